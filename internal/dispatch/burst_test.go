package dispatch

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/placement/forecast"
	"github.com/gangwayhq/gangway/workflows"
)

type fakeCloud []gangway.Offer

func (c fakeCloud) Offers(context.Context) ([]gangway.Offer, error) { return c, nil }

type fakeBudgets map[string]placement.TeamPolicy

func (b fakeBudgets) TeamPolicies(context.Context, time.Time) (map[string]placement.TeamPolicy, error) {
	return b, nil
}

var spotOffer = gangway.Offer{Provider: "fake", Pool: "fake-spot", Zone: "z1", InstanceType: "a2-8", GPUModel: "H100",
	GPUsPerInstance: 8, CapacityType: gangway.CapacitySpot, PricePerHour: 8, InterruptionRate: 0.1}

func burstEntry(id string) gangway.QueueEntry {
	e := entry(id, 1, 8)
	e.Burst = gangway.Burst{Enabled: true}
	e.Runtime, e.MaxRuntime = time.Hour, 2*time.Hour
	return e
}

// TestBurstCycle: a job the full fleet cannot take soon leaves the queue
// for the cloud and its workflow is told; a new leader delivers the burst
// again; a team over budget does not burst.
func TestBurstCycle(t *testing.T) {
	full := func() *fakeCapacity {
		n := node("n1", 8, 0, gangway.NodeReady, 0, 1, 2, 3, 4, 5, 6, 7)
		return &fakeCapacity{snap: capacity.Snapshot{Now: t0, Nodes: []gangway.NodeStatus{n},
			Allocations: []gangway.Assignment{{JobID: "other", Attempt: 1, At: t0, MaxRuntime: 10 * time.Hour,
				Members: []gangway.Member{{NodeID: "n1", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}}},
			Queue: []gangway.QueueEntry{burstEntry("b"), entry("stay", 1, 8)}}}
	}
	ctx := context.Background()

	fc, fw := full(), &fakeWorkflows{}
	l := New(Config{Holder: "me", Cloud: fakeCloud{spotOffer}, Placement: placement.Options{BurstAfter: 10 * time.Minute}}, fc, fw)
	if _, err := l.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	req, ok := fw.bursts["b"]
	if !ok || req.Attempt != 1 || len(req.Offers) != 1 || req.Offers[0].Pool != "fake-spot" || req.Offers[0].Count != 1 {
		t.Fatalf("burst signals %+v; want b to fake-spot, 1 instance", fw.bursts)
	}
	if _, ok := fw.bursts["stay"]; ok {
		t.Errorf("a job without burst enabled was sent to the cloud")
	}
	if len(fc.snap.Queue) != 1 || fc.snap.Queue[0].JobID != "stay" {
		t.Errorf("queue after the burst: %+v, want only stay", fc.snap.Queue)
	}

	// A new leader re-delivers the recorded burst.
	fw2 := &fakeWorkflows{}
	l2 := New(Config{Holder: "new"}, fc, fw2)
	fc.leaseOwner = ""
	if err := l2.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := fw2.bursts["b"]; !ok {
		t.Errorf("the new leader did not deliver the burst again: %+v", fw2.bursts)
	}

	// Over budget: no burst.
	fc, fw = full(), &fakeWorkflows{}
	l = New(Config{Holder: "me", Cloud: fakeCloud{spotOffer}, Budgets: fakeBudgets{"t": {BudgetLeft: 1}},
		Placement: placement.Options{BurstAfter: 10 * time.Minute}}, fc, fw)
	if _, err := l.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	if len(fw.bursts) != 0 {
		t.Errorf("bursts over budget: %+v", fw.bursts)
	}
}

// TestBurstBudgetCountsLaunchingBursts: a burst whose instances are still
// launching (recorded in the view, not in the ledger, not running) is
// charged to its team's budget in the cycles after it was decided, and a
// new leader, reading the record, charges it too.
func TestBurstBudgetCountsLaunchingBursts(t *testing.T) {
	launching := func(team string) []byte {
		raw, err := json.Marshal(workflows.BurstRequest{Attempt: 1, Team: team,
			Offers: []gangway.BurstOffer{{Offer: spotOffer, Count: 1, ExpectedCost: 1000}}})
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	for _, tc := range []struct {
		name   string
		team   string // the launching burst's
		budget float64
		burst  bool // whether b bursts
	}{
		{"the team's $1,000 launching leaves $0.50", "t", 1000.5, false},
		{"the team's $1,000 launching leaves $1,000", "t", 2000, true},
		{"another team's launching is not charged", "other", 1000.5, true},
		{"a record without a team (written before records named it) is not charged", "", 1000.5, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := node("n1", 8, 0, gangway.NodeReady, 0, 1, 2, 3, 4, 5, 6, 7)
			fc := &fakeCapacity{snap: capacity.Snapshot{Now: t0, Nodes: []gangway.NodeStatus{n},
				Allocations: []gangway.Assignment{{JobID: "other", Attempt: 1, At: t0, MaxRuntime: 10 * time.Hour,
					Members: []gangway.Member{{NodeID: "n1", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}}},
				Queue: []gangway.QueueEntry{burstEntry("b")}},
				bursting: map[gangway.JobID][]byte{"a": launching(tc.team)}}
			fw := &fakeWorkflows{}
			l := New(Config{Holder: "me", Cloud: fakeCloud{spotOffer}, Budgets: fakeBudgets{"t": {BudgetLeft: tc.budget}},
				Placement: placement.Options{BurstAfter: 10 * time.Minute}}, fc, fw)
			if _, err := l.Cycle(t.Context()); err != nil {
				t.Fatal(err)
			}
			if _, ok := fw.bursts["b"]; ok != tc.burst {
				t.Errorf("b bursts: %v, want %v (signals %+v)", ok, tc.burst, fw.bursts)
			}
		})
	}
}

// TestBurstExpectsTheLearnedRuntimes: the burst decision reads the on-prem
// wait from the runtimes the estimator's model predicts, not from the
// limits: a job waits for a running job the model says ends in 5 minutes,
// although that job declared 10 hours, and bursts when the model says 3
// hours, saying so.
func TestBurstExpectsTheLearnedRuntimes(t *testing.T) {
	for _, tc := range []struct {
		left  time.Duration // what the model says the running job has to go
		burst string        // the burst's reason begins so; "": no burst
	}{
		{5 * time.Minute, ""},
		{3 * time.Hour, "on-prem ETA 3h0m0s; spot in fake-spot"},
	} {
		n := node("n1", 8, 0, gangway.NodeReady, 0, 1, 2, 3, 4, 5, 6, 7)
		fc := &fakeCapacity{snap: capacity.Snapshot{Now: t0, Nodes: []gangway.NodeStatus{n},
			Allocations: []gangway.Assignment{{JobID: "other", Attempt: 1, At: t0, MaxRuntime: 10 * time.Hour,
				Members: []gangway.Member{{NodeID: "n1", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}}},
			Queue: []gangway.QueueEntry{burstEntry("b")}}}
		model := forecast.RuntimesFunc(func(j forecast.Job, _ time.Duration, _ float64) time.Duration {
			if j.ID == "other" {
				return tc.left
			}
			return j.Runtime
		})
		fw := &fakeWorkflows{}
		l := New(Config{Holder: "me", Cloud: fakeCloud{spotOffer}, ETA: forecast.NewEstimator(model, forecast.Options{}),
			Placement: placement.Options{BurstAfter: 10 * time.Minute}}, fc, fw)
		if _, err := l.Cycle(t.Context()); err != nil {
			t.Fatal(err)
		}
		req, ok := fw.bursts["b"]
		switch {
		case tc.burst == "" && ok:
			t.Errorf("other ends in %v by the model: b bursts (%s), want it to wait", tc.left, req.Reason)
		case tc.burst != "" && (!ok || !strings.HasPrefix(req.Reason, tc.burst)):
			t.Errorf("other ends in %v by the model: burst %+v, want one whose reason begins %q", tc.left, req, tc.burst)
		}
	}
}

// TestExpectedStarts: the burst decision is given the latest forecast's P50
// of the queued jobs that may burst, but not of a job the forecast itself
// bursts (its on-prem start is unknown), of one beyond its horizon (the P50
// is a lower bound), or of one that may not burst.
func TestExpectedStarts(t *testing.T) {
	l := New(Config{Holder: "me"}, &fakeCapacity{}, &fakeWorkflows{})
	if got := l.expectedStarts([]gangway.QueueEntry{burstEntry("a")}); got != nil {
		t.Errorf("before any forecast: %v, want nil", got)
	}
	at := t0.Add(time.Hour)
	ests := map[gangway.JobID]forecast.Estimate{
		"a":    {JobID: "a", P50: at},
		"cl":   {JobID: "cl", P50: at, Burst: true},
		"far":  {JobID: "far", P50: at, Beyond: true},
		"stay": {JobID: "stay", P50: at},
	}
	l.estimates.Store(&ests)
	got := l.expectedStarts([]gangway.QueueEntry{burstEntry("a"), burstEntry("cl"), burstEntry("far"), entry("stay", 1, 8), burstEntry("new")})
	if diff := cmp.Diff(map[gangway.JobID]time.Time{"a": at}, got); diff != "" {
		t.Errorf("expected starts (-want +got):\n%s", diff)
	}
}

type countedBudgets struct {
	fakeBudgets
	reads int
}

func (b *countedBudgets) TeamPolicies(ctx context.Context, now time.Time) (map[string]placement.TeamPolicy, error) {
	b.reads++
	return b.fakeBudgets.TeamPolicies(ctx, now)
}

// TestBudgetsReadAgainWhenACloudRunEnds: within budgetsTTL the loop reuses
// the budgets it read, except once a run on a cloud node has ended: its
// cost has moved to the ledger and is no longer counted as running.
func TestBudgetsReadAgainWhenACloudRunEnds(t *testing.T) {
	cloud := node("c1", 8, 0, gangway.NodeReady, 0, 1, 2, 3, 4, 5, 6, 7)
	cloud.Node.CapacityType, cloud.Node.Owner = gangway.CapacitySpot, "run"
	fc := &fakeCapacity{snap: capacity.Snapshot{Now: t0,
		Nodes: []gangway.NodeStatus{node("n1", 8, 0, gangway.NodeReady, 0, 1, 2, 3, 4, 5, 6, 7), cloud},
		Allocations: []gangway.Assignment{
			{JobID: "other", Attempt: 1, At: t0, MaxRuntime: 10 * time.Hour, Members: []gangway.Member{{NodeID: "n1", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}},
			{JobID: "run", Team: "t", Attempt: 1, At: t0, MaxRuntime: time.Hour, Members: []gangway.Member{{NodeID: "c1", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}},
		},
		Queue: []gangway.QueueEntry{burstEntry("b")}}}
	budgets := &countedBudgets{fakeBudgets: fakeBudgets{"t": {BudgetLeft: 0.5}}}
	l := New(Config{Holder: "me", Cloud: fakeCloud{spotOffer}, Budgets: budgets,
		Placement: placement.Options{BurstAfter: 10 * time.Minute}}, fc, &fakeWorkflows{})
	cycle := func() {
		t.Helper()
		if _, err := l.Cycle(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	cycle()
	cycle()
	if budgets.reads != 1 {
		t.Fatalf("%d budget reads in two cycles at one instant, want 1", budgets.reads)
	}
	fc.snap.Allocations = fc.snap.Allocations[:1] // the cloud run ends
	cycle()
	if budgets.reads != 2 {
		t.Errorf("%d budget reads after a cloud run ended, want 2", budgets.reads)
	}
}

// TestBurstBudgetCountsCloudRuns: a team's run on a cloud node counts
// against its budget at the price of the offer the node came from (the
// view's nodes carry none: the workflow that rented one knows it).
func TestBurstBudgetCountsCloudRuns(t *testing.T) {
	for _, tc := range []struct {
		team  string // the cloud run's
		burst bool
	}{{"t", false}, {"other", true}} {
		cloud := node("c1", 8, 0, gangway.NodeReady, 0, 1, 2, 3, 4, 5, 6, 7)
		cloud.Node.CapacityType, cloud.Node.Pool, cloud.Node.Owner = gangway.CapacitySpot, spotOffer.Pool, "run"
		fc := &fakeCapacity{snap: capacity.Snapshot{Now: t0,
			Nodes: []gangway.NodeStatus{node("n1", 8, 0, gangway.NodeReady, 0, 1, 2, 3, 4, 5, 6, 7), cloud},
			Allocations: []gangway.Assignment{
				{JobID: "other", Attempt: 1, At: t0, MaxRuntime: 10 * time.Hour, Members: []gangway.Member{{NodeID: "n1", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}},
				// $8 an hour for its hour.
				{JobID: "run", Team: tc.team, Attempt: 1, At: t0, MaxRuntime: time.Hour, Members: []gangway.Member{{NodeID: "c1", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}},
			},
			Queue: []gangway.QueueEntry{burstEntry("b")}}}
		fw := &fakeWorkflows{}
		// b alone is expected to cost about $8.48: $10 is enough for it, not
		// for it and the run.
		l := New(Config{Holder: "me", Cloud: fakeCloud{spotOffer}, Budgets: fakeBudgets{"t": {BudgetLeft: 10}},
			Placement: placement.Options{BurstAfter: 10 * time.Minute}}, fc, fw)
		if _, err := l.Cycle(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, ok := fw.bursts["b"]; ok != tc.burst {
			t.Errorf("cloud run of team %s: b bursts %v, want %v", tc.team, ok, tc.burst)
		}
	}
}
