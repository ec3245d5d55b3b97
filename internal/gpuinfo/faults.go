package gpuinfo

import (
	"context"
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Fault kinds.
const (
	KindXid              = "xid"               // an Xid error event
	KindDoubleBitECC     = "ecc-dbe"           // a double-bit ECC error event
	KindUncorrectableECC = "ecc-uncorrectable" // the volatile uncorrectable ECC count rose
	KindRowRemapFailure  = "row-remap-failure" // a row could not be remapped: the GPU needs replacing
	KindRowRemapPending  = "row-remap-pending" // a remap waits for a GPU reset
	KindLost             = "gpu-lost"          // the GPU stopped answering or left the bus
)

// Fault is something a GPU reported that the agent must act on (or at
// least record).
type Fault struct {
	// Device is the physical GPU's NVML index and UUID.
	Device int    `json:"device"`
	UUID   string `json:"uuid"`
	// Slots are the schedulable GPUs it concerns: the GPU's one slot, or
	// for a MIG-partitioned GPU all of its slots (hardware) or the one the
	// event named (application).
	Slots   []int     `json:"slots"`
	Kind    string    `json:"kind"`
	Xid     int       `json:"xid,omitempty"`
	Meaning string    `json:"meaning"`
	Blame   Blame     `json:"blame"`
	At      time.Time `json:"at"`
}

// String is the fault in words, for logs and a job's reason: "Xid 79 on
// GPU 3 (GPU-…): GPU has fallen off the bus".
func (f Fault) String() string {
	what := f.Kind
	if f.Kind == KindXid {
		what = fmt.Sprintf("Xid %d", f.Xid)
	}
	return fmt.Sprintf("%s on GPU %d (%s): %s", what, f.Device, f.UUID, f.Meaning)
}

// noInstance is what NVML puts in an event's GPU and compute instance IDs
// when the event is not about one MIG device.
const noInstance = 0xFFFFFFFF

// WatchFaults delivers the GPUs' faults to out until ctx ends: Xid and
// double-bit ECC events from an NVML event set, and, every PollInterval,
// rises in the volatile uncorrectable ECC count, row-remapping failures
// and GPUs that left the bus. A GPU reported lost is not reported again.
func (n *NVML) WatchFaults(ctx context.Context, out chan<- Fault) error {
	set, ret := n.lib.EventSetCreate()
	if err := ok(ret, "NVML event set"); err != nil {
		return err
	}
	defer set.Free()
	const want = uint64(nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError)
	for _, g := range n.gpus {
		types := want
		if sup, ret := g.h.GetSupportedEventTypes(); ret == nvml.SUCCESS {
			types &= sup
		}
		if types == 0 {
			n.log.Warn("GPU reports no Xid or ECC events; only polled counters will show its faults", "gpu", g.info.Index)
			continue
		}
		if ret := g.h.RegisterEvents(types, set); ret != nvml.SUCCESS {
			n.log.Warn("cannot register GPU events; only polled counters will show its faults", "gpu", g.info.Index, "error", ret)
		}
	}
	send := func(f Fault) bool {
		select {
		case out <- f:
			return true
		case <-ctx.Done():
			return false
		}
	}
	// The first poll sets baselines: ECC errors counted before the agent
	// looked are not news, but a GPU that cannot remap rows is broken.
	if !n.poll(send, true) {
		return nil
	}
	// Polls follow the wall clock, as the event wait does; opts.Now only
	// stamps faults.
	lastPoll := time.Now()
	wait := uint32(n.opts.EventWait.Milliseconds())
	for ctx.Err() == nil {
		ev, ret := set.Wait(wait)
		switch ret {
		case nvml.SUCCESS:
			if f, found := n.eventFault(ev); found && !send(f) {
				return nil
			}
		case nvml.ERROR_TIMEOUT:
		default:
			// GPU_IS_LOST and the like: the poll finds out which GPU.
			n.log.Debug("NVML event wait", "error", ret)
			lastPoll = time.Time{}
			select {
			case <-ctx.Done():
			case <-time.After(n.opts.EventWait):
			}
		}
		if now := time.Now(); now.Sub(lastPoll) >= n.opts.PollInterval {
			lastPoll = now
			if !n.poll(send, false) {
				return nil
			}
		}
	}
	return nil
}

// eventFault turns an NVML event into a fault.
func (n *NVML) eventFault(ev nvml.EventData) (Fault, bool) {
	g := n.deviceOf(ev.Device)
	if g == nil {
		n.log.Warn("NVML event for an unknown GPU", "type", ev.EventType, "data", ev.EventData)
		return Fault{}, false
	}
	f := Fault{Device: g.info.Index, UUID: g.info.UUID, At: n.opts.Now()}
	switch {
	case ev.EventType&nvml.EventTypeXidCriticalError != 0:
		f.Kind, f.Xid = KindXid, int(ev.EventData)
		f.Meaning, f.Blame = Xid(f.Xid)
	case ev.EventType&nvml.EventTypeDoubleBitEccError != 0:
		f.Kind, f.Meaning, f.Blame = KindDoubleBitECC, "double-bit ECC error (uncorrectable memory error)", BlameGPU
		n.mu.Lock()
		g.eccKnown = false // the poll re-reads the count: this error is reported already
		n.mu.Unlock()
	default:
		return Fault{}, false
	}
	f.Slots = g.slotsFor(f.Blame, ev.GpuInstanceId, ev.ComputeInstanceId)
	return f, true
}

// deviceOf finds the GPU an event names: by handle, else by UUID.
func (n *NVML) deviceOf(d nvml.Device) *physGPU {
	if d == nil {
		return nil
	}
	for _, g := range n.gpus {
		if g.h == d {
			return g
		}
	}
	uuid, ret := d.GetUUID()
	if ret != nvml.SUCCESS {
		return nil
	}
	for _, g := range n.gpus {
		if g.info.UUID == uuid {
			return g
		}
	}
	return nil
}

// slotsFor is the slots a fault concerns: all of the GPU's for a hardware
// fault, only the named MIG device's for an application one.
func (g *physGPU) slotsFor(blame Blame, gi, ci uint32) []int {
	if blame == BlameApp && gi != noInstance {
		var out []int
		for _, m := range g.mig {
			if uint32(m.gi) == gi && (ci == noInstance || uint32(m.ci) == ci) {
				out = append(out, m.slot)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return append([]int(nil), g.info.Slots...)
}

// poll reads the counters NVML raises no events for and sends a fault for
// each change; it returns false when send gave up (ctx ended). A baseline
// poll only records the counts, except for a remap failure.
func (n *NVML) poll(send func(Fault) bool, baseline bool) bool {
	var faults []Fault
	now := n.opts.Now()
	fault := func(g *physGPU, kind, meaning string, blame Blame) {
		faults = append(faults, Fault{Device: g.info.Index, UUID: g.info.UUID, Slots: append([]int(nil), g.info.Slots...),
			Kind: kind, Meaning: meaning, Blame: blame, At: now})
	}
	present := n.presentUUIDs()
	n.mu.Lock()
	for _, g := range n.gpus {
		if g.lost {
			continue
		}
		if present != nil && !present[g.info.UUID] {
			g.lost = true
			fault(g, KindLost, "GPU is no longer visible to the driver (fallen off the bus)", BlameGPU)
			continue
		}
		count, ret := g.h.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
		if ret == nvml.ERROR_GPU_IS_LOST {
			g.lost = true
			fault(g, KindLost, "GPU is lost (NVML: GPU_IS_LOST; fallen off the bus or hung)", BlameGPU)
			continue
		}
		if ret == nvml.SUCCESS {
			if g.eccKnown && count > g.eccBase && !baseline {
				fault(g, KindUncorrectableECC, fmt.Sprintf("%d new uncorrectable ECC errors (volatile count %d)", count-g.eccBase, count), BlameGPU)
			}
			g.eccBase, g.eccKnown = count, true
		}
		_, _, pending, failed, ret := g.h.GetRemappedRows()
		if ret == nvml.SUCCESS {
			if failed && !g.remapFail {
				fault(g, KindRowRemapFailure, "row remapping failed: the GPU has run out of spare rows and needs replacing", BlameGPU)
			}
			if pending && !g.remapPend && !baseline {
				fault(g, KindRowRemapPending, "a row remap is pending: reset the GPU to apply it", BlameNone)
			}
			g.remapFail, g.remapPend = failed, pending
		}
	}
	n.mu.Unlock()
	for _, f := range faults {
		if !send(f) {
			return false
		}
	}
	return true
}

// presentUUIDs is the UUIDs of the GPUs the driver still enumerates, or
// nil when none has gone (the count is unchanged) or NVML cannot say.
func (n *NVML) presentUUIDs() map[string]bool {
	count, ret := n.lib.DeviceGetCount()
	if ret != nvml.SUCCESS || count >= len(n.gpus) {
		return nil
	}
	present := map[string]bool{}
	for i := range count {
		h, ret := n.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue
		}
		if u, ret := h.GetUUID(); ret == nvml.SUCCESS {
			present[u] = true
		}
	}
	return present
}
