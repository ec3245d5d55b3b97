package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"golang.org/x/sync/errgroup"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/workflows"
)

// Errors callers check with errors.Is.
var (
	// ErrJobGone: the job's workflow is not running — it closed, or no
	// workflow with that ID exists (never started, or past retention).
	// Signals and queries to such a job return it; Describe returns it
	// only when no workflow exists.
	ErrJobGone = errors.New("job workflow is not running")
	// ErrJobExists: Start found a workflow with the job's ID (a job's name
	// is its ID, and IDs are never reused).
	ErrJobExists = errors.New("job already exists")
)

// Jobs reaches job workflows through a Temporal client. It is safe for
// concurrent use; it does not own the client (Close it yourself).
type Jobs struct {
	c client.Client
	// noSearch: the namespace refused Gangway's search attributes (they
	// are not registered), so jobs start without them.
	noSearch atomic.Bool
}

// New returns the door over c.
func New(c client.Client) *Jobs { return &Jobs{c: c} }

// StartOptions tune Start.
type StartOptions struct {
	// Timing overrides the workflow's timeouts (tests, slow clusters).
	Timing workflows.Timing
	// Limits overrides the workflow's history and status bounds (tests).
	Limits workflows.Limits
}

// Start starts spec's JobWorkflow with workflow ID = spec.Name. It does
// not validate spec (the workflow rejects a bad one; callers validate
// first to fail early). A job whose ID is taken returns ErrJobExists and
// changes nothing.
//
// Jobs start with Gangway's search attributes (workflows.SearchAttributes)
// where the namespace has them registered; where it refuses them, this
// and later jobs start without (the workflow then sets none).
func (j *Jobs) Start(ctx context.Context, spec gangway.JobSpec, o StartOptions) error {
	opts := client.StartWorkflowOptions{
		ID:                       spec.Name,
		TaskQueue:                workflows.TaskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		// Without this the SDK quietly returns the existing run.
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		// Where this door's client also runs the job worker (the
		// server's user API), the first workflow task comes back with
		// the start instead of through matching; elsewhere the SDK
		// starts as usual.
		EnableEagerStart: true,
		Memo: map[string]any{
			workflows.MemoPhase: string(gangway.PhaseSubmitted),
			workflows.MemoTeam:  spec.Team,
			workflows.MemoGPUs:  spec.Gang.Replicas * spec.Gang.GPUsPerReplica,
			// Each run after a continue-as-new has its own start time;
			// the memo, which every run inherits, keeps the submit time.
			workflows.MemoSubmitted: time.Now().UTC(),
		},
	}
	in := workflows.JobInput{Spec: spec, Timing: o.Timing, Limits: o.Limits}
	var err error
	if !j.noSearch.Load() {
		withSearch := opts
		withSearch.TypedSearchAttributes = workflows.StartSearchAttributes(spec)
		_, err = j.c.ExecuteWorkflow(ctx, withSearch, workflows.WorkflowName, in)
		var invalid *serviceerror.InvalidArgument
		if errors.As(err, &invalid) && strings.Contains(strings.ToLower(invalid.Error()), "search attribute") {
			j.noSearch.Store(true)
		}
	}
	if j.noSearch.Load() {
		_, err = j.c.ExecuteWorkflow(ctx, opts, workflows.WorkflowName, in)
	}
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return fmt.Errorf("start job %s: %w", spec.Name, ErrJobExists)
	}
	if err != nil {
		return fmt.Errorf("start job %s: %w", spec.Name, err)
	}
	return nil
}

// SignalPlaced delivers the dispatch loop's assignment; ErrJobGone if the
// workflow is not running.
func (j *Jobs) SignalPlaced(ctx context.Context, a gangway.Assignment) error {
	return j.signal(ctx, a.JobID, workflows.SignalPlaced, a)
}

// SignalPreempt asks a running job to stop and requeue; ErrJobGone if the
// workflow is not running.
func (j *Jobs) SignalPreempt(ctx context.Context, id gangway.JobID, req workflows.PreemptRequest) error {
	return j.signal(ctx, id, workflows.SignalPreempt, req)
}

// SignalBurst tells a queued job to run on rented instances; ErrJobGone if
// the workflow is not running.
func (j *Jobs) SignalBurst(ctx context.Context, id gangway.JobID, req workflows.BurstRequest) error {
	return j.signal(ctx, id, workflows.SignalBurst, req)
}

