package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/checkpoint"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// Capacity is the part of the Redis view the agent uses.
type Capacity interface {
	RegisterNode(ctx context.Context, n gangway.Node) error
	// Heartbeat carries the tasks the node runs, so a lost view learns
	// which GPUs are busy.
	Heartbeat(ctx context.Context, nodeID string, tasks []capacity.Task) error
	AppendLog(ctx context.Context, jobID gangway.JobID, l gangway.LogLine) error
	// RecordCheckpoint tells the dispatch loop the attempt saved a
	// checkpoint at at: what moving or preempting it would lose.
	RecordCheckpoint(ctx context.Context, jobID gangway.JobID, attempt int, at time.Time) error
	// RecordTaskDone records that a task exited 0, before RunTask says
	// so (workflows.TaskDone); the view signs it with the node's
	// credential where it has one.
	RecordTaskDone(ctx context.Context, d workflows.TaskDone) error
}

// Event is a task starting or stopping on GPUs, as the agent saw it. Tests
// use the record to prove no GPU ever ran two jobs at once.
type Event struct {
	Node    string        `json:"node"`
	GPUs    []int         `json:"gpus"`
	JobID   gangway.JobID `json:"jobId"`
	Attempt int           `json:"attempt"`
	Rank    int           `json:"rank"`
	Start   bool          `json:"start"`
	At      time.Time     `json:"at"`
}

// Recorder receives task start/stop events.
type Recorder interface{ Record(Event) }

// Config configures an agent.
type Config struct {
	Node gangway.Node
	// DataDir holds task logs (logs/<job>/) and checkpoint dirs.
	DataDir string
	// HeartbeatInterval is how often the node heartbeats to Redis.
	HeartbeatInterval time.Duration
	// ShutdownGrace is the longest a task may take to stop and save its
	// final checkpoint when the agent itself shuts down: it gets its job's
	// checkpoint.gracePeriod, at most this less the time the upload is
	// expected to take (twice its last, at least 5 s), and the agent waits
	// this and 5 s more (default DefaultShutdownGrace).
	ShutdownGrace time.Duration
	Recorder      Recorder // optional
	Log           *slog.Logger

	// Checkpoints is where rank 0 saves the checkpoints its task writes,
	// and where every rank restores ResumeFrom from; nil: the node does
	// not checkpoint (docs/checkpointing.md).
	Checkpoints checkpoint.Store
	// CheckpointPoll is how often a task's checkpoint directory is looked
	// at for complete checkpoints (default 1s). UploadTimeout bounds the
	// final save after a task stops (default 10m).
	CheckpointPoll time.Duration
	UploadTimeout  time.Duration
	// TaskHeartbeat is how often a task heartbeats to Temporal, carrying
	// its newest checkpoint (default 2s; at most a quarter of the
	// activity's heartbeat timeout).
	TaskHeartbeat      time.Duration
	CheckpointObserver CheckpointObserver // optional
	// LogDrops is told how many task output lines were not shipped to the
	// view's log stream (optional; see logShipper).
	LogDrops interface{ Dropped(lines int) }
	// Notices are the cloud's warnings that this node goes away (see the
	// notice package); nil: none. An interruption or maintenance notice
	// signals the workflow of every task running here to preempt it.
	Notices <-chan Notice

	// TaskUsers is who tasks run as (isolate.go); the zero value runs
	// every task as the agent's own user. PassEnv names the agent
	// variables a task gets; nil means DefaultPassEnv. No other part of
	// the agent's environment reaches a task.
	TaskUsers gangway.TaskUsers
	PassEnv   []string
	// AdoptGrace is how long a task Temporal lost track of waits to be
	// adopted on an agent with no Temporal client to ask its workflow
	// (adopt.go; default DefaultAdoptGrace). Run asks instead.
	AdoptGrace time.Duration

	// GPU turns on GPU health (faults fence GPUs and move their jobs) and
	// reclaim (zombies, orphaned tasks, idle jobs); see health.go.
	GPU GPUConfig
}

// Agent runs one node.
type Agent struct {
	cfg Config
	cap Capacity
	log *slog.Logger

	beatMu sync.Mutex // serialises the node's heartbeats, its own and its host's batches

	mu sync.Mutex
	// busy is what runs on each GPU: tasks ("job/attempt/rank") and the
	// milli-GPU each holds, MilliPerGPU for a whole GPU. Shares of one GPU
	// sum to at most MilliPerGPU; a whole GPU has one task.
	busy map[int]map[string]int

	tasks   taskTable   // running tasks, for StopTasks, notices and adoption
	ended   endedTasks  // how tasks ended, for adoption
	jobs    jobQuery    // asks workflows about orphaned tasks; set by Run
	notices noticeState // notices seen, preempt signals sent
	// recordHeartbeat is activity.RecordHeartbeat unless a test watches.
	recordHeartbeat func(ctx context.Context, details ...any)

	gpu gpuState // GPU health and reclaim (health.go, reclaim.go)
}

// New returns an agent for cfg.Node.
func New(cfg Config, c Capacity) *Agent {
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = 2 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = DefaultShutdownGrace
	}
	if cfg.CheckpointPoll <= 0 {
		cfg.CheckpointPoll = defaultCheckpointPoll
	}
	if cfg.UploadTimeout <= 0 {
		cfg.UploadTimeout = defaultUploadTimeout
	}
	if cfg.TaskHeartbeat <= 0 {
		cfg.TaskHeartbeat = 2 * time.Second
	}
	if cfg.PassEnv == nil {
		cfg.PassEnv = DefaultPassEnv
	}
	return &Agent{cfg: cfg, cap: c, log: cfg.Log.With("node", cfg.Node.ID), busy: map[int]map[string]int{}}
}

