package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// HostCapacity is the part of the Redis view a Host uses: the agent's, and
// registration and heartbeats of many nodes at once.
type HostCapacity interface {
	Capacity
	RegisterNodes(ctx context.Context, nodes []gangway.Node) error
	// HeartbeatNodes returns the IDs the view does not know.
	HeartbeatNodes(ctx context.Context, beats []capacity.NodeBeat) ([]string, error)
}

// HostConfig configures a Host.
type HostConfig struct {
	// ID names the host; its nodes' tasks go to workflows.HostTaskQueue(ID).
	ID string
	// Nodes are the simulated nodes it runs; their TaskQueue is set to the
	// host's.
	Nodes []gangway.Node
	// Agent is every node's config, as an Agent's (Node is set per node,
	// DataDir to Agent.DataDir/<node>). GPU health and notices are not
	// watched on hosted nodes: GPU and Notices must be unset.
	Agent Config
	// MaxConcurrentTasks caps the tasks running at once across all nodes
	// (default: two per GPU, at most 4,096).
	MaxConcurrentTasks int
	// Pollers is how many long polls the host keeps on its task queue
	// (default DefaultHostPollers).
	Pollers int
}

// DefaultHostPollers is HostConfig.Pollers by default. Each poll brings
// one RunTask; with a host's thousands of nodes starting tasks at tens a
// second, 4 pollers held `gangway bench` below 50 starts/s on two cores
// (docs/benchmarks.md, "Pollers"), and idle polls cost next to nothing.
const DefaultHostPollers = 32

// Host runs many simulated nodes in one process, as one Temporal worker:
// every node registers with the host's task queue as its Node.TaskQueue,
// the dispatch loop's assignments carry that queue, and the host routes
// each RunTask to the node it names (RunTaskInput.NodeID), where it runs
// as it would under that node's own agent: same GPU claims, process, logs,
// checkpoints and Temporal heartbeats. Node heartbeats to Redis go out for
// all nodes in one batched script call per 500 nodes per interval.
type Host struct {
	cfg    HostConfig
	cap    HostCapacity
	queue  string
	ids    []string
	agents map[string]*Agent
	log    *slog.Logger
}

// NewHost checks cfg and returns a host for its nodes.
func NewHost(cfg HostConfig, c HostCapacity) (*Host, error) {
	switch {
	case cfg.ID == "":
		return nil, errors.New("agent host: empty ID")
	case len(cfg.Nodes) == 0:
		return nil, fmt.Errorf("agent host %s: no nodes", cfg.ID)
	case cfg.Agent.GPU.Source != nil || cfg.Agent.Notices != nil:
		return nil, fmt.Errorf("agent host %s: hosted nodes watch no GPUs and no cloud notices (Agent.GPU and Agent.Notices must be unset)", cfg.ID)
	}
	if cfg.Agent.ShutdownGrace <= 0 {
		cfg.Agent.ShutdownGrace = DefaultShutdownGrace
	}
	if cfg.Agent.Log == nil {
		cfg.Agent.Log = slog.New(slog.DiscardHandler)
	}
	h := &Host{cfg: cfg, cap: c, queue: workflows.HostTaskQueue(cfg.ID), agents: make(map[string]*Agent, len(cfg.Nodes)),
		log: cfg.Agent.Log.With("host", cfg.ID)}
	gpus := 0
	for _, n := range cfg.Nodes {
		if n.ID == "" {
			return nil, fmt.Errorf("agent host %s: a node has an empty ID", cfg.ID)
		}
		if h.agents[n.ID] != nil {
			return nil, fmt.Errorf("agent host %s: node %s listed twice", cfg.ID, n.ID)
		}
		n.TaskQueue = h.queue
		ac := cfg.Agent
		ac.Node = n
		ac.DataDir = filepath.Join(cfg.Agent.DataDir, n.ID)
		h.agents[n.ID] = New(ac, c)
		h.ids = append(h.ids, n.ID)
		gpus += max(len(n.GPUs), 1)
	}
	if h.cfg.MaxConcurrentTasks <= 0 {
		h.cfg.MaxConcurrentTasks = min(gpus*2, 4096)
	}
	if h.cfg.Pollers <= 0 {
		h.cfg.Pollers = DefaultHostPollers
	}
	return h, nil
}

// TaskQueue is the queue the host's nodes' tasks go to.
func (h *Host) TaskQueue() string { return h.queue }

