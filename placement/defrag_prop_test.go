package placement_test

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
)

// defragFixture is a small random fleet of 8-GPU nodes with running jobs
// (at most six, so that every set of moves can be tried) and one waiting
// job.
type defragFixture struct {
	nodes []*nodeBuilder
	runs  []*runBuilder
	model map[string]string // node → GPU model
	job   *jobBuilder
	opts  placement.Options
}

func genDefragFixture(t *rapid.T) defragFixture {
	f := defragFixture{model: map[string]string{}}
	for i := range rapid.IntRange(2, 4).Draw(t, "nodes") {
		id := fmt.Sprintf("n%d", i+1)
		m := rapid.SampledFrom([]string{"H100", "A100"}).Draw(t, "model")
		f.nodes = append(f.nodes, node(id).gpus(8, m))
		f.model[id] = m
	}
	for _, nb := range f.nodes {
		// Some GPUs are held by work the snapshot does not list, which
		// nothing may move; running jobs fill the node up to a level.
		next := rapid.IntRange(0, 2).Draw(t, "held")
		nb.used(seq(0, next)...)
		fill := rapid.IntRange(max(next, 2), 7).Draw(t, "fill")
		for len(f.runs) < 6 && next < fill {
			size := min(rapid.SampledFrom([]int{1, 2, 4}).Draw(t, "gpus"), fill-next)
			r := running(fmt.Sprintf("r%d", len(f.runs))).on(nb.n.ID, seq(next, size)...).
				prio(rapid.SampledFrom([]int{0, 0, 100, 200}).Draw(t, "priority")).
				checkpoint(t0.Add(-rapid.SampledFrom([]time.Duration{time.Minute, 4 * time.Minute, 4 * time.Minute, 30 * time.Minute}).Draw(t, "checkpoint age")))
			if rapid.IntRange(0, 5).Draw(t, "preemptible") > 0 {
				r.preemptible()
			}
			if rapid.IntRange(0, 5).Draw(t, "checkpointable") > 0 {
				r.checkpointable()
			}
			next += size
			f.runs = append(f.runs, r)
		}
	}
	if rapid.Bool().Draw(t, "spare node") {
		// Room the moved jobs may land on, but not enough for the job.
		id := fmt.Sprintf("n%d", len(f.nodes)+1)
		m := rapid.SampledFrom([]string{"H100", "A100"}).Draw(t, "model")
		f.nodes = append(f.nodes, node(id).gpus(8, m).used(seq(0, rapid.IntRange(4, 7).Draw(t, "spare held"))...))
		f.model[id] = m
	}
	shape := rapid.SampledFrom([][2]int{{1, 8}, {1, 8}, {1, 6}, {2, 4}}).Draw(t, "job shape")
	f.job = job("waits").gang(shape[0], shape[1])
	d := placement.Defrag{Enabled: true, MaxMovesPerHour: rapid.IntRange(0, 5).Draw(t, "max moves"),
		MaxLostGPUSecondsPerHour: float64(rapid.IntRange(0, 60).Draw(t, "max lost /100") * 100),
		RestartOverhead:          rapid.SampledFrom([]time.Duration{0, 30 * time.Second}).Draw(t, "restart overhead")}
	d.Spent = placement.DefragSpent{Moves: rapid.IntRange(0, 1).Draw(t, "spent moves"),
		LostGPUSeconds: float64(rapid.IntRange(0, 5).Draw(t, "spent lost /100") * 100)}
	f.opts = placement.Options{Defrag: d}
	return f
}

// eligible reports whether r may be moved for the fixture's job: what the
// planner promises to move only.
func (f *defragFixture) eligible(r *runBuilder) bool {
	a := &r.r
	return a.Preemptible && a.Checkpointable && a.Priority <= f.job.j.Priority &&
		t0.Sub(saved(a)) <= placement.DefaultMaxCheckpointAge
}

// cost is what moving r costs: its GPU time since it last saved, plus
// the restart.
func (f *defragFixture) cost(r *runBuilder) float64 {
	return (t0.Sub(saved(&r.r)).Seconds() + f.opts.Defrag.RestartOverhead.Seconds()) * float64(r.r.GPUCount())
}

// saved is when a last saved its work: its newest checkpoint, or its
// start.
func saved(a *gangway.Assignment) time.Time {
	if a.LastCheckpoint.After(a.At) {
		return a.LastCheckpoint
	}
	return a.At
}

// feasible is the oracle: with the jobs of set gone, the waiting job is
// placed, and then each of them, largest first, is placed on what is left
// of its node's model — each by Place itself, defragmentation off.
func (f *defragFixture) feasible(set []*runBuilder) bool {
	var rest []*runBuilder
	for _, r := range f.runs {
		if !slices.Contains(set, r) {
			rest = append(rest, r)
		}
	}
	p := placement.Place(fleet(f.nodes...).with(rest...).build(), queue(f.job), placement.Options{})
	if len(p.Assignments) != 1 {
		return false
	}
	g := running(f.job.j.JobID)
	for _, m := range p.Assignments[0].Members {
		g.on(m.NodeID, m.GPUs...)
	}
	rest = append(rest, g)
	order := slices.Clone(set)
	slices.SortStableFunc(order, func(a, b *runBuilder) int {
		return cmp.Or(cmp.Compare(b.r.GPUCount(), a.r.GPUCount()), cmp.Compare(a.r.JobID, b.r.JobID))
	})
	for _, r := range order {
		m := r.r.Members[0]
		e := job(r.r.JobID).gang(1, len(m.GPUs)).models(f.model[m.NodeID]).pools("onprem")
		p := placement.Place(fleet(f.nodes...).with(rest...).build(), queue(e), placement.Options{})
		if len(p.Assignments) != 1 {
			return false
		}
		moved := running(r.r.JobID)
		for _, m := range p.Assignments[0].Members {
			moved.on(m.NodeID, m.GPUs...)
		}
		rest = append(rest, moved)
	}
	return true
}

