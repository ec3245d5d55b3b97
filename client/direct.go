package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// direct is the client inside Gangway's trust boundary: job workflows
// through Jobs, the fleet through View. The user API's server is one.
type direct struct {
	jobs Jobs
	view View
}

var _ backend = (*direct)(nil)

// Submit validates spec — on its own and, when the client has a View that
// answers, against the registered fleet and the cloud pools the servers
// publish (o.Warn hears when it does not) — and starts its workflow.
// Nothing is queued when validation fails. A job whose name is already taken returns
// ErrJobExists and changes nothing.
func (c *direct) submit(ctx context.Context, spec gangway.JobSpec, o SubmitOptions) (gangway.JobID, error) {
	spec.Default()
	if err := spec.Validate(o.Validate...); err != nil {
		return "", err
	}
	if err := c.checkFleet(ctx, spec); errors.Is(err, ErrUnavailable) {
		// The job's workflow, in Temporal, is what accepting it means;
		// the view only answers whether it could ever fit.
		if o.Warn != nil {
			o.Warn(fmt.Sprintf("job %s is not checked against the fleet (%v); it is submitted and waits until the view is back", spec.Name, err))
		}
	} else if err != nil {
		return "", err
	}
	err := reach(c.jobs.Start(ctx, spec, jobs.StartOptions{Timing: o.Timing, Limits: o.Limits}))
	if errors.Is(err, ErrJobExists) {
		return "", fmt.Errorf("%w (a job's name is its ID; pick a new name)", err)
	}
	if err != nil {
		return "", err
	}
	return spec.Name, nil
}

// checkFleet validates spec against the registered fleet and the cloud
// pools the servers publish; ErrUnavailable when the view does not
// answer, nil without a view.
func (c *direct) checkFleet(ctx context.Context, spec gangway.JobSpec) error {
	if c.view == nil {
		return nil
	}
	fleet, err := c.view.FleetNodes(ctx)
	if err != nil {
		return fmt.Errorf("read fleet: %w", reach(err))
	}
	offers, err := c.view.CloudOffers(ctx)
	if err != nil {
		return fmt.Errorf("read cloud offers: %w", reach(err))
	}
	// A cloud pool counts as its offer, whether or not instances of it
	// are up now: the answer must not depend on what happens to run.
	fn := gangway.FleetOfOffers(offers)
	for _, n := range fleet {
		if !slices.ContainsFunc(offers, func(o gangway.Offer) bool { return o.Pool == n.Pool }) {
			fn = append(fn, gangway.FleetOf([]gangway.Node{n})...)
		}
	}
	return spec.ValidateFleet(fn)
}

// Status returns the job's live status (a query) or, once finished, its
// result.
func (c *direct) status(ctx context.Context, id gangway.JobID) (JobStatus, error) {
	d, err := c.jobs.Describe(ctx, id)
	if err != nil {
		return JobStatus{}, notFound(id, err)
	}
	var st JobStatus
	if !d.Running {
		st.Status, err = c.result(ctx, id)
		return st, err
	}
	if st.Status, err = c.jobs.Query(ctx, id); err != nil {
		if timedOut(err) {
			// Temporal answered Describe: it is the workflow that did not.
			return JobStatus{}, unanswered(id)
		}
		return JobStatus{}, notFound(id, err)
	}
	if c.view != nil && (st.Phase == gangway.PhaseQueued || st.Phase == gangway.PhaseRequeued) {
		// The reason is a hint: a Redis hiccup must not hide the job.
		w, err := c.view.Waiting(ctx, id)
		if err := reach(err); errors.Is(err, ErrUnavailable) {
			st.Unavailable = append(st.Unavailable, err.Error()+"; why the job waits is not shown")
		}
		if err == nil && (w.Reason != "" || w.Detail != "") {
			st.Waiting = &w
		}
	}
	return st, nil
}