// Run registers every node, serves RunTask for all of them and heartbeats
// until ctx is done. Running tasks are killed when it returns.
func (h *Host) Run(ctx context.Context, tc client.Client) error {
	if err := os.MkdirAll(h.cfg.Agent.DataDir, 0o755); err != nil {
		return fmt.Errorf("agent host data dir: %w", err)
	}
	door := jobs.New(tc)
	for _, a := range h.agents {
		a.jobs = door
	}
	if err := h.cap.RegisterNodes(ctx, h.views(h.ids)); err != nil {
		return fmt.Errorf("agent host %s: %w", h.cfg.ID, err)
	}
	w := worker.New(tc, h.queue, worker.Options{
		MaxConcurrentActivityExecutionSize: h.cfg.MaxConcurrentTasks,
		MaxConcurrentActivityTaskPollers:   h.cfg.Pollers,
		WorkerStopTimeout:                  h.cfg.Agent.ShutdownGrace + shutdownSave,
		MaxHeartbeatThrottleInterval:       time.Second,
	})
	w.RegisterActivityWithOptions(h.runTask, activity.RegisterOptions{Name: workflows.ActivityRunTask})
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker for agent host %s: %w", h.cfg.ID, err)
	}
	defer w.Stop()
	h.log.Info("agent host up", "nodes", len(h.ids), "task_queue", h.queue)

	interval := h.cfg.Agent.HeartbeatInterval
	if interval <= 0 {
		interval = 2 * time.Second
	}
	every(ctx, interval, h.heartbeat)
	return nil
}

// runTask hands the task to the hosted node it is for.
func (h *Host) runTask(ctx context.Context, in workflows.RunTaskInput) (workflows.RunTaskResult, error) {
	a := h.agents[in.NodeID]
	if a == nil {
		// Not the user's fault: the job is requeued without a retry spent.
		return workflows.RunTaskResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("task for node %s reached agent host %s, which does not run it", in.NodeID, h.cfg.ID),
			workflows.ErrTypeGPUBusy, nil)
	}
	return a.runTaskTracked(ctx, in)
}

// heartbeat refreshes every node in Redis, with its tasks, registering
// again the ones the view lost.
func (h *Host) heartbeat(ctx context.Context) {
	// Every node's beat lock, in one order: a node's own beat as a task
	// ends (RunTask) must not land before a batch that read its tasks
	// earlier.
	// One deferred unlock for them all: a defer per node is an allocation
	// per node per beat.
	for _, id := range h.ids {
		h.agents[id].beatMu.Lock()
	}
	defer func() {
		for _, id := range h.ids {
			h.agents[id].beatMu.Unlock()
		}
	}()
	now := time.Now()
	missing, err := h.cap.HeartbeatNodes(ctx, h.beats(h.ids))
	if err == nil && len(missing) > 0 {
		h.log.Warn("nodes missing from the view; registering again", "nodes", len(missing))
		if err = h.cap.RegisterNodes(ctx, h.views(missing)); err == nil {
			_, err = h.cap.HeartbeatNodes(ctx, h.beats(missing))
		}
	}
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn("heartbeat failed", "nodes", len(h.ids), "error", err)
		}
		return
	}
	for _, a := range h.agents {
		a.heartbeatDone(now)
	}
}

// beats are the heartbeats of ids: each node with the tasks it runs.
func (h *Host) beats(ids []string) []capacity.NodeBeat {
	out := make([]capacity.NodeBeat, 0, len(ids))
	for _, id := range ids {
		if a := h.agents[id]; a != nil {
			out = append(out, capacity.NodeBeat{ID: id, Tasks: a.tasks.reports()})
		}
	}
	return out
}

// views are the registrations of ids, in their order.
func (h *Host) views(ids []string) []gangway.Node {
	out := make([]gangway.Node, 0, len(ids))
	for _, id := range ids {
		if a := h.agents[id]; a != nil {
			out = append(out, a.nodeView())
		}
	}
	return out
}

// Node returns the agent of a hosted node, nil if the host does not run it
// (tests stop its tasks or list them through it).
func (h *Host) Node(id string) *Agent { return h.agents[id] }

// NodeIDs lists the hosted nodes in the order they were given.
func (h *Host) NodeIDs() []string { return slices.Clone(h.ids) }