func (j *Jobs) signal(ctx context.Context, id gangway.JobID, name string, arg any) error {
	if err := j.c.SignalWorkflow(ctx, id, "", name, arg); err != nil {
		return fmt.Errorf("signal %s to job %s: %w", name, id, gone(err))
	}
	return nil
}

// Description is where a job's workflow stands.
type Description struct {
	// Running is true until the workflow closes.
	Running bool
	// Closed is how it closed ("Completed", "Failed", "Canceled",
	// "Terminated", "TimedOut", "ContinuedAsNew"); "" while running.
	Closed    string
	StartedAt time.Time
	ClosedAt  time.Time // zero while running
	// Team is the team the job was submitted for (its memo).
	Team string
}

// Describe reports whether the job's workflow runs and, if not, how it
// closed. It returns ErrJobGone only when no such workflow exists, so a
// caller can tell a finished job from an unknown one.
func (j *Jobs) Describe(ctx context.Context, id gangway.JobID) (Description, error) {
	resp, err := j.c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return Description{}, fmt.Errorf("describe job %s: %w", id, gone(err))
	}
	info := resp.GetWorkflowExecutionInfo()
	d := Description{Running: info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}
	if p := info.GetMemo().GetFields()[workflows.MemoTeam]; p != nil {
		_ = converter.GetDefaultDataConverter().FromPayload(p, &d.Team)
	}
	if info.GetStartTime() != nil {
		d.StartedAt = info.GetStartTime().AsTime()
	}
	if !d.Running {
		d.Closed = info.GetStatus().String()
		if info.GetCloseTime() != nil {
			d.ClosedAt = info.GetCloseTime().AsTime()
		}
	}
	return d, nil
}

// Running reports whether the job's workflow is still running; a job
// with no workflow is not running (false, nil).
func (j *Jobs) Running(ctx context.Context, id gangway.JobID) (bool, error) {
	d, err := j.Describe(ctx, id)
	if errors.Is(err, ErrJobGone) {
		return false, nil
	}
	return d.Running, err
}

// Query returns the job's live status (the workflow's status query);
// ErrJobGone if no such workflow exists.
func (j *Jobs) Query(ctx context.Context, id gangway.JobID) (workflows.Status, error) {
	var st workflows.Status
	v, err := j.c.QueryWorkflow(ctx, id, "", workflows.QueryStatus)
	if err != nil {
		return st, fmt.Errorf("query job %s: %w", id, gone(err))
	}
	if err := v.Get(&st); err != nil {
		return st, fmt.Errorf("decode status of job %s: %w", id, err)
	}
	return st, nil
}

// Result waits for the job to finish and returns its final status: the
// workflow's result for a job that Succeeded, the details of the error it
// failed or was cancelled with for one that ended Failed or Cancelled
// (workflows.StatusFromError). A workflow that ended without a status
// (terminated, timed out, an invalid spec) is reported as Failed with
// Temporal's error as the reason; ErrJobGone if no such workflow exists.
func (j *Jobs) Result(ctx context.Context, id gangway.JobID) (workflows.Status, error) {
	var st workflows.Status
	err := j.c.GetWorkflow(ctx, id, "").Get(ctx, &st)
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return st, fmt.Errorf("result of job %s: %w", id, ErrJobGone)
		}
		if ctx.Err() != nil {
			return st, fmt.Errorf("result of job %s: %w", id, ctx.Err())
		}
		// A job that ended Failed or Cancelled closes its workflow so,
		// with its Status as the error's details.
		if st, ok := workflows.StatusFromError(err); ok {
			return st, nil
		}
		return workflows.Status{JobID: id, Phase: gangway.PhaseFailed, Reason: err.Error()}, nil
	}
	return st, nil
}

// Cancel asks the job's workflow to cancel (it frees the job's GPUs in
// whatever phase it is). Cancelling a finished job changes nothing;
// ErrJobGone if no such workflow exists.
func (j *Jobs) Cancel(ctx context.Context, id gangway.JobID) error {
	if err := j.c.CancelWorkflow(ctx, id, ""); err != nil {
		return fmt.Errorf("cancel job %s: %w", id, gone(err))
	}
	return nil
}

// Summary is one job as Temporal's visibility store lists it.
type Summary struct {
	JobID gangway.JobID `json:"jobId"`
	Team  string        `json:"team"`
	// Phase is the phase the workflow last wrote to its GangwayPhase
	// search attribute or, without one, its memo; Failed for a workflow
	// that closed other than by completing.
	Phase     gangway.Phase `json:"phase"`
	GPUs      int           `json:"gpus"`
	StartedAt time.Time     `json:"submittedAt"`
	ClosedAt  time.Time     `json:"closedAt,omitzero"` // zero while running
}

