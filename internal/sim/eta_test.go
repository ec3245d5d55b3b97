package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/placement/baselines"
)

// TestETAReplay: measuring estimates changes nothing the engine decides
// (the same waits, placements and preemptions as a replay of the same
// limits with no estimator), every job that waited and started was
// estimated at submit by all three estimators, and --output json carries
// eta and eta_exact with the fields the issue names.
func TestETAReplay(t *testing.T) {
	jobs, err := LoadGangJobs(filepath.Join("testdata", "gangs.csv"))
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := LoadNodes(filepath.Join("testdata", "nodes.csv"), 1)
	if err != nil {
		t.Fatal(err)
	}
	run := func(e *ETAConfig) *TraceResult {
		t.Helper()
		cfg := TraceConfig{Nodes: nodes, Jobs: jobs, Policies: []string{"first-fit", GangwayPolicy}, NewScorer: baselines.ScorerByName,
			Options: placement.Options{Reservations: 4, Preempt: true, MinRuntime: 10 * time.Minute}, Seed: 1,
			CheckpointEvery: DefaultCheckpointEvery, ETA: e}
		res, err := RunTrace(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	plain, measured := run(&ETAConfig{limitsOnly: true}), run(&ETAConfig{})
	for i := range plain.Runs {
		p, m := plain.Runs[i], measured.Runs[i]
		if diff := cmp.Diff(p.Waits, m.Waits); diff != "" || p.Preemptions != m.Preemptions || p.Placed != m.Placed {
			t.Errorf("%s: estimating changed the schedule: preemptions %d → %d, placed %d → %d, waits (-plain +measured):\n%s",
				p.Policy, p.Preemptions, m.Preemptions, p.Placed, m.Placed, diff)
		}
		e := m.ETA
		if e == nil || e.Waited == 0 {
			t.Fatalf("%s: no estimate measurement (%+v)", m.Policy, e)
		}
		for name, s := range map[string]ETAScore{"learned": e.Learned, "exact": e.Exact, "limits": e.Limits} {
			if s.Waited != e.Waited {
				t.Errorf("%s: %s estimated %d of the %d jobs that waited", m.Policy, name, s.Waited, e.Waited)
			}
			if s.P90Coverage < 0 || s.P90Coverage > 1 || s.Within25 < 0 || s.Within25 > 1 {
				t.Errorf("%s: %s scores out of range: %+v", m.Policy, name, s)
			}
		}
	}
	var out bytes.Buffer
	if err := measured.WriteJSON(&out); err != nil {
		t.Fatal(err)
	}
	line := strings.SplitN(out.String(), "\n", 2)[0]
	var got map[string]any
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []string{"eta", "eta_exact"} {
		for _, f := range []string{"waited", "within_25pct", "p90_coverage", "median_abs_error_s", "baseline_within_25pct"} {
			if o, _ := got[obj].(map[string]any); o[f] == nil {
				t.Errorf("--output json: %s lacks %s: %s", obj, f, line)
			}
		}
	}
}
