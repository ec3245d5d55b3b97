package client

import (
	"context"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// Jobs is the client's way to job workflows: the truth about each job.
// *jobs.Jobs (the one door to JobWorkflow, over a Temporal client) is the
// implementation; errors wrap jobs.ErrJobGone when no such workflow exists
// and jobs.ErrJobExists when Start finds the ID taken.
type Jobs interface {
	Start(ctx context.Context, spec gangway.JobSpec, o jobs.StartOptions) error
	Describe(ctx context.Context, id gangway.JobID) (jobs.Description, error)
	Query(ctx context.Context, id gangway.JobID) (workflows.Status, error)
	Result(ctx context.Context, id gangway.JobID) (workflows.Status, error)
	Cancel(ctx context.Context, id gangway.JobID) error
	SignalPreempt(ctx context.Context, id gangway.JobID, req workflows.PreemptRequest) error
	List(ctx context.Context) ([]jobs.Summary, error)
}

var _ Jobs = (*jobs.Jobs)(nil)

// View is the client's way to the fleet: registered nodes, running
// allocations, the dispatch loop's waiting reasons, job output, and node
// state for cordon and drain. Inside Gangway the Redis view
// (*capacity.View) is one as it is; a program outside the module may leave
// it nil (see Options.View).
type View interface {
	// FleetNodes is every registered node's inventory, whatever its
	// state: what Submit checks a job could ever fit on.
	FleetNodes(ctx context.Context) ([]gangway.Node, error)
	// CloudOffers is the cloud pools the servers' providers offer, one
	// offer per pool (none without a cloud): Submit counts them as
	// capacity a job that may burst could run on.
	CloudOffers(ctx context.Context) ([]gangway.Offer, error)
	// Nodes is every registered node with its state, heartbeat and
	// allocations, sorted by ID.
	Nodes(ctx context.Context) ([]gangway.NodeStatus, error)
	SetNodeState(ctx context.Context, nodeID, state string) error
	// RemoveNode drops a node from the fleet; it fails while a job holds
	// one of its GPUs, and for a node not registered.
	RemoveNode(ctx context.Context, nodeID string) error
	Allocations(ctx context.Context) ([]gangway.Assignment, error)
	// Waiting is why the last dispatch cycle left the job pending; the
	// zero Waiting when there is no reason on record.
	Waiting(ctx context.Context, id gangway.JobID) (gangway.Waiting, error)
	// Logs returns the job's output lines after the stream ID after (""
	// = from the start); block > 0 waits that long for new lines.
	Logs(ctx context.Context, id gangway.JobID, after string, block time.Duration) ([]gangway.LogLine, error)
}
