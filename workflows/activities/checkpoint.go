package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"

	"github.com/gangwayhq/gangway/checkpoint"
	"github.com/gangwayhq/gangway/workflows"
)

// CheckpointStore is the part of checkpoint.Store the server reads.
type CheckpointStore interface {
	Latest(ctx context.Context, job string) (checkpoint.Manifest, error)
}

// Checkpoints answers the workflow's questions about a job's checkpoints.
type Checkpoints struct {
	Store CheckpointStore
}

// Register registers LatestCheckpoint.
func (c *Checkpoints) Register(w worker.ActivityRegistry) {
	w.RegisterActivityWithOptions(c.LatestCheckpoint, activity.RegisterOptions{Name: workflows.ActivityLatestCheckpoint})
}

// LatestCheckpoint returns the job's newest committed checkpoint, or a
// reference with an empty ID when it has none (or no store is configured).
func (c *Checkpoints) LatestCheckpoint(ctx context.Context, in workflows.LatestCheckpointInput) (workflows.CheckpointRef, error) {
	if c.Store == nil {
		return workflows.CheckpointRef{}, nil
	}
	m, err := c.Store.Latest(ctx, in.JobID)
	switch {
	case errors.Is(err, checkpoint.ErrNotFound):
		return workflows.CheckpointRef{}, nil
	case err != nil:
		return workflows.CheckpointRef{}, fmt.Errorf("latest checkpoint of %s: %w", in.JobID, err)
	}
	return RefOf(m), nil
}

// RefOf is the reference to a checkpoint the workflow keeps; its At is
// when the state was captured, from which the work since it counts.
func RefOf(m checkpoint.Manifest) workflows.CheckpointRef {
	return workflows.CheckpointRef{ID: m.ID, Step: m.Step, At: m.Captured(), Bytes: m.TotalBytes}
}
