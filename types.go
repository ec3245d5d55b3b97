package gangway

import (
	"fmt"
	"strings"
	"time"
)

// JobID identifies a job; it is also the ID of the job's Temporal workflow,
// so submitting the same ID twice never creates a second job.
type JobID = string

// Phase is where a job is in its lifecycle.
type Phase string

// The phases of a job, in lifecycle order. Succeeded, Failed and Cancelled
// are terminal.
const (
	PhaseSubmitted Phase = "Submitted"
	PhaseQueued    Phase = "Queued"
	PhasePlaced    Phase = "Placed"
	PhaseRunning   Phase = "Running"
	// PhaseProvisioning: cloud instances are being launched for the job.
	PhaseProvisioning Phase = "Provisioning"
	PhaseRequeued     Phase = "Requeued"
	PhaseSucceeded    Phase = "Succeeded"
	PhaseFailed       Phase = "Failed"
	PhaseCancelled    Phase = "Cancelled"
)

// Terminal reports whether p is a final phase.
func (p Phase) Terminal() bool {
	return p == PhaseSucceeded || p == PhaseFailed || p == PhaseCancelled
}

// Priority classes and their numeric order (higher runs first).
const (
	PriorityLow    = "low"
	PriorityNormal = "normal"
	PriorityHigh   = "high"
)

// PriorityValue maps a priority class to its rank; unknown classes rank as
// normal (validation rejects them before they get here).
func PriorityValue(class string) int {
	switch class {
	case PriorityLow:
		return 0
	case PriorityHigh:
		return 200
	default:
		return 100
	}
}

// Member is one gang member's share of an assignment: the node it runs on
// and the GPU indices it holds there.
type Member struct {
	Rank   int    `json:"rank"`
	NodeID string `json:"nodeId"`
	Pool   string `json:"pool,omitempty"`
	GPUs   []int  `json:"gpus"`
	// Milli is the share of each GPU the member holds, in milli-GPU; 0
	// means whole GPUs.
	Milli int `json:"milli,omitempty"`
	// MIG is the MIG profile of the member's GPUs when they are MIG
	// devices (held whole, Milli 0); MIGMilli is what each counts for as a
	// share of its parent GPU (MIGMilli), for the ledger and quotas.
	MIG      string `json:"mig,omitempty"`
	MIGMilli int    `json:"migMilli,omitempty"`
	// Addr is the node's address, used as the rank-0 master address.
	Addr string `json:"addr,omitempty"`
	// TaskQueue is where the member's task goes: the node's
	// Node.TaskQueue; "" means the node's own queue, node/<NodeID>.
	TaskQueue string `json:"taskQueue,omitempty"`
	// CapacityType ("on-prem", "spot", "on-demand") and PricePerGPUHour
	// are what the member's GPUs cost, for the ledger.
	CapacityType    CapacityType `json:"capacityType,omitempty"`
	PricePerGPUHour float64      `json:"pricePerGPUHour,omitempty"`
}

// Share reports whether the member holds a share (Milli) of each of its
// GPUs rather than the GPUs whole.
func (m Member) Share() bool { return m.Milli > 0 && m.Milli < MilliPerGPU }

// MeteredMilli is what each of the member's GPUs counts for in milli-GPU,
// in the ledger and against quotas: its share, a MIG device's share of its
// parent GPU, or MilliPerGPU for a whole GPU.
func (m Member) MeteredMilli() int {
	switch {
	case m.MIG != "" && m.MIGMilli > 0:
		return min(m.MIGMilli, MilliPerGPU)
	case m.Share():
		return m.Milli
	}
	return MilliPerGPU
}

