package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/accounting"
	"github.com/gangwayhq/gangway/workflows"
)

// ErrTypeInvalidUsage is the application error type RecordUsage fails with,
// non-retryable, when the ledger refuses the segment (no job or pool, end
// before start, no GPUs, a bad price or capacity type).
const ErrTypeInvalidUsage = "InvalidUsage"

// UsageLedger is the part of the usage ledger RecordUsage writes to.
// Record returns what of the segment is new to the ledger (ok false for
// nothing): all of it, or, for one recorded before (same job, attempt,
// pool and start) with an earlier end, the part after that end.
type UsageLedger interface {
	Record(ctx context.Context, seg gangway.UsageSegment) (added gangway.UsageSegment, ok bool, err error)
}

// UsageMetrics counts recorded usage.
type UsageMetrics interface {
	Segment(seg gangway.UsageSegment)
}

// Usage holds the dependencies of the RecordUsage activity. Metrics may be
// nil (no counters); Log may be nil (no logs).
type Usage struct {
	Ledger  UsageLedger
	Metrics UsageMetrics
	Log     *slog.Logger
}

// Register registers RecordUsage under its contract name.
func (u *Usage) Register(w worker.ActivityRegistry) {
	w.RegisterActivityWithOptions(u.RecordUsage, activity.RegisterOptions{Name: workflows.ActivityRecordUsage})
}

// RecordUsage adds one run segment to the ledger. It runs at least once
// and workflows replay, so the same segment may come many times, also with
// a later end (a workflow task run again): the ledger keeps the latest end,
// and the counters grow only by what the ledger says is new, so a retry
// never bills twice.
func (u *Usage) RecordUsage(ctx context.Context, in workflows.RecordUsageInput) error {
	seg := in.Segment
	if seg.CapacityType == "" {
		// Nodes describe on-prem capacity as "" (gangway.Node); the
		// ledger and the metrics name it.
		seg.CapacityType = gangway.CapacityOnPrem
	}
	added, ok, err := u.Ledger.Record(ctx, seg)
	if errors.Is(err, accounting.ErrInvalidSegment) {
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeInvalidUsage, err)
	}
	if err != nil {
		return fmt.Errorf("record usage of %s attempt %d: %w", seg.JobID, seg.Attempt, err)
	}
	if ok && u.Metrics != nil {
		u.Metrics.Segment(added)
	}
	if u.Log != nil {
		u.Log.Debug("usage recorded", "job_id", seg.JobID, "attempt", seg.Attempt, "pool", seg.Pool,
			"capacity_type", seg.CapacityType, "gpu_seconds", seg.GPUSeconds(), "dollars", seg.Dollars(), "new", ok)
	}
	return nil
}
