package dispatch

import "github.com/gangwayhq/gangway/workflows/jobs"

// The loop reaches job workflows through the one door to them: a
// *jobs.Jobs over a Temporal client is the production Workflows.
var _ Workflows = (*jobs.Jobs)(nil)
