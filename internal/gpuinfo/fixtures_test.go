package gpuinfo

import (
	"fmt"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// pci is the PCI address of bus b (domain 0, device 0).
func pci(b uint32) nvml.PciInfo { return nvml.PciInfo{Bus: b} }

func bus(b uint32) string { return fmt.Sprintf("00000000:%02x:00.0", b) }

// link is one NVLink of a hand-built device: to a GPU or an NVSwitch at a
// PCI bus.
type link struct {
	bus uint32
	typ nvml.IntNvLinkDeviceType
}

// topo is what a device needs for inventory beyond its identity.
type topo struct {
	bus    uint32
	numa   int // -1: NVML does not know
	cpus   []uint
	links  []link
	fabric *nvml.GpuFabricInfo
}

// setTopology installs the locality and NVLink calls on d.
func setTopology(d *mock.Device, t topo) {
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) { return pci(t.bus), nvml.SUCCESS }
	d.GetNumaNodeIdFunc = func() (int, nvml.Return) {
		if t.numa < 0 {
			return 0, nvml.ERROR_NOT_SUPPORTED
		}
		return t.numa, nvml.SUCCESS
	}
	d.GetCpuAffinityFunc = func(n int) ([]uint, nvml.Return) {
		if t.cpus == nil {
			return nil, nvml.ERROR_NOT_SUPPORTED
		}
		out := make([]uint, n)
		copy(out, t.cpus)
		return out, nvml.SUCCESS
	}
	d.GetNvLinkStateFunc = func(l int) (nvml.EnableState, nvml.Return) {
		switch {
		case len(t.links) == 0:
			return 0, nvml.ERROR_NOT_SUPPORTED
		case l >= 18:
			return 0, nvml.ERROR_INVALID_ARGUMENT
		case l >= len(t.links):
			return nvml.FEATURE_DISABLED, nvml.SUCCESS
		}
		return nvml.FEATURE_ENABLED, nvml.SUCCESS
	}
	d.GetNvLinkRemotePciInfoFunc = func(l int) (nvml.PciInfo, nvml.Return) { return pci(t.links[l].bus), nvml.SUCCESS }
	d.GetNvLinkRemoteDeviceTypeFunc = func(l int) (nvml.IntNvLinkDeviceType, nvml.Return) { return t.links[l].typ, nvml.SUCCESS }
	d.GetGpuFabricInfoFunc = func() (nvml.GpuFabricInfo, nvml.Return) {
		if t.fabric == nil {
			return nvml.GpuFabricInfo{}, nvml.ERROR_NOT_SUPPORTED
		}
		return *t.fabric, nvml.SUCCESS
	}
}

// setAncestors installs GetTopologyCommonAncestor on every device: level
// says how devices i and j reach each other.
func setAncestors(devs []*mock.Device, level func(i, j int) nvml.GpuTopologyLevel) {
	index := func(d nvml.Device) int {
		for k, x := range devs {
			if nvml.Device(x) == d {
				return k
			}
		}
		return -1
	}
	for i, d := range devs {
		d.GetTopologyCommonAncestorFunc = func(other nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
			j := index(other)
			if j < 0 {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			return level(i, j), nvml.SUCCESS
		}
	}
}

// dgxH100 is go-nvml's DGX H100 mock server with what it leaves out
// installed: each GPU's 18 NVLinks spread over the baseboard's four
// NVSwitches, GPUs 0–3 on NUMA node 0 and 4–7 on node 1 (NODE apart
// within a socket, SYS across), and CPU affinity per socket.
func dgxH100() (*server.Server, []*mock.Device) {
	srv := dgxh100.New()
	var devs []*mock.Device
	for i, d := range srv.Devices {
		sd := d.(*server.Device)
		t := topo{bus: uint32(0x18 + 0x10*i), numa: i / 4}
		for l := range 18 {
			t.links = append(t.links, link{bus: uint32(0xa0 + l%4), typ: nvml.NVLINK_DEVICE_TYPE_SWITCH})
		}
		t.cpus = []uint{0x00ffffffffffffff, 0xffff << 48, 0xffffffffff} // 0-55,112-167
		if i >= 4 {
			t.cpus = []uint{0xff << 56, 0xffffffffffff, 0xffffff << 40, 0xffffffff} // 56-111,168-223
		}
		setTopology(&sd.Device, t)
		devs = append(devs, &sd.Device)
	}
	setAncestors(devs, func(i, j int) nvml.GpuTopologyLevel {
		if i/4 == j/4 {
			return nvml.TOPOLOGY_NODE
		}
		return nvml.TOPOLOGY_SYSTEM
	})
	return srv, devs
}

// handDevice is a hand-built device: name, UUID and memory, plus topology.
func handDevice(name, uuid string, memMiB uint64, t topo) *mock.Device {
	d := &mock.Device{
		GetUUIDFunc:       func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
		GetNameFunc:       func() (string, nvml.Return) { return name, nvml.SUCCESS },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: memMiB << 20}, nvml.SUCCESS },
		GetMigModeFunc:    func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED },
	}
	setTopology(d, t)
	return d
}

