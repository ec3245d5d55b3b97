package agent

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/gangwayhq/gangway/checkpoint"
	"github.com/gangwayhq/gangway/internal/devstack/devstacktest"
	"github.com/gangwayhq/gangway/workflows"
)

// slowStore makes every save take at least delay.
type slowStore struct {
	checkpoint.Store
	delay time.Duration
}

func (s slowStore) Save(ctx context.Context, job, dir string, m checkpoint.Manifest) (checkpoint.Manifest, error) {
	time.Sleep(s.delay)
	return s.Store.Save(ctx, job, dir, m)
}

// cancelTestHeartbeat is the RunTask heartbeat timeout in the test: the
// final save takes twice as long.
const cancelTestHeartbeat = 2 * time.Second

// runThenCancel runs RunTask as JobWorkflow does (WaitForCancellation), cancels it on
// the "cancel" signal, and returns what the cancellation carried.
func runThenCancel(ctx workflow.Context, in workflows.RunTaskInput) (workflows.RunTaskProgress, error) {
	actx, cancel := workflow.WithCancel(ctx)
	actx = workflow.WithActivityOptions(actx, workflow.ActivityOptions{
		TaskQueue:           workflows.NodeTaskQueue(in.NodeID),
		StartToCloseTimeout: time.Minute,
		HeartbeatTimeout:    cancelTestHeartbeat,
		WaitForCancellation: true,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	f := workflow.ExecuteActivity(actx, workflows.ActivityRunTask, in)
	workflow.GetSignalChannel(ctx, "cancel").Receive(ctx, nil)
	cancel()
	err := f.Get(ctx, nil)
	var ce *temporal.CanceledError
	if !errors.As(err, &ce) {
		return workflows.RunTaskProgress{}, fmt.Errorf("RunTask ended with %v, want a cancellation", err)
	}
	var p workflows.RunTaskProgress
	if err := ce.Details(&p); err != nil {
		return p, fmt.Errorf("cancellation details: %w", err)
	}
	return p, nil
}

// TestRunTaskCancelledByServer runs RunTask under a real Temporal server: a
// cancel from the workflow stops the process, the final checkpoint is saved
// (its save outlasting the heartbeat timeout: heartbeats go on after the
// cancel), and the cancellation hands the workflow the checkpoint.
func TestRunTaskCancelledByServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal dev server")
	}
	srv := devstacktest.Temporal(t)
	c, err := client.Dial(client.Options{HostPort: srv.Addr, Namespace: srv.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	h := newCkptHarness(t, nil)
	h.a.cfg.TaskHeartbeat = 2 * time.Second // as in production: a quarter of the timeout wins
	h.a.cfg.Checkpoints = slowStore{Store: h.store, delay: 2 * cancelTestHeartbeat}
	w := worker.New(c, workflows.NodeTaskQueue("n1"), worker.Options{MaxHeartbeatThrottleInterval: time.Second})
	w.RegisterActivityWithOptions(h.a.RunTask, activity.RegisterOptions{Name: workflows.ActivityRunTask})
	w.RegisterWorkflow(runThenCancel)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	script := `final() { d="$GANGWAY_CHECKPOINT_DIR/final"; mkdir "$d"; echo 23 > "$d/step"; ` +
		`touch "$d/COMPLETE"; exit 143; }; trap final TERM; ` + writePID + `while :; do sleep 0.02; done`
	ctx := t.Context()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "train-1", TaskQueue: workflows.NodeTaskQueue("n1")},
		runThenCancel, h.rank0(script, 0))
	if err != nil {
		t.Fatal(err)
	}
	h.waitPGID(t)
	if err := c.SignalWorkflow(ctx, "train-1", "", "cancel", nil); err != nil {
		t.Fatal(err)
	}
	var got workflows.RunTaskProgress
	if err := run.Get(ctx, &got); err != nil {
		t.Fatalf("workflow: %v", err)
	}
	latest, err := h.store.Latest(ctx, "train-1")
	if err != nil {
		t.Fatalf("no checkpoint saved: %v", err)
	}
	if got.Checkpoint.ID != latest.ID || got.Checkpoint.Step == nil || *got.Checkpoint.Step != 23 {
		t.Errorf("cancellation carried %+v, want checkpoint %s at step 23", got.Checkpoint, latest.ID)
	}
	tr := h.obs.all()
	if len(tr) != 1 || !tr[0].Final || tr[0].Duration < 2*cancelTestHeartbeat {
		t.Errorf("transfers %+v, want one final save longer than the heartbeat timeout", tr)
	}
}
