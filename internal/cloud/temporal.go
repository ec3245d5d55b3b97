package cloud

import (
	"context"
	"errors"
	"fmt"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// TemporalJobs answers Jobs from each job's workflow (workflow ID = job
// ID), through the one door to job workflows: closed or running from
// Describe, the current attempt from the status query.
type TemporalJobs struct{ Jobs *jobs.Jobs }

var _ Jobs = TemporalJobs{}

// Attempt implements Jobs.
func (t TemporalJobs) Attempt(ctx context.Context, jobID gangway.JobID) (int, bool, error) {
	d, err := t.Jobs.Describe(ctx, jobID)
	if errors.Is(err, jobs.ErrJobGone) {
		return 0, false, fmt.Errorf("%w: %w", ErrUnknownJob, err)
	}
	if err != nil {
		return 0, false, err
	}
	if !d.Running {
		return 0, false, nil
	}
	st, err := t.Jobs.Query(ctx, jobID)
	if err != nil {
		return 0, false, err
	}
	return st.Attempt, true, nil
}
