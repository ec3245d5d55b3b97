package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/dispatch"
	"github.com/gangwayhq/gangway/internal/dispatch/dispatchtest"
	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/workflows"
)

var start = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// fleet is one 8-GPU node held whole by a preemptible low-priority job,
// committed through the fake view, with the job's workflow running.
func fleet(t *testing.T, clock *dispatchtest.Clock) (*dispatchtest.Capacity, *dispatchtest.Workflows) {
	t.Helper()
	c, w := dispatchtest.NewCapacity(clock), dispatchtest.NewWorkflows()
	n := gangway.Node{ID: "n0", Pool: "onprem", CPUMilli: 1 << 20, MemMiB: 1 << 20}
	for i := range 8 {
		n.GPUs = append(n.GPUs, gangway.GPU{Index: i, Model: "H100", Healthy: true})
	}
	c.RegisterNode(n)
	low := gangway.QueueEntry{JobID: "low", Team: "a", Attempt: 1, Replicas: 1, GPUsPerReplica: 8,
		Preemptible: true, MaxRuntime: 10 * time.Hour, SubmittedAt: start, EnqueuedAt: start}
	c.Enqueue(low)
	w.Start("low")
	l := dispatch.New(dispatch.Config{Holder: "me", Clock: clock}, c, w)
	if err := l.Tick(t.Context()); err != nil {
		t.Fatal(err)
	}
	if s := w.TakeSignals(); len(s) != 1 || s[0].Name != workflows.SignalPlaced {
		t.Fatalf("signals placing the low job: %+v", s)
	}
	return c, w
}

// TestPreemptResignalOnVirtualClock: a victim that does not stop is asked
// again only once 30 s have passed on the loop's clock, however many
// cycles run meanwhile.
func TestPreemptResignalOnVirtualClock(t *testing.T) {
	clock := dispatchtest.NewClock(start)
	c, w := fleet(t, clock)
	clock.Advance(time.Hour)
	c.Heartbeat()
	c.Enqueue(gangway.QueueEntry{JobID: "high", Team: "b", Priority: 200, Attempt: 1, Replicas: 1, GPUsPerReplica: 8,
		SubmittedAt: clock.Now(), EnqueuedAt: clock.Now()})
	w.Start("high")
	l := dispatch.New(dispatch.Config{Holder: "me", Clock: clock, Placement: placement.Options{Preempt: true}}, c, w)
	var got []string
	for _, step := range []time.Duration{0, 10 * time.Second, 19 * time.Second, time.Second, 29 * time.Second, time.Second} {
		clock.Advance(step)
		c.Heartbeat()
		if err := l.Tick(t.Context()); err != nil {
			t.Fatal(err)
		}
		for _, s := range w.TakeSignals() {
			// The new loop's take-over re-signals low's placement; only
			// preemptions count here.
			if s.Name == workflows.SignalPreempt {
				got = append(got, s.JobID+" at +"+clock.Now().Sub(start.Add(time.Hour)).String())
			}
		}
	}
	want := []string{"low at +0s", "low at +30s", "low at +1m0s"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("signals (-want +got):\n%s", diff)
	}
}

type countingBudgets struct{ calls []time.Time }

func (b *countingBudgets) TeamPolicies(_ context.Context, now time.Time) (map[string]placement.TeamPolicy, error) {
	b.calls = append(b.calls, now)
	return map[string]placement.TeamPolicy{"t": {BudgetLeft: 1}}, nil // too little to burst: the job stays queued
}

type offers []gangway.Offer

func (o offers) Offers(context.Context) ([]gangway.Offer, error) { return o, nil }

// TestBudgetsTTLOnVirtualClock: the loop reads the teams' budgets again
// only after 15 s of its clock (the snapshot's time).
func TestBudgetsTTLOnVirtualClock(t *testing.T) {
	clock := dispatchtest.NewClock(start)
	c, w := fleet(t, clock)
	c.Enqueue(gangway.QueueEntry{JobID: "b", Team: "t", Attempt: 1, Replicas: 1, GPUsPerReplica: 8,
		Burst: gangway.Burst{Enabled: true}, Runtime: time.Hour, MaxRuntime: 2 * time.Hour, SubmittedAt: start, EnqueuedAt: start})
	w.Start("b")
	budgets := &countingBudgets{}
	l := dispatch.New(dispatch.Config{Holder: "me", Clock: clock, Budgets: budgets,
		Cloud: offers{{Provider: "fake", Pool: "fake-spot", Zone: "z1", InstanceType: "a2-8", GPUModel: "H100",
			GPUsPerInstance: 8, CapacityType: gangway.CapacitySpot, PricePerHour: 8, InterruptionRate: 0.1}},
		Placement: placement.Options{BurstAfter: time.Minute}}, c, w)
	for _, step := range []time.Duration{0, 5 * time.Second, 9 * time.Second, time.Second, 14 * time.Second, time.Second} {
		clock.Advance(step)
		c.Heartbeat()
		if err := l.Tick(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	var got []time.Duration
	for _, at := range budgets.calls {
		got = append(got, at.Sub(start))
	}
	if diff := cmp.Diff([]time.Duration{0, 15 * time.Second, 30 * time.Second}, got); diff != "" {
		t.Errorf("budget reads at (-want +got):\n%s", diff)
	}
	for _, s := range w.TakeSignals() {
		if s.Name == workflows.SignalBurst {
			t.Errorf("burst signal to a job over budget: %+v", s)
		}
	}
}

// TestRunOnVirtualClock: Run waits its interval on the configured clock.
func TestRunOnVirtualClock(t *testing.T) {
	clock := dispatchtest.NewClock(start)
	c, w := dispatchtest.NewCapacity(clock), dispatchtest.NewWorkflows()
	l := dispatch.New(dispatch.Config{Holder: "me", Clock: clock, Interval: time.Second, LeaseTTL: 5 * time.Second}, c, w)
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- l.Run(ctx) }()
	c.Enqueue(gangway.QueueEntry{JobID: "j", Team: "t", Attempt: 1, Replicas: 1, GPUsPerReplica: 1, SubmittedAt: start, EnqueuedAt: start})
	w.Start("j")
	n := gangway.Node{ID: "n0", Pool: "onprem", CPUMilli: 1000, MemMiB: 1000, GPUs: []gangway.GPU{{Index: 0, Model: "H100", Healthy: true}}}
	c.RegisterNode(n)
	deadline := time.Now().Add(10 * time.Second)
	for {
		clock.Advance(time.Second)
		c.Heartbeat()
		if s := w.TakeSignals(); len(s) > 0 {
			if s[0].Name != workflows.SignalPlaced || s[0].JobID != "j" {
				t.Errorf("signal %+v, want j placed", s[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Run placed nothing while its clock advanced")
		}
		time.Sleep(time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
