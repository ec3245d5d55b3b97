package placement_test

import (
	"slices"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
)

// t0 is the snapshot time every fixture fleet is taken at.
var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// nodeBuilder builds a placement.Node fluently:
//
//	node("n1").gpus(8, "H100").pool("onprem").used(0, 1, 2)
//
// A new node is schedulable, in pool "onprem", at "<id>:29500", with no GPUs
// and room for 64 CPUs and 1 TiB of memory, so CPU and memory never get in
// the way unless a case says so.
type nodeBuilder struct{ n placement.Node }

func node(id string) *nodeBuilder {
	return &nodeBuilder{n: placement.Node{
		ID: id, Addr: id + ":29500", Pool: "onprem",
		FreeCPUMilli: 64000, FreeMemMiB: 1 << 20, Schedulable: true,
	}}
}

// gpus gives the node count GPUs of model, all free.
func (b *nodeBuilder) gpus(count int, model string) *nodeBuilder {
	b.n.GPUs, b.n.Model = count, model
	b.n.Free = nil
	for i := range count {
		b.n.Free = append(b.n.Free, i)
	}
	return b
}

// used takes GPU indices out of the free list (allocated or unhealthy).
func (b *nodeBuilder) used(idx ...int) *nodeBuilder {
	b.n.Free = slices.DeleteFunc(b.n.Free, func(g int) bool { return slices.Contains(idx, g) })
	return b
}

func (b *nodeBuilder) pool(p string) *nodeBuilder   { b.n.Pool = p; return b }
func (b *nodeBuilder) cpu(milli int64) *nodeBuilder { b.n.FreeCPUMilli = milli; return b }
func (b *nodeBuilder) mem(mib int64) *nodeBuilder   { b.n.FreeMemMiB = mib; return b }

// cordoned marks the node unschedulable.
func (b *nodeBuilder) cordoned() *nodeBuilder { b.n.Schedulable = false; return b }

func (b *nodeBuilder) build() placement.Node { return b.n }

// fleet is a snapshot of nodes taken at t0.
func fleet(nodes ...*nodeBuilder) placement.Snapshot {
	s := placement.Snapshot{Now: t0}
	for _, b := range nodes {
		s.Nodes = append(s.Nodes, b.build())
	}
	return s
}

// jobBuilder builds a gangway.QueueEntry fluently:
//
//	job("j1").gang(2, 8).models("H100")
//
// A new job is one replica of one GPU, any model, any pool, asking for one
// CPU and 4 GiB per replica, attempt 1, submitted at t0.
type jobBuilder struct{ e gangway.QueueEntry }

func job(id string) *jobBuilder {
	return &jobBuilder{e: gangway.QueueEntry{
		JobID: id, Team: "ml", PriorityClass: gangway.PriorityNormal, Priority: gangway.PriorityValue(gangway.PriorityNormal),
		Attempt: 1, Replicas: 1, GPUsPerReplica: 1, CPUMilli: 1000, MemMiB: 4096,
		SubmittedAt: t0, EnqueuedAt: t0,
	}}
}

func (b *jobBuilder) gang(replicas, gpusPer int) *jobBuilder {
	b.e.Replicas, b.e.GPUsPerReplica = replicas, gpusPer
	return b
}
func (b *jobBuilder) models(m ...string) *jobBuilder { b.e.GPUModels = m; return b }
func (b *jobBuilder) pools(p ...string) *jobBuilder  { b.e.Pools = p; return b }
func (b *jobBuilder) cpu(milli int64) *jobBuilder    { b.e.CPUMilli = milli; return b }
func (b *jobBuilder) mem(mib int64) *jobBuilder      { b.e.MemMiB = mib; return b }
func (b *jobBuilder) attempt(n int) *jobBuilder      { b.e.Attempt = n; return b }

func (b *jobBuilder) build() gangway.QueueEntry { return b.e }

// queue is the jobs in the order given.
func queue(jobs ...*jobBuilder) []gangway.QueueEntry {
	var q []gangway.QueueEntry
	for _, b := range jobs {
		q = append(q, b.build())
	}
	return q
}

// placed is the assignment a fixture job gets at t0 (attempt 1 unless
// overridden with atAttempt).
func placed(jobID string, members ...gangway.Member) gangway.Assignment {
	return gangway.Assignment{JobID: jobID, Attempt: 1, Members: members, At: t0}
}

func atAttempt(a gangway.Assignment, attempt int) gangway.Assignment {
	a.Attempt = attempt
	return a
}

// on is gang member rank on a fixture node in pool "onprem" (see inPool).
func on(rank int, nodeID string, gpus ...int) gangway.Member {
	return gangway.Member{Rank: rank, NodeID: nodeID, Pool: "onprem", GPUs: gpus, Addr: nodeID + ":29500"}
}

func inPool(m gangway.Member, pool string) gangway.Member {
	m.Pool = pool
	return m
}

func waiting(jobID string, reason placement.Reason, detail string) placement.Unplaced {
	return placement.Unplaced{JobID: jobID, Reason: reason, Detail: detail}
}

// seq is [from, from+n).
func seq(from, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + i
	}
	return out
}
