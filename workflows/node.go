package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/gangwayhq/gangway"
)

// Node identity: an agent changes its node's inventory in the Redis view
// only through the server. It runs NodeUpdateWorkflow (workflow ID
// NodeUpdateID), whose one activity, on the server's task queue, checks
// the agent's credential for the node and then writes the view
// (internal/nodeauth, docs/security.md). The agent's Redis user can read
// the inventory but not write it.

// NodeUpdateWorkflowName is the registered name of NodeUpdateWorkflow.
const NodeUpdateWorkflowName = "NodeUpdate"

// ActivityNodeUpdate applies a NodeUpdateInput: NodeUpdateInput →
// NodeUpdateResult, or an ApplicationError of type ErrTypeJoinRefused.
const ActivityNodeUpdate = "NodeUpdate"

// ErrTypeJoinRefused: the credential does not allow the update. Not
// retried.
const ErrTypeJoinRefused = "JoinRefused"

// NodeUpdateID is the workflow ID of one update of a node: unique per
// call (seq), never a job's ID (job IDs have no slash).
func NodeUpdateID(nodeID, seq string) string { return "node-update/" + nodeID + "/" + seq }

// NodeUpdateInput is one change an agent asks for its node: exactly one
// of Register, Fence, Unfence and Event.
type NodeUpdateInput struct {
	NodeID string `json:"nodeId"`
	Pool   string `json:"pool"`
	// Proof shows the agent holds a credential for the node (a join
	// token, a launch token, or the node token the last update returned)
	// without carrying it: the history of the workflow holds no secret.
	Proof NodeProof `json:"proof"`
	// Register upserts the node's inventory (its ID and pool must be the
	// update's).
	Register *gangway.Node `json:"register,omitempty"`
	// Fence marks GPUs unhealthy, Unfence healthy again; Event records a
	// GPU event (capacity.View's FenceGPUs, UnfenceGPUs, RecordGPUEvent).
	Fence   *gangway.GPUEvent `json:"fence,omitempty"`
	Unfence *UnfenceGPUs      `json:"unfence,omitempty"`
	Event   *gangway.GPUEvent `json:"event,omitempty"`
	// At is the agent's time of the change.
	At time.Time `json:"at"`
}

// NodeProof is an HMAC of the update (Message), keyed with the agent's
// credential (internal/nodeauth).
type NodeProof struct {
	// Kind is token (a join token), node (a node token) or launch.
	Kind string `json:"kind"`
	// Claims is a launch token's signed, public part ("" otherwise).
	Claims string `json:"claims,omitempty"`
	MAC    string `json:"mac"`
}

// Message is what the proof signs: the update's workflow ID and its
// content (everything but the proof), so a proof seen in a history is
// good for that update only.
func (in NodeUpdateInput) Message(workflowID string) ([]byte, error) {
	in.Proof = NodeProof{}
	body, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("node update message: %w", err)
	}
	return append([]byte("gangway node update\x00"+workflowID+"\x00"), body...), nil
}

// UnfenceGPUs names the GPUs to return to service.
type UnfenceGPUs struct {
	GPUs []int `json:"gpus"`
}

// NodeUpdateResult is what the server did.
type NodeUpdateResult struct {
	// NodeToken is the node's own credential, to show from now on ("" when
	// the server signs none).
	NodeToken string `json:"nodeToken,omitempty"`
	// Health is the GPUs' records after a Fence or Unfence.
	Health []gangway.GPUHealth `json:"health,omitempty"`
}

// NodeUpdateWorkflow runs ActivityNodeUpdate on the server's task queue. A
// refusal is final; anything else is retried a few times.
func NodeUpdateWorkflow(ctx workflow.Context, in NodeUpdateInput) (NodeUpdateResult, error) {
	var res NodeUpdateResult
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           TaskQueue,
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumAttempts: 5,
			NonRetryableErrorTypes: []string{ErrTypeJoinRefused}},
	}), ActivityNodeUpdate, in).Get(ctx, &res)
	var refused *temporal.ApplicationError
	if errors.As(err, &refused) && refused.Type() == ErrTypeJoinRefused {
		// The agent sees the refusal itself, not an activity failure.
		return NodeUpdateResult{}, temporal.NewNonRetryableApplicationError(refused.Message(), ErrTypeJoinRefused, nil)
	}
	if err != nil {
		return NodeUpdateResult{}, fmt.Errorf("node %s: %w", in.NodeID, err)
	}
	return res, nil
}

// ActivityTaskDone reads what a node's agent recorded when a task exited
// 0 (TaskDoneInput → bool), for a workflow that lost the node before the
// task's RunTask reported it.
const ActivityTaskDone = "TaskDone"

// TaskDone is an agent's record, written to the Redis view as soon as
// the agent sees a task's process exit 0, that it did. A node that dies in
// between (the instance gone, the agent killed) leaves the workflow with
// a lost node for a task that finished; the record tells it so, and the
// job ends Succeeded instead of running again. It is signed with the
// node's token, so an agent's Redis password alone vouches for no task.
type TaskDone struct {
	TaskRef
	At    time.Time `json:"at"`
	Proof NodeProof `json:"proof"`
}

// TaskRef names one member's task of one attempt and the node it ran on.
type TaskRef struct {
	JobID   gangway.JobID `json:"jobId"`
	Attempt int           `json:"attempt"`
	Rank    int           `json:"rank"`
	NodeID  string        `json:"nodeId"`
}

// Message is what the record's proof signs: the task and its node.
func (d TaskDone) Message() []byte {
	return fmt.Appendf(nil, "gangway task done\x00%s\x00%d\x00%d\x00%s", d.JobID, d.Attempt, d.Rank, d.NodeID)
}

// TaskDoneInput names the member whose node was lost, and the node's pool
// (its token is signed for node and pool).
type TaskDoneInput struct {
	TaskRef
	Pool string `json:"pool"`
}
