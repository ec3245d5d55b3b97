package client

import (
	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// JobStatus is a job's workflow status plus, while it waits, the dispatch
// loop's reason.
type JobStatus struct {
	workflows.Status
	// Waiting is why the last dispatch cycle did not place the job; nil
	// when it is not waiting, no cycle has considered it yet, or the
	// client has no View.
	Waiting *gangway.Waiting `json:"waiting,omitempty"`
}

// Summary is one row of List: the job workflows' own summary.
type Summary = jobs.Summary
