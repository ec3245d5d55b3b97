package dispatch_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/dispatch"
	"github.com/gangwayhq/gangway/internal/dispatch/dispatchtest"
	"github.com/gangwayhq/gangway/placement"
)

// workloadPlacer is placement.Place, remembering the typical workload and
// the demand each call was given.
type workloadPlacer struct{ seen, demand [][]placement.WorkloadClass }

func (p *workloadPlacer) Place(s placement.Snapshot, q []gangway.QueueEntry, o placement.Options) placement.Plan {
	p.seen, p.demand = append(p.seen, o.Workload), append(p.demand, o.Demand)
	return placement.Place(s, q, o)
}

// shapes is a workload's classes as "GPUs×milli: weight".
func shapes(w []placement.WorkloadClass) map[[2]int]float64 {
	out := map[[2]int]float64{}
	for _, c := range w {
		out[[2]int{c.GPUs, c.Milli}] = c.Weight
	}
	return out
}

// TestLoopLearnsTheTypicalWorkload: placement measures fragmentation
// against the jobs that have arrived, each once, not against the queue of
// the moment: after an 8-GPU job has been placed, a 1-GPU job is placed
// knowing 8-GPU jobs come; a job requeued or still waiting is not counted
// again; Config.Placement's own workload, when set, is used as it is.
func TestLoopLearnsTheTypicalWorkload(t *testing.T) {
	clock := dispatchtest.NewClock(start)
	c, w := dispatchtest.NewCapacity(clock), dispatchtest.NewWorkflows()
	n := gangway.Node{ID: "n0", Pool: "onprem", CPUMilli: 1 << 20, MemMiB: 1 << 20}
	for i := range 16 {
		n.GPUs = append(n.GPUs, gangway.GPU{Index: i, Model: "H100", Healthy: true})
	}
	c.RegisterNode(n)
	job := func(id gangway.JobID, gpus int) gangway.QueueEntry {
		return gangway.QueueEntry{JobID: id, Team: "a", Attempt: 1, Replicas: 1, GPUsPerReplica: gpus, CPUMilli: 1000, MemMiB: 1024,
			MaxRuntime: time.Hour, SubmittedAt: clock.Now(), EnqueuedAt: clock.Now()}
	}
	p := &workloadPlacer{}
	l := dispatch.New(dispatch.Config{Holder: "me", Clock: clock, Placer: p}, c, w)
	tick := func() {
		t.Helper()
		clock.Advance(time.Second)
		c.Heartbeat()
		if err := l.Tick(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	c.Enqueue(job("big", 8))
	w.Start("big")
	tick()
	// A job the fleet cannot hold stays queued, cycle after cycle.
	c.Enqueue(job("huge", 32))
	w.Start("huge")
	tick()
	tick()
	c.Enqueue(job("small", 1))
	w.Start("small")
	tick()

	last := shapes(p.seen[len(p.seen)-1])
	want := map[[2]int]float64{{8, 1000}: 1.0 / 3, {32, 1000}: 1.0 / 3, {1, 1000}: 1.0 / 3}
	near := cmp.Comparer(func(a, b float64) bool { return a-b < 0.01 && b-a < 0.01 })
	if diff := cmp.Diff(want, last, near); diff != "" {
		t.Errorf("the workload the small job was placed against (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, shapes(p.demand[len(p.demand)-1]), near); diff != "" {
		t.Errorf("the demand the small job was placed with (-want +got):\n%s", diff)
	}

	// A workload set in the config is the placement's.
	fixed := []placement.WorkloadClass{{GPUs: 4, Milli: 1000, Weight: 1}}
	p2 := &workloadPlacer{}
	l2 := dispatch.New(dispatch.Config{Holder: "me", Clock: clock, Placer: p2, Placement: placement.Options{Workload: fixed}}, c, w)
	clock.Advance(time.Second)
	c.Heartbeat()
	if err := l2.Tick(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(p2.seen) == 0 || !cmp.Equal(fixed, p2.seen[len(p2.seen)-1]) {
		t.Errorf("a configured workload was replaced: %v", p2.seen)
	}
}