// TestDefragProperties checks the planner against brute force on small
// random fleets: a plan stays within the budget, moves only preemptible,
// checkpointing jobs of no higher priority with a recent checkpoint,
// leaves the waiting job fitting and every moved job fitting elsewhere,
// and uses the fewest moves any such set needs — the cheapest set of that
// size; and a fragmented job gets a plan whenever some set within the
// budget would do.
func TestDefragProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		f := genDefragFixture(t)
		snap := fleet(f.nodes...).with(f.runs...).build()
		q := queue(f.job)
		plan := placement.Place(snap, q, f.opts)
		t.Logf("snapshot: %s\nqueue: %s\ndefrag: %s\nplan: %s", dump(snap), dump(q), dump(f.opts.Defrag), dump(plan))
		checkPlan(t, snap, q, f.opts, plan)

		d := f.opts.Defrag
		movesLeft := min(d.MaxMovesPerHour-d.Spent.Moves, 4)
		lostLeft := d.MaxLostGPUSecondsPerHour - d.Spent.LostGPUSeconds
		var cands []*runBuilder
		for _, r := range f.runs {
			if f.eligible(r) {
				cands = append(cands, r)
			}
		}
		// The cheapest feasible set within the budget, smallest first.
		best, bestCost := []*runBuilder(nil), 0.0
		for size := 1; size <= movesLeft && best == nil; size++ {
			forSubsets(cands, size, func(set []*runBuilder) {
				c := 0.0
				for _, r := range set {
					c += f.cost(r)
				}
				if c <= lostLeft && (best == nil || c < bestCost) && f.feasible(set) {
					best, bestCost = slices.Clone(set), c
				}
			})
		}

		reason := plan.Unplaced
		switch {
		case len(plan.Assignments) == 1:
			if len(plan.Defrags) > 0 {
				t.Fatalf("the job was placed and defragmented for")
			}
			return
		case len(reason) != 1:
			t.Fatalf("want the job waiting, got %+v", plan)
		case reason[0].Reason != placement.ReasonFragmented && reason[0].Reason != placement.ReasonDefragmenting:
			if len(plan.Defrags) > 0 {
				t.Fatalf("defragmented for a job waiting for %s", reason[0].Reason)
			}
			return
		case len(plan.Defrags) == 0:
			if best != nil {
				t.Fatalf("no plan, but moving %v would do within the budget", ids(best))
			}
			if reason[0].Reason != placement.ReasonFragmented {
				t.Fatalf("no plan, but the job waits for %s", reason[0].Reason)
			}
			return
		}
		p := plan.Defrags[0]
		if len(plan.Defrags) != 1 || p.Job != f.job.j.JobID || reason[0].Reason != placement.ReasonDefragmenting {
			t.Fatalf("want one plan for %s and the job waiting for it, got %+v", f.job.j.JobID, plan)
		}
		if d.Spent.Moves+len(p.Moves) > d.MaxMovesPerHour || d.Spent.LostGPUSeconds+p.LostGPUSeconds > d.MaxLostGPUSecondsPerHour+1e-9 {
			t.Fatalf("plan of %d moves, %.0f GPU-seconds, past the budget of %d moves, %.0f GPU-seconds (spent %+v)",
				len(p.Moves), p.LostGPUSeconds, d.MaxMovesPerHour, d.MaxLostGPUSecondsPerHour, d.Spent)
		}
		var set []*runBuilder
		for _, m := range p.Moves {
			k := slices.IndexFunc(f.runs, func(r *runBuilder) bool { return r.r.JobID == m.JobID })
			if k < 0 || !f.eligible(f.runs[k]) {
				t.Fatalf("moves %s, which may not move", m.JobID)
			}
			set = append(set, f.runs[k])
		}
		if !f.feasible(set) {
			t.Fatalf("after moving %v the job or a moved job does not fit", ids(set))
		}
		if best == nil || len(best) != len(set) {
			t.Fatalf("moves %v; the fewest moves that do are %v", ids(set), ids(best))
		}
		if c := p.LostGPUSeconds; c > bestCost+1e-9 {
			t.Fatalf("moves %v for %.0f GPU-seconds; %v would do for %.0f", ids(set), c, ids(best), bestCost)
		}
	})
}

func ids(rs []*runBuilder) []gangway.JobID {
	out := make([]gangway.JobID, len(rs))
	for i, r := range rs {
		out[i] = r.r.JobID
	}
	return out
}

// forSubsets calls f with every size-k subset of xs.
func forSubsets[T any](xs []T, k int, f func([]T)) {
	var rec func(from int, set []T)
	rec = func(from int, set []T) {
		if len(set) == k {
			f(set)
			return
		}
		for i := from; i < len(xs); i++ {
			rec(i+1, append(set, xs[i]))
		}
	}
	rec(0, nil)
}
