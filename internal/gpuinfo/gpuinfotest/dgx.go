package gpuinfotest

import (
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// noInstance is NVML's "not about a MIG device" instance ID.
const noInstance = 0xFFFFFFFF

// Node is a DGX H100 as NVML shows it: eight H100s on one NVSwitch fabric,
// 0–3 on NUMA node 0 and 4–7 on node 1. It satisfies gpuinfo.Library.
type Node struct {
	*server.Server
	Devices []*mock.Device

	events chan nvml.EventData

	mu    sync.Mutex
	util  []uint32 // percent
	procs [][]nvml.ProcessInfo
}

// NewDGXH100 returns the mock node.
func NewDGXH100() *Node {
	n := &Node{Server: dgxh100.New(), events: make(chan nvml.EventData, 64)}
	n.util = make([]uint32, len(n.Server.Devices))
	n.procs = make([][]nvml.ProcessInfo, len(n.Server.Devices))
	for _, d := range n.Server.Devices {
		n.Devices = append(n.Devices, &d.(*server.Device).Device)
	}
	n.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		return &mock.EventSet{
			FreeFunc: func() nvml.Return { return nvml.SUCCESS },
			WaitFunc: func(ms uint32) (nvml.EventData, nvml.Return) {
				select {
				case ev := <-n.events:
					return ev, nvml.SUCCESS
				case <-time.After(time.Duration(ms) * time.Millisecond):
					return nvml.EventData{}, nvml.ERROR_TIMEOUT
				}
			},
		}, nvml.SUCCESS
	}
	for i, d := range n.Devices {
		n.install(i, d)
	}
	return n
}

func (n *Node) install(i int, d *mock.Device) {
	devs := n.Devices
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) { return nvml.PciInfo{Bus: uint32(0x18 + 0x10*i)}, nvml.SUCCESS }
	d.GetNumaNodeIdFunc = func() (int, nvml.Return) { return i / 4, nvml.SUCCESS }
	d.GetCpuAffinityFunc = func(int) ([]uint, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
	d.GetNvLinkStateFunc = func(l int) (nvml.EnableState, nvml.Return) {
		if l >= 18 {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return nvml.FEATURE_ENABLED, nvml.SUCCESS
	}
	d.GetNvLinkRemotePciInfoFunc = func(l int) (nvml.PciInfo, nvml.Return) { return nvml.PciInfo{Bus: uint32(0xa0 + l%4)}, nvml.SUCCESS }
	d.GetNvLinkRemoteDeviceTypeFunc = func(int) (nvml.IntNvLinkDeviceType, nvml.Return) { return nvml.NVLINK_DEVICE_TYPE_SWITCH, nvml.SUCCESS }
	d.GetGpuFabricInfoFunc = func() (nvml.GpuFabricInfo, nvml.Return) { return nvml.GpuFabricInfo{}, nvml.ERROR_NOT_SUPPORTED }
	d.GetTopologyCommonAncestorFunc = func(other nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
		for j, o := range devs {
			if nvml.Device(o) == other {
				if i/4 == j/4 {
					return nvml.TOPOLOGY_NODE, nvml.SUCCESS
				}
				return nvml.TOPOLOGY_SYSTEM, nvml.SUCCESS
			}
		}
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) {
		return nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError, nvml.SUCCESS
	}
	d.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
	d.GetTotalEccErrorsFunc = func(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return) { return 0, nvml.SUCCESS }
	d.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 0, 0, false, false, nvml.SUCCESS }
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		n.mu.Lock()
		defer n.mu.Unlock()
		return nvml.Utilization{Gpu: n.util[i]}, nvml.SUCCESS
	}
	d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 45, nvml.SUCCESS }
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 350000, nvml.SUCCESS }
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		n.mu.Lock()
		defer n.mu.Unlock()
		return append([]nvml.ProcessInfo(nil), n.procs[i]...), nvml.SUCCESS
	}
	d.GpmQueryDeviceSupportFunc = func() (nvml.GpmSupport, nvml.Return) { return nvml.GpmSupport{}, nvml.SUCCESS }
}

// Xid makes GPU gpu report Xid code through the event set.
func (n *Node) Xid(gpu, code int) {
	n.events <- nvml.EventData{Device: n.Devices[gpu], EventType: nvml.EventTypeXidCriticalError, EventData: uint64(code),
		GpuInstanceId: noInstance, ComputeInstanceId: noInstance}
}

// DoubleBitECC makes GPU gpu report a double-bit ECC error.
func (n *Node) DoubleBitECC(gpu int) {
	n.events <- nvml.EventData{Device: n.Devices[gpu], EventType: nvml.EventTypeDoubleBitEccError,
		GpuInstanceId: noInstance, ComputeInstanceId: noInstance}
}

// SetUtilization sets GPU gpu's utilization in percent.
func (n *Node) SetUtilization(gpu int, percent uint32) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.util[gpu] = percent
}

// SetProcesses sets the compute processes on GPU gpu.
func (n *Node) SetProcesses(gpu int, pids ...int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.procs[gpu] = nil
	for _, p := range pids {
		n.procs[gpu] = append(n.procs[gpu], nvml.ProcessInfo{Pid: uint32(p), GpuInstanceId: noInstance, ComputeInstanceId: noInstance})
	}
}
