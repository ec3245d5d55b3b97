package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	tclient "go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// Errors callers can check with errors.Is.
var (
	// ErrJobExists is jobs.ErrJobExists: a job's name is its ID, and IDs
	// are never reused.
	ErrJobExists = jobs.ErrJobExists
	// ErrJobNotFound: no job with that ID exists. The error that wraps it
	// reads `no job named "ID"`.
	ErrJobNotFound = errors.New("job not found")
	// ErrJobEnded: the job has already ended, so there is nothing to
	// cancel. The error that wraps it names the job and its end phase.
	ErrJobEnded = errors.New("job has already ended")
	// ErrNoView: the call needs the fleet view (Options.View), and the
	// client has none.
	ErrNoView = errors.New("client has no fleet view")
)

// Client submits and inspects jobs.
type Client struct {
	jobs  Jobs
	view  View
	close func()
}

// New returns a client over job workflows and the fleet view. view may be
// nil: see Options.View.
func New(j Jobs, view View) *Client { return &Client{jobs: j, view: view, close: func() {}} }

// Options say where Dial finds Gangway.
type Options struct {
	// TemporalHostPort is the Temporal frontend, e.g. "127.0.0.1:7233".
	TemporalHostPort string
	// Namespace is the Temporal namespace the jobs run in ("default" if
	// empty).
	Namespace string
	// TLS, when set, is used for the Temporal connection.
	TLS *tls.Config
	// View is the fleet view. Without one the client still submits
	// (validating the spec, but not against the fleet), follows jobs
	// through Temporal, lists and cancels them; Status carries no waiting
	// reason, and Nodes, Logs, Cordon, Uncordon and Drain return ErrNoView.
	View View
	// Log receives the Temporal client's log lines (default: none).
	Log *slog.Logger
}

