package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/internal/devstack/fullstack"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// TestTemporalShowsJobsAsTheyEnded runs a job that succeeds, one that
// fails and one that is cancelled on the dev system (the in-process
// server, one node) and checks what Temporal itself says about each: the
// workflow's close status matches the job's phase, the search attributes
// hold team, priority class, final phase and pool, and the client still
// reads each job's full result.
func TestTemporalShowsJobsAsTheyEnded(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and a Temporal dev server")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	st, err := fullstack.Start(ctx, fullstack.Options{
		Dir: t.TempDir(), Headless: true,
		Nodes:  agent.FakeFleet("node", "onprem", []agent.NodeShape{{Count: 1, GPUs: 4, Model: "H100"}}),
		Agent:  agent.Config{HeartbeatInterval: 200 * time.Millisecond},
		Server: &fullstack.ServerOptions{},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cl := client.New(jobs.New(st.TemporalClient), st.View)
	job := func(name, class, script string) gangway.JobSpec {
		return gangway.JobSpec{Name: name, Team: "nlp", PriorityClass: class, Command: []string{"/bin/sh", "-c", script},
			Gang: gangway.Gang{Replicas: 1, GPUsPerReplica: 1}}
	}
	timing := client.SubmitOptions{Timing: workflows.Timing{StartTimeout: 30 * time.Second}}
	for _, s := range []gangway.JobSpec{job("ok", "high", "exit 0"), job("broken", "normal", "exit 3"), job("stopped", "low", "sleep 60")} {
		if _, err := cl.Submit(ctx, s, timing); err != nil {
			t.Fatalf("submit %s: %v", s.Name, err)
		}
	}
	// Cancel "stopped" once it runs.
	for {
		s, err := cl.Status(ctx, "stopped")
		if err == nil && s.Phase == gangway.PhaseRunning {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("stopped never ran: %v (%v)", s.Phase, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := cl.Cancel(ctx, "stopped"); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		job        gangway.JobID
		wantPhase  gangway.Phase
		wantStatus enumspb.WorkflowExecutionStatus
		wantClass  string
	}{
		{"ok", gangway.PhaseSucceeded, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, "high"},
		{"broken", gangway.PhaseFailed, enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, "normal"},
		{"stopped", gangway.PhaseCancelled, enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED, "low"},
	}
	for _, tt := range tests {
		res, err := cl.Result(ctx, tt.job)
		if err != nil {
			t.Fatalf("result of %s: %v", tt.job, err)
		}
		if res.Phase != tt.wantPhase || res.JobID != tt.job || res.Attempt < 1 || len(res.Phases) == 0 {
			t.Errorf("%s: result phase %s, id %q, attempt %d, %d phases; want %s with its history", tt.job, res.Phase, res.JobID, res.Attempt, len(res.Phases), tt.wantPhase)
		}
		d, err := st.TemporalClient.DescribeWorkflowExecution(ctx, string(tt.job), "")
		if err != nil {
			t.Fatal(err)
		}
		info := d.GetWorkflowExecutionInfo()
		if info.GetStatus() != tt.wantStatus {
			t.Errorf("%s: Temporal shows %s, want %s", tt.job, info.GetStatus(), tt.wantStatus)
		}
		got := map[string]string{}
		for name, p := range info.GetSearchAttributes().GetIndexedFields() {
			var v string
			if err := converter.GetDefaultDataConverter().FromPayload(p, &v); err == nil {
				got[name] = v
			}
		}
		want := map[string]string{"GangwayTeam": "nlp", "GangwayPriorityClass": tt.wantClass,
			"GangwayPhase": string(tt.wantPhase), "GangwayPool": "onprem"}
		for k := range got {
			if _, ours := want[k]; !ours {
				delete(got, k) // Temporal's own (BuildIds and the like)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: search attributes (-want +got):\n%s", tt.job, diff)
		}
	}
	// `gangway list` reads the phases from the memo, whatever Temporal's
	// close status (visibility is eventually consistent: wait for it).
	for {
		sums, err := jobs.New(st.TemporalClient).List(ctx)
		listed := map[gangway.JobID]gangway.Phase{}
		for _, s := range sums {
			listed[s.JobID] = s.Phase
		}
		want := map[gangway.JobID]gangway.Phase{}
		for _, tt := range tests {
			want[tt.job] = tt.wantPhase
		}
		diff := cmp.Diff(want, listed)
		if err == nil && diff == "" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("list (-want +got):\n%s (%v)", diff, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	// The UI's filters work: a visibility query by team and phase finds
	// the failed job.
	q := fmt.Sprintf("GangwayTeam = 'nlp' AND GangwayPhase = '%s'", gangway.PhaseFailed)
	for {
		resp, err := st.TemporalClient.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q})
		if err == nil && len(resp.GetExecutions()) == 1 && resp.GetExecutions()[0].GetExecution().GetWorkflowId() == "broken" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("query %q never found the failed job: %v", q, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
