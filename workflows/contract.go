package workflows

import (
	"time"

	"github.com/gangwayhq/gangway"
)

// TaskQueue is where JobWorkflow and the server-side activities run.
const TaskQueue = "gangway"

// NodeTaskQueue is the task queue a node's agent polls for RunTask.
func NodeTaskQueue(nodeID string) string { return "node/" + nodeID }

// WorkflowName is the registered name of JobWorkflow.
const WorkflowName = "JobWorkflow"

// Activity names. Workflows call activities by name so this package never
// imports their implementations.
const (
	ActivityEnqueue = "Enqueue"
	ActivityDequeue = "Dequeue"
	ActivityRelease = "Release"
	ActivityRunTask = "RunTask"
)

// Signal and query names.
const (
	// SignalPlaced carries a gangway.Assignment from the dispatch loop. It is
	// sent only after the assignment is committed in Redis, and may be sent
	// again (a new leader re-signals); the workflow ignores repeats.
	SignalPlaced = "placed"
	// SignalPreempt carries a PreemptRequest: the scheduler wants the
	// running attempt's GPUs for higher-priority work. The job stops, is
	// requeued keeping its place, and spends no retry.
	SignalPreempt = "preempt"
	// QueryStatus returns a Status.
	QueryStatus = "status"
)

// PreemptRequest asks a running attempt to stop.
type PreemptRequest struct {
	Attempt int    `json:"attempt"`
	Reason  string `json:"reason"`
}

// Application error types RunTask returns; JobWorkflow classifies failures by
// them.
const (
	// ErrTypeTaskFailed: the process exited non-zero or could not start.
	// The user's fault; it spends a retry.
	ErrTypeTaskFailed = "TaskFailed"
	// ErrTypeGPUBusy: the agent refused because a GPU it was given is
	// already running something (invariant 1 at the edge). Not the user's
	// fault; the job is requeued without spending a retry.
	ErrTypeGPUBusy = "GPUBusy"
	// ErrTypeInvalidSpec: the spec failed validation inside the workflow.
	ErrTypeInvalidSpec = "InvalidSpec"
)

// JobInput starts a JobWorkflow.
type JobInput struct {
	Spec gangway.JobSpec `json:"spec"`
	// Timing tunes timeouts; zero fields take the defaults.
	Timing Timing `json:"timing,omitempty"`
}

// Timing holds the workflow's timeouts. They travel in the input (not read
// from config) so replay is deterministic.
type Timing struct {
	// HeartbeatTimeout: a RunTask that misses heartbeats this long means
	// the node is lost. Cancel reaches a task within about 0.8 × this.
	HeartbeatTimeout time.Duration `json:"heartbeatTimeout,omitempty"`
	// StartTimeout: a RunTask no agent picks up this long means the node
	// is lost.
	StartTimeout time.Duration `json:"startTimeout,omitempty"`
}

// Default timing values.
const (
	DefaultHeartbeatTimeout = 10 * time.Second
	DefaultStartTimeout     = time.Minute
)

func (t Timing) withDefaults() Timing {
	if t.HeartbeatTimeout <= 0 {
		t.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if t.StartTimeout <= 0 {
		t.StartTimeout = DefaultStartTimeout
	}
	return t
}

// EnqueueInput asks the capacity view to queue the job.
type EnqueueInput struct {
	Entry gangway.QueueEntry `json:"entry"`
}

// DequeueInput removes a job from the queue (no-op if absent).
type DequeueInput struct {
	JobID gangway.JobID `json:"jobId"`
}

// ReleaseInput frees every GPU the job holds for attempts up to Attempt.
type ReleaseInput struct {
	JobID   gangway.JobID `json:"jobId"`
	Attempt int           `json:"attempt"`
}

// RunTaskInput is one gang member's task, sent to its node's task queue.
type RunTaskInput struct {
	JobID      gangway.JobID     `json:"jobId"`
	Team       string            `json:"team"`
	Project    string            `json:"project,omitempty"`
	Attempt    int               `json:"attempt"`
	Rank       int               `json:"rank"`
	WorldSize  int               `json:"worldSize"`
	MasterAddr string            `json:"masterAddr"`
	NodeID     string            `json:"nodeId"`
	GPUs       []int             `json:"gpus"`
	Command    []string          `json:"command"`
	Args       []string          `json:"args,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	WorkingDir string            `json:"workingDir,omitempty"`
	// StopSignal and GracePeriod govern how the agent stops the process on
	// cancel: the signal, then SIGKILL to the group after the grace period.
	StopSignal  string        `json:"stopSignal,omitempty"`
	GracePeriod time.Duration `json:"gracePeriod,omitempty"`
}

// RunTaskResult reports a member that exited 0.
type RunTaskResult struct {
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`
	LogPath    string    `json:"logPath"`
}

// PhaseChange is one transition in a job's life.
type PhaseChange struct {
	Phase   gangway.Phase `json:"phase"`
	At      time.Time     `json:"at"`
	Attempt int           `json:"attempt"`
	Reason  string        `json:"reason,omitempty"`
}

// Status is what QueryStatus returns and, with totals filled, JobWorkflow's
// result.
type Status struct {
	JobID   gangway.JobID `json:"jobId"`
	Team    string        `json:"team"`
	Project string        `json:"project,omitempty"`
	Phase   gangway.Phase `json:"phase"`
	// Reason is the last thing that happened to the job, in words.
	Reason string `json:"reason,omitempty"`
	// Attempt counts placements; UserRetries the retries the job's own
	// failures spent; InfraRestarts the requeues caused by infrastructure.
	Attempt       int                 `json:"attempt"`
	UserRetries   int                 `json:"userRetries"`
	InfraRestarts int                 `json:"infraRestarts"`
	Assignment    *gangway.Assignment `json:"assignment,omitempty"`
	Phases        []PhaseChange       `json:"phases"`
	SubmittedAt   time.Time           `json:"submittedAt"`
	// Totals over all attempts so far.
	WaitTime   time.Duration `json:"waitTime"`
	RunTime    time.Duration `json:"runTime"`
	GPUSeconds float64       `json:"gpuSeconds"`
}

// Memo keys JobWorkflow keeps up to date so `gangway list` can show jobs
// without querying each one.
const (
	MemoPhase = "phase"
	MemoTeam  = "team"
	MemoGPUs  = "gpus"
)

// ErrTypeNodeShutdown: the agent was stopping and killed the task. Not the
// user's fault; the job is requeued without spending a retry.
const ErrTypeNodeShutdown = "NodeShutdown"
