package workflows

import (
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// TestReplayHistories replays JobWorkflow histories recorded on a real
// Temporal server (testdata/histories, written by the e2e test with
// -update-histories): a user retry, a 2 × 8 gang, a cancel while running
// (recorded before attempt records and bursts, so they replay the old path),
// and newer ones: a burst to spot ended by a notice and resumed on-prem, a
// burst to on-demand, a preempted checkpointing job, a lost node, and the
// first and last runs of a job that continued as new (continued-*.json),
// and the same recorded again once the server-side activities ran as local
// activities (local-continued-*.json, renamed from TestLimitsOnRealServer's
// -update-histories output), and four recorded again once one change ID
// stood for all of them (lean-*.json: versionLean).
// A change to the workflow's command order that is not behind
// workflow.GetVersion fails here.
func TestReplayHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no saved histories: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(JobWorkflow, workflow.RegisterOptions{Name: WorkflowName})
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}
