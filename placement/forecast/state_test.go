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