// Assignment is what the dispatch loop hands a job: one member per replica,
// committed in Redis before the workflow hears of it.
type Assignment struct {
	JobID   JobID     `json:"jobId"`
	Attempt int       `json:"attempt"`
	Members []Member  `json:"members"`
	At      time.Time `json:"at"`
	// What the scheduler needs to know about the running job later:
	// fair share and quotas, backfill (when it ends at the latest) and
	// preemption. Project is for the cost of runs in flight.
	Team       string        `json:"team,omitempty"`
	Project    string        `json:"project,omitempty"`
	Priority   int           `json:"priority,omitempty"`
	MaxRuntime time.Duration `json:"maxRuntime,omitempty"`
	Runtime    time.Duration `json:"runtime,omitempty"` // expected
	// Kept is the run time earlier attempts kept (QueueEntry.Kept).
	Kept        time.Duration `json:"kept,omitempty"`
	Preemptible bool          `json:"preemptible,omitempty"`
	// Checkpointable: the job saves checkpoints and resumes from them,
	// so moving it loses only the work since its newest one
	// (placement's defragmentation moves only such jobs).
	Checkpointable bool  `json:"checkpointable,omitempty"`
	CPUMilli       int64 `json:"cpuMilli,omitempty"` // per member
	MemMiB         int64 `json:"memMiB,omitempty"`   // per member
	// LastCheckpoint bounds the work lost if the job is preempted now
	// (zero: everything since At). The agents record each checkpoint
	// they save in the view, which fills it in (capacity.View.Snapshot).
	LastCheckpoint time.Time `json:"lastCheckpoint,omitzero"`
}

// Where says where the assignment put each rank, as `gangway status`
// shows it: "rank 0 → n1 GPUs [0 1]; rank 1 → n2 GPUs [0 1]".
func (a Assignment) Where() string {
	parts := make([]string, len(a.Members))
	for i, m := range a.Members {
		parts[i] = fmt.Sprintf("rank %d → %s GPUs %v", m.Rank, m.NodeID, m.GPUs)
	}
	return strings.Join(parts, "; ")
}

// GPUCount is the number of GPUs the assignment holds across all members.
func (a Assignment) GPUCount() int {
	n := 0
	for _, m := range a.Members {
		n += len(m.GPUs)
	}
	return n
}

// GPUMilli is the milli-GPU the assignment holds across all members, each
// GPU counted at its member's MeteredMilli: what it is billed per second.
func (a Assignment) GPUMilli() int64 {
	var n int64
	for _, m := range a.Members {
		n += int64(len(m.GPUs)) * int64(m.MeteredMilli())
	}
	return n
}

// MasterAddr is the address rank 0 listens on.
func (a Assignment) MasterAddr() string {
	for _, m := range a.Members {
		if m.Rank == 0 {
			if m.Addr != "" {
				return m.Addr
			}
			return m.NodeID
		}
	}
	return ""
}

// GPU is one device on a node as its agent reports it.
type GPU struct {
	Index   int    `json:"index"`
	UUID    string `json:"uuid"`
	Model   string `json:"model"`
	MemMiB  int    `json:"memMiB"`
	Healthy bool   `json:"healthy"`
	// NVLinkDomain names the GPUs this one shares NVLink/NVSwitch with
	// (possibly across nodes, for rack-scale systems); "" when none.
	NVLinkDomain string `json:"nvlinkDomain,omitempty"`
	NUMA         int    `json:"numa,omitempty"`
	// Flakiness is the GPU's recent hardware faults, decayed over time
	// (FlakinessHalfLife); placement keeps long gangs off flaky GPUs.
	Flakiness float64 `json:"flakiness,omitempty"`
	// MIGProfile is set when the GPU is a MIG device ("1g.10gb"; UUID is
	// then the MIG device's, "MIG-..."), a fixed partition of the physical
	// GPU ParentIndex (NVML's index) with ParentUUID. Only jobs asking for
	// that profile are placed on it; a GPU in MIG mode offers no whole GPU.
	MIGProfile  string `json:"migProfile,omitempty"`
	ParentIndex int    `json:"parentIndex,omitempty"`
	ParentUUID  string `json:"parentUUID,omitempty"`
}

// IsMIG reports whether the GPU is a MIG device.
func (g GPU) IsMIG() bool { return g.MIGProfile != "" }

// Node state values.
const (
	NodeReady    = "ready"
	NodeCordoned = "cordoned"
	NodeLost     = "lost"
)