// Run registers the node, serves RunTask on the node's task queue and
// heartbeats until ctx is done. Running tasks are killed when it returns.
func (a *Agent) Run(ctx context.Context, tc client.Client) error {
	if err := os.MkdirAll(a.cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("agent data dir: %w", err)
	}
	a.jobs = jobs.New(tc)
	lifted := a.restoreGPUHealth(ctx)
	if err := a.cap.RegisterNode(ctx, a.nodeView()); err != nil {
		return fmt.Errorf("register node %s: %w", a.cfg.Node.ID, err)
	}
	w := worker.New(tc, nodeTaskQueue(a.cfg.Node), worker.Options{
		MaxConcurrentActivityExecutionSize: max(len(a.cfg.Node.GPUs), 1) * 2,
		// On shutdown each task gets its stop signal and grace period
		// (within ShutdownGrace, with its final upload) before SIGKILL;
		// the worker waits for that.
		WorkerStopTimeout: a.cfg.ShutdownGrace + shutdownSave,
		// Cancellation reaches a task on its next heartbeat to the server;
		// sending one at least every second keeps gang stops and user
		// cancels prompt (the default waits up to 0.8 × HeartbeatTimeout).
		MaxHeartbeatThrottleInterval: time.Second,
	})
	w.RegisterActivityWithOptions(a.runTaskTracked, activity.RegisterOptions{Name: workflows.ActivityRunTask})
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker for node %s: %w", a.cfg.Node.ID, err)
	}
	defer w.Stop()
	defer a.startGPUWatch(ctx, tc, lifted)()
	if a.cfg.Notices != nil {
		go a.watchNotices(ctx, jobs.New(tc))
	}
	a.log.Info("agent up", "gpus", len(a.cfg.Node.GPUs), "model", a.cfg.Node.Model(), "pool", a.cfg.Node.Pool)

	every(ctx, a.cfg.HeartbeatInterval, a.heartbeat)
	return nil
}

// every calls f every d until ctx is done.
func every(ctx context.Context, d time.Duration, f func(context.Context)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f(ctx)
		}
	}
}

// nodeTaskQueue is the queue the node's tasks are sent to: the one its
// registration names, else its own.
func nodeTaskQueue(n gangway.Node) string {
	if n.TaskQueue != "" {
		return n.TaskQueue
	}
	return workflows.NodeTaskQueue(n.ID)
}

// heartbeat refreshes the node in Redis, with the tasks it runs,
// re-registering it if the view lost it (Redis is a rebuildable view; the
// agent holds the truth about its node) with the records of its tasks
// that exited 0 in the last hour.
func (a *Agent) heartbeat(ctx context.Context) {
	// One at a time: a beat that read the tasks earlier must not land
	// after one that read them later.
	a.beatMu.Lock()
	defer a.beatMu.Unlock()
	now := time.Now()
	err := a.cap.Heartbeat(ctx, a.cfg.Node.ID, a.tasks.reports())
	if errors.Is(err, capacity.ErrNotFound) {
		a.log.Warn("node missing from the view; registering again")
		if err = a.cap.RegisterNode(ctx, a.nodeView()); err == nil {
			a.recordDoneAgain(ctx)
			err = a.cap.Heartbeat(ctx, a.cfg.Node.ID, a.tasks.reports())
		}
	}
	if err == nil {
		a.heartbeatDone(now)
	}
	if err != nil && ctx.Err() == nil {
		a.log.Warn("heartbeat failed", "error", err)
	}
}

// claim marks gpus busy for task, each whole or, with 0 < milli <
// MilliPerGPU, a share of it; it reports the first GPU that cannot take
// the task. Every task on a GPU is refused the moment its shares would pass
// one GPU: the view never commits that, so it is a stale or forged
// assignment.
func (a *Agent) claim(gpus []int, milli int, task string) error {
	if milli <= 0 || milli >= gangway.MilliPerGPU {
		milli = gangway.MilliPerGPU
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, g := range gpus {
		if g < 0 || g >= len(a.cfg.Node.GPUs) {
			return fmt.Errorf("GPU %d does not exist on node %s (%d GPUs)", g, a.cfg.Node.ID, len(a.cfg.Node.GPUs))
		}
		held := 0
		for _, m := range a.busy[g] {
			held += m
		}
		if held+milli > gangway.MilliPerGPU {
			return fmt.Errorf("GPU %d on node %s is already running %s", g, a.cfg.Node.ID, strings.Join(slices.Sorted(maps.Keys(a.busy[g])), ", "))
		}
		if why := a.fencedReason(g); why != "" {
			return fmt.Errorf("GPU %d on node %s is fenced: %s", g, a.cfg.Node.ID, why)
		}
	}
	for _, g := range gpus {
		if a.busy[g] == nil {
			a.busy[g] = map[string]int{}
		}
		a.busy[g][task] = milli
	}
	return nil
}

func (a *Agent) unclaim(gpus []int, task string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, g := range gpus {
		delete(a.busy[g], task)
		if len(a.busy[g]) == 0 {
			delete(a.busy, g)
		}
	}
}

func (a *Agent) record(in workflows.RunTaskInput, start bool) {
	if a.cfg.Recorder == nil {
		return
	}
	a.cfg.Recorder.Record(Event{Node: a.cfg.Node.ID, GPUs: in.GPUs, JobID: in.JobID, Attempt: in.Attempt,
		Rank: in.Rank, Start: start, At: time.Now()})
}

func (a *Agent) logPath(in workflows.RunTaskInput) string {
	return filepath.Join(a.cfg.DataDir, "logs", in.JobID, fmt.Sprintf("attempt-%d-rank-%d.log", in.Attempt, in.Rank))
}
