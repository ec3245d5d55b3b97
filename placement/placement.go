package placement

import (
	"fmt"
	"slices"
	"time"

	"github.com/gangwayhq/gangway"
)

// Node is a schedulable node as the snapshot sees it.
type Node struct {
	ID    string
	Addr  string
	Pool  string
	Model string
	// GPUs is the node's total GPU count; Free lists the indices of healthy,
	// unallocated GPUs in ascending order.
	GPUs         int
	Free         []int
	FreeCPUMilli int64
	FreeMemMiB   int64
	// Schedulable is false for cordoned or lost nodes: they receive no new
	// work, but count toward what the fleet could hold (they may come back).
	Schedulable bool
}

// Snapshot is the fleet at one instant. Now is the only clock placement sees.
type Snapshot struct {
	Now   time.Time
	Nodes []Node
}

// Options tune a Place call.
type Options struct {
	// MaxAssignments caps how many jobs one plan starts (0 = no cap), so one
	// cycle's commit and signals stay small.
	MaxAssignments int
}

// Plan is Place's answer: jobs to start, and why each other job waits.
type Plan struct {
	Assignments []gangway.Assignment
	Unplaced    []Unplaced
}

// Reason says why a job was not placed.
type Reason string

// Reasons for not placing a job. Metric labels use these values.
const (
	// ReasonInsufficientGPUs: the job could fit in the fleet, but not in what
	// is free now. It will be retried every cycle.
	ReasonInsufficientGPUs Reason = "InsufficientFreeGPUs"
	// ReasonNeverFits: no set of schedulable nodes could ever hold the job
	// (model, pool or size). It stays queued in case the fleet grows.
	ReasonNeverFits Reason = "NeverFits"
	// ReasonPlanFull: the plan reached Options.MaxAssignments.
	ReasonPlanFull Reason = "PlanFull"
)

// Unplaced is a job left waiting, with the reason and a sentence for people.
type Unplaced struct {
	JobID  gangway.JobID
	Reason Reason
	Detail string
}

// Placer is the seam the dispatch loop and the simulator call through.
type Placer interface {
	Place(s Snapshot, queue []gangway.QueueEntry, o Options) Plan
}

// FirstFit places each job, in queue order, on the first nodes with room.
type FirstFit struct{}

var _ Placer = FirstFit{}

// Place implements Placer. The queue is taken in the order given (the Redis
// view already sorts it by priority and submit time). Jobs that do not fit
// do not block smaller jobs behind them; reservations for blocked gangs come
// with the backfill policy.
func (FirstFit) Place(s Snapshot, queue []gangway.QueueEntry, o Options) Plan {
	v := newView(s.Nodes)
	var plan Plan
	for _, job := range queue {
		if o.MaxAssignments > 0 && len(plan.Assignments) >= o.MaxAssignments {
			plan.Unplaced = append(plan.Unplaced, Unplaced{JobID: job.JobID, Reason: ReasonPlanFull,
				Detail: fmt.Sprintf("this cycle already starts %d jobs", o.MaxAssignments)})
			continue
		}
		tx := v.begin()
		members, ok := tx.placeGang(job)
		if !ok {
			plan.Unplaced = append(plan.Unplaced, v.explain(job))
			continue
		}
		tx.commit()
		plan.Assignments = append(plan.Assignments, gangway.Assignment{
			JobID: job.JobID, Attempt: job.Attempt, Members: members, At: s.Now,
		})
	}
	return plan
}

// view is the free capacity during one Place call.
type view struct {
	nodes []Node
	free  [][]int // per node, free GPU indices; replaced (never mutated) on commit
	cpu   []int64
	mem   []int64
}

func newView(nodes []Node) *view {
	v := &view{nodes: nodes, free: make([][]int, len(nodes)), cpu: make([]int64, len(nodes)), mem: make([]int64, len(nodes))}
	for i, n := range nodes {
		v.free[i] = n.Free
		v.cpu[i] = n.FreeCPUMilli
		v.mem[i] = n.FreeMemMiB
	}
	return v
}

// tx is a copy-on-write transaction over a view: a gang either commits all
// its members or leaves the view untouched.
type tx struct {
	v    *view
	free map[int][]int
	cpu  map[int]int64
	mem  map[int]int64
}

func (v *view) begin() *tx {
	return &tx{v: v, free: map[int][]int{}, cpu: map[int]int64{}, mem: map[int]int64{}}
}

