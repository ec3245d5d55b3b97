package forecast_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/placement/forecast"
)

// TestEstimatorState: an Estimator restored from another's State — stored
// as JSON, as the dispatch leader stores it — estimates as the original
// does: the runtimes it learned, its calibration and its P90 tracking
// carry over, where a new Estimator knows none of them. A state no
// Estimator could make is refused.
func TestEstimatorState(t *testing.T) {
	o := forecast.Options{MinScores: 5, Slack: time.Second}
	e := forecast.NewEstimator(nil, o)
	if e.Learned() != 0 {
		t.Fatalf("a new estimator has learned %d things", e.Learned())
	}
	now := t0
	// Jobs that ask for 2 hours run 15 minutes, and start 20 minutes
	// after their estimate: the blocker's end that the simulation expects
	// is not what holds them.
	for i := range 30 {
		id := gangway.JobID(fmt.Sprintf("train-%d", i))
		s := placement.Snapshot{Now: now, Nodes: []placement.Node{node("n1", 8)}}
		running(&s, "blocker", "nlp", "n1", all(8), 0, 10*time.Minute)
		q := []gangway.QueueEntry{queued(string(id), "nlp", 8, 100, 2*time.Hour, 0)}
		q[0].SubmittedAt, q[0].EnqueuedAt = now, now
		e.Observe(s, q, nil)
		e.Forecast(forecast.Input{Snapshot: s, Queue: q})
		now = now.Add(20 * time.Minute)
		s2 := placement.Snapshot{Now: now, Nodes: []placement.Node{node("n1", 8)}}
		running(&s2, string(id), "nlp", "n1", all(8), 0, 2*time.Hour)
		e.Observe(s2, nil, nil)
		now = now.Add(15 * time.Minute)
		e.Observe(placement.Snapshot{Now: now, Nodes: []placement.Node{node("n1", 8)}}, nil, nil)
	}
	if e.Learned() == 0 {
		t.Fatal("the estimator learned nothing from 30 runs")
	}
	raw, err := json.Marshal(e.State())
	if err != nil {
		t.Fatal(err)
	}
	var st forecast.State
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Runtimes) == 0 || len(st.Scores) == 0 || len(st.Boost90) == 0 {
		t.Fatalf("state holds %d runtime groups, %d score groups, %d P90 factors; want all three", len(st.Runtimes), len(st.Scores), len(st.Boost90))
	}
	restored := forecast.NewEstimator(nil, o)
	if err := restored.Restore(st); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(e.State(), restored.State()); diff != "" {
		t.Errorf("restored state (-original +restored):\n%s", diff)
	}

	// A job queued behind one of the team's runs, ten minutes into its 2 h.
	probe := func(e *forecast.Estimator) forecast.Estimate {
		t.Helper()
		s := placement.Snapshot{Now: now, Nodes: []placement.Node{node("n1", 8)}}
		running(&s, "train-busy", "nlp", "n1", all(8), 10*time.Minute, 2*time.Hour)
		e.Forecast(forecast.Input{Snapshot: s, Queue: []gangway.QueueEntry{queued("probe", "nlp", 8, 100, 2*time.Hour, 0)}})
		est, ok := e.Estimate("probe")
		if !ok {
			t.Fatal("no estimate for the probe")
		}
		return est
	}
	want, got, cold := probe(e), probe(restored), probe(forecast.NewEstimator(nil, o))
	if !got.P50.Equal(want.P50) || !got.P90.Equal(want.P90) {
		t.Errorf("restored estimator: P50 %s, P90 %s; the original's %s, %s", got.P50, got.P90, want.P50, want.P90)
	}
	if cold.P50.Equal(want.P50) {
		t.Errorf("a new estimator estimates the same P50 (%s): the test shows nothing", cold.P50)
	}

	bad := st
	bad.Runtimes = append([]forecast.GroupState{{Level: 0, Key: "", N: 1, Bins: map[int]float64{1 << 20: 1}}}, st.Runtimes...)
	if err := forecast.NewEstimator(nil, o).Restore(bad); err == nil {
		t.Error("a state with a bin out of range was restored")
	}
}

// TestEstimatorStateKeepsFirstEstimates: a job that waits through a change
// of leader is scored, when it starts, against the estimate it was shown
// at submit, as the original estimator would score it — not against the
// new leader's first forecast of it, made later and nearer its start.
func TestEstimatorStateKeepsFirstEstimates(t *testing.T) {
	o := forecast.Options{MinScores: 5, Slack: time.Second}
	busy := func(now time.Time) placement.Snapshot {
		s := placement.Snapshot{Now: now, Nodes: []placement.Node{node("n1", 8)}}
		running(&s, "blocker", "nlp", "n1", all(8), now.Sub(t0), 10*time.Minute)
		return s
	}
	q := []gangway.QueueEntry{queued("waiting", "nlp", 8, 100, time.Hour, 0)}
	// step is what the leader does each cycle: observe, then forecast.
	step := func(e *forecast.Estimator, now time.Time) {
		e.Observe(busy(now), q, nil)
		e.Forecast(forecast.Input{Snapshot: busy(now), Queue: q})
	}
	start := func(e *forecast.Estimator, now time.Time) {
		s := placement.Snapshot{Now: now, Nodes: []placement.Node{node("n1", 8)}}
		running(&s, "waiting", "nlp", "n1", all(8), 0, time.Hour)
		e.Observe(s, nil, nil)
	}
	leader := forecast.NewEstimator(nil, o)
	step(leader, t0)
	st := leader.State()
	if len(st.First) != 1 || st.First[0].JobID != "waiting" || !st.First[0].At.Equal(t0) {
		t.Fatalf("state's first estimates %+v, want the waiting job's, made at %s", st.First, t0)
	}
	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var stored forecast.State
	if err := json.Unmarshal(raw, &stored); err != nil {
		t.Fatal(err)
	}
	next, cold := forecast.NewEstimator(nil, o), forecast.NewEstimator(nil, o)
	if err := next.Restore(stored); err != nil {
		t.Fatal(err)
	}
	// The old leader would have gone on; the new one takes over five
	// minutes in; the job starts after half an hour.
	later, startAt := t0.Add(5*time.Minute), t0.Add(30*time.Minute)
	for _, e := range []*forecast.Estimator{leader, next, cold} {
		step(e, later)
		start(e, startAt)
	}
	want := leader.State().Scores
	if len(want) == 0 {
		t.Fatal("the job's start scored nothing")
	}
	if diff := cmp.Diff(want, next.State().Scores); diff != "" {
		t.Errorf("scores after a change of leader (-old leader's +new leader's):\n%s", diff)
	}
	if diff := cmp.Diff(want, cold.State().Scores); diff == "" {
		t.Error("an estimator that never saw the first estimate scores the same: the test shows nothing")
	}

	bad := stored
	bad.First = []forecast.FirstState{{JobID: "", At: t0}}
	if err := forecast.NewEstimator(nil, o).Restore(bad); err == nil {
		t.Error("a first estimate naming no job was restored")
	}
}
