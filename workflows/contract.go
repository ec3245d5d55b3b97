package workflows

import (
	"time"

	"github.com/gangwayhq/gangway"
)

// TaskQueue is where JobWorkflow and the server-side activities run.
const TaskQueue = "gangway"

// NodeTaskQueue is the task queue a node's agent polls for RunTask.
func NodeTaskQueue(nodeID string) string { return "node/" + nodeID }

// HostTaskQueue is the task queue one process hosting many simulated nodes
// polls for all of them (internal/agent.Host); their Node.TaskQueue names it.
func HostTaskQueue(hostID string) string { return "host/" + hostID }

// MemberTaskQueue is where a gang member's RunTask goes: the task queue its
// assignment names, else its node's own. Assignments made before members
// named a queue replay to the same queue they were sent to.
func MemberTaskQueue(m gangway.Member) string {
	if m.TaskQueue != "" {
		return m.TaskQueue
	}
	return NodeTaskQueue(m.NodeID)
}

// WorkflowName is the registered name of JobWorkflow.
const WorkflowName = "JobWorkflow"

// Activity names. Workflows call activities by name so this package never
// imports their implementations. Enqueue, Dequeue, Release, RecordUsage,
// LatestCheckpoint and CheckPlacement run as local activities (in the
// worker that runs the job's workflow task, so every worker on TaskQueue
// registers them); RunTask runs on the node's queue, the cloud activities
// and RecordRun on TaskQueue.
const (
	ActivityEnqueue = "Enqueue"
	ActivityDequeue = "Dequeue"
	ActivityRelease = "Release"
	ActivityRunTask = "RunTask"

	// Cloud bursts (workflows/activities, backed by providers).
	ActivityProvision  = "Provision"  // ProvisionInput → ProvisionResult
	ActivityAwaitNodes = "AwaitNodes" // AwaitNodesInput → AwaitNodesResult
	ActivityTerminate  = "Terminate"  // TerminateInput → int (instances terminated)

	// Accounting and checkpoints.
	ActivityRecordUsage      = "RecordUsage"      // RecordUsageInput
	ActivityLatestCheckpoint = "LatestCheckpoint" // LatestCheckpointInput → CheckpointRef (ID "" when none)
	ActivityRecordRun        = "RecordRun"        // RecordRunInput: run metrics

	// ActivityCheckPlacement compares a placed signal with the allocation
	// committed in Redis: CheckPlacementInput → CheckPlacementResult.
	ActivityCheckPlacement = "CheckPlacement"
)

// CheckPlacementInput is a placed signal the workflow is about to act on.
type CheckPlacementInput struct {
	Assignment gangway.Assignment `json:"assignment"`
}

// CheckPlacementResult says whether the signal is the allocation the
// dispatch loop committed; Reason says how it differs when it is not.
type CheckPlacementResult struct {
	Committed bool   `json:"committed"`
	Reason    string `json:"reason,omitempty"`
}

// Signal and query names.
const (
	// SignalPlaced carries a gangway.Assignment from the dispatch loop. It is
	// sent only after the assignment is committed in Redis, and may be sent
	// again (a new leader re-signals); the workflow ignores repeats, and
	// ignores (and logs) one that is not the committed allocation: a
	// forged signal cannot send the job's tasks anywhere.
	SignalPlaced = "placed"
	// SignalPreempt carries a PreemptRequest: the scheduler wants the
	// running attempt's GPUs for higher-priority work, a node is drained, a
	// GPU faulted, or a cloud gave a preemption notice. The job checkpoints
	// (when it can), stops, is requeued keeping its place, and spends no
	// retry.
	SignalPreempt = "preempt"
	// SignalBurst carries a BurstRequest from the dispatch loop: run this
	// attempt on instances rented for it. Sent after the job left the queue.
	SignalBurst = "burst"
	// QueryStatus returns a Status.
	QueryStatus = "status"
	// QueryView returns a ViewState: what the job holds in the Redis
	// view, for a rebuild of a lost view.
	QueryView = "view"
)

// ViewState is what a job's workflow holds in the Redis view, as it knows
// it: the queue entry of its current attempt while it waits in the queue
// (Queued), or the assignment whose GPUs it holds (Holding). The view is
// rebuilt from these when it is lost.
type ViewState struct {
	JobID   gangway.JobID `json:"jobId"`
	Attempt int           `json:"attempt"`
	// Entry is the attempt's queue entry (nil before the first Enqueue);
	// Holding's CPU and memory come from it.
	Entry   *gangway.QueueEntry `json:"entry,omitempty"`
	Queued  bool                `json:"queued,omitempty"`
	Holding *gangway.Assignment `json:"holding,omitempty"`
}

