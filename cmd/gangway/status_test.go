package main

import (
	"strings"
	"testing"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/workflows"
)

// TestPrintStatusRuns: status shows each run's pool, how it ended, what it
// resumed from and the work it lost.
func TestPrintStatusRuns(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	step := int64(400)
	ck := &workflows.CheckpointRef{ID: "00001-a1-ab", Step: &step}
	st := client.JobStatus{Status: workflows.Status{JobID: "llm", Team: "nlp", Phase: gangway.PhaseSucceeded,
		Attempt: 2, InfraRestarts: 1, Dollars: 12.5, LostGPUSeconds: 16,
		Attempts: []workflows.AttemptRecord{
			{Attempt: 1, Pool: "aws-spot", CapacityType: "spot", Nodes: []string{"i-1", "i-2"}, StartedAt: t0,
				EndedAt: t0.Add(time.Hour), Ended: workflows.CauseNotice, Checkpoint: ck, LostGPUSeconds: 16, Dollars: 10},
			{Attempt: 2, Pool: "onprem", CapacityType: "on-prem", Nodes: []string{"node-1"}, StartedAt: t0.Add(2 * time.Hour),
				EndedAt: t0.Add(150 * time.Minute), Ended: workflows.CauseCompleted, ResumedFrom: ck, Dollars: 2.5},
		}}}
	var b strings.Builder
	if err := printStatus(&b, "text", st); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Cost: $12.50",
		"Lost:      16 GPU-seconds",
		"1  aws-spot  spot      i-1,i-2  1h0m0s  notice     -                       16          $10.00",
		"2  onprem    on-prem   node-1   30m0s   completed  step 400 (00001-a1-ab)  0           $2.50",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}
}
