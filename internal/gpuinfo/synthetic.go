package gpuinfo

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gangwayhq/gangway"
)

// Synthetic is a GPU source for GPUs that are not there: `--fake-gpus`,
// `gangway dev` and tests. It never faults on its own and reports no
// utilization (so idle reclaim leaves its tasks alone) until a test says
// otherwise with Inject, SetUtilization, SetReadings and SetProcesses.
type Synthetic struct {
	slots  []gangway.GPU
	faults chan Fault
	now    func() time.Time

	mu       sync.Mutex
	util     map[int]float64
	readings map[int]Sample
	procs    map[int][]Process
}

// NewSynthetic returns a source for slots (a synthetic node's GPUs).
func NewSynthetic(slots []gangway.GPU) *Synthetic {
	return &Synthetic{slots: slices.Clone(slots), faults: make(chan Fault, 64), now: time.Now,
		util: map[int]float64{}, readings: map[int]Sample{}, procs: map[int][]Process{}}
}

// Inventory describes the synthetic GPUs as NVML would: one physical GPU
// per whole-GPU slot, and one in MIG mode per parent GPU the MIG slots
// name, with those slots as its MIG devices; in the NVLink domains and
// NUMA nodes the slots name.
func (s *Synthetic) Inventory() Inventory {
	inv := Inventory{Slots: slices.Clone(s.slots)}
	domains := map[string]*Domain{}
	parents := map[int]int{} // parent GPU index → its entry in inv.GPUs
	for _, g := range s.slots {
		if g.IsMIG() {
			k, ok := parents[g.ParentIndex]
			if !ok {
				k = len(inv.GPUs)
				parents[g.ParentIndex] = k
				inv.GPUs = append(inv.GPUs, GPUInfo{Index: g.ParentIndex, UUID: g.ParentUUID, Name: g.Model + " (synthetic)",
					Model: g.Model, NUMA: g.NUMA, MIG: true})
			}
			p := &inv.GPUs[k]
			p.MemMiB += g.MemMiB
			p.Slots = append(p.Slots, g.Index)
			p.MIGDevices = append(p.MIGDevices, MIGDevice{UUID: g.UUID, Name: g.Model + " (synthetic) MIG " + g.MIGProfile,
				Profile: g.MIGProfile, MemMiB: g.MemMiB, GPUInstance: len(p.MIGDevices) + 1, Slot: g.Index})
			continue
		}
		inv.GPUs = append(inv.GPUs, GPUInfo{Index: g.Index, UUID: g.UUID, Name: g.Model + " (synthetic)", Model: g.Model,
			MemMiB: g.MemMiB, NUMA: g.NUMA, NVLinkDomain: g.NVLinkDomain, Slots: []int{g.Index}})
		if g.NVLinkDomain == "" {
			continue
		}
		d := domains[g.NVLinkDomain]
		if d == nil {
			inv.Topology.NVLinkDomains = append(inv.Topology.NVLinkDomains, Domain{Name: g.NVLinkDomain})
			d = &inv.Topology.NVLinkDomains[len(inv.Topology.NVLinkDomains)-1]
			domains[g.NVLinkDomain] = d
		}
		d.GPUs = append(d.GPUs, g.Index)
	}
	for i, a := range inv.GPUs {
		row := make([]string, len(inv.GPUs))
		for j, b := range inv.GPUs {
			switch {
			case i == j:
				row[j] = "X"
			case a.NVLinkDomain != "" && a.NVLinkDomain == b.NVLinkDomain:
				row[j] = "NV"
			case a.NUMA == b.NUMA:
				row[j] = "NODE"
			default:
				row[j] = "SYS"
			}
		}
		inv.Topology.Matrix = append(inv.Topology.Matrix, row)
	}
	return inv
}

// InjectXid makes slot's GPU report an Xid, as NVML would.
func (s *Synthetic) InjectXid(slot, xid int) {
	meaning, blame := Xid(xid)
	s.Inject(Fault{Kind: KindXid, Xid: xid, Meaning: meaning, Blame: blame, Slots: []int{slot}})
}

// InjectDoubleBitECC makes slot's GPU report a double-bit ECC error.
func (s *Synthetic) InjectDoubleBitECC(slot int) {
	s.Inject(Fault{Kind: KindDoubleBitECC, Meaning: "double-bit ECC error (uncorrectable memory error)", Blame: BlameGPU, Slots: []int{slot}})
}

// Inject delivers f to WatchFaults, filling in the device, UUID and time
// from its first slot. It panics on a slot the node does not have: that is
// a broken test.
func (s *Synthetic) Inject(f Fault) {
	if len(f.Slots) == 0 || f.Slots[0] < 0 || f.Slots[0] >= len(s.slots) {
		panic(fmt.Sprintf("gpuinfo: inject a fault on slots %v of %d", f.Slots, len(s.slots)))
	}
	g := s.slots[f.Slots[0]]
	f.Device, f.UUID = g.Index, g.UUID
	if f.At.IsZero() {
		f.At = s.now()
	}
	s.faults <- f
}

// WatchFaults delivers injected faults until ctx ends.
func (s *Synthetic) WatchFaults(ctx context.Context, out chan<- Fault) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case f := <-s.faults:
			select {
			case out <- f:
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// SetUtilization sets what Sample reports for slot (0–1); a negative
// value makes it unknown again.
func (s *Synthetic) SetUtilization(slot int, ratio float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ratio < 0 {
		delete(s.util, slot)
		return
	}
	s.util[slot] = ratio
}

// SetReadings sets the SM activity, memory, temperature and power Sample
// reports for slot (r's other fields are ignored); NaN leaves one unknown.
func (s *Synthetic) SetReadings(slot int, r Sample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readings[slot] = Sample{SMActivity: r.SMActivity, MemUsedBytes: r.MemUsedBytes, TempCelsius: r.TempCelsius, PowerWatts: r.PowerWatts}
}

// SetProcesses sets the compute processes Sample reports on slot.
func (s *Synthetic) SetProcesses(slot int, pids ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.procs[slot] = nil
	for _, p := range pids {
		s.procs[slot] = append(s.procs[slot], Process{PID: p})
	}
}

// Sample reports what the test set: utilization and readings (NaN when
// unset) and processes.
func (s *Synthetic) Sample(ctx context.Context) ([]Sample, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Sample, len(s.slots))
	for i, g := range s.slots {
		out[i] = Sample{Slot: g.Index, UUID: g.UUID, Utilization: nan, SMActivity: nan, MemUsedBytes: nan,
			TempCelsius: nan, PowerWatts: nan, Processes: slices.Clone(s.procs[g.Index])}
		if u, ok := s.util[g.Index]; ok {
			out[i].Utilization = u
		}
		if r, ok := s.readings[g.Index]; ok {
			out[i].SMActivity, out[i].MemUsedBytes, out[i].TempCelsius, out[i].PowerWatts = r.SMActivity, r.MemUsedBytes, r.TempCelsius, r.PowerWatts
		}
	}
	return out, nil
}
