package sim

import (
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/dispatch/dispatchtest"
	"github.com/gangwayhq/gangway/placement"
)

// timedPlacer is the dispatch loop's placement engine in a replay:
// placement.Place itself, counting the calls, the queue lengths and the
// time they take.
type timedPlacer struct {
	last placement.Plan // the plan of the latest call
	// moves are the jobs the plans moved for defragmentation, by job.
	moves    map[gangway.JobID]placement.Move
	calls    int
	maxQueue int
	sumQueue float64
	elapsed  time.Duration
}

var _ placement.Placer = (*timedPlacer)(nil)

func (p *timedPlacer) Place(s placement.Snapshot, queue []gangway.QueueEntry, o placement.Options) placement.Plan {
	p.calls++
	p.maxQueue = max(p.maxQueue, len(queue))
	p.sumQueue += float64(len(queue))
	t0 := time.Now()
	p.last = placement.Place(s, queue, o)
	p.elapsed += time.Since(t0)
	for _, d := range p.last.Defrags {
		for _, m := range d.Moves {
			if p.moves == nil {
				p.moves = map[gangway.JobID]placement.Move{}
			}
			p.moves[m.JobID] = m
		}
	}
	return p.last
}

// fleetMeter keeps the fleet's free and fragmented GPU milli up to date
// from the view, re-measuring only the nodes a start or an end touched.
// Fragmentation is placement's kernel (placement.FragmentationOf) against
// the replay's workload.
type fleetMeter struct {
	cap      *dispatchtest.Capacity
	nodes    []placement.Node
	workload []placement.WorkloadClass
	index    map[string]int
	free     int64
	frag     float64
	nodeFree []int64
	fragOf   []float64
	buf      []int
}

func newFleetMeter(c *dispatchtest.Capacity, nodes []placement.Node, workload []placement.WorkloadClass) *fleetMeter {
	m := &fleetMeter{cap: c, nodes: nodes, workload: workload, index: make(map[string]int, len(nodes)),
		nodeFree: make([]int64, len(nodes)), fragOf: make([]float64, len(nodes))}
	for i := range nodes {
		m.index[nodes[i].ID] = i
		m.update(nodes[i].ID)
	}
	return m
}

func (m *fleetMeter) update(nodeID string) {
	i, ok := m.index[nodeID]
	if !ok {
		return
	}
	n := &m.nodes[i]
	used, cpu, mem := m.cap.NodeUse(nodeID)
	m.buf = m.buf[:0]
	var free int64
	for g, gpu := range n.GPUs {
		f := 0
		if gpu.Healthy {
			f = max(placement.Whole-used[g], 0)
		}
		m.buf = append(m.buf, f)
		free += int64(f)
	}
	fr := placement.FragmentationOf(m.buf, n.CPUMilli-cpu, n.MemMiB-mem, n.Model, m.workload)
	m.free += free - m.nodeFree[i]
	m.nodeFree[i] = free
	m.frag += fr - m.fragOf[i]
	m.fragOf[i] = fr
}

// viewNode is a trace node as its agent would register it.
func viewNode(n placement.Node) gangway.Node {
	out := gangway.Node{ID: n.ID, Addr: n.Addr, Pool: n.Pool, Owner: n.Owner, Rack: n.Rack, Block: n.Block,
		CPUMilli: n.CPUMilli, MemMiB: n.MemMiB, GPUs: make([]gangway.GPU, len(n.GPUs))}
	if n.CapacityType != gangway.CapacityOnPrem {
		out.CapacityType = n.CapacityType
	}
	for i, g := range n.GPUs {
		out.GPUs[i] = gangway.GPU{Index: g.Index, Model: g.Model, Healthy: g.Healthy, NVLinkDomain: g.Domain,
			NUMA: g.NUMA, Flakiness: g.Flakiness}
	}
	return out
}
