package forecast_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/placement/forecast"
)

var t0 = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// node is an on-prem node of gpus free H100 GPUs.
func node(id string, gpus int) placement.Node {
	n := placement.Node{ID: id, Pool: "onprem", Model: "H100", CapacityType: gangway.CapacityOnPrem,
		CPUMilli: 64000, MemMiB: 1 << 20, Schedulable: true}
	for i := range gpus {
		n.GPUs = append(n.GPUs, placement.GPU{Index: i, Model: "H100", Healthy: true})
	}
	return n
}

// running puts job id on GPUs of node n, started ago, with a max runtime.
func running(s *placement.Snapshot, id, team, nodeID string, gpus []int, ago, maxRuntime time.Duration) {
	for i := range s.Nodes {
		if s.Nodes[i].ID == nodeID {
			for _, g := range gpus {
				s.Nodes[i].GPUs[g].UsedMilli = placement.Whole
			}
		}
	}
	s.Running = append(s.Running, gangway.Assignment{JobID: id, Attempt: 1, Team: team, At: s.Now.Add(-ago),
		MaxRuntime: maxRuntime, Members: []gangway.Member{{NodeID: nodeID, GPUs: gpus, Pool: "onprem"}}})
}

func queued(id, team string, gpus, priority int, maxRuntime time.Duration, submitted time.Duration) gangway.QueueEntry {
	return gangway.QueueEntry{JobID: id, Team: team, Replicas: 1, GPUsPerReplica: gpus, Priority: priority,
		Attempt: 1, MaxRuntime: maxRuntime, SubmittedAt: t0.Add(-submitted), EnqueuedAt: t0.Add(-submitted)}
}

// exact knows every job's runtime: left[id] more for a running job, the
// whole run for a queued one.
type exact map[gangway.JobID]time.Duration

func (x exact) Remaining(j forecast.Job, _ time.Duration, _ float64) time.Duration { return x[j.ID] }

func (exact) Point() bool { return true }

