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
	"github.com/gangwayhq/gangway/placement/forecast"
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

// oneNode is a fake view and workflows with one node of gpus H100s, for
// the workload tests: job enqueues a 1-replica job of gpus GPUs and starts
// its workflow; tick advances the clock and runs one turn of l.
type oneNode struct {
	t     *testing.T
	clock *dispatchtest.Clock
	c     *dispatchtest.Capacity
	w     *dispatchtest.Workflows
}

func newOneNode(t *testing.T, clock *dispatchtest.Clock, gpus int) *oneNode {
	f := &oneNode{t: t, clock: clock, c: dispatchtest.NewCapacity(clock), w: dispatchtest.NewWorkflows()}
	n := gangway.Node{ID: "n0", Pool: "onprem", CPUMilli: 1 << 20, MemMiB: 1 << 20}
	for i := range gpus {
		n.GPUs = append(n.GPUs, gangway.GPU{Index: i, Model: "H100", Healthy: true})
	}
	f.c.RegisterNode(n)
	return f
}

func (f *oneNode) loop(cfg dispatch.Config) *dispatch.Loop {
	cfg.Clock = f.clock
	return dispatch.New(cfg, f.c, f.w)
}

func (f *oneNode) job(id gangway.JobID, gpus int) {
	f.c.Enqueue(gangway.QueueEntry{JobID: id, Team: "a", Attempt: 1, Replicas: 1, GPUsPerReplica: gpus, CPUMilli: 1000, MemMiB: 1024,
		MaxRuntime: time.Hour, SubmittedAt: f.clock.Now(), EnqueuedAt: f.clock.Now()})
	f.w.Start(id)
}

func (f *oneNode) tick(l *dispatch.Loop, after time.Duration) {
	f.t.Helper()
	f.clock.Advance(after)
	f.c.Heartbeat()
	if err := l.Tick(f.t.Context()); err != nil {
		f.t.Fatal(err)
	}
}

// near compares workload weights to a hundredth.
var near = cmp.Comparer(func(a, b float64) bool { return a-b < 0.01 && b-a < 0.01 })

