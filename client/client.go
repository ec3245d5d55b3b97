package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/workflows"
)

// View is the part of the Redis view the client reads (and, for cordon
// and drain, writes).
type View interface {
	FleetNodes(ctx context.Context) ([]gangway.Node, error)
	SetNodeState(ctx context.Context, nodeID, state string) error
	Allocations(ctx context.Context) ([]gangway.Assignment, error)
	Reason(ctx context.Context, jobID gangway.JobID) (string, error)
	Logs(ctx context.Context, jobID gangway.JobID, after string, block time.Duration) ([]capacity.LogLine, error)
}

// Errors callers can check with errors.Is.
var (
	ErrJobExists   = errors.New("job already exists")
	ErrJobNotFound = errors.New("job not found")
)

// Client submits and inspects jobs.
type Client struct {
	t    tclient.Client
	view View
}

// New returns a client over a Temporal client and the Redis view.
func New(t tclient.Client, v View) *Client { return &Client{t: t, view: v} }

// SubmitOptions tune a submission.
type SubmitOptions struct {
	// Timing overrides the workflow's timeouts (tests, slow clusters).
	Timing workflows.Timing
}

// Submit validates spec — on its own and against the registered fleet —
// and starts its workflow. Nothing is queued when validation fails. A job
// whose name is already taken returns ErrJobExists and changes nothing.
func (c *Client) Submit(ctx context.Context, spec gangway.JobSpec, o SubmitOptions) (gangway.JobID, error) {
	spec.Default()
	if err := spec.Validate(); err != nil {
		return "", err
	}
	fleet, err := c.view.FleetNodes(ctx)
	if err != nil {
		return "", fmt.Errorf("read fleet: %w", err)
	}
	fn := make([]gangway.FleetNode, 0, len(fleet))
	for _, n := range fleet {
		fn = append(fn, gangway.FleetNode{Model: n.Model(), Pool: n.Pool, GPUs: len(n.GPUs)})
	}
	if err := spec.ValidateFleet(fn); err != nil {
		return "", err
	}
	_, err = c.t.ExecuteWorkflow(ctx, tclient.StartWorkflowOptions{
		ID:                       spec.Name,
		TaskQueue:                workflows.TaskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		// Without this the SDK quietly returns the existing run.
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		Memo: map[string]any{
			workflows.MemoPhase: string(gangway.PhaseSubmitted),
			workflows.MemoTeam:  spec.Team,
			workflows.MemoGPUs:  spec.Gang.Replicas * spec.Gang.GPUsPerReplica,
		},
	}, workflows.WorkflowName, workflows.JobInput{Spec: spec, Timing: o.Timing})
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return "", fmt.Errorf("job %q: %w (a job's name is its ID; pick a new name)", spec.Name, ErrJobExists)
	}
	if err != nil {
		return "", fmt.Errorf("start job %q: %w", spec.Name, err)
	}
	return spec.Name, nil
}

// JobStatus is a job's workflow status plus, while it waits, the dispatch
// loop's reason.
type JobStatus struct {
	workflows.Status
	// Waiting is why the last dispatch cycle did not place the job.
	Waiting string `json:"waiting,omitempty"`
}

// Status returns the job's live status (a query) or, once finished, its
// result.
func (c *Client) Status(ctx context.Context, id gangway.JobID) (JobStatus, error) {
	desc, err := c.t.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return JobStatus{}, notFound(id, err)
	}
	var st JobStatus
	if desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		v, err := c.t.QueryWorkflow(ctx, id, "", workflows.QueryStatus)
		if err != nil {
			return JobStatus{}, fmt.Errorf("query job %s: %w", id, err)
		}
		if err := v.Get(&st.Status); err != nil {
			return JobStatus{}, fmt.Errorf("decode status of %s: %w", id, err)
		}
		if st.Phase == gangway.PhaseQueued || st.Phase == gangway.PhaseRequeued {
			st.Waiting, _ = c.view.Reason(ctx, id)
		}
		return st, nil
	}
	st.Status, err = c.Result(ctx, id)
	return st, err
}

// Result waits for the job to finish and returns its final status.
func (c *Client) Result(ctx context.Context, id gangway.JobID) (workflows.Status, error) {
	var st workflows.Status
	err := c.t.GetWorkflow(ctx, id, "").Get(ctx, &st)
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return st, notFound(id, err)
		}
		// Terminated, timed out or an invalid spec: report it as Failed.
		return workflows.Status{JobID: id, Phase: gangway.PhaseFailed, Reason: err.Error()}, nil
	}
	return st, nil
}

