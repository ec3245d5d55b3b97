package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
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

// Client submits and inspects jobs, over the user API (NewAPI: what users
// hold credentials for) or, inside Gangway's trust boundary, directly over
// job workflows and the fleet view (New, Dial).
type Client struct {
	b     backend
	close func()
}

// backend is what a Client runs on: the direct one, or the user API.
type backend interface {
	submit(ctx context.Context, spec gangway.JobSpec, o SubmitOptions) (gangway.JobID, error)
	status(ctx context.Context, id gangway.JobID) (JobStatus, error)
	result(ctx context.Context, id gangway.JobID) (workflows.Status, error)
	cancel(ctx context.Context, id gangway.JobID) error
	list(ctx context.Context) ([]Summary, error)
	nodes(ctx context.Context) ([]Node, error)
	setNodeState(ctx context.Context, nodeID, state string) error
	drain(ctx context.Context, nodeID string) ([]gangway.JobID, error)
	removeNode(ctx context.Context, nodeID string) error
	logs(ctx context.Context, id gangway.JobID, after string, block time.Duration) ([]gangway.LogLine, error)
	followLogs(ctx context.Context, id gangway.JobID, follow bool, line func(gangway.LogLine)) error
}

// New returns a client over job workflows and the fleet view. view may be
// nil: see Options.View.
func New(j Jobs, view View) *Client {
	return &Client{b: &direct{jobs: j, view: view}, close: func() {}}
}

// Options say where Dial finds Gangway's Temporal: for programs inside the
// trust boundary (servers, tests). Users reach Gangway through the user
// API instead (NewAPI).
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
	// reason, and Nodes, Logs, Cordon, Uncordon, Drain and RemoveNode
	// return ErrNoView.
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

// Close releases what Dial opened; a client from New or NewAPI owns
// nothing that needs it.
func (c *Client) Close() { c.close() }

// SubmitOptions tune a submission.
type SubmitOptions struct {
	// Timing overrides the workflow's timeouts (tests, slow clusters). The
	// user API ignores it: the server's own timing holds.
	Timing workflows.Timing
	// Limits overrides the workflow's history and status bounds (tests).
	// The user API ignores it.
	Limits workflows.Limits
	// Validate relaxes the spec's validation as the server's config says
	// (gangway.AllowEnv); none is the strict default. The user API's
	// server applies its own.
	Validate []gangway.ValidateOption
	// Warn, when set, is told what the submission could not check and
	// accepted all the same: while Redis does not answer, the spec is not
	// checked against the fleet (the job waits until the view is back,
	// and its waiting reason says so if it can never fit).
	Warn func(msg string)
}

// Node is a node as `gangway nodes` shows it: the view's node status and
// its GPUs' health records, by GPU index (none for a GPU that never
// faulted).
type Node struct {
	gangway.NodeStatus
	GPUHealth map[int]gangway.GPUHealth `json:"GPUHealth,omitempty"`
}

// Submit validates spec — on its own and against the registered fleet and
// the cloud pools the servers publish (the direct client only with a View)
// — and starts its workflow. Nothing is queued when validation fails. A
// job whose name is already taken returns ErrJobExists and changes
// nothing.
func (c *Client) Submit(ctx context.Context, spec gangway.JobSpec, o SubmitOptions) (gangway.JobID, error) {
	return c.b.submit(ctx, spec, o)
}

// Status returns the job's live status (a query, with the totals live as
// of now: JobStatus.Live) or, once finished, its result.
func (c *Client) Status(ctx context.Context, id gangway.JobID) (JobStatus, error) {
	st, err := c.b.status(ctx, id)
	if err != nil {
		return st, err
	}
	return st.Live(time.Now()), nil
}

// Waiting is why the last dispatch cycle left the job pending, with its
// start-time estimate: Status's Waiting, nil when the job is not waiting
// or no cycle has considered it yet.
func (c *Client) Waiting(ctx context.Context, id gangway.JobID) (*gangway.Waiting, error) {
	st, err := c.Status(ctx, id)
	return st.Waiting, err
}

// Result waits for the job to finish and returns its final status. A job
// that ended without one (terminated, timed out, an invalid spec) is
// reported Failed, with the reason.
func (c *Client) Result(ctx context.Context, id gangway.JobID) (workflows.Status, error) {
	return c.b.result(ctx, id)
}

// Cancel asks the job's workflow to cancel; it frees the job's GPUs in
// whatever phase it is. A job that has already ended returns ErrJobEnded,
// naming how it ended; an unknown one ErrJobNotFound.
func (c *Client) Cancel(ctx context.Context, id gangway.JobID) error { return c.b.cancel(ctx, id) }

// List returns jobs known to Temporal's visibility store, newest first
// (through the user API: the jobs of the caller's teams).
func (c *Client) List(ctx context.Context) ([]Summary, error) { return c.b.list(ctx) }

// Nodes lists the registered nodes with their state, heartbeat, the jobs
// holding their GPUs and the GPUs' health records.
func (c *Client) Nodes(ctx context.Context) ([]Node, error) { return c.b.nodes(ctx) }

// Cordon stops new work from landing on a node; jobs on it keep running.
func (c *Client) Cordon(ctx context.Context, nodeID string) error {
	return c.b.setNodeState(ctx, nodeID, gangway.NodeCordoned)
}

// Uncordon makes a cordoned node schedulable again.
func (c *Client) Uncordon(ctx context.Context, nodeID string) error {
	return c.b.setNodeState(ctx, nodeID, gangway.NodeReady)
}

// Drain cordons a node and asks every job running on it to stop and
// requeue (no retry spent; it keeps its place in line). It returns the
// jobs asked.
func (c *Client) Drain(ctx context.Context, nodeID string) ([]gangway.JobID, error) {
	return c.b.drain(ctx, nodeID)
}

// RemoveNode takes a node out of the fleet for good — decommissioned,
// renamed, its machine gone — once its agent has stopped: it is no longer
// listed, counted as capacity a job could fit on, or offered. It returns
// ErrNodeInUse while the node's agent still heartbeats (it would register
// the node again) or a job holds one of its GPUs (drain it first).
func (c *Client) RemoveNode(ctx context.Context, nodeID string) error {
	return c.b.removeNode(ctx, nodeID)
}

// Logs returns the job's output lines after the given stream ID ("" = from
// the start); block > 0 waits that long for new lines. A read from the
// start that finds no line checks the job exists: ErrJobNotFound if not.
func (c *Client) Logs(ctx context.Context, id gangway.JobID, after string, block time.Duration) ([]gangway.LogLine, error) {
	return c.b.logs(ctx, id, after, block)
}

// FollowLogs passes the job's output lines, from the start, to line. With
// follow it keeps waiting for new ones until the job has ended and its
// lines are read, or ctx ends (which is not an error); without, it returns
// after the lines there are.
func (c *Client) FollowLogs(ctx context.Context, id gangway.JobID, follow bool, line func(gangway.LogLine)) error {
	return c.b.followLogs(ctx, id, follow, line)
}

// stateVerb names the command that sets a node state, for errors.
func stateVerb(state string) string {
	if state == gangway.NodeReady {
		return "uncordon"
	}
	return "cordon"
}
