package sim

import (
	"errors"
	"path/filepath"
	"testing"
)

func TestLoadTraceJobs(t *testing.T) {
	tests := map[string]struct {
		in          TraceInput
		wantJobs    int
		wantTiming  bool
		wantErrFrom string
	}{
		"gang jobs, limited": {in: TraceInput{Jobs: filepath.Join("testdata", "gangs.csv"), Limit: 2}, wantJobs: 2},
		"openb tasks": {in: TraceInput{Tasks: tracePath(t, "openb_pod_list_default.csv"),
			TimesFrom: tracePath(t, "openb_pod_list_default.csv"), Limit: 100, Seed: 1}, wantJobs: 100, wantTiming: true},
		"openb tasks drawing times": {in: TraceInput{Tasks: tracePath(t, "openb_pod_list_multigpu20.csv"),
			TimesFrom: tracePath(t, "openb_pod_list_default.csv"), Limit: 50, Seed: 1}, wantJobs: 50, wantTiming: true},
		"missing times-from": {in: TraceInput{Tasks: tracePath(t, "openb_pod_list_multigpu20.csv"),
			TimesFrom: filepath.Join(t.TempDir(), "none.csv"), Limit: 50}, wantErrFrom: "times-from"},
		"missing jobs": {in: TraceInput{Jobs: filepath.Join(t.TempDir(), "none.csv")}, wantErrFrom: "jobs"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := LoadTraceJobs(tc.in)
			if tc.wantErrFrom != "" {
				var ie *InputError
				if !errors.As(err, &ie) || ie.Field != tc.wantErrFrom {
					t.Fatalf("LoadTraceJobs error = %v, want one from %s", err, tc.wantErrFrom)
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadTraceJobs: %v", err)
			}
			if len(got.Jobs) != tc.wantJobs || (got.Timing != nil) != tc.wantTiming || (got.Workload != nil) != tc.wantTiming {
				t.Errorf("got %d jobs, timing %v, workload %v; want %d jobs, timing and workload %v",
					len(got.Jobs), got.Timing != nil, got.Workload != nil, tc.wantJobs, tc.wantTiming)
			}
		})
	}
}

// TestPrepareTrace: the fleet share keeps that share of the nodes, the
// mix is named in what comes back, and a bad share or node list is an
// InputError naming its flag, before anything is replayed.
func TestPrepareTrace(t *testing.T) {
	in := TraceInput{Tasks: tracePath(t, "openb_pod_list_default.csv"), TimesFrom: tracePath(t, "openb_pod_list_default.csv"),
		Limit: 50, Seed: 1}
	fleet, err := LoadNodes("40x8", in.Seed)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		setup       TraceSetup
		wantNodes   int
		wantMix     string
		wantErrFrom string
	}{
		"every node":   {setup: TraceSetup{Nodes: "40x8", Input: in}, wantNodes: 40},
		"a quarter":    {setup: TraceSetup{Nodes: "40x8", FleetShare: 0.25, Input: in}, wantNodes: len(FleetShare(fleet, 0.25))},
		"share over 1": {setup: TraceSetup{Nodes: "40x8", FleetShare: 1.5, Input: in}, wantErrFrom: "fleet-share"},
		"bad nodes":    {setup: TraceSetup{Nodes: filepath.Join(t.TempDir(), "none.csv"), Input: in}, wantErrFrom: "nodes"},
		"a mix": {setup: TraceSetup{Nodes: "40x8", Input: func() TraceInput {
			i := in
			i.Mix = &Mix{Share: 0.5}
			return i
		}()}, wantNodes: 40, wantMix: (&Mix{Share: 0.5}).String()},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var cfg TraceConfig
			got, err := PrepareTrace(t.Context(), &cfg, tc.setup)
			if tc.wantErrFrom != "" {
				var ie *InputError
				if !errors.As(err, &ie) || ie.Field != tc.wantErrFrom {
					t.Fatalf("PrepareTrace error = %v, want one from %s", err, tc.wantErrFrom)
				}
				return
			}
			if err != nil {
				t.Fatalf("PrepareTrace: %v", err)
			}
			if len(cfg.Nodes) != tc.wantNodes || len(cfg.Jobs) != len(got.Jobs) || len(got.Jobs) == 0 || got.Mix != tc.wantMix {
				t.Errorf("got %d nodes, %d of %d jobs in the config, mix %q; want %d nodes, all jobs, mix %q",
					len(cfg.Nodes), len(cfg.Jobs), len(got.Jobs), got.Mix, tc.wantNodes, tc.wantMix)
			}
		})
	}
}
