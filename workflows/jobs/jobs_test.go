package jobs_test

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/devstack/devstacktest"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// standIn answers JobWorkflow's contract without running anything: its
// status query lists the signals taken, a burst signal ends it Succeeded
// and cancellation ends it Cancelled.
func standIn(ctx workflow.Context, in workflows.JobInput) (workflows.Status, error) {
	st := workflows.Status{JobID: in.Spec.Name, Team: in.Spec.Team, Phase: gangway.PhaseQueued}
	if err := workflow.SetQueryHandler(ctx, workflows.QueryStatus, func() (workflows.Status, error) {
		return st, nil
	}); err != nil {
		return st, err
	}
	done := false
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(workflow.GetSignalChannel(ctx, workflows.SignalPlaced), func(c workflow.ReceiveChannel, _ bool) {
		var a gangway.Assignment
		c.Receive(ctx, &a)
		st.Assignment, st.Phase = &a, gangway.PhaseRunning
	})
	sel.AddReceive(workflow.GetSignalChannel(ctx, workflows.SignalPreempt), func(c workflow.ReceiveChannel, _ bool) {
		var r workflows.PreemptRequest
		c.Receive(ctx, &r)
		st.Phase, st.Reason = gangway.PhaseRequeued, r.Reason
	})
	sel.AddReceive(workflow.GetSignalChannel(ctx, workflows.SignalBurst), func(c workflow.ReceiveChannel, _ bool) {
		var r workflows.BurstRequest
		c.Receive(ctx, &r)
		st.Phase, st.Reason, done = gangway.PhaseSucceeded, r.Reason, true
	})
	sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) {
		st.Phase, done = gangway.PhaseCancelled, true
	})
	for !done {
		sel.Select(ctx)
	}
	return st, nil
}

