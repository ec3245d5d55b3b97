package placement

import (
	"slices"

	"github.com/gangwayhq/gangway"
)

// filter is one feasibility check of a replica of j on node i. The engine
// places a replica only on a node every filter passes; explain counts, per
// filter, the nodes it rules out and builds the reason from those counts,
// so what may run and why not are one model.
type filter struct {
	name string
	// static filters depend only on the job and the node, never on what is
	// free: a node they rule out is not one of the job's matching nodes.
	static bool
	ok     func(se *Session, j *gangway.QueueEntry, i int) bool
}

// Filter indexes into filters; explain reads the counts by them.
const (
	fOwner = iota
	fPinned
	fModel
	fPool
	fSchedulable
	fGPUs
	fCPU
	fMemory
	fQuota
	numFilters
)

// filters is the chain, cheapest first: the static ones compare a field
// or scan a list that is usually empty; free GPUs, CPU and memory read the
// view; quota looks up the team's books and runs only when quotas are set.
var filters = [numFilters]filter{
	fOwner: {name: "owner", static: true, ok: func(se *Session, j *gangway.QueueEntry, i int) bool {
		n := &se.view.nodes[i]
		return n.Owner == "" || n.Owner == j.JobID
	}},
	fPinned: {name: "pinned nodes", static: true, ok: func(se *Session, j *gangway.QueueEntry, i int) bool {
		return allowed(j.Nodes, se.view.nodes[i].ID)
	}},
	fModel: {name: "model", static: true, ok: func(se *Session, j *gangway.QueueEntry, i int) bool {
		return allowed(j.GPUModels, se.view.nodes[i].Model)
	}},
	fPool: {name: "pool", static: true, ok: func(se *Session, j *gangway.QueueEntry, i int) bool {
		return allowed(j.Pools, se.view.nodes[i].Pool)
	}},
	fSchedulable: {name: "schedulable", ok: func(se *Session, _ *gangway.QueueEntry, i int) bool {
		return se.view.nodes[i].Schedulable
	}},
	fGPUs: {name: "free GPUs", ok: freeGPUsFit},
	fCPU: {name: "CPU", ok: func(se *Session, j *gangway.QueueEntry, i int) bool {
		return se.view.cpu[i] >= j.CPUMilli
	}},
	fMemory: {name: "memory", ok: func(se *Session, j *gangway.QueueEntry, i int) bool {
		return se.view.mem[i] >= j.MemMiB
	}},
	fQuota: {name: "quota", ok: func(se *Session, j *gangway.QueueEntry, i int) bool {
		if !se.quota.hasQuotas() {
			return true
		}
		model := se.view.nodes[i].Model
		ok, _ := se.quota.admits(j.Team, model, j.MeteredMilli(model))
		return ok
	}},
}

// freeGPUsFit is the free-GPUs filter: a whole-GPU replica needs that many
// entirely free GPUs, a share one GPU with that much left, a MIG replica
// that many free MIG devices of its profile.
func freeGPUsFit(se *Session, j *gangway.QueueEntry, i int) bool {
	switch {
	case j.GPUsPerReplica == 0:
		return true
	case j.MIGProfile != "":
		return se.view.migFits(i, j)
	case j.Share():
		return shareFits(se.view.free[i], j.GPUMilli)
	}
	return se.view.whole[i] >= j.GPUsPerReplica
}

// shareFits reports whether one of the free amounts holds milli. It is a
// function of its own so that freeGPUsFit stays small enough to inline.
func shareFits(free []int, milli int) bool {
	return slices.ContainsFunc(free, func(f int) bool { return f >= milli })
}

// migFits reports whether node i has j.GPUsPerReplica free MIG devices of
// j's profile, ignoring reservations (the candidates heed them).
func (v *View) migFits(i int, j *gangway.QueueEntry) bool {
	return v.FreeMIG(i, j.MIGProfile) >= j.GPUsPerReplica
}

// placeOrder is the chain in the order the engine tries a node: every
// filter must pass, so the order changes only the speed, and free GPUs go
// first because on a busy fleet they rule out the most nodes (trying the
// static filters first made a 10,000-node cycle several times slower).
// explain keeps the chain's own order, which its counts depend on. Node
// classes check the first two themselves (nodeClass.room and
// schedulable; feasibleRest runs the rest).
var placeOrder = [numFilters]int{fGPUs, fSchedulable, fOwner, fPinned, fModel, fPool, fCPU, fMemory, fQuota}

// feasibleNode reports whether one replica of j may go on node i now: the
// whole chain, stopping at the first filter that fails.
func (se *Session) feasibleNode(j *gangway.QueueEntry, i int) bool {
	if !freeGPUsFit(se, j, i) { // placeOrder[0], called directly: this is the hot loop
		return false
	}
	for _, k := range placeOrder[1:] {
		if !filters[k].ok(se, j, i) {
			return false
		}
	}
	return true
}

// mayUse reports whether j may ever run on node i: every static filter.
func (se *Session) mayUse(j *gangway.QueueEntry, i int) bool {
	for k := range filters {
		if filters[k].static && !filters[k].ok(se, j, i) {
			return false
		}
	}
	return true
}

// census is the chain run for one replica of j over the whole fleet, with
// what each filter ruled out.
type census struct {
	// rejected counts, per filter, the matching nodes it rules out (for a
	// static filter: the nodes it is the first to rule out). Matching nodes
	// go through every dynamic filter, so each count stands on its own.
	rejected [numFilters]int
	matching int // nodes every static filter passes
	// everReplicas is how many replicas the matching nodes could hold
	// empty; models lists the GPU models of the whole fleet.
	everReplicas int
	models       []string
	// Free capacity on matching schedulable nodes: milli-GPU, entirely
	// free GPUs j may use, the most of those on one node, and entirely free
	// GPUs it may not use (reserved for a blocked job, or flaky). For a MIG
	// job the GPUs are free MIG devices of its profile.
	freeMilli, freeWhole, largestNode, reservedFree int
}

// count runs the census of j on the current view.
func (se *Session) count(j *gangway.QueueEntry) census {
	if se.classed != nil && len(j.Nodes) == 0 && j.MIGProfile == "" {
		return se.countClasses(j)
	}
	v := se.view
	var c census
	end := v.jobEnd(j)
	for i := range v.nodes {
		n := &v.nodes[i]
		if n.Model != "" && !slices.Contains(c.models, n.Model) {
			c.models = append(c.models, n.Model)
		}
		static := true
		for k := range filters {
			if !filters[k].static {
				continue
			}
			if !filters[k].ok(se, j, i) {
				c.rejected[k]++
				static = false
				break
			}
		}
		if !static {
			continue
		}
		c.matching++
		c.everReplicas += replicasByCapacity(n, j)
		for k := range filters {
			if !filters[k].static && !filters[k].ok(se, j, i) {
				c.rejected[k]++
			}
		}
		if !n.Schedulable {
			continue
		}
		nodeWhole := 0
		for gi, f := range v.free[i] {
			c.freeMilli += f
			if j.MIGProfile != "" {
				if v.isMIG(i, gi) && v.mig[i][gi] == migFree && v.nodes[i].GPUs[gi].MIG == j.MIGProfile {
					if v.usable(i, gi, end) {
						nodeWhole++
					} else {
						c.reservedFree++
					}
				}
				continue
			}
			if f == Whole {
				if v.usable(i, gi, end) {
					nodeWhole++
				} else {
					c.reservedFree++
				}
			}
		}
		c.freeWhole += nodeWhole
		c.largestNode = max(c.largestNode, nodeWhole)
	}
	slices.Sort(c.models)
	return c
}
