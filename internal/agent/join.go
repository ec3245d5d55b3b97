package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/nodeauth"
	"github.com/gangwayhq/gangway/workflows"
)

// ErrJoinRefused: the server refused the agent's credential (an
// errors.Is match; the message says why).
var ErrJoinRefused = errors.New("join refused")

// JoinConfig is how an agent proves to the server which node it is.
type JoinConfig struct {
	// Token is the join token the site gave this node or its pool, or the
	// one-use launch token of a cloud instance's boot data.
	Token string
	// TokenFile keeps the node token the server returns (mode 0600), so a
	// restarted agent shows it instead of the join token; "" keeps it in
	// memory only.
	TokenFile string
	// Timeout bounds one update (default 30s).
	Timeout time.Duration
}

// ServerView is an agent's view of the fleet when it joins through the
// server, as `gangway agent` does: inventory changes (registration, GPU
// fences and events) go to the server's NodeUpdate activity with a proof
// of the agent's credential, where they are checked and written; only
// heartbeats, checkpoint and task-done records and task output go
// straight to Redis,
// and only the node's GPU health records are read from it. It is the
// agent's Capacity and GPUHealthView, for a Redis user that may do no more
// than that (docs/security.md).
type ServerView struct {
	view *capacity.View
	tc   client.Client
	pool string
	cfg  JoinConfig

	mu        sync.Mutex
	nodeToken string
}

var (
	_ Capacity      = (*ServerView)(nil)
	_ GPUHealthView = (*ServerView)(nil)
)

// NewServerView returns the view of a node of pool; a node token left in
// cfg.TokenFile by an earlier run is shown first.
func NewServerView(view *capacity.View, tc client.Client, pool string, cfg JoinConfig) *ServerView {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	v := &ServerView{view: view, tc: tc, pool: pool, cfg: cfg}
	if cfg.TokenFile != "" {
		if b, err := os.ReadFile(cfg.TokenFile); err == nil {
			v.nodeToken = strings.TrimSpace(string(b))
		}
	}
	return v
}

// DirectView is the view of an agent in the server's own process (a fake
// cloud's instances, the dev stack's nodes): everything goes straight to
// Redis, and task-done records are signed with Token, the node token the
// server's authority gives the node ("" signs nothing: right for a server
// that checks no credentials). ServerView writes its task-done records
// through one, with the agent's own credential.
type DirectView struct {
	*capacity.View
	Token string
}

// RecordTaskDone signs the record with the node token and writes it.
func (v DirectView) RecordTaskDone(ctx context.Context, d workflows.TaskDone) error {
	d.Proof = nodeauth.Prove(v.Token, d.Message()) // no proof without a token
	return v.View.RecordTaskDone(ctx, d)
}

// RegisterNode asks the server to register the node.
func (v *ServerView) RegisterNode(ctx context.Context, n gangway.Node) error {
	_, err := v.update(ctx, workflows.NodeUpdateInput{NodeID: n.ID, Register: &n, At: time.Now()})
	return err
}

// Heartbeat goes straight to Redis, with the node's tasks.
func (v *ServerView) Heartbeat(ctx context.Context, nodeID string, tasks []capacity.Task) error {
	return v.view.Heartbeat(ctx, nodeID, tasks)
}

// RecordCheckpoint goes straight to Redis.
func (v *ServerView) RecordCheckpoint(ctx context.Context, jobID gangway.JobID, attempt int, at time.Time) error {
	return v.view.RecordCheckpoint(ctx, jobID, attempt, at)
}

// RecordTaskDone goes straight to Redis, signed with the node token (the
// join token before the first join returned one).
func (v *ServerView) RecordTaskDone(ctx context.Context, d workflows.TaskDone) error {
	v.mu.Lock()
	credential := v.nodeToken
	v.mu.Unlock()
	if credential == "" {
		credential = v.cfg.Token
	}
	return DirectView{View: v.view, Token: credential}.RecordTaskDone(ctx, d)
}

// AppendLog goes straight to Redis.
func (v *ServerView) AppendLog(ctx context.Context, jobID gangway.JobID, l gangway.LogLine) error {
	return v.view.AppendLog(ctx, jobID, l)
}

