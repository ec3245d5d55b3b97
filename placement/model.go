package placement

import (
	"time"

	"github.com/gangwayhq/gangway"
)

// Whole is one GPU in milli-GPU, the unit GPU shares are measured in.
const Whole = 1000

// Level is a topology level a gang can be kept within.
type Level int

// Topology levels, innermost first.
const (
	LevelNone   Level = iota
	LevelNVLink       // GPUs that share NVLink/NVSwitch; a rack-scale domain spans nodes
	LevelNode
	LevelRack
	LevelBlock
)

func (l Level) String() string {
	switch l {
	case LevelNVLink:
		return "nvlink"
	case LevelNode:
		return "node"
	case LevelRack:
		return "rack"
	case LevelBlock:
		return "block"
	}
	return "none"
}

// Topology is a gang's locality constraint: all replicas within one group of
// Level — required (or the gang waits) or preferred (or it spreads).
type Topology struct {
	Level    Level
	Required bool
}

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

	CPUMilli, MemMiB         int64 // capacity
	UsedCPUMilli, UsedMemMiB int64
	GPUs                     []GPU
	// Schedulable is false for cordoned or lost nodes: they receive no new
	// work, but count toward what the fleet could hold (they may come back).
	Schedulable bool
}

// Job is a pending job as placement sees it.
type Job struct {
	ID        gangway.JobID
	Team      string
	Project   string
	Priority  int
	Submitted time.Time
	Attempt   int
	// Replicas members of GPUsPerReplica whole GPUs each; or, when
	// GPUsPerReplica is 1 and 0 < GPUMilli < Whole, a share of one GPU;
	// GPUsPerReplica 0 is a CPU-only task.
	Replicas       int
	GPUsPerReplica int
	GPUMilli       int
	CPUMilli       int64 // per replica
	MemMiB         int64 // per replica
	Models         []string
	Pools          []string
	Topology       Topology
	MaxRuntime     time.Duration
	Preemptible    bool
	// Nodes pins the job to these nodes (a burst attempt waiting for the
	// instances launched for it); empty means anywhere.
	Nodes []string
	// Burst is what the job may rent when waiting costs more (burst.go).
	Burst BurstPolicy
}

// mayUse reports whether the job may ever run on the node: its model and
// pool, the node's owner, and the job's pinned nodes.
func (j *Job) mayUse(n *Node) bool {
	return allowed(j.Models, n.Model) && allowed(j.Pools, n.Pool) && allowed(j.Nodes, n.ID) &&
		(n.Owner == "" || n.Owner == j.ID)
}

// Share reports whether each replica takes a fraction of one GPU.
func (j *Job) Share() bool { return j.GPUsPerReplica == 1 && j.GPUMilli > 0 && j.GPUMilli < Whole }

// milliPerGPU is what each of the replica's GPUs gives up.
func (j *Job) milliPerGPU() int {
	if j.Share() {
		return j.GPUMilli
	}
	return Whole
}

// GPUMilliTotal is the job's whole GPU demand in milli-GPU.
func (j *Job) GPUMilliTotal() int64 {
	return int64(j.Replicas) * int64(j.GPUsPerReplica) * int64(j.milliPerGPU())
}

// Running is an allocation the snapshot found: what preemption, backfill,
// fair share and quotas reason about. Its GPUs are already counted as used
// on the nodes.
type Running struct {
	JobID       gangway.JobID
	Attempt     int
	Team        string
	Priority    int
	Preemptible bool
	Start       time.Time
	// LastCheckpoint bounds the work lost if the job is preempted now (zero:
	// everything since Start).
	LastCheckpoint time.Time
	MaxRuntime     time.Duration
	// Runtime is how long the job is expected to run (0: unknown; use
	// MaxRuntime). Burst ETAs use it; backfill keeps to MaxRuntime.
	Runtime  time.Duration
	Members  []gangway.Member
	GPUMilli int   // per GPU when the job runs on shares; 0 = whole
	CPUMilli int64 // per member
	MemMiB   int64 // per member
}

// GPUs is the number of GPUs (or shares) the allocation holds.
func (r *Running) GPUs() int {
	n := 0
	for _, m := range r.Members {
		n += len(m.GPUs)
	}
	return n
}

// End is when the allocation is expected to end: start plus max runtime.
func (r *Running) End() time.Time { return r.Start.Add(r.MaxRuntime) }

// Snapshot is the fleet at one instant. Now is the only clock placement sees.
type Snapshot struct {
	Now     time.Time
	Nodes   []Node
	Running []Running
}
