package placement_test

import (
	"fmt"
	"slices"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
)

// t0 is the instant every fixture snapshot is taken at.
var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// nodeBuilder builds a placement.Node fluently:
//
//	node("n1").gpus(8, "H100").domain("nvl-0").used(0, 1).rack("r1")
//
// A new node is schedulable, in pool "onprem", at "<id>:29500", with no
// GPUs and room for 64 CPUs and 1 TiB of memory, so CPU and memory never
// get in the way unless a case says so.
type nodeBuilder struct{ n placement.Node }

func node(id string) *nodeBuilder {
	return &nodeBuilder{n: placement.Node{
		ID: id, Addr: id + ":29500", Pool: "onprem", CapacityType: "on-prem",
		CPUMilli: 64000, MemMiB: 1 << 20, Schedulable: true,
	}}
}

// gpus gives the node count healthy, free GPUs of model, each its own
// NVLink domain until domain says otherwise.
func (b *nodeBuilder) gpus(count int, model string) *nodeBuilder {
	b.n.Model = model
	b.n.GPUs = make([]placement.GPU, count)
	for i := range b.n.GPUs {
		b.n.GPUs[i] = placement.GPU{Index: i, Model: model, Healthy: true}
	}
	return b
}

// domain puts GPUs idx (all of them when none are named) in NVLink domain d.
func (b *nodeBuilder) domain(d string, idx ...int) *nodeBuilder {
	for i := range b.n.GPUs {
		if len(idx) == 0 || slices.Contains(idx, i) {
			b.n.GPUs[i].Domain = d
		}
	}
	return b
}

// used marks GPUs idx as fully allocated to work the snapshot does not list
// as Running (it cannot be preempted or waited for).
func (b *nodeBuilder) used(idx ...int) *nodeBuilder {
	for _, i := range idx {
		b.n.GPUs[i].UsedMilli = placement.Whole
	}
	return b
}

// usedMilli marks milli of GPU i as allocated (GPU shares).
func (b *nodeBuilder) usedMilli(i, milli int) *nodeBuilder {
	b.n.GPUs[i].UsedMilli = milli
	return b
}

// mig makes GPUs idx MIG devices of profile (no NVLink domain: MIG
// devices do not use it).
func (b *nodeBuilder) mig(profile string, idx ...int) *nodeBuilder {
	for _, i := range idx {
		b.n.GPUs[i].MIG, b.n.GPUs[i].Domain = profile, ""
	}
	return b
}

func (b *nodeBuilder) unhealthy(idx ...int) *nodeBuilder {
	for _, i := range idx {
		b.n.GPUs[i].Healthy = false
	}
	return b
}

func (b *nodeBuilder) rack(r string) *nodeBuilder       { b.n.Rack = r; return b }
func (b *nodeBuilder) block(bl string) *nodeBuilder     { b.n.Block = bl; return b }
func (b *nodeBuilder) pool(p string) *nodeBuilder       { b.n.Pool = p; return b }
func (b *nodeBuilder) cpu(milli int64) *nodeBuilder     { b.n.CPUMilli = milli; return b }
func (b *nodeBuilder) mem(mib int64) *nodeBuilder       { b.n.MemMiB = mib; return b }
func (b *nodeBuilder) usedCPU(milli int64) *nodeBuilder { b.n.UsedCPUMilli = milli; return b }

// cordoned marks the node unschedulable.
func (b *nodeBuilder) cordoned() *nodeBuilder { b.n.Schedulable = false; return b }

// runBuilder builds a running allocation fluently:
//
//	running("r1").team("nlp").prio(50).preemptible().on("n1", 0, 1, 2, 3).started(t0.Add(-time.Hour))
//
// A new allocation belongs to team "ml" at priority 100, is not
// preemptible, started an hour before t0, has no max runtime and asks one
// CPU and 4 GiB per member. fleet.with marks its GPUs, CPU and memory used
// on its nodes, so snapshots stay consistent.
type runBuilder struct {
	r       gangway.Assignment
	milli   int    // per GPU for a share, set on every member by build
	profile string // MIG profile of its GPUs, set on every member by build
}

func running(id string) *runBuilder {
	return &runBuilder{r: gangway.Assignment{JobID: id, Team: "ml", Priority: 100, At: t0.Add(-time.Hour),
		CPUMilli: 1000, MemMiB: 4096}}
}

// on adds a member on nodeID holding gpus.
func (b *runBuilder) on(nodeID string, gpus ...int) *runBuilder {
	b.r.Members = append(b.r.Members, gangway.Member{Rank: len(b.r.Members), NodeID: nodeID, GPUs: gpus})
	return b
}