// FenceGPUs asks the server to fence the GPUs.
func (v *ServerView) FenceGPUs(ctx context.Context, e gangway.GPUEvent) ([]gangway.GPUHealth, error) {
	res, err := v.update(ctx, workflows.NodeUpdateInput{NodeID: e.Node, Fence: &e, At: e.At})
	return res.Health, err
}

// UnfenceGPUs asks the server to return the GPUs to service.
func (v *ServerView) UnfenceGPUs(ctx context.Context, nodeID string, gpus []int, now time.Time) ([]gangway.GPUHealth, error) {
	res, err := v.update(ctx, workflows.NodeUpdateInput{NodeID: nodeID, Unfence: &workflows.UnfenceGPUs{GPUs: gpus}, At: now})
	return res.Health, err
}

// RecordGPUEvent asks the server to record the event.
func (v *ServerView) RecordGPUEvent(ctx context.Context, e gangway.GPUEvent) error {
	_, err := v.update(ctx, workflows.NodeUpdateInput{NodeID: e.Node, Event: &e, At: e.At})
	return err
}

// GPUHealth is read from Redis.
func (v *ServerView) GPUHealth(ctx context.Context, nodeID string) (map[int]gangway.GPUHealth, error) {
	return v.view.GPUHealth(ctx, nodeID)
}

// update runs one NodeUpdate with the node token when the agent has one,
// else with the join token; a refused node token (its secret rotated
// away) is dropped and the join token tried.
func (v *ServerView) update(ctx context.Context, in workflows.NodeUpdateInput) (workflows.NodeUpdateResult, error) {
	in.Pool = v.pool
	if in.At.IsZero() {
		in.At = time.Now()
	}
	v.mu.Lock()
	node := v.nodeToken
	v.mu.Unlock()
	if node != "" {
		res, err := v.run(ctx, in, node)
		if !errors.Is(err, ErrJoinRefused) || v.cfg.Token == "" {
			return res, err
		}
		v.setNodeToken("")
	}
	return v.run(ctx, in, v.cfg.Token)
}

func (v *ServerView) run(ctx context.Context, in workflows.NodeUpdateInput, credential string) (workflows.NodeUpdateResult, error) {
	var seq [8]byte
	_, _ = rand.Read(seq[:])
	id := workflows.NodeUpdateID(in.NodeID, hex.EncodeToString(seq[:]))
	if credential != "" {
		msg, err := in.Message(id)
		if err != nil {
			return workflows.NodeUpdateResult{}, err
		}
		in.Proof = nodeauth.Prove(credential, msg)
	}
	ctx, cancel := context.WithTimeout(ctx, v.cfg.Timeout)
	defer cancel()
	run, err := v.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: id, TaskQueue: workflows.TaskQueue, WorkflowExecutionTimeout: v.cfg.Timeout,
		WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	}, workflows.NodeUpdateWorkflowName, in)
	if err != nil {
		return workflows.NodeUpdateResult{}, fmt.Errorf("node update: %w", err)
	}
	var res workflows.NodeUpdateResult
	if err := run.Get(ctx, &res); err != nil {
		var ae *temporal.ApplicationError
		if errors.As(err, &ae) && ae.Type() == workflows.ErrTypeJoinRefused {
			return res, fmt.Errorf("%w by the server: %s", ErrJoinRefused, strings.TrimPrefix(ae.Message(), nodeauth.ErrRefused.Error()+": "))
		}
		return res, fmt.Errorf("node update: %w", err)
	}
	if res.NodeToken != "" {
		v.setNodeToken(res.NodeToken)
	}
	return res, nil
}

// setNodeToken keeps the node token, in TokenFile too when it changed.
func (v *ServerView) setNodeToken(t string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if t == v.nodeToken {
		return
	}
	v.nodeToken = t
	if v.cfg.TokenFile == "" {
		return
	}
	if t == "" {
		_ = os.Remove(v.cfg.TokenFile)
		return
	}
	tmp := v.cfg.TokenFile + ".tmp"
	if err := os.MkdirAll(filepath.Dir(tmp), 0o700); err == nil {
		if err := os.WriteFile(tmp, []byte(t+"\n"), 0o600); err == nil {
			_ = os.Rename(tmp, v.cfg.TokenFile)
		}
	}
}