// PreemptRequest asks a running attempt to stop.
type PreemptRequest struct {
	Attempt int    `json:"attempt"`
	Reason  string `json:"reason"`
	// Cause classifies it for the attempt record and metrics; "" means
	// CausePreempted.
	Cause string `json:"cause,omitempty"`
	// By is the job that preempted this one, for CausePreempted.
	By gangway.JobID `json:"by,omitempty"`
	// NodeID is the node the notice or fault is about.
	NodeID string `json:"nodeId,omitempty"`
	// Deadline is when a cloud takes the instance away (CauseNotice);
	// zero otherwise.
	Deadline time.Time `json:"deadline,omitzero"`
}

// How an attempt ended, in attempt records and metric labels.
const (
	CauseCompleted  = "completed"   // every member exited 0
	CauseFailed     = "failed"      // the job's own failure (spends a retry)
	CauseCancelled  = "cancelled"   // the user cancelled
	CausePreempted  = "preempted"   // the scheduler wanted the GPUs
	CauseNotice     = "notice"      // a cloud preemption notice
	CauseDrain      = "drain"       // a person drained the node
	CauseFault      = "fault"       // a GPU fault fenced the GPU
	CauseNodeLost   = "node-lost"   // heartbeats stopped: no chance to save
	CauseIdle       = "idle"        // the idle policy released the GPUs
	CauseInfra      = "infra"       // another infrastructure problem (busy GPU, agent shutdown)
	CauseTimeout    = "timeout"     // maxRuntime exceeded
	CauseNoCapacity = "no-capacity" // a burst got no instances in time
)

// Causes lists every Cause*, for metrics that create their series up front.
var Causes = []string{CauseCompleted, CauseFailed, CauseCancelled, CausePreempted, CauseNotice, CauseDrain,
	CauseFault, CauseNodeLost, CauseIdle, CauseInfra, CauseTimeout, CauseNoCapacity}

// BurstRequest tells a queued job's workflow to rent capacity for this
// attempt: the offers in order of preference, each tried until one gives
// Count instances whose agents register.
type BurstRequest struct {
	Attempt int `json:"attempt"`
	// Team is the job's: a leader charges a burst whose instances are
	// still launching to the team's budget from the recorded request.
	Team   string               `json:"team,omitempty"`
	Offers []gangway.BurstOffer `json:"offers"`
	// Reason is the placement engine's explanation ("on-prem ETA 3h10m;
	// spot costs $4.10 expected").
	Reason string `json:"reason"`
}

// ProvisionInput launches the instances of one burst attempt. Token is
// derived from job and attempt (and the offer's index) in the workflow, so
// a retried activity never launches twice.
type ProvisionInput struct {
	JobID   gangway.JobID      `json:"jobId"`
	Attempt int                `json:"attempt"`
	Team    string             `json:"team"`
	Project string             `json:"project,omitempty"`
	Token   string             `json:"token"`
	Offer   gangway.BurstOffer `json:"offer"`
	// MaxPricePerHour caps a spot price per instance (0: the cloud's default).
	MaxPricePerHour float64 `json:"maxPricePerHour,omitempty"`
	// JoinBy is when the instances' one-use join token expires; set by the
	// workflow so a retried launch renders the same boot data.
	JoinBy time.Time `json:"joinBy,omitzero"`
}

// Instance is a launched instance as the workflow tracks it.
type Instance struct {
	Provider string `json:"provider"`
	ID       string `json:"id"`
	NodeID   string `json:"nodeId"`
}

// ProvisionResult lists what Provision launched (or adopted on a retry).
type ProvisionResult struct {
	Instances []Instance `json:"instances"`
}

// AwaitNodesInput waits until every node has registered with the capacity
// view; the activity heartbeats while it waits and fails with
// ErrTypeNodesNotReady after Timeout.
type AwaitNodesInput struct {
	NodeIDs []string      `json:"nodeIds"`
	Timeout time.Duration `json:"timeout"`
}

// AwaitNodesResult reports when the last node registered.
type AwaitNodesResult struct {
	ReadyAt time.Time `json:"readyAt"`
}

