package dispatch_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/dispatch"
	"github.com/gangwayhq/gangway/internal/dispatch/dispatchtest"
	"github.com/gangwayhq/gangway/internal/metrics"
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

// workloadStore is a dispatch.WorkloadStore in memory: the last workload
// saved, and by whom.
type workloadStore struct {
	w       capacity.Workload
	holders []string
}

func (s *workloadStore) SaveWorkload(_ context.Context, holder string, w capacity.Workload) error {
	s.w, s.holders = w, append(s.holders, holder)
	return nil
}

func (s *workloadStore) Workload(context.Context) (capacity.Workload, error) { return s.w, nil }

// TestTypicalWorkloadSurvivesALeaderChange: the leader stores the typical
// workload it learns, at most every 15 s while jobs arrive; a server that
// takes over goes on from it — a job still queued then, counted by the
// old leader, is not counted again — where without it the new leader
// would know only its queue.
func TestTypicalWorkloadSurvivesALeaderChange(t *testing.T) {
	clock := dispatchtest.NewClock(start)
	c, w := dispatchtest.NewCapacity(clock), dispatchtest.NewWorkflows()
	n := gangway.Node{ID: "n0", Pool: "onprem", CPUMilli: 1 << 20, MemMiB: 1 << 20}
	for i := range 16 {
		n.GPUs = append(n.GPUs, gangway.GPU{Index: i, Model: "H100", Healthy: true})
	}
	c.RegisterNode(n)
	job := func(id gangway.JobID, gpus int) {
		c.Enqueue(gangway.QueueEntry{JobID: id, Team: "a", Attempt: 1, Replicas: 1, GPUsPerReplica: gpus, CPUMilli: 1000, MemMiB: 1024,
			MaxRuntime: time.Hour, SubmittedAt: clock.Now(), EnqueuedAt: clock.Now()})
		w.Start(id)
	}
	tick := func(l *dispatch.Loop, after time.Duration) {
		t.Helper()
		clock.Advance(after)
		c.Heartbeat()
		if err := l.Tick(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	store := &workloadStore{}
	old := dispatch.New(dispatch.Config{Holder: "old", Clock: clock, Workloads: store}, c, w)
	job("big", 8)
	tick(old, time.Second)
	job("huge", 32) // never fits: still queued at the change of leader
	tick(old, time.Second)
	if len(store.holders) != 1 {
		t.Fatalf("%d stores in the first 15 s, want 1 (the first arrival's)", len(store.holders))
	}
	tick(old, 15*time.Second)
	if len(store.holders) != 2 || store.holders[1] != "old" {
		t.Fatalf("stores %v, want a second by the leader once 15 s had passed", store.holders)
	}
	tick(old, 15*time.Second)
	if len(store.holders) != 2 {
		t.Errorf("stores %v: stored again with nothing new arrived", store.holders)
	}

	// The old leader stops; its lease runs out; a small job arrives.
	clock.Advance(10 * time.Second)
	job("small", 1)
	p := &workloadPlacer{}
	next := dispatch.New(dispatch.Config{Holder: "next", Clock: clock, Placer: p, Workloads: store}, c, w)
	tick(next, time.Second)
	want := map[[2]int]float64{{8, 1000}: 1.0 / 3, {32, 1000}: 1.0 / 3, {1, 1000}: 1.0 / 3}
	near := cmp.Comparer(func(a, b float64) bool { return a-b < 0.01 && b-a < 0.01 })
	if len(p.demand) == 0 {
		t.Fatal("the new leader placed nothing")
	}
	if diff := cmp.Diff(want, shapes(p.demand[0]), near); diff != "" {
		t.Errorf("the new leader's first demand (-want +got):\n%s", diff)
	}

	// Without a store the new leader has its queue only.
	c2, w2 := dispatchtest.NewCapacity(clock), dispatchtest.NewWorkflows()
	c2.RegisterNode(n)
	c, w = c2, w2
	job("huge", 32)
	job("small", 1)
	p2 := &workloadPlacer{}
	tick(dispatch.New(dispatch.Config{Holder: "next", Clock: clock, Placer: p2}, c2, w2), time.Second)
	if diff := cmp.Diff(map[[2]int]float64{{32, 1000}: 0.5, {1, 1000}: 0.5}, shapes(p2.demand[0]), near); diff != "" {
		t.Errorf("a new leader without a store (-want +got):\n%s", diff)
	}
}

// TestFragmentationGaugeReadsTheTypicalWorkload: with nothing queued the
// fragmentation gauge still says how much of the free capacity the jobs
// that come cannot use. Half the jobs that arrived wanted a whole 8-GPU
// node; one 1-GPU job runs on the only one: none of its 7 free GPUs can
// take the 8-GPU half, so the rate is 0.5 (against the empty queue, 0).
func TestFragmentationGaugeReadsTheTypicalWorkload(t *testing.T) {
	clock := dispatchtest.NewClock(start)
	c, w := dispatchtest.NewCapacity(clock), dispatchtest.NewWorkflows()
	n := gangway.Node{ID: "n0", Pool: "onprem", CPUMilli: 1 << 20, MemMiB: 1 << 20}
	for i := range 8 {
		n.GPUs = append(n.GPUs, gangway.GPU{Index: i, Model: "H100", Healthy: true})
	}
	c.RegisterNode(n)
	reg := prometheus.NewRegistry()
	l := dispatch.New(dispatch.Config{Holder: "me", Clock: clock, Metrics: metrics.New(reg)}, c, w)
	tick := func() {
		t.Helper()
		clock.Advance(10 * time.Second)
		c.Heartbeat()
		if err := l.Tick(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	for i, gpus := range []int{8, 1} {
		id := gangway.JobID(fmt.Sprintf("j%d", i))
		c.Enqueue(gangway.QueueEntry{JobID: id, Team: "a", Attempt: 1, Replicas: 1, GPUsPerReplica: gpus, CPUMilli: 1000, MemMiB: 1024,
			MaxRuntime: time.Hour, SubmittedAt: clock.Now(), EnqueuedAt: clock.Now()})
		w.Start(id)
		tick()
		if gpus == 8 { // it ran and ended: its GPUs are free again
			if _, err := c.Release(t.Context(), id, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	tick()
	snap, err := c.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Queue) != 0 || len(snap.Allocations) != 1 {
		t.Fatalf("%d queued, %d running; want none and the 1-GPU job", len(snap.Queue), len(snap.Allocations))
	}
	if got := gauge(t, reg, "gangway_fragmentation_ratio"); math.Abs(got-0.5) > 0.01 { // the later arrival weighs a little more
		t.Errorf("fragmentation with an empty queue = %v, want 0.5", got)
	}
}

// gauge is the value of the unlabelled gauge name in reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}
