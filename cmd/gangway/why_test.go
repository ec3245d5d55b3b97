package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/workflows"
)

// TestPrintWhy: why gives the typed reason, its reservation and whether
// waiting helps; as JSON, the reason's fields.
func TestPrintWhy(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.Local)
	queued := workflows.Status{JobID: "big", Team: "nlp", Phase: gangway.PhaseQueued, Attempt: 1}
	tests := map[string]struct {
		output  string
		waiting *gangway.Waiting
		want    string
	}{
		"not yet considered": {
			output: "text",
			want: "Job big (team nlp) is Queued, attempt 1.\n" +
				"Why: not yet considered by the dispatch loop (it runs every cycle; is a gangway server up?)\n",
		},
		"own reservation": {
			output: "text",
			waiting: &gangway.Waiting{Reason: "WaitingForReservation", Detail: "16 GPUs free up when 2 jobs end", Retry: true,
				ReservationStart: now.Add(90 * time.Minute), ReservedNodes: []string{"n1", "n2"}},
			want: "Job big (team nlp) is Queued, attempt 1.\n" +
				"Why: WaitingForReservation: 16 GPUs free up when 2 jobs end\n" +
				"Reserved: GPUs on n1,n2 from 2026-11-30 11:30:00 (in 1h30m0s)\n",
		},
		"defragmentation": {
			output: "text",
			waiting: &gangway.Waiting{Reason: "WaitingForDefragmentation", Retry: true,
				Detail:        "1 × 8 GPUs: waiting for defragmentation: moving 2 jobs (a, b), about 30 GPU-seconds lost; GPUs on n1 reserved for it",
				ReservedNodes: []string{"n1"}, Moving: []gangway.JobID{"a", "b"}, MoveLostGPUSeconds: 30},
			want: "Job big (team nlp) is Queued, attempt 1.\n" +
				"Why: WaitingForDefragmentation: 1 × 8 GPUs: waiting for defragmentation: moving 2 jobs (a, b), about 30 GPU-seconds lost; GPUs on n1 reserved for it\n",
		},
		"never fits": {
			output:  "text",
			waiting: &gangway.Waiting{Reason: "NeverFits", Detail: "needs 16 GPUs on one node; the largest has 8"},
			want: "Job big (team nlp) is Queued, attempt 1.\n" +
				"Why: NeverFits: needs 16 GPUs on one node; the largest has 8\n" +
				"It will not fit as the fleet stands: change the job's spec or add capacity.\n",
		},
		"json": {
			output:  "json",
			waiting: &gangway.Waiting{Reason: "QuotaExceeded", Detail: "team nlp uses 32 of 32 GPUs", Retry: true},
			want: `{
  "attempt": 1,
  "jobId": "big",
  "phase": "Queued",
  "reason": "",
  "waiting": {
    "reason": "QuotaExceeded",
    "detail": "team nlp uses 32 of 32 GPUs",
    "retry": true
  }
}
`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			if err := printWhy(&b, tc.output, client.JobStatus{Status: queued, Waiting: tc.waiting}, now); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, b.String()); diff != "" {
				t.Errorf("why (-want +got):\n%s", diff)
			}
		})
	}
}