// Node is a node's inventory as registered by its agent.
type Node struct {
	ID   string `json:"id"`
	Addr string `json:"addr"`
	Pool string `json:"pool"`
	// Owner is set on a cloud node launched for one job: only that job is
	// placed on it. "" for shared (on-prem) nodes.
	Owner JobID `json:"owner,omitempty"`
	// CapacityType is "spot" or "on-demand" for cloud nodes, "" on-prem.
	CapacityType CapacityType `json:"capacityType,omitempty"`
	// Driver and CUDA versions reported by NVML ("" when synthetic).
	DriverVersion string `json:"driverVersion,omitempty"`
	CUDAVersion   string `json:"cudaVersion,omitempty"`
	Rack          string `json:"rack,omitempty"`
	Block         string `json:"block,omitempty"`
	GPUs          []GPU  `json:"gpus"`
	CPUMilli      int64  `json:"cpuMilli"`
	MemMiB        int64  `json:"memMiB"`
	// TaskQueue is the Temporal task queue the node's tasks are sent to;
	// "" means the node's own, node/<ID>, polled by its agent. Simulated
	// nodes hosted many to one process share their host's queue
	// (internal/agent.Host).
	TaskQueue string `json:"taskQueue,omitempty"`
}

// Model is the GPU model of the node's GPUs ("" when it has none). Nodes are
// homogeneous, as real GPU servers are.
func (n Node) Model() string {
	if len(n.GPUs) == 0 {
		return ""
	}
	return n.GPUs[0].Model
}

// QueueEntry is a pending job as the dispatch loop sees it: what it asks for
// and where it stands in line. Attempt counts placements (it grows with every
// requeue), so a late commit or release for an old attempt is recognised.
type QueueEntry struct {
	JobID          JobID         `json:"jobId"`
	Team           string        `json:"team"`
	Project        string        `json:"project,omitempty"`
	PriorityClass  string        `json:"priorityClass"`
	Priority       int           `json:"priority"`
	Attempt        int           `json:"attempt"`
	Replicas       int           `json:"replicas"`
	GPUsPerReplica int           `json:"gpusPerReplica"`
	GPUModels      []string      `json:"gpuModels,omitempty"`
	CPUMilli       int64         `json:"cpuMilli"`
	MemMiB         int64         `json:"memMiB"`
	Pools          []string      `json:"pools,omitempty"`
	MaxRuntime     time.Duration `json:"maxRuntime"`
	Preemptible    bool          `json:"preemptible,omitempty"`
	Topology       Topology      `json:"topology,omitzero"`
	// GPUMilli, when GPUsPerReplica is 1 and 0 < GPUMilli < MilliPerGPU,
	// makes each replica a share of one GPU (GPU-sharing tasks, as the
	// simulator replays them); 0 means whole GPUs. GPUsPerReplica 0 is a
	// CPU-only task.
	GPUMilli int `json:"gpuMilli,omitempty"`
	// MIGProfile makes each replica's GPUs MIG devices of that profile
	// ("1g.10gb"; job specs ask for one per replica): placed only on free
	// MIG devices of the profile, never on a whole GPU.
	MIGProfile string `json:"migProfile,omitempty"`
	// Runtime is the expected length of one run (estimatedRuntime or
	// maxRuntime); Deadline the time it must have finished by (zero: none).
	// An attempt that resumes from a checkpoint has Kept, the run time
	// its earlier attempts kept (run time less the work lost), and
	// Runtime what is left of the expected one after it.
	Runtime  time.Duration `json:"runtime,omitempty"`
	Kept     time.Duration `json:"kept,omitempty"`
	Deadline time.Time     `json:"deadline,omitzero"`
	// Burst is the job's cloud policy; Checkpointable and
	// CheckpointInterval price what a spot interruption loses.
	Burst              Burst         `json:"burst,omitzero"`
	Checkpointable     bool          `json:"checkpointable,omitempty"`
	CheckpointInterval time.Duration `json:"checkpointInterval,omitempty"`
	// Nodes pins the entry to these nodes (a burst attempt waits for the
	// instances launched for it); empty means anywhere it fits.
	Nodes []string `json:"nodes,omitempty"`
	// SubmittedAt orders jobs within a priority class; a requeued job keeps
	// its original submit time, so it does not go to the back of the line.
	SubmittedAt time.Time `json:"submittedAt"`
	EnqueuedAt  time.Time `json:"enqueuedAt"`
}

