package client_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/workflows"
)

// TestJobStatusJSON: durations are Go duration strings, never nanoseconds,
// and the JSON reads back to the same status.
func TestJobStatusJSON(t *testing.T) {
	st := client.JobStatus{Status: workflows.Status{JobID: "j", Phase: gangway.PhaseRunning, WaitTime: 90 * time.Second,
		RunTime: 1500 * time.Millisecond, Assignment: &gangway.Assignment{JobID: "j", Attempt: 1,
			Members: []gangway.Member{{Rank: 0, NodeID: "n0", GPUs: []int{0}}}, MaxRuntime: 2 * time.Minute, Runtime: time.Minute}},
		Waiting: &gangway.Waiting{Reason: "quota"}}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"waitTime":"1m30s"`, `"runTime":"1.5s"`, `"maxRuntime":"2m"`, `"runtime":"1m"`, `"jobId":"j"`, `"waiting":{`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON lacks %s:\n%s", want, b)
		}
	}
	if strings.Contains(string(b), "120000000000") {
		t.Errorf("JSON has nanoseconds:\n%s", b)
	}
	var back client.JobStatus
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(st, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

// TestLive: a waiting job's wait and a running job's run, GPU-seconds and
// cost grow with the clock; a finished job's totals are final.
func TestLive(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	asg := &gangway.Assignment{JobID: "j", Attempt: 2, Members: []gangway.Member{
		{Rank: 0, NodeID: "n0", GPUs: []int{0, 1, 2, 3}, PricePerGPUHour: 2},
		{Rank: 1, NodeID: "n1", GPUs: []int{0, 1, 2, 3}, PricePerGPUHour: 2}}}
	tests := map[string]struct {
		st   workflows.Status
		want workflows.Status
	}{
		"queued a minute: the wait so far, not the enqueue latency": {
			st: workflows.Status{Phase: gangway.PhaseQueued, WaitTime: 200 * time.Millisecond,
				Phases: []workflows.PhaseChange{{Phase: gangway.PhaseQueued, At: now.Add(-time.Minute)}}},
			want: workflows.Status{Phase: gangway.PhaseQueued, WaitTime: time.Minute + 200*time.Millisecond,
				Phases: []workflows.PhaseChange{{Phase: gangway.PhaseQueued, At: now.Add(-time.Minute)}}},
		},
		"running 90s on 8 GPUs at $2/GPU-h": {
			st: workflows.Status{Phase: gangway.PhaseRunning, Assignment: asg, RunTime: time.Hour, GPUSeconds: 100, Dollars: 1,
				Phases:   []workflows.PhaseChange{{Phase: gangway.PhaseRunning, At: now.Add(-90 * time.Second)}},
				Attempts: []workflows.AttemptRecord{{Attempt: 1, Dollars: 1, EndedAt: now.Add(-time.Hour)}, {Attempt: 2, StartedAt: now.Add(-90 * time.Second)}}},
			want: workflows.Status{Phase: gangway.PhaseRunning, Assignment: asg, RunTime: time.Hour + 90*time.Second, GPUSeconds: 820, Dollars: 1.4,
				Phases:   []workflows.PhaseChange{{Phase: gangway.PhaseRunning, At: now.Add(-90 * time.Second)}},
				Attempts: []workflows.AttemptRecord{{Attempt: 1, Dollars: 1, EndedAt: now.Add(-time.Hour)}, {Attempt: 2, StartedAt: now.Add(-90 * time.Second), Dollars: 0.4}}},
		},
		"finished": {
			st: workflows.Status{Phase: gangway.PhaseSucceeded, WaitTime: time.Second,
				Phases: []workflows.PhaseChange{{Phase: gangway.PhaseSucceeded, At: now.Add(-time.Hour)}}},
			want: workflows.Status{Phase: gangway.PhaseSucceeded, WaitTime: time.Second,
				Phases: []workflows.PhaseChange{{Phase: gangway.PhaseSucceeded, At: now.Add(-time.Hour)}}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := client.JobStatus{Status: tc.st}.Live(now)
			if diff := cmp.Diff(tc.want, got.Status, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("live (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLiveTwice: a status made live on the user API's server and again by
// its client counts the time once.
func TestLiveTwice(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	st := client.JobStatus{Status: workflows.Status{Phase: gangway.PhaseQueued,
		Phases: []workflows.PhaseChange{{Phase: gangway.PhaseQueued, At: now.Add(-time.Minute)}}}}
	once := st.Live(now.Add(10 * time.Second))
	if got := once.Live(now.Add(10 * time.Second)).WaitTime; got != 70*time.Second {
		t.Errorf("live twice at the same time: wait %s, want 1m10s", got)
	}
	if got := once.Live(now.Add(20 * time.Second)).WaitTime; got != 80*time.Second {
		t.Errorf("live again 10s later: wait %s, want 1m20s", got)
	}
}

// TestWriteTextEarlierRuns: runs and phase changes the status no longer
// keeps one by one show as a summary line.
func TestWriteTextEarlierRuns(t *testing.T) {
	st := client.JobStatus{Status: workflows.Status{JobID: "j", Team: "ml", Phase: gangway.PhaseRunning, Attempt: 101,
		Attempts:        []workflows.AttemptRecord{{Attempt: 101, Pool: "onprem", Nodes: []string{"n0"}}},
		EarlierAttempts: &workflows.AttemptSummary{Count: 100, First: 1, Last: 100, Ended: map[string]int{"preempted": 99, "node-lost": 1}, GPUSeconds: 2048, Dollars: 3.5},
		Phases:          []workflows.PhaseChange{{Phase: gangway.PhaseRunning, Attempt: 101}}, EarlierPhases: 400}}
	var b strings.Builder
	if err := st.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"#1-100 (100 runs, not kept one by one): 1 node-lost, 99 preempted; 2048 GPU-seconds, 0 lost, $3.50",
		"(400 earlier phase changes not kept)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status text lacks %q:\n%s", want, b.String())
		}
	}
}

// TestWriteTextRunningRun: the run still going shows how long it has run
// so far, as the job's totals do.
func TestWriteTextRunningRun(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	st := client.JobStatus{Status: workflows.Status{JobID: "j", Team: "ml", Phase: gangway.PhaseRunning, Attempt: 1,
		Assignment: &gangway.Assignment{JobID: "j", Attempt: 1, Members: []gangway.Member{{NodeID: "n0", GPUs: []int{0}}}},
		Attempts:   []workflows.AttemptRecord{{Attempt: 1, Pool: "onprem", CapacityType: gangway.CapacityOnPrem, Nodes: []string{"n0"}, StartedAt: t0}},
		Phases:     []workflows.PhaseChange{{Phase: gangway.PhaseRunning, Attempt: 1, At: t0}}}}.Live(t0.Add(90 * time.Second))
	var b strings.Builder
	if err := st.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if want := "  1  onprem  on-prem   n0     1m30s  running  -"; !strings.Contains(b.String(), want) {
		t.Errorf("status text lacks %q:\n%s", want, b.String())
	}
}
