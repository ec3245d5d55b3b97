package dispatch

import (
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/placement"
)

// placementSnapshot turns the Redis view into placement's input. Nodes that
// are cordoned or have not heartbeated within nodeTTL are not schedulable;
// committed allocations become the running jobs placement reasons about.
func placementSnapshot(s capacity.Snapshot, nodeTTL time.Duration, onPremPrices map[string]float64) placement.Snapshot {
	ps := placement.Snapshot{Now: s.Now, Nodes: make([]placement.Node, 0, len(s.Nodes))}
	for _, n := range s.Nodes {
		pn := placement.Node{
			ID: n.Node.ID, Addr: n.Node.Addr, Pool: n.Node.Pool, Model: n.Node.Model(),
			CapacityType: gangway.CapacityOnPrem, PricePerGPUHour: onPremPrices[n.Node.Pool], Owner: n.Node.Owner,
			Rack: n.Node.Rack, Block: n.Node.Block,
			CPUMilli: n.Node.CPUMilli, MemMiB: n.Node.MemMiB, UsedCPUMilli: n.UsedCPUMilli, UsedMemMiB: n.UsedMemMiB,
			Schedulable: n.State == gangway.NodeReady && s.Now.Sub(n.LastHeartbeat) <= nodeTTL,
		}
		if n.Node.CapacityType != "" {
			// A cloud node: the workflow that rented it knows its price.
			pn.CapacityType, pn.PricePerGPUHour = n.Node.CapacityType, 0
		}
		for _, g := range n.Node.GPUs {
			pg := placement.GPU{Index: g.Index, Model: g.Model, Healthy: g.Healthy, Domain: g.NVLinkDomain, NUMA: g.NUMA, Flakiness: g.Flakiness}
			if _, used := n.Allocated[g.Index]; used {
				pg.UsedMilli = placement.Whole
			}
			pn.GPUs = append(pn.GPUs, pg)
		}
		ps.Nodes = append(ps.Nodes, pn)
	}
	for _, a := range s.Allocations {
		ps.Running = append(ps.Running, placement.Running{
			JobID: a.JobID, Attempt: a.Attempt, Team: a.Team, Priority: a.Priority, Preemptible: a.Preemptible,
			Start: a.At, MaxRuntime: a.MaxRuntime, Runtime: a.Runtime, Members: a.Members, CPUMilli: a.CPUMilli, MemMiB: a.MemMiB,
		})
	}
	return ps
}

// placementJobs turns queue entries into placement's jobs.
func placementJobs(q []gangway.QueueEntry) []placement.Job {
	out := make([]placement.Job, len(q))
	for i, e := range q {
		out[i] = placement.Job{
			ID: e.JobID, Team: e.Team, Project: e.Project, Priority: e.Priority, Submitted: e.SubmittedAt,
			Attempt: e.Attempt, Replicas: e.Replicas, GPUsPerReplica: e.GPUsPerReplica,
			CPUMilli: e.CPUMilli, MemMiB: e.MemMiB, Models: e.GPUModels, Pools: e.Pools,
			Topology: topology(e.Topology), MaxRuntime: e.MaxRuntime, Preemptible: e.Preemptible, Nodes: e.Nodes,
			Burst: placement.BurstPolicy{Enabled: e.Burst.Enabled, Pools: e.Burst.Pools, CapacityTypes: e.Burst.CapacityTypes,
				MaxPricePerGPUHour: e.Burst.MaxPricePerGPUHour, Runtime: e.Runtime, Deadline: e.Deadline,
				Checkpointable: e.Checkpointable, CheckpointInterval: e.CheckpointInterval},
		}
	}
	return out
}

func topology(t gangway.Topology) placement.Topology {
	return placement.Topology{Level: placement.Level(t.Level.Rank()), Required: t.Required}
}

// stamp copies what later cycles need about a running job from its queue
// entry into the assignment that is committed.
func stamp(asgs []gangway.Assignment, q []gangway.QueueEntry) {
	byID := make(map[gangway.JobID]*gangway.QueueEntry, len(q))
	for i := range q {
		byID[q[i].JobID] = &q[i]
	}
	for i := range asgs {
		if e := byID[asgs[i].JobID]; e != nil {
			a := &asgs[i]
			a.Team, a.Priority, a.MaxRuntime, a.Preemptible = e.Team, e.Priority, e.MaxRuntime, e.Preemptible
			a.Runtime = e.Runtime
			a.CPUMilli, a.MemMiB = e.CPUMilli, e.MemMiB
		}
	}
}