// Result waits for the job to finish and returns its final status. A job
// that ended without one (terminated, timed out, an invalid spec) is
// reported Failed, with the reason.
func (c *direct) result(ctx context.Context, id gangway.JobID) (workflows.Status, error) {
	st, err := c.jobs.Result(ctx, id)
	if err != nil {
		return st, notFound(id, err)
	}
	return st, nil
}

// Cancel asks the job's workflow to cancel; it frees the job's GPUs in
// whatever phase it is. A job that has already ended returns ErrJobEnded,
// naming how it ended; an unknown one ErrJobNotFound.
func (c *direct) cancel(ctx context.Context, id gangway.JobID) error {
	d, err := c.jobs.Describe(ctx, id)
	if err != nil {
		return notFound(id, err)
	}
	if !d.Running {
		return c.ended(ctx, id)
	}
	return notFound(id, c.jobs.Cancel(ctx, id))
}

// ended is ErrJobEnded for a job whose workflow has closed, with the
// phase it ended in.
func (c *direct) ended(ctx context.Context, id gangway.JobID) error {
	st, err := c.result(ctx, id)
	if err != nil {
		return err
	}
	return jobEndedError{id: id, phase: st.Phase}
}

// jobEndedError reads "job ID has already ended (Phase); nothing to
// cancel" and is ErrJobEnded.
type jobEndedError struct {
	id    gangway.JobID
	phase gangway.Phase
}

func (e jobEndedError) Error() string {
	return fmt.Sprintf("job %s has already ended (%s); nothing to cancel", e.id, e.phase)
}
func (e jobEndedError) Is(target error) bool { return target == ErrJobEnded }

// List returns jobs known to Temporal's visibility store, newest first.
func (c *direct) list(ctx context.Context) ([]Summary, error) {
	list, err := c.jobs.List(ctx)
	return list, reach(err)
}

// nodes is the view's nodes with their GPUs' health records, where the
// view keeps them.
func (c *direct) nodes(ctx context.Context) ([]Node, error) {
	if c.view == nil {
		return nil, fmt.Errorf("nodes: %w", ErrNoView)
	}
	list, err := c.view.Nodes(ctx)
	if err != nil {
		return nil, reach(err)
	}
	var health map[string]map[int]gangway.GPUHealth
	if h, ok := c.view.(healthView); ok {
		if health, err = h.AllGPUHealth(ctx); err != nil {
			return nil, reach(err)
		}
	}
	out := make([]Node, len(list))
	for i, n := range list {
		out[i] = Node{NodeStatus: n, GPUHealth: health[n.Node.ID]}
	}
	return out, nil
}

// healthView is a View that also keeps GPU health records (the Redis
// view does).
type healthView interface {
	AllGPUHealth(ctx context.Context) (map[string]map[int]gangway.GPUHealth, error)
}

func (c *direct) setNodeState(ctx context.Context, nodeID, state string) error {
	if c.view == nil {
		return fmt.Errorf("%s %s: %w", stateVerb(state), nodeID, ErrNoView)
	}
	return reach(c.view.SetNodeState(ctx, nodeID, state))
}

func (c *direct) removeNode(ctx context.Context, nodeID string) error {
	if c.view == nil {
		return fmt.Errorf("remove node %s: %w", nodeID, ErrNoView)
	}
	nodes, err := c.view.Nodes(ctx)
	if err != nil {
		return fmt.Errorf("remove node %s: %w", nodeID, reach(err))
	}
	for _, n := range nodes {
		if n.Node.ID != nodeID {
			continue
		}
		if n.State != gangway.NodeLost {
			return fmt.Errorf("%w: %s is %s, its agent heartbeating (last %s ago); stop the agent first, or it registers the node again",
				ErrNodeInUse, nodeID, n.State, n.HeartbeatAge.Round(time.Second))
		}
		if jobs := n.Jobs(); len(jobs) > 0 {
			return fmt.Errorf("%w: jobs %s hold GPUs of %s; drain it first", ErrNodeInUse, strings.Join(jobs, ", "), nodeID)
		}
	}
	return reach(c.view.RemoveNode(ctx, nodeID))
}

