package gpuinfo

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var tFault = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// watched is a DGX H100 mock whose faults are being watched.
type watched struct {
	devs   []*mock.Device
	ev     *events
	health []*health
	faults chan Fault
	count  atomic.Int32 // devices the driver still enumerates
}

func watch(t *testing.T) *watched {
	t.Helper()
	srv, devs := dgxH100()
	w := &watched{devs: devs, ev: newEvents(), faults: make(chan Fault, 16)}
	w.count.Store(int32(len(devs)))
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return w.ev.set(), nvml.SUCCESS }
	for _, d := range devs {
		h := &health{}
		w.health = append(w.health, h)
		setHealth(d, w.ev, h)
	}
	n, err := Open(srv, Options{PollInterval: time.Millisecond, EventWait: 5 * time.Millisecond, Now: func() time.Time { return tFault }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Inventory("node-a"); err != nil {
		t.Fatal(err)
	}
	// Fewer devices from here on: GPUs that left the bus.
	srv.DeviceGetCountFunc = func() (int, nvml.Return) { return int(w.count.Load()), nvml.SUCCESS }
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- n.WatchFaults(ctx, w.faults) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("WatchFaults: %v", err)
		}
	})
	return w
}

func (w *watched) next(t *testing.T) Fault {
	t.Helper()
	select {
	case f := <-w.faults:
		return f
	case <-time.After(5 * time.Second):
		t.Fatal("no fault reported")
		return Fault{}
	}
}

