package dispatch

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

// TemporalWorkflows reaches job workflows through a Temporal client.
type TemporalWorkflows struct{ Client client.Client }

var _ Workflows = TemporalWorkflows{}

// SignalPlaced implements Workflows.
func (t TemporalWorkflows) SignalPlaced(ctx context.Context, a gangway.Assignment) error {
	err := t.Client.SignalWorkflow(ctx, a.JobID, "", workflows.SignalPlaced, a)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("signal %s: %w", a.JobID, ErrJobGone)
	}
	if err != nil {
		return fmt.Errorf("signal %s: %w", a.JobID, err)
	}
	return nil
}

// SignalPreempt implements Workflows.
func (t TemporalWorkflows) SignalPreempt(ctx context.Context, jobID gangway.JobID, req workflows.PreemptRequest) error {
	return t.signal(ctx, jobID, workflows.SignalPreempt, req)
}

func (t TemporalWorkflows) signal(ctx context.Context, jobID gangway.JobID, name string, arg any) error {
	err := t.Client.SignalWorkflow(ctx, jobID, "", name, arg)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("signal %s to %s: %w", name, jobID, ErrJobGone)
	}
	if err != nil {
		return fmt.Errorf("signal %s to %s: %w", name, jobID, err)
	}
	return nil
}

// Running implements Workflows.
func (t TemporalWorkflows) Running(ctx context.Context, jobID gangway.JobID) (bool, error) {
	resp, err := t.Client.DescribeWorkflowExecution(ctx, jobID, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("describe %s: %w", jobID, err)
	}
	return resp.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
}
