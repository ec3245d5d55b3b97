package placement

import "github.com/gangwayhq/gangway"

// Report is the fragmentation view of a fleet at one moment: where the
// free GPUs are, the largest block free together at each topology level,
// and how much free capacity a workload (the typical one) cannot use.
type Report struct {
	FreeGPUs   int // entirely free GPUs on schedulable nodes
	FreeMilli  int // free milli-GPU, shares included
	FreeByNode map[string]int
	// FreeByDomain counts entirely free GPUs per NVLink domain.
	FreeByDomain map[string]int
	// Largest is the most entirely free GPUs within one group, per level
	// (nvlink, node, rack, block).
	Largest map[string]int
	// FragmentedMilli is free capacity the workload cannot use (FGD's
	// measure, against View.Workload); Rate is its share of FreeMilli.
	FragmentedMilli float64
	Rate            float64
}

// Measure reports on a snapshot against a workload (nil: any single GPU).
func Measure(s Snapshot, workload []WorkloadClass) Report {
	return NewSession(s, Options{Workload: workload}).Report()
}

// Report measures the session's current view.
func (se *Session) Report() Report {
	v := se.view
	r := Report{FreeByNode: map[string]int{}, FreeByDomain: map[string]int{}, Largest: map[string]int{}}
	for i := range v.nodes {
		n := &v.nodes[i]
		if !n.Schedulable {
			continue
		}
		r.FreeByNode[n.ID] = v.whole[i]
		r.FreeGPUs += v.whole[i]
		for gi, f := range v.free[i] {
			r.FreeMilli += f
			if f == Whole {
				r.FreeByDomain[domainKey(n, gi)]++
			}
		}
	}
	for _, l := range gangway.Levels {
		best := 0
		for _, g := range se.groupsAt(l) {
			best = max(best, se.freeFor(g))
		}
		r.Largest[l.String()] = best
	}
	frag, free := ClusterFragmentation(v)
	r.FragmentedMilli = frag
	if free > 0 {
		r.Rate = frag / free
	}
	return r
}
