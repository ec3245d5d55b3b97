package client_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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