// Dial connects to Temporal and returns a client; Close releases the
// connection.
func Dial(ctx context.Context, o Options) (*Client, error) {
	if o.TemporalHostPort == "" {
		return nil, errors.New("client: Options.TemporalHostPort is empty")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	t, err := tclient.DialContext(ctx, tclient.Options{
		HostPort:          o.TemporalHostPort,
		Namespace:         o.Namespace,
		ConnectionOptions: tclient.ConnectionOptions{TLS: o.TLS},
		Logger:            tlog.NewStructuredLogger(o.Log),
	})
	if err != nil {
		return nil, fmt.Errorf("dial temporal %s: %w", o.TemporalHostPort, err)
	}
	c := New(jobs.New(t), o.View)
	c.close = t.Close
	return c, nil
}

// Close releases what Dial opened; a client from New owns nothing.
func (c *Client) Close() { c.close() }

// SubmitOptions tune a submission.
type SubmitOptions struct {
	// Timing overrides the workflow's timeouts (tests, slow clusters).
	Timing workflows.Timing
	// Validate relaxes the spec's validation as the server's config says
	// (gangway.AllowEnv); none is the strict default.
	Validate []gangway.ValidateOption
}

// Submit validates spec — on its own and, when the client has a View,
// against the registered fleet and the cloud pools the servers publish —
// and starts its workflow. Nothing is
// queued when validation fails. A job whose name is already taken returns
// ErrJobExists and changes nothing.
func (c *Client) Submit(ctx context.Context, spec gangway.JobSpec, o SubmitOptions) (gangway.JobID, error) {
	spec.Default()
	if err := spec.Validate(o.Validate...); err != nil {
		return "", err
	}
	if c.view != nil {
		fleet, err := c.view.FleetNodes(ctx)
		if err != nil {
			return "", fmt.Errorf("read fleet: %w", err)
		}
		offers, err := c.view.CloudOffers(ctx)
		if err != nil {
			return "", fmt.Errorf("read cloud offers: %w", err)
		}
		// A cloud pool counts as its offer, whether or not instances of it
		// are up now: the answer must not depend on what happens to run.
		fn := gangway.FleetOfOffers(offers)
		for _, n := range fleet {
			if !slices.ContainsFunc(offers, func(o gangway.Offer) bool { return o.Pool == n.Pool }) {
				fn = append(fn, gangway.FleetOf([]gangway.Node{n})...)
			}
		}
		if err := spec.ValidateFleet(fn); err != nil {
			return "", err
		}
	}
	err := c.jobs.Start(ctx, spec, jobs.StartOptions{Timing: o.Timing})
	if errors.Is(err, ErrJobExists) {
		return "", fmt.Errorf("%w (a job's name is its ID; pick a new name)", err)
	}
	if err != nil {
		return "", err
	}
	return spec.Name, nil
}

// Status returns the job's live status (a query) or, once finished, its
// result.
func (c *Client) Status(ctx context.Context, id gangway.JobID) (JobStatus, error) {
	d, err := c.jobs.Describe(ctx, id)
	if err != nil {
		return JobStatus{}, notFound(id, err)
	}
	var st JobStatus
	if !d.Running {
		st.Status, err = c.Result(ctx, id)
		return st, err
	}
	if st.Status, err = c.jobs.Query(ctx, id); err != nil {
		return JobStatus{}, notFound(id, err)
	}
	if c.view != nil && (st.Phase == gangway.PhaseQueued || st.Phase == gangway.PhaseRequeued) {
		// The reason is a hint: a Redis hiccup must not hide the job.
		if w, err := c.view.Waiting(ctx, id); err == nil && (w.Reason != "" || w.Detail != "") {
			st.Waiting = &w
		}
	}
	return st, nil
}

// Result waits for the job to finish and returns its final status. A job
// that ended without one (terminated, timed out, an invalid spec) is
// reported Failed, with the reason.
func (c *Client) Result(ctx context.Context, id gangway.JobID) (workflows.Status, error) {
	st, err := c.jobs.Result(ctx, id)
	if err != nil {
		return st, notFound(id, err)
	}
	return st, nil
}

// Cancel asks the job's workflow to cancel; it frees the job's GPUs in
// whatever phase it is. A job that has already ended returns ErrJobEnded,
// naming how it ended; an unknown one ErrJobNotFound.
func (c *Client) Cancel(ctx context.Context, id gangway.JobID) error {
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
func (c *Client) ended(ctx context.Context, id gangway.JobID) error {
	st, err := c.Result(ctx, id)
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
func (c *Client) List(ctx context.Context) ([]Summary, error) {
	return c.jobs.List(ctx)
}

// Nodes lists the registered nodes with their state, heartbeat and the
// jobs holding their GPUs.
func (c *Client) Nodes(ctx context.Context) ([]gangway.NodeStatus, error) {
	if c.view == nil {
		return nil, fmt.Errorf("nodes: %w", ErrNoView)
	}
	return c.view.Nodes(ctx)
}

// Cordon stops new work from landing on a node; jobs on it keep running.
func (c *Client) Cordon(ctx context.Context, nodeID string) error {
	if c.view == nil {
		return fmt.Errorf("cordon %s: %w", nodeID, ErrNoView)
	}
	return c.view.SetNodeState(ctx, nodeID, gangway.NodeCordoned)
}

// Uncordon makes a cordoned node schedulable again.
func (c *Client) Uncordon(ctx context.Context, nodeID string) error {
	if c.view == nil {
		return fmt.Errorf("uncordon %s: %w", nodeID, ErrNoView)
	}
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
		err := c.jobs.SignalPreempt(ctx, a.JobID, req)
		if errors.Is(err, jobs.ErrJobGone) {
			continue // finished meanwhile
		}
		if err != nil {
			return asked, fmt.Errorf("drain %s: stop job %s: %w", nodeID, a.JobID, err)
		}
		asked = append(asked, a.JobID)
	}
	return asked, nil
}

// Logs returns the job's output lines after the given stream ID ("" = from
// the start); block > 0 waits that long for new lines. A read from the
// start that finds no line checks the job exists: ErrJobNotFound if not.
func (c *Client) Logs(ctx context.Context, id gangway.JobID, after string, block time.Duration) ([]gangway.LogLine, error) {
	if c.view == nil {
		return nil, fmt.Errorf("logs of %s: %w", id, ErrNoView)
	}
	lines, err := c.view.Logs(ctx, id, after, block)
	if err == nil && len(lines) == 0 && after == "" && c.jobs != nil {
		if _, derr := c.jobs.Describe(ctx, id); errors.Is(derr, jobs.ErrJobGone) {
			return nil, notFound(id, derr)
		}
	}
	return lines, err
}

// FollowLogs passes the job's output lines, from the start, to line. With
// follow it keeps waiting for new ones until the job has ended and its
// lines are read, or ctx ends (which is not an error); without, it returns
// after the lines there are.
func (c *Client) FollowLogs(ctx context.Context, id gangway.JobID, follow bool, line func(gangway.LogLine)) error {
	after := ""
	for {
		// The first read does not block: a job with no output yet
		// returns at once, and its status is checked below.
		block := time.Duration(0)
		if follow && after != "" {
			block = 2 * time.Second
		}
		lines, err := c.Logs(ctx, id, after, block)
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
	return fmt.Errorf("job %q: %w", id, err)
}

// noJobError reads `no job named "ID"` and is ErrJobNotFound.
type noJobError gangway.JobID

func (e noJobError) Error() string        { return fmt.Sprintf("no job named %q", string(e)) }
func (e noJobError) Is(target error) bool { return target == ErrJobNotFound }