// TerminateInput ends every instance launched with Token by Provider. It
// is the burst saga's compensation and is idempotent.
type TerminateInput struct {
	Provider string        `json:"provider"`
	Token    string        `json:"token"`
	JobID    gangway.JobID `json:"jobId"`
	// NodeIDs are removed from the capacity view.
	NodeIDs []string `json:"nodeIds,omitempty"`
}

// RecordUsageInput adds one segment to the ledger. Recording the same
// segment again (same job, attempt, pool and start) is a no-op.
type RecordUsageInput struct {
	Segment gangway.UsageSegment `json:"segment"`
}

// RecordRunInput reports a run to the metrics: one that ended, or a job
// running again after its previous run was stopped or lost.
type RecordRunInput struct {
	JobID gangway.JobID `json:"jobId"`
	Team  string        `json:"team"`
	// Ended is the run that just ended; nil for a recovery.
	Ended *AttemptRecord `json:"ended,omitempty"`
	// RecoveredCause is why the previous run stopped, RecoveredAfter the
	// time from its stop request (or its end, when it was lost) to this
	// run starting.
	RecoveredCause string        `json:"recoveredCause,omitempty"`
	RecoveredAfter time.Duration `json:"recoveredAfter,omitempty"`
}

// LatestCheckpointInput asks for the job's newest committed checkpoint.
type LatestCheckpointInput struct {
	JobID gangway.JobID `json:"jobId"`
}

// CheckpointRef names a checkpoint in the store the agents share. At is
// when its state was captured (checkpoint.Manifest.Captured): the work
// since then is what a stop without a newer one loses.
type CheckpointRef struct {
	ID    string    `json:"id"`
	Step  *int64    `json:"step,omitempty"`
	At    time.Time `json:"at,omitzero"`
	Bytes int64     `json:"bytes,omitempty"`
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
	// Limits bound one run's history and the status's size; zero fields
	// take the defaults.
	Limits Limits `json:"limits,omitzero"`
	// Continued is what a run hands the next when the job continues as
	// new between attempts; nil on a job's first run.
	Continued *Continued `json:"continued,omitempty"`
}

// Limits keep a job inside Temporal's limits however often it is
// restarted: a run's history (events and bytes) and the status it returns.
// They travel in the input, as Timing does, so replay is deterministic.
type Limits struct {
	// RunEvents and RunBytes: a run whose history would pass either with
	// one more attempt (estimated from the gang's size and its task input)
	// continues as new first. Defaults 8,192 events and 8 MiB, under
	// Temporal's warnings at 10,240 events and 10 MiB.
	RunEvents int `json:"runEvents,omitempty"`
	RunBytes  int `json:"runBytes,omitempty"`
	// AttemptRecords is how many attempt records the status keeps one by
	// one, newest last (default 20); older ones are summed in
	// Status.EarlierAttempts. PhaseChanges is how many phase changes it
	// keeps (default 64); older ones are counted in Status.EarlierPhases.
	AttemptRecords int `json:"attemptRecords,omitempty"`
	PhaseChanges   int `json:"phaseChanges,omitempty"`
}

// Default limits.
const (
	DefaultRunEvents      = 8192
	DefaultRunBytes       = 8 << 20
	DefaultAttemptRecords = 20
	DefaultPhaseChanges   = 64
)

func (l Limits) withDefaults() Limits {
	if l.RunEvents <= 0 {
		l.RunEvents = DefaultRunEvents
	}
	if l.RunBytes <= 0 {
		l.RunBytes = DefaultRunBytes
	}
	if l.AttemptRecords <= 0 {
		l.AttemptRecords = DefaultAttemptRecords
	}
	if l.PhaseChanges <= 0 {
		l.PhaseChanges = DefaultPhaseChanges
	}
	return l
}

// Continued is the state of a job carried from one workflow run to the
// next: its status so far (with Attempt the attempt that just ended), the
// checkpoint its next attempt resumes from, the pool in its search
// attributes, and when its current phase began.
type Continued struct {
	Status Status         `json:"status"`
	Resume *CheckpointRef `json:"resume,omitempty"`
	Pool   string         `json:"pool,omitempty"`
	Since  time.Time      `json:"since"`
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
	// BootTimeout: instances launched for a burst whose agents have not
	// all registered this long are given up on (terminated; the next offer
	// is tried).
	BootTimeout time.Duration `json:"bootTimeout,omitempty"`
}

// Default timing values.
const (
	DefaultHeartbeatTimeout = 10 * time.Second
	DefaultStartTimeout     = time.Minute
	DefaultBootTimeout      = 10 * time.Minute
)