// Drain cordons a node and asks every job running on it to stop and
// requeue (no retry spent; it keeps its place in line). It returns the
// jobs asked.
func (c *direct) drain(ctx context.Context, nodeID string) ([]gangway.JobID, error) {
	if err := c.setNodeState(ctx, nodeID, gangway.NodeCordoned); err != nil {
		return nil, err
	}
	allocs, err := c.view.Allocations(ctx)
	if err != nil {
		return nil, fmt.Errorf("drain %s: %w", nodeID, reach(err))
	}
	var asked []gangway.JobID
	for _, a := range allocs {
		if !slices.ContainsFunc(a.Members, func(m gangway.Member) bool { return m.NodeID == nodeID }) {
			continue
		}
		req := workflows.PreemptRequest{Attempt: a.Attempt, Reason: "node " + nodeID + " is being drained",
			Cause: workflows.CauseDrain, NodeID: nodeID}
		err := c.jobs.SignalPreempt(ctx, a.JobID, req)
		if errors.Is(err, jobs.ErrJobGone) {
			continue // finished meanwhile
		}
		if err != nil {
			return asked, fmt.Errorf("drain %s: stop job %s: %w", nodeID, a.JobID, reach(err))
		}
		asked = append(asked, a.JobID)
	}
	return asked, nil
}

// Logs returns the job's output lines after the given stream ID ("" = from
// the start); block > 0 waits that long for new lines. A read from the
// start that finds no line checks the job exists: ErrJobNotFound if not.
func (c *direct) logs(ctx context.Context, id gangway.JobID, after string, block time.Duration) ([]gangway.LogLine, error) {
	if c.view == nil {
		return nil, fmt.Errorf("logs of %s: %w", id, ErrNoView)
	}
	lines, err := c.view.Logs(ctx, id, after, block)
	if err == nil && len(lines) == 0 && after == "" && c.jobs != nil {
		if _, derr := c.jobs.Describe(ctx, id); errors.Is(derr, jobs.ErrJobGone) {
			return nil, notFound(id, derr)
		}
	}
	return lines, reach(err)
}

// FollowLogs passes the job's output lines, from the start, to line. With
// follow it keeps waiting for new ones until the job has ended and its
// lines are read, or ctx ends (which is not an error); without, it returns
// after the lines there are.
func (c *direct) followLogs(ctx context.Context, id gangway.JobID, follow bool, line func(gangway.LogLine)) error {
	after := ""
	for {
		// The first read does not block: a job with no output yet
		// returns at once, and its status is checked below.
		block := time.Duration(0)
		if follow && after != "" {
			block = 2 * time.Second
		}
		lines, err := c.logs(ctx, id, after, block)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		for _, l := range lines {
			line(l)
			after = l.ID
		}
		if !follow {
			return nil
		}
		if len(lines) > 0 {
			continue
		}
		d, err := c.jobs.Describe(ctx, id)
		if errors.Is(err, jobs.ErrJobGone) {
			return notFound(id, err)
		}
		if err == nil && !d.Running {
			return nil
		}
		if after == "" {
			// Nothing to block on yet.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
		}
	}
}

// notFound turns "no such workflow" into ErrJobNotFound, naming the job.
func notFound(id gangway.JobID, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, jobs.ErrJobGone) {
		return noJobError(id)
	}
	return fmt.Errorf("job %q: %w", id, reach(err))
}

// noJobError reads `no job named "ID"` and is ErrJobNotFound.
type noJobError gangway.JobID

func (e noJobError) Error() string        { return fmt.Sprintf("no job named %q", string(e)) }
func (e noJobError) Is(target error) bool { return target == ErrJobNotFound }
