package cloud

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/workflows"
)

// TemporalJobs answers Jobs from each job's workflow (workflow ID = job
// ID): closed or running from DescribeWorkflowExecution, the current
// attempt from the status query.
type TemporalJobs struct{ Client client.Client }

var _ Jobs = TemporalJobs{}

// Attempt implements Jobs.
func (t TemporalJobs) Attempt(ctx context.Context, jobID gangway.JobID) (int, bool, error) {
	desc, err := t.Client.DescribeWorkflowExecution(ctx, jobID, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return 0, false, fmt.Errorf("job %s: %w", jobID, ErrUnknownJob)
	}
	if err != nil {
		return 0, false, fmt.Errorf("describe job %s: %w", jobID, err)
	}
	if desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return 0, false, nil
	}
	v, err := t.Client.QueryWorkflow(ctx, jobID, "", workflows.QueryStatus)
	if err != nil {
		return 0, false, fmt.Errorf("query job %s: %w", jobID, err)
	}
	var st workflows.Status
	if err := v.Get(&st); err != nil {
		return 0, false, fmt.Errorf("decode status of job %s: %w", jobID, err)
	}
	return st.Attempt, true, nil
}
