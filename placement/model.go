package placement

import (
	"time"

	"github.com/gangwayhq/gangway"
)

// Whole is one GPU in milli-GPU, the unit GPU shares are measured in.
const Whole = gangway.MilliPerGPU

// GPU is one device of a node.
type GPU struct {
	Index   int
	Model   string
	Healthy bool
	// Flakiness is the GPU's decayed recent fault count (flaky.go).
	Flakiness float64
	// Domain names the NVLink domain; GPUs with the same non-empty Domain
	// (on this or, for rack-scale domains, other nodes) share NVLink. Empty
	// means the GPU is its own domain.
	Domain string
	NUMA   int
	// UsedMilli is how much of the GPU is allocated: 0 free, Whole fully
	// used, in between when GPU shares run on it.
	UsedMilli int
	// MIG is the profile of a MIG device ("1g.10gb"), "" for a whole GPU.
	// A MIG device goes whole, to one replica of a job asking for its
	// profile, and to nothing else: whole-GPU and share jobs never see it.
	MIG string
}

// Node is a node as the snapshot sees it: capacity, what is in use, where it
// sits in the topology and what it costs.
type Node struct {
	ID    string
	Addr  string
	Pool  string
	Model string // GPU model; nodes are homogeneous ("" for CPU-only nodes)
	// CapacityType is "on-prem", "spot" or "on-demand"; price is per
	// GPU-hour.
	CapacityType    gangway.CapacityType
	PricePerGPUHour float64
	Rack, Block     string
	// Owner is the job a cloud node was launched for; only that job is
	// placed on it. "" for shared nodes.
	Owner gangway.JobID
	// TaskQueue is where tasks placed on the node go (gangway.Node's); ""
	// means the node's own queue. Placement only copies it to members.
	TaskQueue string

	CPUMilli, MemMiB         int64 // capacity
	UsedCPUMilli, UsedMemMiB int64
	GPUs                     []GPU
	// Schedulable is false for cordoned or lost nodes: they receive no new
	// work, but count toward what the fleet could hold (they may come back).
	Schedulable bool
}

// milliOf is the share of each GPU an allocation holds: its members'
// Milli, Whole for whole GPUs.
func milliOf(a *gangway.Assignment) int {
	for _, m := range a.Members {
		if len(m.GPUs) > 0 {
			return orWhole(m.Milli)
		}
	}
	return Whole
}

// meteredOf is what each GPU of an allocation counts for in quotas, fair
// share and lost work: milliOf, except that a MIG device, which the
// allocation holds whole, counts its share of its parent GPU.
func meteredOf(a *gangway.Assignment) int {
	for _, m := range a.Members {
		if len(m.GPUs) > 0 {
			if m.MIG != "" {
				return m.MeteredMilli()
			}
			return orWhole(m.Milli)
		}
	}
	return Whole
}

// meteredMilli is what member m counts for against quotas: each GPU at
// its share, a MIG device at its share of its parent, else whole.
func meteredMilli(m gangway.Member) int64 {
	return int64(len(m.GPUs)) * int64(m.MeteredMilli())
}

// endOf is when an allocation is expected to end: its start plus its max
// runtime.
func endOf(a *gangway.Assignment) time.Time { return a.At.Add(a.MaxRuntime) }

// Snapshot is the fleet at one instant. Now is the only clock placement sees.
type Snapshot struct {
	Now   time.Time
	Nodes []Node
	// Running is every allocation found, as committed: what preemption,
	// backfill, fair share and quotas reason about. Its GPUs are already
	// counted as used on the nodes.
	Running []gangway.Assignment
}
