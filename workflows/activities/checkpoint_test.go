package activities

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gangwayhq/gangway/checkpoint"
	"github.com/gangwayhq/gangway/workflows"
)

type fakeStore map[string]checkpoint.Manifest

func (f fakeStore) Latest(_ context.Context, job string) (checkpoint.Manifest, error) {
	if m, ok := f[job]; ok {
		return m, nil
	}
	if job == "broken" {
		return checkpoint.Manifest{}, fmt.Errorf("s3 unreachable")
	}
	return checkpoint.Manifest{}, fmt.Errorf("latest %s: %w", job, checkpoint.ErrNotFound)
}

func TestLatestCheckpoint(t *testing.T) {
	step := int64(7)
	at := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	c := &Checkpoints{Store: fakeStore{"j": {ID: "ck", Step: &step, Created: at, TotalBytes: 10}}}
	ctx := context.Background()
	got, err := c.LatestCheckpoint(ctx, workflows.LatestCheckpointInput{JobID: "j"})
	if err != nil || got.ID != "ck" || *got.Step != 7 || !got.At.Equal(at) || got.Bytes != 10 {
		t.Errorf("latest of j = %+v, %v", got, err)
	}
	if got, err := c.LatestCheckpoint(ctx, workflows.LatestCheckpointInput{JobID: "none"}); err != nil || got.ID != "" {
		t.Errorf("latest of a job without checkpoints = %+v, %v; want empty, nil", got, err)
	}
	if _, err := c.LatestCheckpoint(ctx, workflows.LatestCheckpointInput{JobID: "broken"}); err == nil {
		t.Error("a store error was swallowed")
	}
	if got, err := (&Checkpoints{}).LatestCheckpoint(ctx, workflows.LatestCheckpointInput{JobID: "j"}); err != nil || got.ID != "" {
		t.Errorf("without a store = %+v, %v; want empty", got, err)
	}
}