// Cancel asks the job's workflow to cancel; it frees the job's GPUs in
// whatever phase it is.
func (c *Client) Cancel(ctx context.Context, id gangway.JobID) error {
	if err := c.t.CancelWorkflow(ctx, id, ""); err != nil {
		return notFound(id, err)
	}
	return nil
}

// Summary is one row of List.
type Summary struct {
	JobID     gangway.JobID `json:"jobId"`
	Team      string        `json:"team"`
	Phase     gangway.Phase `json:"phase"`
	GPUs      int           `json:"gpus"`
	StartedAt time.Time     `json:"submittedAt"`
	ClosedAt  time.Time     `json:"closedAt,omitzero"`
}

// List returns jobs known to Temporal's visibility store, newest first.
func (c *Client) List(ctx context.Context) ([]Summary, error) {
	var out []Summary
	var token []byte
	dc := converter.GetDefaultDataConverter()
	for {
		resp, err := c.t.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query:         fmt.Sprintf("WorkflowType = '%s'", workflows.WorkflowName),
			NextPageToken: token,
		})
		if err != nil {
			return nil, fmt.Errorf("list jobs: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			s := Summary{JobID: e.GetExecution().GetWorkflowId(), StartedAt: e.GetStartTime().AsTime()}
			if e.GetCloseTime() != nil {
				s.ClosedAt = e.GetCloseTime().AsTime()
			}
			fields := e.GetMemo().GetFields()
			var phase string
			_ = dc.FromPayload(fields[workflows.MemoPhase], &phase)
			_ = dc.FromPayload(fields[workflows.MemoTeam], &s.Team)
			_ = dc.FromPayload(fields[workflows.MemoGPUs], &s.GPUs)
			s.Phase = gangway.Phase(phase)
			if e.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING &&
				e.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
				s.Phase = gangway.PhaseFailed // terminated, timed out, failed validation
			}
			out = append(out, s)
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			break
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StartedAt.After(out[j].StartedAt) })
	return out, nil
}

// Cordon stops new work from landing on a node; jobs on it keep running.
func (c *Client) Cordon(ctx context.Context, nodeID string) error {
	return c.view.SetNodeState(ctx, nodeID, gangway.NodeCordoned)
}

// Uncordon makes a cordoned node schedulable again.
func (c *Client) Uncordon(ctx context.Context, nodeID string) error {
	return c.view.SetNodeState(ctx, nodeID, gangway.NodeReady)
}

// Drain cordons a node and asks every job running on it to stop and
// requeue (no retry spent; it keeps its place in line). It returns the
// jobs asked.
func (c *Client) Drain(ctx context.Context, nodeID string) ([]gangway.JobID, error) {
	if err := c.Cordon(ctx, nodeID); err != nil {
		return nil, err
	}
	allocs, err := c.view.Allocations(ctx)
	if err != nil {
		return nil, fmt.Errorf("drain %s: %w", nodeID, err)
	}
	var asked []gangway.JobID
	for _, a := range allocs {
		if !slices.ContainsFunc(a.Members, func(m gangway.Member) bool { return m.NodeID == nodeID }) {
			continue
		}
		req := workflows.PreemptRequest{Attempt: a.Attempt, Reason: "node " + nodeID + " is being drained",
			Cause: workflows.CauseDrain, NodeID: nodeID}
		if err := c.t.SignalWorkflow(ctx, a.JobID, "", workflows.SignalPreempt, req); err != nil {
			var nf *serviceerror.NotFound
			if errors.As(err, &nf) {
				continue // finished meanwhile
			}
			return asked, fmt.Errorf("drain %s: stop job %s: %w", nodeID, a.JobID, err)
		}
		asked = append(asked, a.JobID)
	}
	return asked, nil
}

// Logs returns the job's output lines after the given stream ID ("" = from
// the start); block > 0 waits that long for new lines.
func (c *Client) Logs(ctx context.Context, id gangway.JobID, after string, block time.Duration) ([]capacity.LogLine, error) {
	return c.view.Logs(ctx, id, after, block)
}

func notFound(id gangway.JobID, err error) error {
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("job %q: %w", id, ErrJobNotFound)
	}
	return fmt.Errorf("job %q: %w", id, err)
}