// TestLoopLearnsTheTypicalWorkload: placement measures fragmentation
// against the jobs that have arrived, each once, not against the queue of
// the moment: after an 8-GPU job has been placed, a 1-GPU job is placed
// knowing 8-GPU jobs come; a job requeued or still waiting is not counted
// again; Config.Placement's own workload, when set, is used as it is.
func TestLoopLearnsTheTypicalWorkload(t *testing.T) {
	f := newOneNode(t, dispatchtest.NewClock(start), 16)
	p := &workloadPlacer{}
	l := f.loop(dispatch.Config{Holder: "me", Placer: p})
	f.job("big", 8)
	f.tick(l, time.Second)
	// A job the fleet cannot hold stays queued, cycle after cycle.
	f.job("huge", 32)
	f.tick(l, time.Second)
	f.tick(l, time.Second)
	f.job("small", 1)
	f.tick(l, time.Second)

	last := shapes(p.seen[len(p.seen)-1])
	want := map[[2]int]float64{{8, 1000}: 1.0 / 3, {32, 1000}: 1.0 / 3, {1, 1000}: 1.0 / 3}
	if diff := cmp.Diff(want, last, near); diff != "" {
		t.Errorf("the workload the small job was placed against (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, shapes(p.demand[len(p.demand)-1]), near); diff != "" {
		t.Errorf("the demand the small job was placed with (-want +got):\n%s", diff)
	}

	// A workload set in the config is the placement's.
	fixed := []placement.WorkloadClass{{GPUs: 4, Milli: 1000, Weight: 1}}
	p2 := &workloadPlacer{}
	f.tick(f.loop(dispatch.Config{Holder: "me", Placer: p2, Placement: placement.Options{Workload: fixed}}), time.Second)
	if len(p2.seen) == 0 || !cmp.Equal(fixed, p2.seen[len(p2.seen)-1]) {
		t.Errorf("a configured workload was replaced: %v", p2.seen)
	}
}

// records is a dispatch.LeaderRecords in memory: the last record of each
// kind stored, and by whom.
type records struct {
	l       capacity.Learned
	d       capacity.Defrags
	holders []string // of the Learned records
	defrags int      // Defrags records stored
}

func (s *records) SaveLearned(_ context.Context, holder string, l capacity.Learned) error {
	s.l, s.holders = l, append(s.holders, holder)
	return nil
}

func (s *records) Learned(context.Context) (capacity.Learned, error) { return s.l, nil }

func (s *records) SaveDefrags(_ context.Context, _ string, d capacity.Defrags) error {
	s.d = d
	s.defrags++
	return nil
}

func (s *records) Defrags(context.Context) (capacity.Defrags, error) { return s.d, nil }

// TestTypicalWorkloadSurvivesALeaderChange: the leader stores the typical
// workload it learns, at most every minute while jobs arrive; a server that
// takes over goes on from it — a job still queued then, counted by the
// old leader, is not counted again — where without it the new leader
// would know only its queue.
func TestTypicalWorkloadSurvivesALeaderChange(t *testing.T) {
	clock := dispatchtest.NewClock(start)
	f := newOneNode(t, clock, 16)
	store := &records{}
	old := f.loop(dispatch.Config{Holder: "old", Records: store})
	f.job("big", 8)
	f.tick(old, time.Second)
	f.job("huge", 32) // never fits: still queued at the change of leader
	f.tick(old, time.Second)
	if len(store.holders) != 1 {
		t.Fatalf("%d stores in the first minute, want 1 (the first arrival's)", len(store.holders))
	}
	f.tick(old, time.Minute)
	if len(store.holders) != 2 || store.holders[1] != "old" {
		t.Fatalf("stores %v, want a second by the leader once a minute had passed", store.holders)
	}
	f.tick(old, time.Minute)
	if len(store.holders) != 2 {
		t.Errorf("stores %v: stored again with nothing new arrived", store.holders)
	}

	// The old leader stops; its lease runs out; a small job arrives.
	clock.Advance(10 * time.Second)
	f.job("small", 1)
	p := &workloadPlacer{}
	f.tick(f.loop(dispatch.Config{Holder: "next", Placer: p, Records: store}), time.Second)
	if len(p.demand) == 0 {
		t.Fatal("the new leader placed nothing")
	}
	want := map[[2]int]float64{{8, 1000}: 1.0 / 3, {32, 1000}: 1.0 / 3, {1, 1000}: 1.0 / 3}
	if diff := cmp.Diff(want, shapes(p.demand[0]), near); diff != "" {
		t.Errorf("the new leader's first demand (-want +got):\n%s", diff)
	}

	// Without a store the new leader has its queue only.
	f2 := newOneNode(t, clock, 16)
	f2.job("huge", 32)
	f2.job("small", 1)
	p2 := &workloadPlacer{}
	f2.tick(f2.loop(dispatch.Config{Holder: "next", Placer: p2}), time.Second)
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
	f := newOneNode(t, dispatchtest.NewClock(start), 8)
	reg := prometheus.NewRegistry()
	l := f.loop(dispatch.Config{Holder: "me", Metrics: metrics.New(reg)})
	f.job("j8", 8)
	f.tick(l, 10*time.Second)
	if _, err := f.c.Release(t.Context(), "j8", 1); err != nil { // it ran and ended
		t.Fatal(err)
	}
	f.job("j1", 1)
	f.tick(l, 10*time.Second)
	f.tick(l, 10*time.Second)
	snap, err := f.c.Snapshot(t.Context())
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

// TestEstimatorSurvivesALeaderChange: the runtimes the estimator learned
// from the runs it saw end are stored with the workload; a leader that
// takes over estimates from them, not from the declared limits.
func TestEstimatorSurvivesALeaderChange(t *testing.T) {
	clock := dispatchtest.NewClock(start)
	f := newOneNode(t, clock, 8)
	store := &records{}
	eta := forecast.NewEstimator(nil, forecast.Options{})
	old := f.loop(dispatch.Config{Holder: "old", Records: store, ETA: eta})
	// Jobs that ask for an hour run ten minutes.
	for i := range 5 {
		id := gangway.JobID(fmt.Sprintf("train-%d", i))
		f.job(id, 8)
		f.tick(old, time.Second) // placed
		f.tick(old, time.Second) // seen running
		clock.Advance(10 * time.Minute)
		if _, err := f.c.Release(t.Context(), id, 1); err != nil {
			t.Fatal(err)
		}
		f.tick(old, time.Second)
	}
	f.tick(old, time.Minute)
	if store.l.ETA == nil || len(store.l.ETA.Runtimes) == 0 {
		t.Fatalf("stored %+v, want the estimator's runtimes in it", store.l)
	}
	if diff := cmp.Diff(eta.State(), *store.l.ETA); diff != "" {
		t.Errorf("stored estimator state (-the leader's +stored):\n%s", diff)
	}

	clock.Advance(10 * time.Second) // the old leader's lease runs out
	next := forecast.NewEstimator(nil, forecast.Options{})
	f.tick(f.loop(dispatch.Config{Holder: "next", Records: store, ETA: next}), time.Second)
	if diff := cmp.Diff(eta.State(), next.State()); diff != "" {
		t.Errorf("the new leader's estimator (-the old leader's +new):\n%s", diff)
	}
}

// defragPlacer plans, on its first call, one defragmentation that moves
// "small" to make room for "wide", and from then on leaves "wide" waiting
// for it; it remembers the defragmentation options of each call.
type defragPlacer struct{ seen []placement.Defrag }

func (p *defragPlacer) Place(_ placement.Snapshot, _ []gangway.QueueEntry, o placement.Options) placement.Plan {
	p.seen = append(p.seen, o.Defrag)
	plan := placement.Plan{Unplaced: []placement.Unplaced{{JobID: "wide", Reason: placement.ReasonDefragmenting, Detail: "moving 1 job"}}}
	if len(p.seen) == 1 {
		plan.Defrags = []placement.DefragPlan{{Job: "wide", At: start, Dest: []gangway.Member{{NodeID: "n0", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}},
			Moves:          []placement.Move{{JobID: "small", Attempt: 1, GPUs: 1, From: "n0", To: []gangway.Member{{NodeID: "n1", GPUs: []int{0}}}, LostGPUSeconds: 90}},
			LostGPUSeconds: 90}}
	}
	return plan
}

// TestDefragmentationSurvivesALeaderChange: a defragmentation the leader
// plans is stored before its moved job is asked to stop; a leader that
// takes over keeps it under way — its reservations handed back to
// placement — and counts its moves against the hour's budget.
func TestDefragmentationSurvivesALeaderChange(t *testing.T) {
	clock := dispatchtest.NewClock(start)
	f := newOneNode(t, clock, 8)
	store := &records{}
	opts := placement.Options{Defrag: placement.Defrag{Enabled: true, MaxMovesPerHour: 4, MaxLostGPUSecondsPerHour: 1000}}
	f.job("wide", 8)
	old := f.loop(dispatch.Config{Holder: "old", Records: store, Placer: &defragPlacer{}, Placement: opts})
	f.tick(old, time.Second)
	if store.defrags != 1 || len(store.d.InFlight) != 1 || store.d.InFlight[0].Job != "wide" || len(store.d.Spent) != 1 {
		t.Fatalf("stored %d records, the last %+v; want the plan for wide and its spend", store.defrags, store.d)
	}
	f.tick(old, time.Second)
	if store.defrags != 1 {
		t.Errorf("stored %d records with nothing changed, want 1", store.defrags)
	}

	clock.Advance(10 * time.Second)                  // the old leader's lease runs out
	p := &defragPlacer{seen: []placement.Defrag{{}}} // plans nothing more
	f.tick(f.loop(dispatch.Config{Holder: "next", Records: store, Placer: p, Placement: opts}), time.Second)
	got := p.seen[len(p.seen)-1]
	if len(got.InFlight) != 1 || got.InFlight[0].Job != "wide" || got.Spent.Moves != 1 || got.Spent.LostGPUSeconds != 90 {
		t.Errorf("the new leader's first defragmentation options: in flight %+v, spent %+v; want wide's plan, 1 move, 90 GPU-s",
			got.InFlight, got.Spent)
	}
}

// lostView is the fake view with a rebuilt flag: false stands for a view
// Redis lost (restarted empty, FLUSHALL) that no leader has rebuilt yet.
type lostView struct {
	*dispatchtest.Capacity
	rebuilt bool
}

func (v *lostView) Rebuilt(context.Context) (bool, error) { return v.rebuilt, nil }

// TestStandbyLeavesALostViewsLeaseToTheLeader: when Redis loses the view,
// and the lease with it, a standby leaves the free lease to the leader,
// which holds in memory what it learned, for half a lease; a leader that
// died with the view is replaced after that.
func TestStandbyLeavesALostViewsLeaseToTheLeader(t *testing.T) {
	clock := dispatchtest.NewClock(start)
	f := newOneNode(t, clock, 8)
	v := &lostView{Capacity: f.c, rebuilt: true}
	loop := func(holder string) *dispatch.Loop {
		return dispatch.New(dispatch.Config{Holder: holder, Clock: clock, LeaseTTL: 4 * time.Second}, v, f.w)
	}
	leader, standby := loop("leader"), loop("standby")
	f.tick(leader, time.Second)
	f.tick(standby, 100*time.Millisecond)
	lose := func() {
		if err := f.c.ReleaseLease(t.Context(), "leader"); err != nil {
			t.Fatal(err)
		}
		v.rebuilt = false
	}

	lose()
	f.tick(standby, 100*time.Millisecond)
	if h := f.c.LeaseHolder(); h != "" {
		t.Fatalf("a standby took a lost view's lease at once: %q holds it", h)
	}
	f.tick(leader, 500*time.Millisecond)
	if h := f.c.LeaseHolder(); h != "leader" {
		t.Fatalf("the leader did not take its lease back: %q holds it", h)
	}
	v.rebuilt = true
	f.tick(standby, 100*time.Millisecond)

	// Again, and the leader died with the view.
	lose()
	f.tick(standby, 100*time.Millisecond)
	f.tick(standby, time.Second)
	if h := f.c.LeaseHolder(); h != "" {
		t.Fatalf("%q holds the lease %s after the view was lost, want it free for half a lease", h, 1100*time.Millisecond)
	}
	f.tick(standby, time.Second)
	if h := f.c.LeaseHolder(); h != "standby" {
		t.Fatalf("the standby did not take over from a leader that died with the view: %q holds the lease", h)
	}

	// A first start: no leader seen, nothing to leave the lease to.
	v2 := &lostView{Capacity: dispatchtest.NewCapacity(clock)}
	first := dispatch.New(dispatch.Config{Holder: "first", Clock: clock, LeaseTTL: 4 * time.Second}, v2, f.w)
	if err := first.Tick(t.Context()); err != nil {
		t.Fatal(err)
	}
	if h := v2.LeaseHolder(); h != "first" {
		t.Errorf("the first server of a new view did not lead at once: %q holds the lease", h)
	}
}

// TestLeaderStoresWhatItLearnedAsItStops: a leader that stops (a deploy)
// stores what it learned since its last store before it gives up the
// lease, so the server taking over counts every arrival.
func TestLeaderStoresWhatItLearnedAsItStops(t *testing.T) {
	clock := dispatchtest.NewClock(start)
	f := newOneNode(t, clock, 16)
	store := &records{}
	old := f.loop(dispatch.Config{Holder: "old", Records: store})
	ctx, stop := context.WithCancel(t.Context())
	f.job("big", 8)
	if err := old.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	f.job("huge", 32)
	clock.Advance(time.Second)
	if err := old.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if len(store.holders) != 1 || len(store.l.Workload) != 1 {
		t.Fatalf("%d stores, the last of %d workload classes; want one, of the first arrival's", len(store.holders), len(store.l.Workload))
	}
	stop()
	_ = old.Run(ctx) // returns at once: stores, and gives the lease up
	if len(store.holders) != 2 || store.holders[1] != "old" || len(store.l.Workload) != 2 {
		t.Errorf("stores by %v, the last of %d workload classes; want a second by the leader as it stopped, of both arrivals'",
			store.holders, len(store.l.Workload))
	}
	if h := f.c.LeaseHolder(); h != "" {
		t.Errorf("%q holds the lease after the leader stopped", h)
	}
}
