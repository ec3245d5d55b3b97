package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/nodeauth"
	"github.com/gangwayhq/gangway/workflows"
)

// NodeView is the part of the Redis view node updates write.
type NodeView interface {
	RegisterNode(ctx context.Context, n gangway.Node) error
	LastHeartbeat(ctx context.Context, nodeID string) (time.Time, bool, error)
	FenceGPUs(ctx context.Context, e gangway.GPUEvent) ([]gangway.GPUHealth, error)
	UnfenceGPUs(ctx context.Context, nodeID string, gpus []int, now time.Time) ([]gangway.GPUHealth, error)
	RecordGPUEvent(ctx context.Context, e gangway.GPUEvent) error
	// TaskDone is the record of a task its agent saw exit 0.
	TaskDone(ctx context.Context, jobID gangway.JobID, attempt, rank int) (workflows.TaskDone, bool, error)
}

// NodeUpdates is the server's side of node identity: the one door through which
// an agent changes its node's inventory (workflows.NodeUpdateWorkflow).
type NodeUpdates struct {
	View NodeView
	Auth *nodeauth.Authority
	// Grace is how long a node must have been silent before a pool's or a
	// launch's token may register its ID again (server.nodeTTL): a live
	// node is taken over only with its own credential.
	Grace time.Duration
	// MaxSkew bounds how far an update's time may be from the server's
	// (default 5m): an old proof is not good again.
	MaxSkew time.Duration
	Log     *slog.Logger
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Register registers the node update and task-done activities.
func (n *NodeUpdates) Register(w worker.Registry) {
	w.RegisterActivityWithOptions(n.Update, activity.RegisterOptions{Name: workflows.ActivityNodeUpdate})
	w.RegisterActivityWithOptions(n.TaskDone, activity.RegisterOptions{Name: workflows.ActivityTaskDone})
}

// TaskDone reports whether the agent of a member's node recorded that the
// member's task exited 0 (workflows.TaskDone), for a workflow that lost
// the node. The record must name the member's node and, where the server
// checks agents' credentials, be signed with that node's own; anything
// else is logged and counts as no record.
func (n *NodeUpdates) TaskDone(ctx context.Context, in workflows.TaskDoneInput) (bool, error) {
	d, ok, err := n.View.TaskDone(ctx, in.JobID, in.Attempt, in.Rank)
	if err != nil || !ok {
		return false, err
	}
	why := ""
	if d.NodeID != in.NodeID {
		why = "it names node " + d.NodeID
	} else if n.Auth.Enabled() {
		if err := n.Auth.Vouches(ctx, in.NodeID, in.Pool, d.Proof, d.Message()); err != nil {
			why = err.Error()
		}
	}
	if why != "" {
		n.Log.Warn("task-done record not trusted; the task counts as lost with its node",
			"job_id", in.JobID, "attempt", in.Attempt, "rank", in.Rank, "node", in.NodeID, "reason", why)
		return false, nil
	}
	return true, nil
}

// Update checks the credential behind in.Proof for in.NodeID, then applies
// the change. A refusal is an ApplicationError of type ErrTypeJoinRefused,
// logged with what was refused and why (never the credential).
func (n *NodeUpdates) Update(ctx context.Context, in workflows.NodeUpdateInput) (workflows.NodeUpdateResult, error) {
	now := time.Now()
	if n.Now != nil {
		now = n.Now()
	}
	refuse := func(err error) (workflows.NodeUpdateResult, error) {
		n.Log.Warn("node update refused", "node", in.NodeID, "pool", in.Pool, "op", op(in), "error", err)
		return workflows.NodeUpdateResult{}, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeJoinRefused, nil)
	}
	if err := checkShape(in); err != nil {
		return refuse(err)
	}
	skew := n.MaxSkew
	if skew <= 0 {
		skew = 5 * time.Minute
	}
	if d := now.Sub(in.At); d > skew || d < -skew {
		return refuse(fmt.Errorf("%w: node %s: the update is dated %s, more than %v from the server's clock", nodeauth.ErrRefused,
			in.NodeID, in.At.UTC().Format(time.RFC3339), skew))
	}
	msg, err := in.Message(activity.GetInfo(ctx).WorkflowExecution.ID)
	if err != nil {
		return workflows.NodeUpdateResult{}, err
	}
	grant, err := n.Auth.Check(ctx, in.NodeID, in.Pool, in.Proof, msg)
	if errors.Is(err, nodeauth.ErrRefused) {
		return refuse(err)
	} else if err != nil {
		return workflows.NodeUpdateResult{}, err
	}
	if !grant.Bound {
		if in.Register == nil {
			return refuse(fmt.Errorf("%w: node %s: a %s token only registers a node; GPU health needs the node's own token", nodeauth.ErrRefused, in.NodeID, grant.Kind))
		}
		last, known, err := n.View.LastHeartbeat(ctx, in.NodeID)
		if err != nil {
			return workflows.NodeUpdateResult{}, err
		}
		if known && now.Sub(last) < n.Grace {
			return refuse(fmt.Errorf("%w: node %s is registered and heartbeated %v ago: a %s token may not take it over (show the node's own token)",
				nodeauth.ErrRefused, in.NodeID, now.Sub(last).Round(time.Second), grant.Kind))
		}
	}
	res := workflows.NodeUpdateResult{NodeToken: n.Auth.NodeToken(in.NodeID, in.Pool)}
	switch {
	case in.Register != nil:
		err = n.View.RegisterNode(ctx, *in.Register)
		if err == nil {
			n.Log.Info("node joined", "node", in.NodeID, "pool", in.Pool, "credential", grant.Kind, "gpus", len(in.Register.GPUs))
		}
	case in.Fence != nil:
		res.Health, err = n.View.FenceGPUs(ctx, *in.Fence)
	case in.Unfence != nil:
		res.Health, err = n.View.UnfenceGPUs(ctx, in.NodeID, in.Unfence.GPUs, in.At)
	case in.Event != nil:
		err = n.View.RecordGPUEvent(ctx, *in.Event)
	}
	if err != nil {
		return workflows.NodeUpdateResult{}, fmt.Errorf("node update %s of %s: %w", op(in), in.NodeID, err)
	}
	return res, nil
}

// checkShape refuses an update that is not exactly one change of the node
// it names.
func checkShape(in workflows.NodeUpdateInput) error {
	n := 0
	for _, set := range []bool{in.Register != nil, in.Fence != nil, in.Unfence != nil, in.Event != nil} {
		if set {
			n++
		}
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: node %s: %s", nodeauth.ErrRefused, in.NodeID, fmt.Sprintf(format, args...))
	}
	switch {
	case !gangway.IsDNSLabel(in.NodeID):
		return bad("not a node ID (a DNS label)")
	case n != 1:
		return bad("an update makes exactly one change, this one makes %d", n)
	case in.Register != nil && (in.Register.ID != in.NodeID || in.Register.Pool != in.Pool):
		return bad("the inventory is of node %s in pool %s", in.Register.ID, in.Register.Pool)
	case in.Register != nil && in.Register.TaskQueue != "":
		return bad("an agent's node polls its own task queue; it may not name %q", in.Register.TaskQueue)
	case in.Fence != nil && in.Fence.Node != in.NodeID, in.Event != nil && in.Event.Node != in.NodeID:
		return bad("the GPU event is another node's")
	}
	return nil
}

func op(in workflows.NodeUpdateInput) string {
	switch {
	case in.Register != nil:
		return "register"
	case in.Fence != nil:
		return "fence"
	case in.Unfence != nil:
		return "unfence"
	case in.Event != nil:
		return "gpu-event"
	}
	return "none"
}