func (t *tx) freeOf(i int) []int {
	if f, ok := t.free[i]; ok {
		return f
	}
	return t.v.free[i]
}

func (t *tx) cpuOf(i int) int64 {
	if c, ok := t.cpu[i]; ok {
		return c
	}
	return t.v.cpu[i]
}

func (t *tx) memOf(i int) int64 {
	if m, ok := t.mem[i]; ok {
		return m
	}
	return t.v.mem[i]
}

func (t *tx) placeGang(job gangway.QueueEntry) ([]gangway.Member, bool) {
	members := make([]gangway.Member, 0, job.Replicas)
	for rank := 0; rank < job.Replicas; rank++ {
		placed := false
		for i, n := range t.v.nodes {
			if !n.Schedulable || !matches(n, job) {
				continue
			}
			free := t.freeOf(i)
			if len(free) < job.GPUsPerReplica || t.cpuOf(i) < job.CPUMilli || t.memOf(i) < job.MemMiB {
				continue
			}
			gpus := slices.Clone(free[:job.GPUsPerReplica])
			t.free[i] = free[job.GPUsPerReplica:]
			t.cpu[i] = t.cpuOf(i) - job.CPUMilli
			t.mem[i] = t.memOf(i) - job.MemMiB
			members = append(members, gangway.Member{Rank: rank, NodeID: n.ID, Pool: n.Pool, GPUs: gpus, Addr: n.Addr})
			placed = true
			break
		}
		if !placed {
			return nil, false
		}
	}
	return members, true
}

func (t *tx) commit() {
	for i, f := range t.free {
		t.v.free[i] = f
	}
	for i, c := range t.cpu {
		t.v.cpu[i] = c
	}
	for i, m := range t.mem {
		t.v.mem[i] = m
	}
}

func matches(n Node, job gangway.QueueEntry) bool {
	if len(job.GPUModels) > 0 && !slices.Contains(job.GPUModels, n.Model) {
		return false
	}
	if len(job.Pools) > 0 && !slices.Contains(job.Pools, n.Pool) {
		return false
	}
	return true
}

// explain says why job did not fit, distinguishing "not now" from "never".
// Cordoned and lost nodes count toward what could ever fit (they may come
// back) but not toward what fits now; CPU and memory count like GPUs.
func (v *view) explain(job gangway.QueueEntry) Unplaced {
	var matching, unschedulable, everReplicas, nowReplicas, gpuReplicas, largestFree int
	for i, n := range v.nodes {
		if !matches(n, job) {
			continue
		}
		matching++
		everReplicas += n.GPUs / job.GPUsPerReplica
		if !n.Schedulable {
			unschedulable++
			continue
		}
		byGPU := len(v.free[i]) / job.GPUsPerReplica
		gpuReplicas += byGPU
		nowReplicas += min(byGPU, perResource(v.cpu[i], job.CPUMilli), perResource(v.mem[i], job.MemMiB))
		largestFree = max(largestFree, len(v.free[i]))
	}
	shape := fmt.Sprintf("%d × %d GPUs", job.Replicas, job.GPUsPerReplica)
	if len(job.GPUModels) > 0 {
		shape += fmt.Sprintf(" (%v)", job.GPUModels)
	}
	if everReplicas < job.Replicas {
		return Unplaced{JobID: job.JobID, Reason: ReasonNeverFits, Detail: fmt.Sprintf(
			"%s: the fleet holds at most %d such replicas (%d matching nodes)", shape, everReplicas, matching)}
	}
	detail := fmt.Sprintf("%s: only %d replicas fit in free GPUs now (largest free block %d GPUs)", shape, nowReplicas, largestFree)
	if gpuReplicas >= job.Replicas {
		detail = fmt.Sprintf("%s: enough free GPUs, but only %d replicas fit in free CPU and memory (%d mCPU, %d MiB each)",
			shape, nowReplicas, job.CPUMilli, job.MemMiB)
	}
	if unschedulable > 0 {
		detail += fmt.Sprintf("; %d matching nodes are cordoned or not heartbeating", unschedulable)
	}
	return Unplaced{JobID: job.JobID, Reason: ReasonInsufficientGPUs, Detail: detail}
}

// perResource is how many replicas fit in free, or all when none is asked.
func perResource(free, per int64) int {
	if per <= 0 {
		return int(^uint(0) >> 1)
	}
	return int(free / per)
}