func (w *watched) quiet(t *testing.T) {
	t.Helper()
	select {
	case f := <-w.faults:
		t.Fatalf("unexpected fault: %+v", f)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestWatchFaults(t *testing.T) {
	ignoreUUID := cmpopts.IgnoreFields(Fault{}, "UUID")
	tests := map[string]struct {
		do   func(w *watched)
		want Fault
	}{
		"Xid 79 blames the GPU": {
			do: func(w *watched) {
				w.ev.ch <- nvml.EventData{Device: w.devs[3], EventType: nvml.EventTypeXidCriticalError, EventData: 79, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}
			},
			want: Fault{Device: 3, Slots: []int{3}, Kind: KindXid, Xid: 79, Meaning: "GPU has fallen off the bus", Blame: BlameGPU, At: tFault},
		},
		"Xid 13 blames the application": {
			do: func(w *watched) {
				w.ev.ch <- nvml.EventData{Device: w.devs[5], EventType: nvml.EventTypeXidCriticalError, EventData: 13, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}
			},
			want: Fault{Device: 5, Slots: []int{5}, Kind: KindXid, Xid: 13, Meaning: "graphics engine exception (the application hit an illegal instruction or address)", Blame: BlameApp, At: tFault},
		},
		"double-bit ECC event": {
			do: func(w *watched) {
				w.ev.ch <- nvml.EventData{Device: w.devs[2], EventType: nvml.EventTypeDoubleBitEccError, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}
			},
			want: Fault{Device: 2, Slots: []int{2}, Kind: KindDoubleBitECC, Meaning: "double-bit ECC error (uncorrectable memory error)", Blame: BlameGPU, At: tFault},
		},
		"volatile uncorrectable ECC count rises": {
			do: func(w *watched) {
				w.health[1].mu.Lock()
				w.health[1].ecc += 2
				w.health[1].mu.Unlock()
			},
			want: Fault{Device: 1, Slots: []int{1}, Kind: KindUncorrectableECC, Meaning: "2 new uncorrectable ECC errors (volatile count 2)", Blame: BlameGPU, At: tFault},
		},
		"row remapping fails": {
			do: func(w *watched) {
				w.health[6].mu.Lock()
				w.health[6].remapFail = true
				w.health[6].mu.Unlock()
			},
			want: Fault{Device: 6, Slots: []int{6}, Kind: KindRowRemapFailure, Meaning: "row remapping failed: the GPU has run out of spare rows and needs replacing", Blame: BlameGPU, At: tFault},
		},
		"handle calls fail with GPU_IS_LOST": {
			do: func(w *watched) {
				w.health[4].mu.Lock()
				w.health[4].lost = true
				w.health[4].mu.Unlock()
			},
			want: Fault{Device: 4, Slots: []int{4}, Kind: KindLost, Meaning: "GPU is lost (NVML: GPU_IS_LOST; fallen off the bus or hung)", Blame: BlameGPU, At: tFault},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := watch(t)
			w.quiet(t) // the first poll only takes baselines
			tc.do(w)
			if diff := cmp.Diff(tc.want, w.next(t), ignoreUUID); diff != "" {
				t.Errorf("fault (-want +got):\n%s", diff)
			}
			w.quiet(t) // reported once
		})
	}
}

func TestWatchFaultsGPUOffTheBus(t *testing.T) {
	w := watch(t)
	w.quiet(t)
	// GPU 7 leaves the bus: the driver enumerates seven, and they are 0–6.
	w.count.Store(7)
	f := w.next(t)
	if f.Device != 7 || f.Kind != KindLost || f.Blame != BlameGPU {
		t.Errorf("fault %+v, want GPU 7 lost", f)
	}
	w.quiet(t)
}

func TestWatchFaultsRegistersEvents(t *testing.T) {
	w := watch(t)
	w.quiet(t)
	w.ev.mu.Lock()
	defer w.ev.mu.Unlock()
	for i, d := range w.devs {
		if got := w.ev.registered[d]; got != nvml.EventTypeXidCriticalError|nvml.EventTypeDoubleBitEccError {
			t.Errorf("GPU %d registered for events %#x, want Xid and double-bit ECC", i, got)
		}
	}
}

func TestWatchFaultsMIG(t *testing.T) {
	devs := migNode(false)
	ev := newEvents()
	for _, d := range devs {
		setHealth(d, ev, &health{})
	}
	lib := handLibrary("570.86.15", 12080, devs...)
	lib.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return ev.set(), nvml.SUCCESS }
	n, err := Open(lib, Options{PollInterval: time.Hour, EventWait: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Inventory("node-m"); err != nil {
		t.Fatal(err)
	}
	out := make(chan Fault, 4)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { _ = n.WatchFaults(ctx, out); close(done) }()
	defer func() { cancel(); <-done }()

	// An application Xid in GPU instance 2 of GPU 1 concerns that MIG
	// device only; a hardware one every MIG device of the GPU.
	ev.ch <- nvml.EventData{Device: devs[1], EventType: nvml.EventTypeXidCriticalError, EventData: 31, GpuInstanceId: 2, ComputeInstanceId: 0}
	if f := <-out; f.Blame != BlameApp || !cmp.Equal(f.Slots, []int{3}) {
		t.Errorf("application Xid in a MIG device: %+v, want slot 3 only", f)
	}
	ev.ch <- nvml.EventData{Device: devs[1], EventType: nvml.EventTypeXidCriticalError, EventData: 48, GpuInstanceId: 2, ComputeInstanceId: 0}
	if f := <-out; f.Blame != BlameGPU || !cmp.Equal(f.Slots, []int{2, 3}) {
		t.Errorf("hardware Xid in a MIG device: %+v, want slots 2 and 3", f)
	}
}

func TestSample(t *testing.T) {
	srv, devs := dgxH100()
	samples := []*mock.GpmSample{}
	srv.GpmSampleAllocFunc = func() (nvml.GpmSample, nvml.Return) {
		s := &mock.GpmSample{FreeFunc: func() nvml.Return { return nvml.SUCCESS }}
		samples = append(samples, s)
		return s, nvml.SUCCESS
	}
	srv.GpmMetricsGetFunc = func(m *nvml.GpmMetricsGetType) nvml.Return {
		if m.Sample1 == nil || m.Sample2 == nil || m.Metrics[0].MetricId != uint32(nvml.GPM_METRIC_SM_UTIL) {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		m.Metrics[0].Value = 37.5
		return nvml.SUCCESS
	}
	for i, d := range devs {
		d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: uint32(10 * i)}, nvml.SUCCESS }
		d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Total: 80 << 30, Used: uint64(i) << 30}, nvml.SUCCESS
		}
		d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 40 + uint32(i), nvml.SUCCESS }
		d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 300000 + 1000*uint32(i), nvml.SUCCESS }
		d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			if i != 2 {
				return nil, nvml.SUCCESS
			}
			return []nvml.ProcessInfo{{Pid: 4242, UsedGpuMemory: 1 << 30, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}}, nvml.SUCCESS
		}
		d.GpmQueryDeviceSupportFunc = func() (nvml.GpmSupport, nvml.Return) {
			return nvml.GpmSupport{IsSupportedDevice: 1}, nvml.SUCCESS
		}
		d.GpmSampleGetFunc = func(nvml.GpmSample) nvml.Return { return nvml.SUCCESS }
	}
	n, err := Open(srv, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Inventory("node-a"); err != nil {
		t.Fatal(err)
	}
	first, err := n.Sample(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(first[0].SMActivity) {
		t.Errorf("SM activity on the first sample %v, want NaN (GPM needs two)", first[0].SMActivity)
	}
	second, err := n.Sample(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := second[2]
	want := Sample{Slot: 2, UUID: got.UUID, Utilization: 0.2, SMActivity: 0.375, MemUsedBytes: 2 << 30, TempCelsius: 42, PowerWatts: 302,
		Processes: []Process{{PID: 4242, UsedBytes: 1 << 30}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sample of GPU 2 (-want +got):\n%s", diff)
	}
	if len(second) != 8 {
		t.Errorf("%d samples, want 8", len(second))
	}
}

func TestSampleMIG(t *testing.T) {
	devs := migNode(false)
	for _, d := range devs {
		d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 50, nvml.SUCCESS }
		d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 200000, nvml.SUCCESS }
		d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			return []nvml.ProcessInfo{{Pid: 10, GpuInstanceId: 1}, {Pid: 20, GpuInstanceId: 2}}, nvml.SUCCESS
		}
	}
	n, err := Open(handLibrary("570.86.15", 12080, devs...), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Inventory("node-m"); err != nil {
		t.Fatal(err)
	}
	s, err := n.Sample(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 4 {
		t.Fatalf("%d samples, want one per MIG device (4)", len(s))
	}
	if s[1].Slot != 1 || s[1].UUID != "MIG-h100-a-2-0" || !cmp.Equal(s[1].Processes, []Process{{PID: 20}}) {
		t.Errorf("MIG slot 1: %+v, want process 20 of GPU instance 2", s[1])
	}
	if !math.IsNaN(s[1].Utilization) || s[1].MemUsedBytes != 1<<30 || s[1].TempCelsius != 50 {
		t.Errorf("MIG slot 1 readings: %+v (utilization is not per MIG device; memory is)", s[1])
	}
}
