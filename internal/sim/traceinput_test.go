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