// migSpec is one MIG device of a hand-built GPU.
type migSpec struct {
	profile string
	memMiB  uint64
	gi, ci  int
}

// withMIG turns MIG mode on for d with the given MIG devices (at MIG
// indices 0, 2, 4, … to show that empty indices are skipped).
func withMIG(d *mock.Device, parentName string, devs ...migSpec) {
	d.GetMigModeFunc = func() (int, int, nvml.Return) { return nvml.DEVICE_MIG_ENABLE, nvml.DEVICE_MIG_ENABLE, nvml.SUCCESS }
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	parentUUID, _ := d.GetUUID()
	d.GetMigDeviceHandleByIndexFunc = func(k int) (nvml.Device, nvml.Return) {
		if k%2 != 0 || k/2 >= len(devs) {
			return nil, nvml.ERROR_NOT_FOUND
		}
		m := devs[k/2]
		return &mock.Device{
			GetUUIDFunc: func() (string, nvml.Return) {
				return fmt.Sprintf("MIG-%s-%d-%d", parentUUID[4:], m.gi, m.ci), nvml.SUCCESS
			},
			GetNameFunc: func() (string, nvml.Return) { return parentName + " MIG " + m.profile, nvml.SUCCESS },
			GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
				return nvml.Memory{Total: m.memMiB << 20, Used: 1 << 30}, nvml.SUCCESS
			},
			GetGpuInstanceIdFunc:     func() (int, nvml.Return) { return m.gi, nvml.SUCCESS },
			GetComputeInstanceIdFunc: func() (int, nvml.Return) { return m.ci, nvml.SUCCESS },
		}, nvml.SUCCESS
	}
}

// handLibrary is a hand-built NVML over devs.
func handLibrary(driver string, cuda int, devs ...*mock.Device) *mock.Interface {
	return &mock.Interface{
		InitFunc:                       func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:                   func() nvml.Return { return nvml.SUCCESS },
		SystemGetDriverVersionFunc:     func() (string, nvml.Return) { return driver, nvml.SUCCESS },
		SystemGetCudaDriverVersionFunc: func() (int, nvml.Return) { return cuda, nvml.SUCCESS },
		DeviceGetCountFunc:             func() (int, nvml.Return) { return len(devs), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i < 0 || i >= len(devs) {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			return devs[i], nvml.SUCCESS
		},
	}
}

// events is an NVML event set fed by a test: Wait returns what the test
// sends, or times out.
type events struct {
	ch chan nvml.EventData

	mu         sync.Mutex
	registered map[nvml.Device]uint64
}

func newEvents() *events {
	return &events{ch: make(chan nvml.EventData, 16), registered: map[nvml.Device]uint64{}}
}

func (e *events) set() *mock.EventSet {
	return &mock.EventSet{
		FreeFunc: func() nvml.Return { return nvml.SUCCESS },
		WaitFunc: func(ms uint32) (nvml.EventData, nvml.Return) {
			select {
			case ev := <-e.ch:
				return ev, nvml.SUCCESS
			case <-time.After(time.Duration(ms) * time.Millisecond):
				return nvml.EventData{}, nvml.ERROR_TIMEOUT
			}
		},
	}
}

// health is a device's polled health counters, changeable while a test
// runs.
type health struct {
	mu                      sync.Mutex
	ecc                     uint64
	lost, remapFail, remapP bool
}

// setHealth installs event registration and the polled counters on d.
func setHealth(d *mock.Device, e *events, h *health) {
	d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) {
		return nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError | nvml.EventTypeSingleBitEccError, nvml.SUCCESS
	}
	d.RegisterEventsFunc = func(types uint64, _ nvml.EventSet) nvml.Return {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.registered[d] = types
		return nvml.SUCCESS
	}
	d.GetTotalEccErrorsFunc = func(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.lost {
			return 0, nvml.ERROR_GPU_IS_LOST
		}
		return h.ecc, nvml.SUCCESS
	}
	d.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) {
		h.mu.Lock()
		defer h.mu.Unlock()
		return 0, 0, h.remapP, h.remapFail, nvml.SUCCESS
	}
}
