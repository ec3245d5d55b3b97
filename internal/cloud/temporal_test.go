package cloud_test

import (
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/gangwayhq/gangway/internal/cloud"
	"github.com/gangwayhq/gangway/internal/devstack/devstacktest"
	"github.com/gangwayhq/gangway/workflows"
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
	c, err := client.Dial(client.Options{HostPort: srv.Addr, Namespace: srv.Namespace})
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
	jobs := cloud.TemporalJobs{Client: c}

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
}