// List returns every job Temporal's visibility store knows, newest first:
// one entry per job, from its current or last workflow run (a job that
// continued as new has a run per stretch of attempts).
func (j *Jobs) List(ctx context.Context) ([]Summary, error) {
	var out []Summary
	var token []byte
	dc := converter.GetDefaultDataConverter()
	for {
		resp, err := j.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query:         fmt.Sprintf("WorkflowType = '%s'", workflows.WorkflowName),
			NextPageToken: token,
		})
		if err != nil {
			return nil, fmt.Errorf("list jobs: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			if e.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW {
				continue
			}
			s := Summary{JobID: e.GetExecution().GetWorkflowId(), StartedAt: e.GetStartTime().AsTime()}
			if e.GetCloseTime() != nil {
				s.ClosedAt = e.GetCloseTime().AsTime()
			}
			fields := e.GetMemo().GetFields()
			if p := fields[workflows.MemoSubmitted]; p != nil {
				var at time.Time
				if dc.FromPayload(p, &at) == nil && !at.IsZero() {
					s.StartedAt = at
				}
			}
			// A run keeps its phase in GangwayPhase where it has search
			// attributes (and its memo's stays at the first one), else in
			// its memo.
			var phase string
			if p := e.GetSearchAttributes().GetIndexedFields()[workflows.SearchPhase.GetName()]; p == nil || dc.FromPayload(p, &phase) != nil {
				_ = dc.FromPayload(fields[workflows.MemoPhase], &phase)
			}
			_ = dc.FromPayload(fields[workflows.MemoTeam], &s.Team)
			_ = dc.FromPayload(fields[workflows.MemoGPUs], &s.GPUs)
			s.Phase = gangway.Phase(phase)
			// A job that ended Failed or Cancelled closes its workflow
			// failed or cancelled, its memo at the final phase; a workflow
			// that closed otherwise (terminated, timed out, an invalid
			// spec) left its memo short of one.
			if e.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING &&
				e.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED && !s.Phase.Terminal() {
				s.Phase = gangway.PhaseFailed
			}
			out = append(out, s)
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			break
		}
	}
	slices.SortStableFunc(out, func(a, b Summary) int { return b.StartedAt.Compare(a.StartedAt) })
	return out, nil
}

// gone maps Temporal's "no such (running) workflow" to ErrJobGone, keeping
// Temporal's message; other errors pass through.
func gone(err error) error {
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("%w: %s", ErrJobGone, nf.Error())
	}
	return err
}

// Holdings asks every running job workflow what it holds in the Redis view
// (workflows.QueryView), for a rebuild of a lost view: the states of those
// that answered, and the IDs of those that did not (their worker is down,
// or the query timed out). Jobs that closed meanwhile are neither.
func (j *Jobs) Holdings(ctx context.Context) ([]workflows.ViewState, []gangway.JobID, error) {
	var ids []gangway.JobID
	var token []byte
	for {
		resp, err := j.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query:         fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", workflows.WorkflowName),
			NextPageToken: token,
		})
		if err != nil {
			return nil, nil, fmt.Errorf("list running jobs: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			ids = append(ids, e.GetExecution().GetWorkflowId())
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	states := make([]*workflows.ViewState, len(ids))
	failed := make([]bool, len(ids))
	var g errgroup.Group
	g.SetLimit(holdingsParallelism)
	for i, id := range ids {
		g.Go(func() error {
			qctx, cancel := context.WithTimeout(ctx, holdingsTimeout)
			defer cancel()
			v, err := j.c.QueryWorkflow(qctx, id, "", workflows.QueryView)
			var st workflows.ViewState
			if err == nil {
				err = v.Get(&st)
			}
			switch {
			case errors.Is(gone(err), ErrJobGone):
			case err != nil:
				failed[i] = true
			default:
				states[i] = &st
			}
			return nil
		})
	}
	_ = g.Wait()
	var out []workflows.ViewState
	var missing []gangway.JobID
	for i, id := range ids {
		switch {
		case failed[i]:
			missing = append(missing, id)
		case states[i] != nil:
			out = append(out, *states[i])
		}
	}
	return out, missing, nil
}

// holdingsParallelism bounds the queries Holdings has in flight;
// holdingsTimeout bounds each.
const (
	holdingsParallelism = 16
	holdingsTimeout     = 10 * time.Second
)
