package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/workflows"
)

// Capacity is the part of the Redis view these activities use.
type Capacity interface {
	Enqueue(ctx context.Context, e gangway.QueueEntry) (bool, error)
	Dequeue(ctx context.Context, jobID gangway.JobID) error
	Release(ctx context.Context, jobID gangway.JobID, attempt int) (int, error)
	ForgetHeartbeat(ctx context.Context, nodeID string) error
	// Allocation is the job's committed assignment, capacity.ErrNotFound
	// when it has none.
	Allocation(ctx context.Context, jobID gangway.JobID) (gangway.Assignment, error)
}

// Activities holds the dependencies of the server-side activities.
type Activities struct {
	Capacity Capacity
	Log      *slog.Logger
}

// Register registers every server-side activity under its contract name.
func (a *Activities) Register(w worker.ActivityRegistry) {
	w.RegisterActivityWithOptions(a.Enqueue, activity.RegisterOptions{Name: workflows.ActivityEnqueue})
	w.RegisterActivityWithOptions(a.Dequeue, activity.RegisterOptions{Name: workflows.ActivityDequeue})
	w.RegisterActivityWithOptions(a.Release, activity.RegisterOptions{Name: workflows.ActivityRelease})
	w.RegisterActivityWithOptions(a.CheckPlacement, activity.RegisterOptions{Name: workflows.ActivityCheckPlacement})
}

// CheckPlacement tells the workflow whether a placed signal is the
// allocation committed for its job: same attempt, same members (nodes,
// GPUs, shares, addresses, task queues, prices). Anything else is forged
// or stale, and the workflow ignores it.
func (a *Activities) CheckPlacement(ctx context.Context, in workflows.CheckPlacementInput) (workflows.CheckPlacementResult, error) {
	got := in.Assignment
	want, err := a.Capacity.Allocation(ctx, got.JobID)
	switch {
	case errors.Is(err, capacity.ErrNotFound):
		return a.mismatch(got, "no allocation is committed for the job"), nil
	case err != nil:
		return workflows.CheckPlacementResult{}, fmt.Errorf("check placement of %s: %w", got.JobID, err)
	case want.Attempt != got.Attempt:
		return a.mismatch(got, fmt.Sprintf("the committed allocation is for attempt %d", want.Attempt)), nil
	case !reflect.DeepEqual(want.Members, got.Members):
		return a.mismatch(got, "the committed allocation is "+want.Where()), nil
	}
	return workflows.CheckPlacementResult{Committed: true}, nil
}

func (a *Activities) mismatch(got gangway.Assignment, why string) workflows.CheckPlacementResult {
	a.Log.Warn("placed signal does not match the committed allocation; the workflow ignores it",
		"job_id", got.JobID, "attempt", got.Attempt, "signalled", got.Where(), "reason", why)
	return workflows.CheckPlacementResult{Reason: why}
}

// Enqueue puts the job in the Redis queue. A retry after the dispatch loop
// already placed this attempt is a no-op (the view refuses it).
func (a *Activities) Enqueue(ctx context.Context, in workflows.EnqueueInput) error {
	added, err := a.Capacity.Enqueue(ctx, in.Entry)
	if err != nil {
		return fmt.Errorf("enqueue %s: %w", in.Entry.JobID, err)
	}
	a.Log.Debug("enqueued", "job_id", in.Entry.JobID, "attempt", in.Entry.Attempt, "added", added)
	return nil
}

// Dequeue removes the job from the queue.
func (a *Activities) Dequeue(ctx context.Context, in workflows.DequeueInput) error {
	if err := a.Capacity.Dequeue(ctx, in.JobID); err != nil {
		return fmt.Errorf("dequeue %s: %w", in.JobID, err)
	}
	return nil
}

// Release frees the GPUs the job holds for attempts up to in.Attempt, after
// making the nodes it found lost (or whose agent shut down) look silent,
// so the requeued job is not placed there before the node heartbeats
// again.
func (a *Activities) Release(ctx context.Context, in workflows.ReleaseInput) (int, error) {
	for _, n := range in.LostNodes {
		if err := a.Capacity.ForgetHeartbeat(ctx, n); err != nil {
			return 0, fmt.Errorf("release %s attempt %d: %w", in.JobID, in.Attempt, err)
		}
		a.Log.Info("node reported lost or shutting down: no new work until it heartbeats again", "node", n, "job_id", in.JobID, "attempt", in.Attempt)
	}
	n, err := a.Capacity.Release(ctx, in.JobID, in.Attempt)
	if err != nil {
		return 0, fmt.Errorf("release %s attempt %d: %w", in.JobID, in.Attempt, err)
	}
	a.Log.Debug("released", "job_id", in.JobID, "attempt", in.Attempt, "gpus", n)
	return n, nil
}
