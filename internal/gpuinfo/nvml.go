package gpuinfo

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Library is the part of NVML Gangway calls. nvml.New() satisfies it, and
// so do go-nvml's mocks (mock.Interface and the dgx* mock servers).
type Library interface {
	Init() nvml.Return
	Shutdown() nvml.Return
	SystemGetDriverVersion() (string, nvml.Return)
	SystemGetCudaDriverVersion() (int, nvml.Return)
	DeviceGetCount() (int, nvml.Return)
	DeviceGetHandleByIndex(int) (nvml.Device, nvml.Return)
	EventSetCreate() (nvml.EventSet, nvml.Return)
	GpmSampleAlloc() (nvml.GpmSample, nvml.Return)
	GpmMetricsGet(*nvml.GpmMetricsGetType) nvml.Return
}

// Device lists the device calls Gangway makes. Handles come from
// Library.DeviceGetHandleByIndex as nvml.Device, which satisfies it; a
// hand-built mock (mock.Device) needs only these functions set.
type Device interface {
	GetUUID() (string, nvml.Return)
	GetName() (string, nvml.Return)
	GetMemoryInfo() (nvml.Memory, nvml.Return)
	GetPciInfo() (nvml.PciInfo, nvml.Return)
	GetNumaNodeId() (int, nvml.Return)
	GetCpuAffinity(int) ([]uint, nvml.Return)
	GetMigMode() (int, int, nvml.Return)
	GetMaxMigDeviceCount() (int, nvml.Return)
	GetMigDeviceHandleByIndex(int) (nvml.Device, nvml.Return)
	GetGpuInstanceId() (int, nvml.Return)
	GetComputeInstanceId() (int, nvml.Return)
	GetNvLinkState(int) (nvml.EnableState, nvml.Return)
	GetNvLinkRemotePciInfo(int) (nvml.PciInfo, nvml.Return)
	GetNvLinkRemoteDeviceType(int) (nvml.IntNvLinkDeviceType, nvml.Return)
	GetTopologyCommonAncestor(nvml.Device) (nvml.GpuTopologyLevel, nvml.Return)
	GetGpuFabricInfo() (nvml.GpuFabricInfo, nvml.Return)
	GetSupportedEventTypes() (uint64, nvml.Return)
	RegisterEvents(uint64, nvml.EventSet) nvml.Return
	GetTotalEccErrors(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return)
	GetRemappedRows() (int, int, bool, bool, nvml.Return)
	GetUtilizationRates() (nvml.Utilization, nvml.Return)
	GetTemperature(nvml.TemperatureSensors) (uint32, nvml.Return)
	GetPowerUsage() (uint32, nvml.Return)
	GetComputeRunningProcesses() ([]nvml.ProcessInfo, nvml.Return)
	GpmQueryDeviceSupport() (nvml.GpmSupport, nvml.Return)
	GpmSampleGet(nvml.GpmSample) nvml.Return
}

var _ Device = nvml.Device(nil)

// ErrNoDriver: NVML could not be loaded, so this machine has no usable
// NVIDIA driver.
var ErrNoDriver = errors.New("no NVIDIA driver found (libnvidia-ml.so)")

// Options tune an NVML source. Zero fields take the defaults.
type Options struct {
	// PollInterval is how often the counters NVML has no events for are
	// read: volatile uncorrectable ECC counts, remapped rows, the device
	// count (a GPU that fell off the bus). Default 10 s.
	PollInterval time.Duration
	// EventWait bounds one wait for an NVML event, and so how long
	// WatchFaults takes to notice its context ended. Default 1 s.
	EventWait time.Duration
	// Now is the clock fault times are read from; nil is time.Now.
	Now func() time.Time
	Log *slog.Logger
}

// NVML reads real GPUs through NVML. Open it, call Inventory once, then
// WatchFaults and Sample may run concurrently.
type NVML struct {
	lib  Library
	opts Options
	log  *slog.Logger

	// gpus is the inventory's physical GPUs, in NVML index order, with
	// their handles. Set by Inventory; read-only afterwards except for the
	// fields under mu.
	gpus []*physGPU

	mu sync.Mutex // guards the per-GPU state below
}

// physGPU is one physical GPU as the source tracks it.
type physGPU struct {
	info GPUInfo
	h    nvml.Device
	mig  []migHandle

	// Under NVML.mu:
	lost       bool
	eccBase    uint64
	eccKnown   bool
	remapFail  bool
	remapPend  bool
	gpmPrev    nvml.GpmSample
	gpmChecked bool
	gpmOK      bool
}

type migHandle struct {
	h      nvml.Device
	gi, ci int
	slot   int
}

// Open initialises NVML. Without a driver it returns an error wrapping
// ErrNoDriver.
func Open(lib Library, opts Options) (*NVML, error) {
	if opts.PollInterval <= 0 {
		opts.PollInterval = 10 * time.Second
	}
	if opts.EventWait <= 0 {
		opts.EventWait = time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	switch ret := lib.Init(); ret {
	case nvml.SUCCESS:
	case nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED:
		return nil, fmt.Errorf("%w: NVML init: %v", ErrNoDriver, ret)
	default:
		return nil, fmt.Errorf("NVML init: %w", ret)
	}
	return &NVML{lib: lib, opts: opts, log: opts.Log}, nil
}

// Close shuts NVML down.
func (n *NVML) Close() error {
	if ret := n.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("NVML shutdown: %w", ret)
	}
	return nil
}

// ok turns an NVML return code into an error naming the call.
func ok(ret nvml.Return, call string, args ...any) error {
	if ret == nvml.SUCCESS {
		return nil
	}
	return fmt.Errorf("%s: %w", fmt.Sprintf(call, args...), ret)
}

// unsupported reports whether ret means the call does not apply to this
// GPU or driver, rather than that something went wrong.
func unsupported(ret nvml.Return) bool {
	switch ret {
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND, nvml.ERROR_INVALID_ARGUMENT, nvml.ERROR_NOT_FOUND:
		return true
	}
	return false
}