func (b *runBuilder) team(t string) *runBuilder           { b.r.Team = t; return b }
func (b *runBuilder) prio(p int) *runBuilder              { b.r.Priority = p; return b }
func (b *runBuilder) preemptible() *runBuilder            { b.r.Preemptible = true; return b }
func (b *runBuilder) checkpointable() *runBuilder         { b.r.Checkpointable = true; return b }
func (b *runBuilder) attempt(n int) *runBuilder           { b.r.Attempt = n; return b }
func (b *runBuilder) started(t time.Time) *runBuilder     { b.r.At = t; return b }
func (b *runBuilder) checkpoint(t time.Time) *runBuilder  { b.r.LastCheckpoint = t; return b }
func (b *runBuilder) runtime(d time.Duration) *runBuilder { b.r.MaxRuntime = d; return b }
func (b *runBuilder) share(milli int) *runBuilder         { b.milli = milli; return b }
func (b *runBuilder) mig(profile string) *runBuilder      { b.profile = profile; return b }
func (b *runBuilder) res(cpu, mem int64) *runBuilder      { b.r.CPUMilli, b.r.MemMiB = cpu, mem; return b }

// fleetBuilder is a snapshot taken at t0 (or at): nodes, and running
// allocations charged to them.
type fleetBuilder struct {
	nodes   []*nodeBuilder
	running []*runBuilder
	now     time.Time
}

func fleet(nodes ...*nodeBuilder) *fleetBuilder { return &fleetBuilder{nodes: nodes, now: t0} }

// with adds running allocations.
func (f *fleetBuilder) with(rs ...*runBuilder) *fleetBuilder {
	f.running = append(f.running, rs...)
	return f
}

func (f *fleetBuilder) at(t time.Time) *fleetBuilder { f.now = t; return f }

// build is the snapshot, with every running member's GPUs, CPU and memory
// marked used on its node. A fixture that double-books a GPU, or needs
// more CPU or memory than a node has, panics: that is a broken test, not a
// case.
func (f *fleetBuilder) build() placement.Snapshot {
	if f == nil {
		return placement.Snapshot{Now: t0}
	}
	s := placement.Snapshot{Now: f.now}
	at := map[string]int{}
	for _, b := range f.nodes {
		n := b.n
		n.GPUs = slices.Clone(n.GPUs)
		at[n.ID] = len(s.Nodes)
		s.Nodes = append(s.Nodes, n)
	}
	for _, rb := range f.running {
		r := rb.r
		r.Members = slices.Clone(r.Members)
		milli := rb.milli
		if milli == 0 {
			milli = placement.Whole
		}
		for k, m := range r.Members {
			i, ok := at[m.NodeID]
			if !ok {
				panic(fmt.Sprintf("fixture: running %s on unknown node %s", r.JobID, m.NodeID))
			}
			n := &s.Nodes[i]
			r.Members[k].Pool, r.Members[k].Addr = n.Pool, n.Addr
			r.Members[k].Milli = rb.milli
			if rb.profile != "" {
				r.Members[k].MIG, r.Members[k].MIGMilli = rb.profile, gangway.MIGMilli(n.Model, rb.profile)
			}
			n.UsedCPUMilli += r.CPUMilli
			n.UsedMemMiB += r.MemMiB
			if n.UsedCPUMilli > n.CPUMilli || n.UsedMemMiB > n.MemMiB {
				panic(fmt.Sprintf("fixture: running %s over-allocates %s CPU or memory", r.JobID, n.ID))
			}
			for _, g := range m.GPUs {
				if n.GPUs[g].UsedMilli+milli > placement.Whole {
					panic(fmt.Sprintf("fixture: running %s over-allocates %s GPU %d", r.JobID, n.ID, g))
				}
				n.GPUs[g].UsedMilli += milli
			}
		}
		s.Running = append(s.Running, r)
	}
	return s
}

// jobBuilder builds a gangway.QueueEntry fluently:
//
//	job("j1").gang(2, 8).team("nlp").prio(200).topology(gangway.LevelNVLink, true).preemptible().runtime(2 * time.Hour)
//
// A new job is one replica of one GPU of any model in any pool, for team
// "ml" at priority 100, asking one CPU and 4 GiB per replica, attempt 1,
// submitted at t0, with no max runtime.
type jobBuilder struct{ j gangway.QueueEntry }

func job(id string) *jobBuilder {
	return &jobBuilder{j: gangway.QueueEntry{JobID: id, Team: "ml", Priority: 100, SubmittedAt: t0, Attempt: 1,
		Replicas: 1, GPUsPerReplica: 1, CPUMilli: 1000, MemMiB: 4096}}
}

// gang is replicas members of gpusPer whole GPUs each.
func (b *jobBuilder) gang(replicas, gpusPer int) *jobBuilder {
	b.j.Replicas, b.j.GPUsPerReplica, b.j.GPUMilli = replicas, gpusPer, 0
	return b
}

// share makes each replica a share of milli of one GPU.
func (b *jobBuilder) share(milli int) *jobBuilder {
	b.j.GPUsPerReplica, b.j.GPUMilli = 1, milli
	return b
}

