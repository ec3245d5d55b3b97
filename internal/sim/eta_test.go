package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
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
	run := func(e *ETAConfig) *TraceResult {
		t.Helper()
		cfg := exampleConfig(t, "first-fit", GangwayPolicy)
		cfg.ETA = e
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

// TestFleetShare: a share keeps the mix of node shapes, and a smaller
// share keeps a subset of a larger one's nodes.
func TestFleetShare(t *testing.T) {
	var nodes []placement.Node
	for i := range 100 {
		n := gpuNode(fmt.Sprintf("a-%02d", i), 8)
		if i%4 == 0 {
			n = gpuNode(fmt.Sprintf("b-%02d", i), 2)
		}
		nodes = append(nodes, n)
	}
	prev := map[string]bool{}
	for _, share := range []float64{0.01, 0.1, 0.2, 0.5, 1} {
		got := FleetShare(nodes, share)
		small := 0
		ids := map[string]bool{}
		for _, n := range got {
			ids[n.ID] = true
			if len(n.GPUs) == 2 {
				small++
			}
		}
		for id := range prev {
			if !ids[id] {
				t.Errorf("share %g drops %s, kept at a smaller share", share, id)
			}
		}
		if want := int(share*25 + 0.5); share >= 0.1 && small != want {
			t.Errorf("share %g: %d of %d nodes are 2-GPU, want %d", share, small, len(got), want)
		}
		prev = ids
	}
	if got := FleetShare(nodes, 0.001); len(got) != 1 {
		t.Errorf("a tiny share keeps %d nodes, want 1", len(got))
	}
}

// TestETAOnGeneratedVariants replays `gangway replay trace --eta`'s
// defaults (speedup 10, the fleet sized to the load, the first 1,000
// tasks) on workload variants GenerateMix derives from the default openb
// pod list — more multi-GPU tasks, more GPU sharing, model constraints —
// and logs the calibration of each, for docs/benchmarks.md. It takes
// minutes, so it runs only with GANGWAY_ETA_VARIANTS=1:
//
//	GANGWAY_ETA_VARIANTS=1 go test ./internal/sim -run TestETAOnGeneratedVariants -v -timeout 2h
func TestETAOnGeneratedVariants(t *testing.T) {
	if os.Getenv("GANGWAY_ETA_VARIANTS") == "" {
		t.Skip("set GANGWAY_ETA_VARIANTS=1 to run (minutes)")
	}
	nodesFile, tasksFile := LocateTrace(filepath.Join("..", "shared", "traces", "openb", "openb_node_list_gpu_node.csv")),
		LocateTrace(filepath.Join("..", "shared", "traces", "openb", "openb_pod_list_default.csv"))
	if nodesFile == "" || tasksFile == "" {
		t.Skip("the openb trace is not here")
	}
	nodes, tasks, err := LoadOpenB(nodesFile, tasksFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []SweepPoint{{"multi", 0.3}, {"share", 0.6}, {"spec", 0.2}} {
		mixed, err := GenerateMix(tasks, nodes, p.Mix(), nil, 7)
		if err != nil {
			t.Fatal(err)
		}
		mixed = mixed[:min(1000, len(mixed))]
		jobs, _, err := OpenBTraceJobs(mixed, tasks, 42)
		if err != nil {
			t.Fatal(err)
		}
		cfg := TraceConfig{Nodes: nodes, Jobs: jobs, Policies: []string{GangwayPolicy}, NewScorer: baselines.ScorerByName, Seed: 42,
			Options: placement.Options{Reservations: 4, Preempt: true, MinRuntime: 10 * time.Minute,
				Workload: TypicalWorkload(mixed, TypicalPopularity)},
			CheckpointEvery: DefaultCheckpointEvery, Speedup: ETASpeedup, ETA: &ETAConfig{}}
		share, err := LoadedFleet(context.Background(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Nodes = FleetShare(nodes, share)
		res, err := RunTrace(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		e := res.Runs[0].ETA
		t.Logf("%s: %d nodes, %d of %d jobs waited (median %s); learned: %s; known: %s; Slurm-style: %s; warm learned: %s; warm known: %s; warm Slurm-style: %s",
			p, len(cfg.Nodes), e.Waited, e.Jobs, FormatSeconds(e.MedianWait), e.Learned, e.Exact, e.Limits, e.WarmLearned, e.WarmExact, e.WarmLimits)
	}
}
