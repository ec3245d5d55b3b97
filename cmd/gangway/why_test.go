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
		"own reservation, expected sooner": {
			output: "text",
			waiting: &gangway.Waiting{Reason: "WaitingForReservation", Detail: "16 GPUs free up when 2 jobs end", Retry: true,
				ReservationStart: now.Add(24 * time.Hour), ReservedNodes: []string{"n1", "n2"},
				ETA: &gangway.ETA{P50: now.Add(25 * time.Second), P90: now.Add(2 * time.Minute), At: now}},
			want: "Job big (team nlp) is Queued, attempt 1.\n" +
				"Why: WaitingForReservation: 16 GPUs free up when 2 jobs end\n" +
				"ETA: in 25s (P90 in 2m); P50 10:00:25, P90 10:02:00 (estimated 0s ago)\n" +
				"Reserved: GPUs on n1,n2 from 2026-12-01 10:00:00 (in 24h0m0s); held from then at the latest: the jobs on them are expected to end sooner (ETA)\n",
		},
		"quota, with an estimate and a cloud option": {
			output: "text",
			waiting: &gangway.Waiting{Reason: "QuotaExceeded", Detail: "team nlp uses 8/8 GPUs of H100 quota", Retry: true,
				ETA:      &gangway.ETA{P50: now.Add(42 * time.Minute), P90: now.Add(70 * time.Minute), At: now.Add(-3 * time.Second)},
				WaitsFor: []gangway.JobID{"train-a", "train-b"},
				Cloud: &gangway.CloudOption{Pool: "fake-a100-spot", CapacityType: gangway.CapacitySpot, InstanceType: "a2-highgpu-8g",
					Instances: 1, PricePerGPUHour: 1.1, ExpectedCost: 4.1, ExpectedDuration: gangway.Duration{Duration: 28 * time.Minute}, BurstEnabled: true}},
			want: "Job big (team nlp) is Queued, attempt 1.\n" +
				"Why: QuotaExceeded: team nlp uses 8/8 GPUs of H100 quota\n" +
				"ETA: in 42m (P90 in 1h10m); P50 10:42:00, P90 11:10:00 (estimated 3s ago)\n" +
				"Waits for: train-a, train-b\n" +
				"Cloud: start now on spot in fake-a100-spot, about $4.10 expected over 28m (1×a2-highgpu-8g at $1.10/GPU-h)\n",
		},
		"nothing in sight frees it": {
			output: "text",
			waiting: &gangway.Waiting{Reason: "InsufficientFreeGPUs", Detail: "2 × 8 GPUs: needs 16 GPUs, 8 free on matching nodes", Retry: true,
				ETA: &gangway.ETA{P50: now, P90: now.Add(time.Minute), At: now, Beyond: true}},
			want: "Job big (team nlp) is Queued, attempt 1.\n" +
				"Why: InsufficientFreeGPUs: 2 × 8 GPUs: needs 16 GPUs, 8 free on matching nodes\n" +
				"ETA: none in sight: nothing running or queued is expected to free what it needs; no P50 or P90 (estimated 0s ago)\n",
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
		"never fits on-prem, may burst": {
			output: "text",
			waiting: &gangway.Waiting{Reason: "NeverFits", Detail: "needs 16 GPUs on one node; the largest has 8",
				Cloud: &gangway.CloudOption{Pool: "fake-h100-od", CapacityType: gangway.CapacityOnDemand, InstanceType: "p5.48xlarge",
					Instances: 2, PricePerGPUHour: 4, ExpectedCost: 128, ExpectedDuration: gangway.Duration{Duration: 2 * time.Hour}, BurstEnabled: true}},
			want: "Job big (team nlp) is Queued, attempt 1.\n" +
				"Why: NeverFits: needs 16 GPUs on one node; the largest has 8\n" +
				"Cloud: start now on on-demand in fake-h100-od, about $128.00 expected over 2h (2×p5.48xlarge at $4.00/GPU-h)\n" +
				"It will not fit on-prem as the fleet stands: it can start only in the cloud (above).\n",
		},
		"json": {
			output: "json",
			waiting: &gangway.Waiting{Reason: "QuotaExceeded", Detail: "team nlp uses 32 of 32 GPUs", Retry: true,
				ETA:      &gangway.ETA{P50: now.Add(time.Hour).UTC(), P90: now.Add(2 * time.Hour).UTC(), At: now.UTC()},
				WaitsFor: []gangway.JobID{"a"}},
			want: `{
  "attempt": 1,
  "jobId": "big",
  "phase": "Queued",
  "reason": "",
  "waiting": {
    "reason": "QuotaExceeded",
    "detail": "team nlp uses 32 of 32 GPUs",
    "retry": true,
    "eta": {
      "p50": "` + now.Add(time.Hour).UTC().Format(time.RFC3339) + `",
      "p90": "` + now.Add(2*time.Hour).UTC().Format(time.RFC3339) + `",
      "at": "` + now.UTC().Format(time.RFC3339) + `"
    },
    "waitsFor": [
      "a"
    ]
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