func newJobs(t *testing.T) *jobs.Jobs {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a Temporal dev server")
	}
	srv := devstacktest.Temporal(t)
	c, err := client.Dial(client.Options{HostPort: srv.Addr, Namespace: srv.Namespace,
		Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	w := worker.New(c, workflows.TaskQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(standIn, workflow.RegisterOptions{Name: workflows.WorkflowName})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return jobs.New(c)
}

func spec(name string) gangway.JobSpec {
	return gangway.JobSpec{Name: name, Team: "ml", Gang: gangway.Gang{Replicas: 2, GPUsPerReplica: 4}}
}

// TestDoor walks one job through every call of the door, and checks that
// a finished job and an unknown one both answer ErrJobGone to a signal.
func TestDoor(t *testing.T) {
	j := newJobs(t)
	ctx := t.Context()

	if err := j.Start(ctx, spec("train-1"), jobs.StartOptions{}); err != nil {
		t.Fatalf("start: %v", err)
	}
	if err := j.Start(ctx, spec("train-1"), jobs.StartOptions{}); !errors.Is(err, jobs.ErrJobExists) {
		t.Fatalf("second start: %v, want ErrJobExists", err)
	}
	if d, err := j.Describe(ctx, "train-1"); err != nil || !d.Running || d.Closed != "" || d.StartedAt.IsZero() || d.Team != spec("train-1").Team {
		t.Errorf("describe running job: %+v, %v", d, err)
	}
	if ok, err := j.Running(ctx, "train-1"); !ok || err != nil {
		t.Errorf("running: %t, %v; want true, nil", ok, err)
	}
	a := gangway.Assignment{JobID: "train-1", Attempt: 1,
		Members: []gangway.Member{{Rank: 0, NodeID: "n1", GPUs: []int{0, 1, 2, 3}}}}
	if err := j.SignalPlaced(ctx, a); err != nil {
		t.Fatalf("signal placed: %v", err)
	}
	if err := j.SignalPreempt(ctx, "train-1", workflows.PreemptRequest{Attempt: 1, Reason: "drain"}); err != nil {
		t.Fatalf("signal preempt: %v", err)
	}
	// Signals are taken in order; the query sees both once processed.
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := j.Query(ctx, "train-1")
		if err == nil && st.Phase == gangway.PhaseRequeued {
			if diff := cmp.Diff(&a, st.Assignment); diff != "" {
				t.Errorf("assignment seen by the workflow (-want +got):\n%s", diff)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("query: %+v, %v; want phase Requeued", st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := j.SignalBurst(ctx, "train-1", workflows.BurstRequest{Attempt: 1, Reason: "cheaper"}); err != nil {
		t.Fatalf("signal burst: %v", err)
	}
	st, err := j.Result(ctx, "train-1")
	if err != nil || st.Phase != gangway.PhaseSucceeded || st.Reason != "cheaper" {
		t.Fatalf("result: %+v, %v; want Succeeded, cheaper", st, err)
	}
	if d, err := j.Describe(ctx, "train-1"); err != nil || d.Running || d.Closed != "Completed" || d.ClosedAt.IsZero() {
		t.Errorf("describe finished job: %+v, %v; want closed Completed", d, err)
	}
	if err := j.Start(ctx, spec("train-1"), jobs.StartOptions{}); !errors.Is(err, jobs.ErrJobExists) {
		t.Errorf("start over a finished job: %v, want ErrJobExists", err)
	}

	if err := j.Start(ctx, spec("train-2"), jobs.StartOptions{}); err != nil {
		t.Fatalf("start train-2: %v", err)
	}
	if err := j.Cancel(ctx, "train-2"); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if st, err := j.Result(ctx, "train-2"); err != nil || st.Phase != gangway.PhaseCancelled {
		t.Errorf("result of cancelled job: %+v, %v; want Cancelled", st, err)
	}

	gone := map[string]func(id gangway.JobID) error{
		"signal placed":  func(id gangway.JobID) error { return j.SignalPlaced(ctx, gangway.Assignment{JobID: id}) },
		"signal preempt": func(id gangway.JobID) error { return j.SignalPreempt(ctx, id, workflows.PreemptRequest{}) },
		"signal burst":   func(id gangway.JobID) error { return j.SignalBurst(ctx, id, workflows.BurstRequest{}) },
	}
	for name, call := range gone {
		for _, id := range []gangway.JobID{"train-1", "no-such-job"} {
			if err := call(id); !errors.Is(err, jobs.ErrJobGone) {
				t.Errorf("%s to %s: %v, want ErrJobGone", name, id, err)
			}
		}
	}
	if err := j.Cancel(ctx, "no-such-job"); !errors.Is(err, jobs.ErrJobGone) {
		t.Errorf("cancel unknown job: %v, want ErrJobGone", err)
	}
	if _, err := j.Describe(ctx, "no-such-job"); !errors.Is(err, jobs.ErrJobGone) {
		t.Errorf("describe unknown job: %v, want ErrJobGone", err)
	}
	if ok, err := j.Running(ctx, "no-such-job"); ok || err != nil {
		t.Errorf("running unknown job: %t, %v; want false, nil", ok, err)
	}
	if _, err := j.Query(ctx, "no-such-job"); !errors.Is(err, jobs.ErrJobGone) {
		t.Errorf("query unknown job: %v, want ErrJobGone", err)
	}
	if _, err := j.Result(ctx, "no-such-job"); !errors.Is(err, jobs.ErrJobGone) {
		t.Errorf("result of unknown job: %v, want ErrJobGone", err)
	}

	// Visibility is eventually consistent: wait for both jobs to be listed.
	want := []jobs.Summary{{JobID: "train-2", Team: "ml", Phase: gangway.PhaseSubmitted, GPUs: 8},
		{JobID: "train-1", Team: "ml", Phase: gangway.PhaseSubmitted, GPUs: 8}}
	deadline = time.Now().Add(20 * time.Second)
	for {
		got, err := j.List(ctx)
		for i := range got {
			got[i].StartedAt, got[i].ClosedAt = time.Time{}, time.Time{}
		}
		diff := cmp.Diff(want, got)
		if err == nil && diff == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("list (-want +got):\n%s (err %v)", diff, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