// GPUs is the total number of GPUs the entry asks for.
func (q QueueEntry) GPUs() int { return q.Replicas * q.GPUsPerReplica }

// MilliPerGPU is one whole GPU in milli-GPU, the unit GPU shares are
// measured in.
const MilliPerGPU = 1000

// Share reports whether each replica takes a fraction of one GPU.
func (q QueueEntry) Share() bool {
	return q.GPUsPerReplica == 1 && q.GPUMilli > 0 && q.GPUMilli < MilliPerGPU
}

// MilliEachGPU is how much of each GPU a replica takes: its share, or
// MilliPerGPU for whole GPUs.
func (q QueueEntry) MilliEachGPU() int {
	if q.Share() {
		return q.GPUMilli
	}
	return MilliPerGPU
}

// GPUMilliTotal is the entry's whole GPU demand in milli-GPU.
func (q QueueEntry) GPUMilliTotal() int64 {
	return int64(q.Replicas) * int64(q.GPUsPerReplica) * int64(q.MilliEachGPU())
}

// MIG reports whether each replica takes MIG devices (GPUsPerReplica of
// them; job specs allow one).
func (q QueueEntry) MIG() bool { return q.MIGProfile != "" && q.GPUsPerReplica > 0 }

// MeteredMilli is the milli-GPU the entry counts for on GPUs of model, in
// the ledger and against quotas: GPUMilliTotal, except that a MIG device
// counts as its share of the parent GPU (MIGMilli). With model "" the
// share is read as on a GPU of seven slices.
func (q QueueEntry) MeteredMilli(model string) int64 {
	if q.MIG() {
		return int64(q.Replicas) * int64(q.GPUsPerReplica) * int64(MIGMilli(model, q.MIGProfile))
	}
	return q.GPUMilliTotal()
}

// UsageSegment is one stretch of one attempt holding GPUs in one pool: the
// unit the ledger bills. Dollars = GPU-hours (each GPU at its share) ×
// PricePerGPUHour.
type UsageSegment struct {
	JobID   JobID  `json:"jobId"`
	Attempt int    `json:"attempt"`
	Team    string `json:"team"`
	Project string `json:"project,omitempty"`
	Pool    string `json:"pool"`
	// CapacityType is "on-prem", "spot" or "on-demand".
	CapacityType CapacityType `json:"capacityType"`
	GPUs         int          `json:"gpus"`
	// GPUMilli is what the GPUs count for together, in milli-GPU: each
	// GPU at its member's Member.MeteredMilli, so a half-GPU share is 500
	// and a whole GPU 1000. 0 means GPUs whole GPUs (segments recorded
	// before shares were metered).
	GPUMilli        int64     `json:"gpuMilli,omitempty"`
	Start           time.Time `json:"start"`
	End             time.Time `json:"end"`
	PricePerGPUHour float64   `json:"pricePerGPUHour"`
}

// Milli is what the segment's GPUs count for, in milli-GPU.
func (u UsageSegment) Milli() int64 {
	if u.GPUMilli > 0 {
		return u.GPUMilli
	}
	return int64(u.GPUs) * MilliPerGPU
}

// GPUSeconds is the segment's GPU time: seconds × its GPUs, each counted
// at its share (milli-GPU-seconds / 1000).
func (u UsageSegment) GPUSeconds() float64 {
	return MeteredGPUSeconds(u.End.Sub(u.Start).Seconds(), u.GPUs, u.Milli())
}

// MeteredGPUSeconds is sec seconds of gpus GPUs that count for milli
// milli-GPU together: sec × milli / 1000, and for whole GPUs (milli =
// gpus × 1000) exactly sec × gpus, as GPU time was counted before shares
// were metered. Every GPU-second Gangway reports is computed here.
func MeteredGPUSeconds(sec float64, gpus int, milli int64) float64 {
	if milli != int64(gpus)*MilliPerGPU {
		return sec * float64(milli) / MilliPerGPU
	}
	return sec * float64(gpus)
}

// Dollars is what the segment cost.
func (u UsageSegment) Dollars() float64 { return u.GPUSeconds() / 3600 * u.PricePerGPUHour }