// mig makes each replica one MIG device of profile.
func (b *jobBuilder) mig(profile string) *jobBuilder {
	b.j.GPUsPerReplica, b.j.GPUMilli, b.j.MIGProfile = 1, 0, profile
	return b
}

// replicas sets the number of replicas without changing their shape.
func (b *jobBuilder) replicas(n int) *jobBuilder { b.j.Replicas = n; return b }

// cpuOnly makes each replica ask for no GPU.
func (b *jobBuilder) cpuOnly() *jobBuilder { b.j.GPUsPerReplica, b.j.GPUMilli = 0, 0; return b }

func (b *jobBuilder) topology(l gangway.Level, required bool) *jobBuilder {
	b.j.Topology = gangway.Topology{Level: l, Required: required}
	return b
}

func (b *jobBuilder) team(t string) *jobBuilder           { b.j.Team = t; return b }
func (b *jobBuilder) prio(p int) *jobBuilder              { b.j.Priority = p; return b }
func (b *jobBuilder) models(m ...string) *jobBuilder      { b.j.GPUModels = m; return b }
func (b *jobBuilder) pools(p ...string) *jobBuilder       { b.j.Pools = p; return b }
func (b *jobBuilder) cpu(milli int64) *jobBuilder         { b.j.CPUMilli = milli; return b }
func (b *jobBuilder) mem(mib int64) *jobBuilder           { b.j.MemMiB = mib; return b }
func (b *jobBuilder) attempt(n int) *jobBuilder           { b.j.Attempt = n; return b }
func (b *jobBuilder) preemptible() *jobBuilder            { b.j.Preemptible = true; return b }
func (b *jobBuilder) checkpointable() *jobBuilder         { b.j.Checkpointable = true; return b }
func (b *jobBuilder) runtime(d time.Duration) *jobBuilder { b.j.MaxRuntime = d; return b }
func (b *jobBuilder) submitted(t time.Time) *jobBuilder   { b.j.SubmittedAt = t; return b }

// age submits the job d before t0.
func (b *jobBuilder) age(d time.Duration) *jobBuilder { b.j.SubmittedAt = t0.Add(-d); return b }

// queue is the jobs in the order given.
func queue(jobs ...*jobBuilder) []gangway.QueueEntry {
	q := make([]gangway.QueueEntry, 0, len(jobs))
	for _, b := range jobs {
		q = append(q, b.j)
	}
	return q
}

// withEntry is a with what the assignment carries about its job filled in
// from the job's queue entry, as Place fills it.
func withEntry(a gangway.Assignment, e *gangway.QueueEntry) gangway.Assignment {
	a.Team, a.Priority, a.MaxRuntime, a.Runtime, a.Preemptible = e.Team, e.Priority, e.MaxRuntime, e.Runtime, e.Preemptible
	a.Checkpointable = e.Checkpointable
	a.CPUMilli, a.MemMiB = e.CPUMilli, e.MemMiB
	return a
}

// placed is the assignment a fixture job gets at t0, attempt 1 (runPlaceCases
// fills in what it carries from the entry: withEntry).
func placed(jobID string, members ...gangway.Member) gangway.Assignment {
	return gangway.Assignment{JobID: jobID, Attempt: 1, Members: members, At: t0}
}

// on is gang member rank holding whole GPUs of a fixture node in pool
// "onprem".
func on(rank int, nodeID string, gpus ...int) gangway.Member {
	return gangway.Member{Rank: rank, NodeID: nodeID, Pool: "onprem", GPUs: gpus, Addr: nodeID + ":29500"}
}

// shareOn is gang member rank holding milli of GPU gpu.
func shareOn(rank int, nodeID string, milli, gpu int) gangway.Member {
	m := on(rank, nodeID, gpu)
	m.Milli = milli
	return m
}

// migOn is gang member rank holding MIG device gpu of profile on a node
// of model.
func migOn(rank int, nodeID, model, profile string, gpu int) gangway.Member {
	m := on(rank, nodeID, gpu)
	m.MIG, m.MIGMilli = profile, gangway.MIGMilli(model, profile)
	return m
}

// inPool moves a fixture member to pool p.
func inPool(m gangway.Member, p string) gangway.Member { m.Pool = p; return m }

// cpuOn is a CPU-only member.
func cpuOn(rank int, nodeID string) gangway.Member { return on(rank, nodeID) }

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

// nodes is count nodes "<prefix>1".."<prefix>count" built by each.
func nodes(prefix string, count int, each func(b *nodeBuilder) *nodeBuilder) []*nodeBuilder {
	out := make([]*nodeBuilder, count)
	for i := range out {
		out[i] = each(node(fmt.Sprintf("%s%d", prefix, i+1)))
	}
	return out
}

func intp(v int) *int { return &v }
