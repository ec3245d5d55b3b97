package dispatch

import (
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/placement"
)

// placementSnapshot turns the Redis view into placement's input: the one
// conversion between dispatch and placement (queue entries pass through as
// they are). Nodes that are cordoned or have not heartbeated within nodeTTL
// are not schedulable; committed allocations are the running jobs
// placement reasons about.
func placementSnapshot(s capacity.Snapshot, nodeTTL time.Duration, onPremPrices map[string]float64) placement.Snapshot {
	ps := placement.Snapshot{Now: s.Now, Nodes: make([]placement.Node, 0, len(s.Nodes))}
	total := 0
	for i := range s.Nodes {
		total += len(s.Nodes[i].Node.GPUs)
	}
	// One backing array for every node's GPUs: a fleet of thousands of
	// nodes is converted every cycle.
	gpus := make([]placement.GPU, 0, total)
	for i := range s.Nodes {
		n := &s.Nodes[i]
		pn := placement.Node{
			ID: n.Node.ID, Addr: n.Node.Addr, Pool: n.Node.Pool, Model: n.Node.Model(),
			CapacityType: gangway.CapacityOnPrem, PricePerGPUHour: onPremPrices[n.Node.Pool], Owner: n.Node.Owner,
			Rack: n.Node.Rack, Block: n.Node.Block, TaskQueue: n.Node.TaskQueue,
			CPUMilli: n.Node.CPUMilli, MemMiB: n.Node.MemMiB, UsedCPUMilli: n.UsedCPUMilli, UsedMemMiB: n.UsedMemMiB,
			Schedulable: n.State == gangway.NodeReady && s.Now.Sub(n.LastHeartbeat) <= nodeTTL,
		}
		if n.Node.CapacityType != "" {
			// A cloud node: the view does not hold its price (the workflow
			// that rented it bills it); priceCloudNodes gives it once the
			// cycle has the cloud's offers.
			pn.CapacityType, pn.PricePerGPUHour = n.Node.CapacityType, 0
		}
		first := len(gpus)
		for gi := range n.Node.GPUs {
			g := &n.Node.GPUs[gi]
			pg := placement.GPU{Index: g.Index, Model: g.Model, Healthy: g.Healthy, Domain: g.NVLinkDomain, NUMA: g.NUMA, Flakiness: g.Flakiness,
				MIG: g.MIGProfile}
			if _, used := n.Allocated[g.Index]; used {
				pg.UsedMilli = placement.Whole
			} else if milli := n.SharedMilli(g.Index); milli > 0 {
				pg.UsedMilli = min(milli, placement.Whole)
			}
			gpus = append(gpus, pg)
		}
		pn.GPUs = gpus[first:len(gpus):len(gpus)]
		ps.Nodes = append(ps.Nodes, pn)
	}
	// A committed allocation is the assignment placement made, complete:
	// it is the running job as placement reads it back.
	ps.Running = s.Allocations
	return ps
}

// priceCloudNodes gives each cloud node the price per GPU-hour of the offer
// it was rented from, by pool, capacity type, GPU model and GPUs per
// instance: the dearest such offer (a budget errs high), else the dearest of
// any pool when its own is no longer offered; a node no offer matches stays
// at 0. The burst decision charges a team's cloud runs to its budget at
// these prices (placement's commitments).
func priceCloudNodes(nodes []placement.Node, offers []gangway.Offer) {
	for i := range nodes {
		n := &nodes[i]
		if !n.CapacityType.Cloud() || n.PricePerGPUHour > 0 || len(n.GPUs) == 0 {
			continue
		}
		var own, any float64
		for _, o := range offers {
			if o.CapacityType != n.CapacityType || o.GPUModel != n.Model || o.GPUsPerInstance != len(n.GPUs) {
				continue
			}
			any = max(any, o.PricePerHour)
			if o.Pool == n.Pool {
				own = max(own, o.PricePerHour)
			}
		}
		if own == 0 {
			own = any
		}
		n.PricePerGPUHour = own / float64(len(n.GPUs))
	}
}

// Measure is the fragmentation report of the view s against the typical
// workload w the dispatch leader stored (capacity.Learned.Workload), cut
// as the loop cuts it, or against the pending mix while there is none,
// with nodes silent longer than nodeTTL not schedulable: what each cycle
// exports as metrics, for readers outside the loop (the web view samples
// it over time).
func Measure(s capacity.Snapshot, w []placement.WorkloadClass, nodeTTL time.Duration) placement.Report {
	typical := placement.Typical(w, placement.TypicalPopularity)
	return placement.Measure(placementSnapshot(s, nodeTTL, nil), placement.WorkloadOr(typical, s.Queue))
}
