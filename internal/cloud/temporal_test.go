package cloud_test

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

	"github.com/gangwayhq/gangway/internal/cloud"
	"github.com/gangwayhq/gangway/internal/devstack/devstacktest"
	"github.com/gangwayhq/gangway/internal/testclock"
	"github.com/gangwayhq/gangway/providers"
	"github.com/gangwayhq/gangway/workflows"
	wfjobs "github.com/gangwayhq/gangway/workflows/jobs"
)

// statusWorkflow stands in for JobWorkflow: it answers the status query
// with the attempt it was started with and ends on a signal.
func statusWorkflow(ctx workflow.Context, attempt int) error {
	if err := workflow.SetQueryHandler(ctx, workflows.QueryStatus, func() (workflows.Status, error) {
		return workflows.Status{Attempt: attempt}, nil
	}); err != nil {
		return err
	}
	workflow.GetSignalChannel(ctx, "finish").Receive(ctx, nil)
	return nil
}

func TestTemporalJobs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal dev server")
	}
	srv := devstacktest.Temporal(t)
	c, err := client.Dial(client.Options{HostPort: srv.Addr, Namespace: srv.Namespace,
		Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const queue = "cloud-test"
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflow(statusWorkflow)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	ctx := t.Context()
	for _, id := range []string{"running-job", "closed-job"} {
		if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, statusWorkflow, 3); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.SignalWorkflow(ctx, "closed-job", "", "finish", nil); err != nil {
		t.Fatal(err)
	}
	if err := c.GetWorkflow(ctx, "closed-job", "").Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	jobs := cloud.TemporalJobs{Jobs: wfjobs.New(c)}

	// The query needs the workflow's first task done; retry briefly.
	deadline := time.Now().Add(20 * time.Second)
	for {
		attempt, running, err := jobs.Attempt(ctx, "running-job")
		if err == nil {
			if attempt != 3 || !running {
				t.Errorf("running job: attempt %d running %t, want 3 true", attempt, running)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("running job: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, running, err := jobs.Attempt(ctx, "closed-job"); err != nil || running {
		t.Errorf("closed job: running %t, err %v; want false, nil", running, err)
	}
	if _, _, err := jobs.Attempt(ctx, "no-such-job"); !errors.Is(err, cloud.ErrUnknownJob) {
		t.Errorf("unknown job: err %v, want ErrUnknownJob", err)
	}

	// The reconciler over these workflows: the closed job's instance (its
	// workflow ended without terminating it, as after a crash), the
	// unknown job's and the running job's earlier attempt's go; the
	// running job's current attempt stays.
	c0 := testclock.New(t0)
	p := newCloud(t, "c1", c0)
	launch(t, p, "a100-spot", "closed-job", 3, 1)  // fake-000001
	launch(t, p, "a100-spot", "no-such-job", 1, 1) // fake-000002
	launch(t, p, "a100-od", "running-job", 2, 1)   // fake-000003
	launch(t, p, "a100-od", "running-job", 3, 1)   // fake-000004
	c0.Advance(time.Hour)
	reg, _ := cloud.NewRegistry([]providers.Provider{p}, cloud.RegistryOptions{})
	got := summarize(cloud.NewReconciler(reg, jobs, cloud.ReconcilerConfig{Now: c0.Now}).Reconcile(ctx))
	want := summary{Instances: 4, Kept: 1, Terminated: []string{"c1/fake-000001 closed-job 3 job-closed",
		"c1/fake-000002 no-such-job 1 job-unknown", "c1/fake-000003 running-job 2 stale-attempt"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reconcile over Temporal (-want +got):\n%s", diff)
	}
}