func all(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func TestForecastStarts(t *testing.T) {
	quota := []placement.Quota{{Team: "vision", Nominal: 8}}
	tests := map[string]struct {
		setup    func(s *placement.Snapshot)
		queue    []gangway.QueueEntry
		rt       exact
		opts     placement.Options
		want     map[gangway.JobID]time.Duration // start after t0
		waitsFor map[gangway.JobID][]gangway.JobID
	}{
		"waits only for the job whose end frees a node": {
			setup: func(s *placement.Snapshot) {
				running(s, "a", "nlp", "n1", all(8), time.Hour, 4*time.Hour)
				running(s, "b", "nlp", "n2", all(8), time.Hour, 4*time.Hour)
			},
			queue:    []gangway.QueueEntry{queued("big", "nlp", 8, 100, time.Hour, time.Minute)},
			rt:       exact{"a": 2 * time.Hour, "b": 30 * time.Minute, "big": time.Hour},
			want:     map[gangway.JobID]time.Duration{"big": 30 * time.Minute},
			waitsFor: map[gangway.JobID][]gangway.JobID{"big": {"b"}},
		},
		"in queue order, behind the one ahead": {
			setup: func(s *placement.Snapshot) {
				running(s, "a", "nlp", "n1", all(8), time.Hour, 4*time.Hour)
				running(s, "b", "nlp", "n2", all(8), time.Hour, 8*time.Hour)
			},
			queue: []gangway.QueueEntry{queued("first", "nlp", 8, 200, time.Hour, time.Minute),
				queued("second", "nlp", 8, 100, time.Hour, 2*time.Minute)},
			rt:       exact{"a": time.Hour, "b": 5 * time.Hour, "first": 2 * time.Hour, "second": time.Hour},
			want:     map[gangway.JobID]time.Duration{"first": time.Hour, "second": 3 * time.Hour},
			waitsFor: map[gangway.JobID][]gangway.JobID{"first": {"a"}, "second": {"first"}},
		},
		"quota: starts on free GPUs when a team job ends": {
			setup: func(s *placement.Snapshot) {
				running(s, "mine", "vision", "n1", all(8), time.Hour, 4*time.Hour)
			},
			queue:    []gangway.QueueEntry{queued("next", "vision", 8, 100, time.Hour, time.Minute)},
			rt:       exact{"mine": 45 * time.Minute, "next": time.Hour},
			opts:     placement.Options{Quotas: quota},
			want:     map[gangway.JobID]time.Duration{"next": 45 * time.Minute},
			waitsFor: map[gangway.JobID][]gangway.JobID{"next": {"mine"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := placement.Snapshot{Now: t0, Nodes: []placement.Node{node("n1", 8), node("n2", 8)}}
			tc.setup(&s)
			est, _ := forecast.Forecast(forecast.Input{Snapshot: s, Queue: tc.queue, Options: tc.opts}, tc.rt, forecast.Options{MinStep: time.Millisecond})
			got := map[gangway.JobID]time.Duration{}
			waits := map[gangway.JobID][]gangway.JobID{}
			for id, e := range est {
				got[id] = e.P50.Sub(t0)
				waits[id] = e.WaitsFor
				if !e.P90.Equal(e.P50) {
					t.Errorf("%s: P90 %s, want P50 %s for a point model", id, e.P90, e.P50)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("starts after t0 (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.waitsFor, waits); diff != "" {
				t.Errorf("waits for (-want +got):\n%s", diff)
			}
		})
	}
}

// TestForecastReservationAndLimits: a blocked gang holds a reservation;
// the baseline (every job lasts its limit) puts its start at the limit,
// a model that knows runtimes at the real end.
func TestForecastReservationAndLimits(t *testing.T) {
	s := placement.Snapshot{Now: t0, Nodes: []placement.Node{node("n1", 8), node("n2", 8)}}
	running(&s, "a", "nlp", "n1", all(8), time.Hour, 8*time.Hour)
	running(&s, "b", "nlp", "n2", []int{0, 1, 2, 3}, time.Hour, 8*time.Hour)
	queue := []gangway.QueueEntry{queued("gang", "nlp", 8, 200, time.Hour, time.Minute)}
	queue[0].Replicas = 2
	in := forecast.Input{Snapshot: s, Queue: queue, Options: placement.Options{Reservations: 2}}
	lim, _ := forecast.Forecast(in, forecast.Limits{}, forecast.Options{})
	if got, want := lim["gang"].P50.Sub(t0), 7*time.Hour; got != want {
		t.Errorf("limits: gang starts after %s, want %s (the later limit)", got, want)
	}
	ex, _ := forecast.Forecast(in, exact{"a": 20 * time.Minute, "b": 2 * time.Hour, "gang": time.Hour}, forecast.Options{})
	if got, want := ex["gang"].P50.Sub(t0), 2*time.Hour; got != want {
		t.Errorf("exact: gang starts after %s, want %s", got, want)
	}
	if diff := cmp.Diff([]gangway.JobID{"a", "b"}, ex["gang"].WaitsFor); diff != "" {
		t.Errorf("waits for (-want +got):\n%s", diff)
	}
}

// TestForecastHorizon: a job behind more ends than the simulation plays
// is Beyond the horizon, a lower bound.
func TestForecastHorizon(t *testing.T) {
	s := placement.Snapshot{Now: t0, Nodes: []placement.Node{node("n1", 8)}}
	rt := exact{}
	var queue []gangway.QueueEntry
	for i := range 10 {
		id := gangway.JobID("j" + string(rune('a'+i)))
		queue = append(queue, queued(id, "nlp", 8, 100, time.Hour, time.Duration(10-i)*time.Minute))
		rt[id] = time.Hour
	}
	est, _ := forecast.Forecast(forecast.Input{Snapshot: s, Queue: queue}, rt, forecast.Options{MaxSteps: 4})
	if e := est["ja"]; e.Beyond || !e.P50.Equal(t0) {
		t.Errorf("first job: %+v, want a start now", e)
	}
	if e := est["jj"]; !e.Beyond || e.P50.Sub(t0) != 3*time.Hour {
		t.Errorf("last job: %+v, want Beyond the horizon at 3h", e)
	}
}

// TestHistoryShrinks: a group with few runs leans on its team's
// distribution; a running job's remaining time is conditioned on how long
// it has run.
func TestHistoryShrinks(t *testing.T) {
	h := forecast.NewHistory()
	limit := 10 * time.Hour
	// The team's jobs run a tenth of their limit; one "sweep" job ran it all.
	for range 50 {
		h.Observe(forecast.Job{ID: "train-1", Team: "nlp", Project: "lm", MaxRuntime: limit}, limit/10)
	}
	h.Observe(forecast.Job{ID: "sweep-1", Team: "nlp", Project: "lm", MaxRuntime: limit}, limit)
	near := func(got, want time.Duration) bool { return math.Abs(float64(got-want)) <= 0.1*float64(want) }
	if got := h.Remaining(forecast.Job{ID: "train-9", Team: "nlp", Project: "lm", MaxRuntime: limit}, 0, 0.5); !near(got, time.Hour) {
		t.Errorf("train median %s, want about 1h", got)
	}
	// One run of sweep weighs 1 against 8 for the team's: still mostly short.
	if got := h.Remaining(forecast.Job{ID: "sweep-2", Team: "nlp", Project: "lm", MaxRuntime: limit}, 0, 0.5); got > 2*time.Hour {
		t.Errorf("sweep median %s, want near the team's 1h", got)
	}
	// Past every short run, the remaining time comes from the long one.
	if got := h.Remaining(forecast.Job{ID: "train-9", Team: "nlp", Project: "lm", MaxRuntime: limit}, 2*time.Hour, 0.5); got < 5*time.Hour {
		t.Errorf("remaining after 2h: %s, want most of the rest of the limit", got)
	}
	// No history for this team's runtime: its own estimate.
	if got := forecast.NewHistory().Remaining(forecast.Job{ID: "x", Runtime: 3 * time.Hour, MaxRuntime: limit}, time.Hour, 0.9); got != 2*time.Hour {
		t.Errorf("no history: %s, want the estimate's 2h left", got)
	}
	if got := forecast.NamePrefix("resnet-sweep-17"); got != "resnet-sweep" {
		t.Errorf("NamePrefix = %q", got)
	}
}

// TestHistoryBases: runs that declared only a limit and runs that declared
// an estimated runtime are learned apart, so a team whose jobs use a tenth
// of their limits does not have its estimates cut to a tenth, and one
// whose estimates run long does not stretch its limits; the two survive a
// change of leader apart too.
func TestHistoryBases(t *testing.T) {
	h := forecast.NewHistory()
	limit := 10 * time.Hour
	for i := range 50 {
		h.Observe(forecast.Job{ID: gangway.JobID(fmt.Sprintf("train-%d", i)), Team: "nlp", MaxRuntime: limit}, limit/10)
	}
	near := func(got, want time.Duration) bool { return math.Abs(float64(got-want)) <= 0.1*float64(want) }
	limitJob := forecast.Job{ID: "train-99", Team: "nlp", MaxRuntime: limit}
	estimateJob := forecast.Job{ID: "train-98", Team: "nlp", Runtime: 2 * time.Hour, MaxRuntime: limit}
	if got := h.Remaining(limitJob, 0, 0.5); !near(got, time.Hour) {
		t.Errorf("a limit-only job: median %s, want about the team's tenth of its limit, 1h", got)
	}
	if got := h.Remaining(estimateJob, 0, 0.5); got != 2*time.Hour {
		t.Errorf("a job that declares 2h, no estimate seen end yet: median %s, want its own 2h", got)
	}
	// The team's estimates turn out half again too short.
	for i := range 50 {
		h.Observe(forecast.Job{ID: gangway.JobID(fmt.Sprintf("train-%d", 100+i)), Team: "nlp", Runtime: time.Hour, MaxRuntime: limit}, 90*time.Minute)
	}
	if got := h.Remaining(estimateJob, 0, 0.5); !near(got, 3*time.Hour) {
		t.Errorf("a job that declares 2h after estimates ran 1.5×: median %s, want about 3h", got)
	}
	if got := h.Remaining(limitJob, 0, 0.5); !near(got, time.Hour) {
		t.Errorf("a limit-only job after the estimates' runs: median %s, want still about 1h", got)
	}
	if got, want := h.Observations(), 100.0; got != want {
		t.Errorf("Observations = %v, want %v", got, want)
	}

	st := forecast.NewEstimator(h, forecast.Options{}).State()
	h2 := forecast.NewHistory()
	if err := forecast.NewEstimator(h2, forecast.Options{}).Restore(st); err != nil {
		t.Fatal(err)
	}
	for _, j := range []forecast.Job{limitJob, estimateJob} {
		if got, want := h2.Remaining(j, 0, 0.5), h.Remaining(j, 0, 0.5); got != want {
			t.Errorf("restored: %s's median %s, the original's %s", j.ID, got, want)
		}
	}
}

// TestResumedRuns: an attempt that resumed from a checkpoint has run what
// its earlier attempts kept (Kept) before this one: it is learned as a run
// of the whole job, and predicted as a job that has run that long — not as
// a new job whose declared runtime is what was left.
func TestResumedRuns(t *testing.T) {
	limit := 10 * time.Hour
	near := func(got, want time.Duration) bool { return math.Abs(float64(got-want)) <= 0.1*float64(want) }

	// Learned: 30 jobs each kept 2 h and then ran 1 h more are 3 h jobs.
	h := forecast.NewHistory()
	e := forecast.NewEstimator(h, forecast.Options{})
	now := t0
	for i := range 30 {
		s := placement.Snapshot{Now: now, Nodes: []placement.Node{node("n1", 8)}}
		running(&s, fmt.Sprintf("train-%d", i), "nlp", "n1", all(8), 0, limit)
		a := &s.Running[0]
		a.Attempt, a.Checkpointable, a.Kept, a.Runtime = 2, true, 2*time.Hour, limit-2*time.Hour
		e.Observe(s, nil, nil)
		now = now.Add(time.Hour)
		e.Observe(placement.Snapshot{Now: now, Nodes: []placement.Node{node("n1", 8)}}, nil, nil)
	}
	if got := h.Observations(); got != 30 {
		t.Fatalf("%v runs learned, want 30", got)
	}
	fresh := forecast.Job{ID: "train-99", Team: "nlp", MaxRuntime: limit}
	if got := h.Remaining(fresh, 0, 0.5); !near(got, 3*time.Hour) {
		t.Errorf("a new job after resumed 3 h ones: median %s, want about 3h", got)
	}

	// Predicted: of the team's jobs half run 1 h and half 3 h; one that
	// has kept 2 h is a 3 h one, with 1 h left, and 30 m once it has run
	// 30 m more.
	h = forecast.NewHistory()
	for i := range 50 {
		run := time.Hour
		if i%2 == 1 {
			run = 3 * time.Hour
		}
		h.Observe(forecast.Job{ID: gangway.JobID(fmt.Sprintf("train-%d", i)), Team: "nlp", MaxRuntime: limit}, run)
	}
	q := queued("train-99", "nlp", 8, 0, limit, 0)
	q.Attempt, q.Checkpointable, q.Kept, q.Runtime = 2, true, 2*time.Hour, limit-2*time.Hour
	// (Within a histogram bin and the pull towards the declaration.)
	within := func(got, want time.Duration) bool { return got >= want && got <= want+10*time.Minute }
	if got := h.Remaining(forecast.QueuedJob(&q), 0, 0.5); !within(got, time.Hour) {
		t.Errorf("queued, 2 h kept: median %s left, want about 1h", got)
	}
	a := gangway.Assignment{JobID: "train-99", Team: "nlp", Attempt: 2, Checkpointable: true, Kept: 2 * time.Hour,
		Runtime: limit - 2*time.Hour, MaxRuntime: limit}
	if got := h.Remaining(forecast.RunningJob(&a), 30*time.Minute, 0.5); !within(got, 30*time.Minute) {
		t.Errorf("running 30 m after 2 h kept: median %s left, want about 30m", got)
	}
	// With no history, what its declaration leaves: an estimate of 5 h,
	// or the 10 h limit, less the 2 h kept and the hour run.
	est := gangway.Assignment{JobID: "x", Kept: 2 * time.Hour, Runtime: 3 * time.Hour, MaxRuntime: limit}
	if got := forecast.NewHistory().Remaining(forecast.RunningJob(&est), time.Hour, 0.5); got != 2*time.Hour {
		t.Errorf("no history, a 5 h estimate, 2 h kept, 1 h run: %s left, want 2h", got)
	}
	lim := gangway.Assignment{JobID: "x", Kept: 2 * time.Hour, Runtime: limit - 2*time.Hour, MaxRuntime: limit}
	if got := forecast.NewHistory().Remaining(forecast.RunningJob(&lim), time.Hour, 0.5); got != 7*time.Hour {
		t.Errorf("no history, no estimate, 2 h kept, 1 h run: %s left, want the limit's 7h", got)
	}
}

// TestHistoryShortHistory: one short run (a `sleep 1` under a 24h limit)
// does not make every running job of the fleet end within seconds: with
// few runs the model stays near what a job declared; with many it follows
// them.
func TestHistoryShortHistory(t *testing.T) {
	limit := 24 * time.Hour
	for _, tc := range []struct {
		runs      int
		elapsed   time.Duration
		atLeast   time.Duration
		atMost    time.Duration
		reference string
	}{
		{1, 5 * time.Second, 12 * time.Hour, limit, "one run: the limit, not seconds"},
		{1, 40 * time.Second, 12 * time.Hour, limit, "past the short run: still the limit"},
		{3, 5 * time.Second, 12 * time.Hour, limit, "three runs: still mostly the limit"},
		{200, 0, 0, time.Minute, "two hundred runs: seconds, as they ran"},
	} {
		h := forecast.NewHistory()
		for i := range tc.runs {
			h.Observe(forecast.Job{ID: gangway.JobID(fmt.Sprintf("nlp-done-%d", i)), Team: "nlp", MaxRuntime: limit}, time.Second)
		}
		// Another team's job, with no history of its own, queued or
		// running behind it.
		got := h.Remaining(forecast.Job{ID: "vision-train", Team: "vision", MaxRuntime: limit}, tc.elapsed, 0.5)
		if got < tc.atLeast || got > tc.atMost {
			t.Errorf("%s: median remaining %s after %s, want %s to %s", tc.reference, got, tc.elapsed, tc.atLeast, tc.atMost)
		}
	}
}

// TestEstimatorCalibrates: when jobs keep starting twice as late as the
// simulation says (arrivals it cannot know of cut in), the calibrated
// estimates stretch to match.
func TestEstimatorCalibrates(t *testing.T) {
	e := forecast.NewEstimator(forecast.Limits{}, forecast.Options{MinScores: 5, Slack: time.Second})
	now := t0
	for i := range 30 {
		id := gangway.JobID("j" + string(rune('A'+i)))
		s := placement.Snapshot{Now: now, Nodes: []placement.Node{node("n1", 8)}}
		running(&s, "blocker", "nlp", "n1", all(8), 0, 10*time.Minute)
		q := []gangway.QueueEntry{queued(id, "nlp", 8, 100, time.Hour, 0)}
		q[0].SubmittedAt, q[0].EnqueuedAt = now, now
		e.Observe(s, q, nil)
		e.Forecast(forecast.Input{Snapshot: s, Queue: q})
		// It starts after 20 minutes, not 10.
		now = now.Add(20 * time.Minute)
		s2 := placement.Snapshot{Now: now, Nodes: []placement.Node{node("n1", 8)}}
		running(&s2, id, "nlp", "n1", all(8), 0, time.Hour)
		e.Observe(s2, nil, nil)
	}
	s := placement.Snapshot{Now: now, Nodes: []placement.Node{node("n1", 8)}}
	running(&s, "blocker", "nlp", "n1", all(8), 0, 10*time.Minute)
	e.Forecast(forecast.Input{Snapshot: s, Queue: []gangway.QueueEntry{queued("last", "nlp", 8, 100, time.Hour, 0)}})
	est, _ := e.Estimate("last")
	if w := est.P50.Sub(now); w < 19*time.Minute || w > 21*time.Minute {
		t.Errorf("calibrated P50 wait %s, want about 20m", w)
	}
}

// TestEstimatorBurstRaisesP90: jobs still waiting past their P90 count
// as misses before any of them starts, so the next job's P90, in the same
// situation as theirs, is later than theirs was.
func TestEstimatorBurstRaisesP90(t *testing.T) {
	e := forecast.NewEstimator(forecast.Limits{}, forecast.Options{Slack: time.Second})
	snap := func(now time.Time) placement.Snapshot {
		s := placement.Snapshot{Now: now, Nodes: []placement.Node{node("n1", 8)}}
		running(&s, "blocker", "nlp", "n1", all(8), 0, 10*time.Minute)
		return s
	}
	var q []gangway.QueueEntry
	for i := range 5 {
		q = append(q, queued(gangway.JobID("early"+string(rune('A'+i))), "nlp", 8, 0, time.Hour, 0))
	}
	s := snap(t0)
	e.Observe(s, q, nil)
	e.Forecast(forecast.Input{Snapshot: s, Queue: q})
	first, _ := e.Estimate("earlyA")
	p90 := first.P90.Sub(first.At)
	// Hours later none has started: higher-priority work kept the GPUs.
	later := t0.Add(3 * time.Hour)
	s = snap(later)
	e.Observe(s, q, nil)
	next := append(q[:0:0], queued("next", "nlp", 8, 0, time.Hour, 0))
	e.Forecast(forecast.Input{Snapshot: s, Queue: next})
	est, _ := e.Estimate("next")
	if got := est.P90.Sub(est.At); got <= p90 {
		t.Errorf("P90 wait after five misses %s, want more than the %s before them", got, p90)
	}
	if est.P50.Sub(est.At) != first.P50.Sub(first.At) {
		t.Errorf("P50 wait %s, want %s as before: the misses move the P90 only", est.P50.Sub(est.At), first.P50.Sub(first.At))
	}
}

// TestForecastCloud: a waiting job is priced on the cloud offer it could
// rent whether or not it may burst; one the plan sends there is Bursting,
// and starts there in the estimate.
func TestForecastCloud(t *testing.T) {
	s := placement.Snapshot{Now: t0, Nodes: []placement.Node{node("n1", 8)}}
	running(&s, "a", "nlp", "n1", all(8), 0, 4*time.Hour)
	offer := gangway.Offer{Provider: "fake", Pool: "fake-a100-spot", Zone: "z", InstanceType: "a100x8", GPUModel: "A100",
		GPUsPerInstance: 8, CapacityType: gangway.CapacitySpot, PricePerHour: 12}
	stay := queued("stay", "nlp", 8, 100, time.Hour, time.Minute)
	burst := queued("burst", "nlp", 8, 100, time.Hour, 2*time.Minute)
	burst.Burst = gangway.Burst{Enabled: true}
	in := forecast.Input{Snapshot: s, Queue: []gangway.QueueEntry{stay, burst},
		Options: placement.Options{Offers: []gangway.Offer{offer}, BurstAfter: time.Minute}}
	est, _ := forecast.Forecast(in, exact{"a": 2 * time.Hour, "stay": time.Hour, "burst": time.Hour}, forecast.Options{})
	if e := est["stay"]; e.Cloud == nil || e.Cloud.Pool != "fake-a100-spot" || e.Cloud.ExpectedCost <= 0 || e.Bursting || e.Burst {
		t.Errorf("stay: %+v, want the spot offer priced, not bursting", e)
	}
	if e := est["burst"]; e.Cloud == nil || !e.Bursting || !e.Burst {
		t.Errorf("burst: %+v, want it bursting to the offer", e)
	}
}

// TestForecastCloudPricesThePredictedRuntime: the cloud alternative is
// priced over the runtime the model predicts, not the job's limit.
func TestForecastCloudPricesThePredictedRuntime(t *testing.T) {
	s := placement.Snapshot{Now: t0, Nodes: []placement.Node{node("n1", 8)}}
	running(&s, "a", "nlp", "n1", all(8), 0, 4*time.Hour)
	offer := gangway.Offer{Provider: "fake", Pool: "fake-a100", Zone: "z", InstanceType: "a100x8", GPUModel: "A100",
		GPUsPerInstance: 8, CapacityType: gangway.CapacityOnDemand, PricePerHour: 30}
	in := forecast.Input{Snapshot: s, Queue: []gangway.QueueEntry{queued("short", "nlp", 8, 100, 10*time.Hour, time.Minute)},
		Options: placement.Options{Offers: []gangway.Offer{offer}}}
	for _, tc := range []struct {
		runs  time.Duration
		hours float64 // what on-demand is paid for
	}{{time.Hour, 1}, {5 * time.Hour, 5}, {forecast.Forever, 10}} {
		est, _ := forecast.Forecast(in, exact{"a": 2 * time.Hour, "short": tc.runs}, forecast.Options{})
		c := est["short"].Cloud
		if c == nil {
			t.Fatalf("predicted %s: no cloud alternative", tc.runs)
		}
		// A runtime the model cannot bound is priced over the limit.
		if lo := tc.hours * 30; c.ExpectedCost < lo || c.ExpectedCost >= lo+30 {
			t.Errorf("predicted %s: expected cost $%.2f, want $%.0f (%.0f h at $30/h) or a little more", tc.runs, c.ExpectedCost, lo, tc.hours)
		}
	}
}

// TestEstimatorSkipsPlacedAtOnce: a job the plan places in the cycle its
// first estimate was made in never waited on it (its estimate was never
// shown): it is not scored, so a run of them neither calibrates the next
// estimates nor counts as P90s met.
func TestEstimatorSkipsPlacedAtOnce(t *testing.T) {
	probe := func(e *forecast.Estimator, now time.Time) time.Duration {
		s := placement.Snapshot{Now: now, Nodes: []placement.Node{node("n1", 8)}}
		running(&s, "blocker", "nlp", "n1", all(8), 0, 10*time.Minute)
		q := []gangway.QueueEntry{queued("probe", "nlp", 8, 100, time.Hour, 0)}
		e.Forecast(forecast.Input{Snapshot: s, Queue: q})
		est, ok := e.Estimate("probe")
		if !ok {
			t.Fatal("no estimate for the probe")
		}
		return est.P90.Sub(est.At)
	}
	want := probe(forecast.NewEstimator(forecast.Limits{}, forecast.Options{Slack: time.Second}), t0)

	e := forecast.NewEstimator(forecast.Limits{}, forecast.Options{Slack: time.Second, MinScores: 5})
	now := t0
	for i := range 60 {
		id := gangway.JobID(fmt.Sprintf("at-once-%d", i))
		s := placement.Snapshot{Now: now, Nodes: []placement.Node{node("n1", 8)}}
		q := []gangway.QueueEntry{queued(string(id), "nlp", 8, 100, time.Hour, 0)}
		e.Observe(s, q, nil)
		e.Forecast(forecast.Input{Snapshot: s, Queue: q})
		// The same cycle's plan placed it: the next snapshot shows it
		// running since the estimate's instant.
		s2 := placement.Snapshot{Now: now.Add(time.Second), Nodes: []placement.Node{node("n1", 8)}}
		running(&s2, string(id), "nlp", "n1", all(8), time.Second, time.Hour)
		s2.Running[0].Attempt = q[0].Attempt
		e.Observe(s2, nil, nil)
		// It ends before the next one arrives.
		now = now.Add(time.Minute)
		e.Observe(placement.Snapshot{Now: now, Nodes: []placement.Node{node("n1", 8)}}, nil, nil)
	}
	if got := probe(e, now); got != want {
		t.Errorf("P90 wait after 60 jobs placed at once %s, want %s as with none", got, want)
	}
}

// TestForecastBurstsOnTheModelsRuntimes: the simulation's burst decisions
// expect the runs it plays (placement.Options.Predicted), and Predicted
// hands the model's medians on to the plan's. n1 is
// held by a job an hour into a 4 h limit that the model says ends in 30
// minutes: a job that may burst after an hour's wait waits for it, in the
// simulation as in the plan; by the declared runtimes it bursts in both.
func TestForecastBurstsOnTheModelsRuntimes(t *testing.T) {
	s := placement.Snapshot{Now: t0, Nodes: []placement.Node{node("n1", 8)}}
	running(&s, "a", "nlp", "n1", all(8), time.Hour, 4*time.Hour)
	spot := gangway.Offer{Provider: "fake", Pool: "fake-spot", Zone: "z", InstanceType: "a100x8", GPUModel: "A100",
		GPUsPerInstance: 8, CapacityType: gangway.CapacitySpot, PricePerHour: 10}
	b := queued("b", "nlp", 8, 100, 10*time.Hour, 0)
	b.Burst.Enabled = true
	in := forecast.Input{Snapshot: s, Queue: []gangway.QueueEntry{b},
		Options: placement.Options{Offers: []gangway.Offer{spot}, BurstAfter: time.Hour}}

	declared := forecast.NewEstimator(forecast.Limits{}, forecast.Options{})
	declared.Forecast(in)
	if est, _ := declared.Estimate("b"); !est.Bursting || !est.Burst {
		t.Errorf("by the declared runtimes (a ends in 3 h): estimate %+v, want b bursting", est)
	}
	if p := placement.Place(s, in.Queue, in.Options); len(p.Bursts) != 1 {
		t.Errorf("by the declared runtimes the plan bursts %+v, want b", p.Bursts)
	}

	model := exact{"a": 30 * time.Minute, "b": 2 * time.Hour}
	learned := forecast.NewEstimator(model, forecast.Options{})
	learned.Forecast(in)
	est, _ := learned.Estimate("b")
	if est.Bursting || est.Burst || !est.P50.Equal(t0.Add(30*time.Minute)) {
		t.Errorf("a expected to end in 30 minutes: estimate %+v, want b to start on n1 then, not to burst", est)
	}
	want := map[gangway.JobID]time.Duration{"a": 90 * time.Minute, "b": 2 * time.Hour}
	predicted := forecast.Predicted(s, in.Queue, model, 0.5)
	if d := cmp.Diff(want, predicted); d != "" {
		t.Errorf("predicted runtimes (-want +got):\n%s", d)
	}
	o := in.Options
	o.Predicted = predicted
	if p := placement.Place(s, in.Queue, o); len(p.Bursts) != 0 {
		t.Errorf("given the predictions the plan bursts %+v, want none", p.Bursts)
	}
}
