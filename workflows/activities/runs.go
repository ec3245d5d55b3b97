package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/workflows"
)

// RunMetrics is the part of the metrics RecordRun feeds.
type RunMetrics interface {
	RunEnded(cause, team, pool string, capacityType gangway.CapacityType, lostGPUSeconds float64, stop time.Duration)
	Recovered(cause string, d time.Duration)
}

// Runs turns the workflow's run reports into metrics.
type Runs struct {
	Metrics RunMetrics
}

// Register registers RecordRun.
func (r *Runs) Register(w worker.ActivityRegistry) {
	w.RegisterActivityWithOptions(r.RecordRun, activity.RegisterOptions{Name: workflows.ActivityRecordRun})
}

// RecordRun records a run's end (cause, pool, lost work, how long the stop
// took) or a job's recovery. A retried report may count twice; these are
// rates and distributions, not the bill.
func (r *Runs) RecordRun(_ context.Context, in workflows.RecordRunInput) error {
	if in.Ended == nil {
		if in.RecoveredCause != "" && in.RecoveredAfter >= 0 {
			r.Metrics.Recovered(in.RecoveredCause, in.RecoveredAfter)
		}
		return nil
	}
	e := in.Ended
	var stop time.Duration
	if !e.StopRequestedAt.IsZero() && !e.EndedAt.Before(e.StopRequestedAt) {
		stop = e.EndedAt.Sub(e.StopRequestedAt)
	}
	r.Metrics.RunEnded(e.Ended, in.Team, e.Pool, e.CapacityType, e.LostGPUSeconds, stop)
	return nil
}