func (t Timing) withDefaults() Timing {
	if t.HeartbeatTimeout <= 0 {
		t.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if t.StartTimeout <= 0 {
		t.StartTimeout = DefaultStartTimeout
	}
	if t.BootTimeout <= 0 {
		t.BootTimeout = DefaultBootTimeout
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
	// LostNodes are nodes the attempt found lost, or whose agent shut
	// down: they get no new work until they heartbeat again, so the
	// requeued job does not land there.
	LostNodes []string `json:"lostNodes,omitempty"`
}

// RunTaskInput is one gang member's task, sent to its node's task queue.
type RunTaskInput struct {
	JobID      gangway.JobID `json:"jobId"`
	Team       string        `json:"team"`
	Project    string        `json:"project,omitempty"`
	Attempt    int           `json:"attempt"`
	Rank       int           `json:"rank"`
	WorldSize  int           `json:"worldSize"`
	MasterAddr string        `json:"masterAddr"`
	NodeID     string        `json:"nodeId"`
	GPUs       []int         `json:"gpus"`
	// GPUMilli is the member's share of each of its GPUs (0: whole GPUs),
	// enforced as Sharing says.
	GPUMilli int             `json:"gpuMilli,omitempty"`
	Sharing  gangway.Sharing `json:"sharing,omitempty"`
	// MIGProfile is set when GPUs are MIG devices of that profile: the
	// agent refuses a task whose GPUs are not.
	MIGProfile string            `json:"migProfile,omitempty"`
	Command    []string          `json:"command"`
	Args       []string          `json:"args,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	WorkingDir string            `json:"workingDir,omitempty"`
	// RunAs is the spec's runAs: the Unix user the agent runs the task as
	// when its policy allows the team that one ("": the team's default).
	RunAs string `json:"runAs,omitempty"`
	// StopSignal and GracePeriod govern how the agent stops the process on
	// cancel: the signal, then SIGKILL to the group after the grace period.
	StopSignal  string        `json:"stopSignal,omitempty"`
	GracePeriod time.Duration `json:"gracePeriod,omitempty"`
	// Checkpoint settings (docs/checkpointing.md). With Checkpoint set the
	// agent gives the process GANGWAY_CHECKPOINT_DIR, uploads what rank 0
	// writes there, and restores ResumeFrom (a checkpoint ID; "" on a first
	// run) into GANGWAY_RESUME_DIR before it starts. Keep is the retention.
	Checkpoint bool   `json:"checkpoint,omitempty"`
	ResumeFrom string `json:"resumeFrom,omitempty"`
	Keep       int    `json:"keep,omitempty"`
	// Idle is the job's idle policy; zero After means none.
	Idle gangway.Idle `json:"idle,omitzero"`
	// Adopt asks the agent for the task of job, attempt and rank that an
	// earlier RunTask started and Temporal lost track of (its heartbeats
	// timed out while Temporal was unreachable): the agent attaches this
	// activity to the process still running, or returns how it ended if it
	// has; ErrTypeTaskUnknown if it has no such task. Nothing is started.
	// AdoptToStop: the gang is stopping, so the adopted task is stopped
	// (checkpointing first) rather than waited for.
	Adopt       bool `json:"adopt,omitempty"`
	AdoptToStop bool `json:"adoptToStop,omitempty"`
}

// RunTaskResult reports a member that exited 0.
type RunTaskResult struct {
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`
	LogPath    string    `json:"logPath"`
}

// RunTaskProgress is the heartbeat detail RunTask records: the newest
// checkpoint this member uploaded.
type RunTaskProgress struct {
	Checkpoint CheckpointRef `json:"checkpoint,omitzero"`
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
	// Dollars is what the job's GPU time cost, over every pool; it equals
	// the sum of the job's ledger segments.
	Dollars float64 `json:"dollars"`
	// LostGPUSeconds is GPU time whose work was thrown away: the time since
	// the last checkpoint on every attempt that ended without saving.
	LostGPUSeconds float64 `json:"lostGPUSeconds,omitempty"`
	// IgnoredPlacements counts placed signals for the current attempt that
	// did not match the committed allocation (forged, or stale).
	IgnoredPlacements int `json:"ignoredPlacements,omitempty"`
	// Attempts records each run: where, how it ended, what it resumed from
	// — the newest Limits.AttemptRecords of them; EarlierAttempts sums the
	// ones before (nil when none were folded).
	Attempts        []AttemptRecord `json:"attempts,omitempty"`
	EarlierAttempts *AttemptSummary `json:"earlierAttempts,omitempty"`
	// EarlierPhases counts the phase changes no longer in Phases, which
	// keeps the newest Limits.PhaseChanges.
	EarlierPhases int `json:"earlierPhases,omitempty"`
	// Runs counts the job's workflow runs: 1, plus one each time it
	// continued as new (0 for runs from before continuing as new).
	Runs int `json:"runs,omitempty"`
}

// AttemptSummary sums attempt records the status no longer keeps one by
// one.
type AttemptSummary struct {
	// Count attempts, numbers First to Last.
	Count int `json:"count"`
	First int `json:"first"`
	Last  int `json:"last"`
	// Ended counts them by how they ended (a Cause*).
	Ended          map[string]int `json:"ended"`
	GPUSeconds     float64        `json:"gpuSeconds"`
	LostGPUSeconds float64        `json:"lostGPUSeconds,omitempty"`
	Dollars        float64        `json:"dollars"`
	// KeptRunSeconds is their run time whose work was kept (run time less
	// lost), which the estimate of a resumed job's remaining run counts.
	KeptRunSeconds float64 `json:"keptRunSeconds"`
}

// AttemptRecord is one run of the gang.
type AttemptRecord struct {
	Attempt      int                  `json:"attempt"`
	Pool         string               `json:"pool"`
	CapacityType gangway.CapacityType `json:"capacityType"`
	Nodes        []string             `json:"nodes"`
	GPUs         int                  `json:"gpus"`
	// GPUMilli is what the GPUs count for together, each at its share
	// (gangway.Assignment.GPUMilli); 0 in records from before shares were
	// metered, which count GPUs whole.
	GPUMilli  int64     `json:"gpuMilli,omitempty"`
	StartedAt time.Time `json:"startedAt"`
	EndedAt   time.Time `json:"endedAt,omitzero"`
	// Ended is one of the Cause constants; "" while running.
	Ended string `json:"ended,omitempty"`
	// StopRequestedAt is when the scheduler, a person, a GPU fault or a
	// cloud notice asked the attempt to stop; EndedAt - StopRequestedAt is
	// how long the checkpoint and shutdown took.
	StopRequestedAt time.Time     `json:"stopRequestedAt,omitzero"`
	By              gangway.JobID `json:"by,omitempty"`
	Reason          string        `json:"reason,omitempty"`
	// ResumedFrom is the checkpoint the attempt started from; nil for a
	// fresh start.
	ResumedFrom *CheckpointRef `json:"resumedFrom,omitempty"`
	// Checkpoint is the newest checkpoint the attempt left.
	Checkpoint     *CheckpointRef `json:"checkpoint,omitempty"`
	LostGPUSeconds float64        `json:"lostGPUSeconds,omitempty"`
	Dollars        float64        `json:"dollars"`
}

// Memo keys JobWorkflow keeps up to date so `gangway list` can show jobs
// without querying each one.
const (
	MemoPhase = "phase"
	MemoTeam  = "team"
	MemoGPUs  = "gpus"
	// MemoSubmitted is when the job was submitted (set at start; every
	// run inherits the memo, so it holds after a continue-as-new).
	MemoSubmitted = "submitted"
)

// More application error types.
const (
	// ErrTypeNodeShutdown: the agent was stopping and killed the task. Not
	// the user's fault; the job is requeued without spending a retry.
	ErrTypeNodeShutdown = "NodeShutdown"
	// ErrTypeGPUFault: a GPU the task held faulted (an Xid NVIDIA blames on
	// the hardware, a double-bit ECC error, off the bus). The agent
	// checkpointed and stopped the task; the job moves without spending a
	// retry. (An Xid that blames the application is ErrTypeTaskFailed.)
	ErrTypeGPUFault = "GPUFault"
	// ErrTypeIdle: the job's idle policy released its GPUs. The job ends.
	ErrTypeIdle = "Idle"
	// ErrTypeNodesNotReady: AwaitNodes timed out.
	ErrTypeNodesNotReady = "NodesNotReady"
	// ErrTypeRestoreFailed: the agent could not restore the checkpoint the
	// attempt resumes from (store unreachable, corrupt file). Not the
	// user's fault; the job is requeued without spending a retry.
	ErrTypeRestoreFailed = "RestoreFailed"
	// ErrTypeTaskUnknown: an adopting RunTask found no such task on the
	// node, running or ended (the agent restarted since, or it never ran
	// there): the node is lost as far as the attempt is concerned.
	ErrTypeTaskUnknown = "TaskUnknown"
)
