package workflows

import (
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/gangwayhq/gangway"
)

// serverActivity is the retry policy of the short server-side activities:
// they are idempotent and must eventually succeed (a release must never be
// dropped), so they retry without limit.
var serverActivity = workflow.ActivityOptions{
	TaskQueue:           TaskQueue,
	StartToCloseTimeout: 10 * time.Second,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:    200 * time.Millisecond,
		BackoffCoefficient: 2,
		MaximumInterval:    10 * time.Second,
	},
}

// serverLocal is serverActivity as a local activity: run by the worker
// that runs the workflow task, in it, with one marker in the history
// instead of an activity task's round trip and its six events.
//
// While a local activity is tried the workflow task stays open: the
// worker heartbeats it every few seconds, three events each time, and the
// job answers no query. That is cheap for a blip, not for an outage of
// Redis or the ledger that lasts hours — a job would pile up a thousand
// events an hour, and `gangway status` would get no answer. So a local
// activity is tried for localTries only; then server goes on with the same
// activity on the server task queue (serverActivity), whose tries have no
// limit, leave no event until one succeeds, and let the workflow task
// close in between.
var serverLocal = workflow.LocalActivityOptions{
	StartToCloseTimeout:    serverActivity.StartToCloseTimeout,
	ScheduleToCloseTimeout: localTries,
	RetryPolicy:            serverActivity.RetryPolicy,
}

// localTries is how long a server-side local activity is tried before
// the activity moves to the server task queue: past the blips of a
// healthy Redis (a failover takes a few seconds), within a couple of the
// workflow task's heartbeats.
const localTries = 20 * time.Second

// server runs one of the short server-side activities (Enqueue,
// CheckPlacement, Dequeue, Release, RecordUsage, LatestCheckpoint,
// TaskDone): as a local activity from versionLocal on — and, if that runs
// out of tries, as an activity on the server task queue — else as an
// activity alone. Its error is one the activity would not retry, or the
// job's cancellation.
func (j *job) server(ctx workflow.Context, name string, in any) workflow.Future {
	remote := func() workflow.Future {
		return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, serverActivity), name, in)
	}
	if !j.local {
		return remote()
	}
	local := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, serverLocal), name, in)
	f, set := workflow.NewFuture(ctx)
	workflow.Go(ctx, func(gctx workflow.Context) {
		if err := local.Get(gctx, nil); err != nil && retryable(err) {
			set.Chain(remote())
			return
		}
		set.Chain(local)
	})
	return f
}

// retryable reports whether an activity's err is one more tries could
// cure: not its cancellation, nor an error it marked as final.
func retryable(err error) bool {
	var app *temporal.ApplicationError
	return !temporal.IsCanceledError(err) && !(errors.As(err, &app) && app.NonRetryable())
}

// runGrace is added to a job's max runtime for the RunTask StartToClose
// timeout, so a task that hits its own limit still has time to stop.
const runGrace = 5 * time.Minute

// maxInfraRestarts bounds requeues caused by infrastructure, so a job that
// keeps hitting a broken node cannot loop forever.
const maxInfraRestarts = 100

// outcome is how one attempt of the gang ended.
type outcome int

const (
	outcomeSucceeded outcome = iota
	outcomeCancelled
	outcomeUserFailure  // spends a user retry
	outcomeInfraFailure // node lost, GPU busy, preempted: requeue for free
	outcomeFatal        // max runtime exceeded: no retry
	outcomeReleased     // the idle policy released the GPUs: the job ends
)

// JobWorkflow runs one job from submit to a terminal phase:
// validate → enqueue → wait for placement → run the gang → release, with
// requeues for infrastructure failures and user retries for the job's own.
// It always completes with a Status whose phase is terminal; it returns an
// error only for an invalid spec.
func JobWorkflow(ctx workflow.Context, in JobInput) (Status, error) {
	spec := in.Spec
	// Submit applied the server's env policy; the workflow checks only the
	// spec's shape, so a policy changed since cannot fail it on replay.
	if err := spec.Validate(gangway.AllowLoaderEnv()); err != nil {
		return Status{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeInvalidSpec, err)
	}
	j := &job{
		spec:   spec,
		timing: in.Timing.withDefaults(),
		limits: in.Limits.withDefaults(),
		st: Status{
			JobID:       spec.Name,
			Team:        spec.Team,
			Project:     spec.Project,
			SubmittedAt: workflow.GetInfo(ctx).WorkflowStartTime,
		},
		placed:  workflow.GetSignalChannel(ctx, SignalPlaced),
		preempt: workflow.GetSignalChannel(ctx, SignalPreempt),
		burst:   workflow.GetSignalChannel(ctx, SignalBurst),
	}
	// A run from versionLean on has every change before it; one recorded
	// before takes each as its own markers say.
	if j.lean = workflow.GetVersion(ctx, versionLean, workflow.DefaultVersion, 1) >= 1; j.lean {
		j.v1, j.v2, j.checkPlaced, j.v3, j.v4, j.local = true, true, true, true, true, true
	} else {
		j.oldVersions(ctx)
	}
	if j.v2 {
		sa := workflow.GetTypedSearchAttributes(ctx)
		_, j.search = sa.GetKeyword(SearchTeam)
		j.phase, _ = sa.GetKeyword(SearchPhase)
	}
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (Status, error) { return j.st, nil }); err != nil {
		return Status{}, fmt.Errorf("set status query: %w", err)
	}
	if err := workflow.SetQueryHandler(ctx, QueryView, func() (ViewState, error) { return j.view, nil }); err != nil {
		return Status{}, fmt.Errorf("set view query: %w", err)
	}
	if c := in.Continued; c != nil {
		j.resume(c)
	} else {
		if j.v3 {
			j.st.Runs = 1
		}
		j.setPhase(ctx, gangway.PhaseSubmitted, "")
	}
	st, more := j.run(ctx)
	if more {
		return Status{}, j.continueAsNew(ctx, in)
	}
	if !j.v2 {
		return st, nil
	}
	if err := closeError(st); err != nil {
		return Status{}, err
	}
	return st, nil
}

type job struct {
	spec    gangway.JobSpec
	timing  Timing
	limits  Limits
	st      Status
	placed  workflow.ReceiveChannel
	preempt workflow.ReceiveChannel
	burst   workflow.ReceiveChannel
	// since is when the current phase began, for wait and run totals.
	since time.Time
	// v1: this run records attempts and usage, resumes from checkpoints
	// and accepts bursts (see versionAttempts).
	v1 bool
	// v2: this run closes as Failed or Cancelled in Temporal when the job
	// ends so, and keeps its search attributes when it was started with
	// them (search); see versionVisibility.
	v2, search bool
	// checkPlaced: this run acts on a placed signal only once it is
	// checked against the committed allocation (see versionCheckPlacement).
	checkPlaced bool
	// v3: this run continues as new when its history grows near
	// Temporal's limits, and keeps a bounded status (see
	// versionContinueAsNew).
	v3 bool
	// v4: after a heartbeat timeout this run adopts the task still running
	// on the node (see versionAdopt).
	v4 bool
	// local: the short server-side activities run as local activities
	// (see versionLocal).
	local bool
	// lean: this run's history is the short one of versionLean; phase is
	// the value of its GangwayPhase search attribute.
	lean  bool
	phase string
	// pool is the pool in the GangwayPool search attribute.
	pool string
	// resumeFrom is the checkpoint the next attempt starts from.
	resumeFrom *CheckpointRef
	// view is what the job holds in the Redis view (QueryView).
	view ViewState
}

// versionAttempts is the change ID of attempt records, usage segments,
// checkpoint resume and cloud bursts.
const versionAttempts = "attempts-usage-checkpoints-bursts"

// versionVisibility is the change ID of closing Failed and Cancelled jobs'
// workflows as failed and cancelled, and of keeping search attributes.
const versionVisibility = "close-status-search-attributes"

// versionCheckPlacement is the change ID of checking each placed signal
// against the allocation committed in Redis before acting on it.
const versionCheckPlacement = "check-placement-committed"

// versionContinueAsNew is the change ID of continuing as new between
// attempts and of bounding the attempt records and phase changes the
// status keeps (continue.go).
const versionContinueAsNew = "continue-as-new-bounded-status"

// versionAdopt is the change ID of adopting a task after its heartbeat
// timed out (a Temporal outage) rather than calling its node lost.
const versionAdopt = "adopt-after-heartbeat-timeout"

// versionLocal is the change ID of running the short server-side
// activities as local activities (job.server).
const versionLocal = "local-server-activities"

// versionLean is the change ID of a shorter history per job: its one
// marker stands for every change above (a run records one version marker
// and its search-attribute upsert instead of six of each), RecordRun runs
// as a local activity, and a phase change goes to the GangwayPhase search
// attribute alone where the run has search attributes — only when it
// changes, and not for Placed, which Running follows in the same workflow
// task — and to the memo only where it has none (jobs.List reads
// GangwayPhase first).
const versionLean = "lean-history"

// versionTaskDone is the change ID of reading, when a member's node is
// lost, whether its agent recorded the task exiting 0 first
// (TaskDone): such a member counts as done rather than lost. The marker
// is written only when a node is lost.
const versionTaskDone = "task-done-record"

// oldVersions reads the changes of a run recorded before versionLean,
// each from its own marker, in the order they were added.
func (j *job) oldVersions(ctx workflow.Context) {
	// Histories recorded before attempt records, the ledger, checkpoints
	// and bursts replay along the old path.
	j.v1 = workflow.GetVersion(ctx, versionAttempts, workflow.DefaultVersion, 1) >= 1
	// Runs from before this close with their Status whatever the phase and
	// set no search attributes.
	j.v2 = workflow.GetVersion(ctx, versionVisibility, workflow.DefaultVersion, 1) >= 1
	// Runs from before this act on any placed signal for their attempt.
	j.checkPlaced = workflow.GetVersion(ctx, versionCheckPlacement, workflow.DefaultVersion, 1) >= 1
	// Runs from before this continue as new never, and keep every attempt
	// record and phase change.
	j.v3 = workflow.GetVersion(ctx, versionContinueAsNew, workflow.DefaultVersion, 1) >= 1
	// Runs from before this give a node up on a task's heartbeat timeout.
	j.v4 = workflow.GetVersion(ctx, versionAdopt, workflow.DefaultVersion, 1) >= 1
	// Runs from before this run the server-side activities as activities.
	j.local = workflow.GetVersion(ctx, versionLocal, workflow.DefaultVersion, 1) >= 1
}

// maxAdopts bounds the adoptions of one member's task: a task whose
// heartbeats keep timing out, adopted or not, is on a node that is lost.
const maxAdopts = 3

// adoptStartTimeout is how long an adopting RunTask may wait for the
// node's agent to take it: an agent polls again within seconds of Temporal
// returning; one that does not is gone, and its node lost.
func adoptStartTimeout(t Timing) time.Duration { return max(3*t.HeartbeatTimeout, 30*time.Second) }

// lostTrack reports whether a task's error means Temporal lost track of
// it (its heartbeats timed out) rather than that it ended.
func lostTrack(err error) bool {
	var te *temporal.TimeoutError
	return errors.As(err, &te) && te.TimeoutType() == enumspb.TIMEOUT_TYPE_HEARTBEAT
}

// attemptEnd is how one attempt of the gang ended.
type attemptEnd struct {
	out    outcome
	cause  string // Cause* constant
	reason string
	by     gangway.JobID
	// stopAt is when a preempt request arrived (zero otherwise).
	stopAt time.Time
	// lostNode is the node a member was lost on.
	lostNode string
}

// run loops over attempts until the job ends (more false), or until this
// run's history is full enough that the job continues as new before its
// next attempt (more true).
func (j *job) run(ctx workflow.Context) (st Status, more bool) {
	for {
		j.st.Attempt++
		attempt := j.st.Attempt
		if attempt > 1 {
			j.setPhase(ctx, gangway.PhaseRequeued, j.st.Reason)
		}
		entry := j.spec.QueueEntry(attempt, j.st.SubmittedAt, workflow.Now(ctx))
		if j.resumeFrom != nil {
			entry.Runtime, entry.Kept = j.remaining(), j.kept()
		}
		if !j.enqueue(ctx, entry) {
			return j.cancelled(ctx, "cancelled while queueing"), false
		}
		asg, burst, ok := j.waitPlacement(ctx, attempt)
		if !ok {
			return j.cancelled(ctx, "cancelled while queued"), false
		}
		var end attemptEnd
		if burst != nil {
			end = j.runBurst(ctx, entry, *burst)
		} else {
			end = j.runPlaced(ctx, asg)
		}
		if st, done := j.afterAttempt(ctx, end); done {
			return st, false
		}
		if j.v3 && ctx.Err() == nil && j.historyFull(ctx) {
			return j.st, true
		}
	}
}

// enqueue puts this attempt in the queue and marks the job Queued; false
// means the workflow was cancelled.
func (j *job) enqueue(ctx workflow.Context, entry gangway.QueueEntry) bool {
	err := j.server(ctx, ActivityEnqueue, EnqueueInput{Entry: entry}).Get(ctx, nil)
	if err != nil {
		return false
	}
	j.view = ViewState{JobID: entry.JobID, Attempt: entry.Attempt, Entry: &entry, Queued: true}
	reason := "waiting for GPUs"
	if len(entry.Nodes) > 0 {
		reason = fmt.Sprintf("waiting for placement on its instances %v", entry.Nodes)
	}
	j.setPhase(ctx, gangway.PhaseQueued, reason)
	return true
}

// runPlaced runs the gang where the dispatch loop placed it and frees the
// GPUs afterwards.
func (j *job) runPlaced(ctx workflow.Context, asg gangway.Assignment) attemptEnd {
	j.st.Assignment = &asg
	j.view.Queued, j.view.Holding = false, &asg
	if j.lean {
		// Running follows in this workflow task: only it is published.
		j.recordPhase(ctx, gangway.PhasePlaced, placedReason(asg))
	} else {
		j.setPhase(ctx, gangway.PhasePlaced, placedReason(asg))
	}
	j.setPhase(ctx, gangway.PhaseRunning, placedReason(asg))
	end := j.runGang(ctx, asg)
	j.release(ctx, asg.Attempt, end.lostNode)
	j.view.Holding = nil
	return end
}

// afterAttempt settles an attempt's outcome: the job ends, or the loop
// goes round again with the reason set.
func (j *job) afterAttempt(ctx workflow.Context, end attemptEnd) (Status, bool) {
	switch end.out {
	case outcomeSucceeded:
		return j.finish(ctx, gangway.PhaseSucceeded, "all members exited 0"), true
	case outcomeCancelled:
		// Where the attempt was: running, or provisioning cloud instances.
		return j.finish(ctx, gangway.PhaseCancelled, end.reason), true
	case outcomeFatal:
		return j.finish(ctx, gangway.PhaseFailed, end.reason), true
	case outcomeReleased:
		return j.finish(ctx, gangway.PhaseCancelled, end.reason), true
	case outcomeInfraFailure:
		if j.st.InfraRestarts >= maxInfraRestarts {
			return j.finish(ctx, gangway.PhaseFailed,
				fmt.Sprintf("%s; gave up after %d infrastructure restarts", end.reason, maxInfraRestarts)), true
		}
		j.st.InfraRestarts++
		j.st.Reason = end.reason + "; requeued (infrastructure, no retry spent)"
	case outcomeUserFailure:
		if j.st.UserRetries >= j.spec.Retries {
			return j.finish(ctx, gangway.PhaseFailed,
				fmt.Sprintf("%s; no retries left (%d allowed)", end.reason, j.spec.Retries)), true
		}
		j.st.UserRetries++
		j.st.Reason = fmt.Sprintf("%s; retry %d of %d", end.reason, j.st.UserRetries, j.spec.Retries)
	}
	return Status{}, false
}

// waitPlacement blocks until the dispatch loop signals an assignment (or,
// for a job that may burst, a burst) for this attempt, or the workflow is
// cancelled. Signals for other attempts are leftovers (a re-signal from a
// new leader) and are dropped: their GPUs are freed by the release of that
// attempt.
func (j *job) waitPlacement(ctx workflow.Context, attempt int) (gangway.Assignment, *BurstRequest, bool) {
	for {
		var asg gangway.Assignment
		var burst BurstRequest
		got, gotBurst := false, false
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(j.placed, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, &asg)
			got = true
		})
		if j.v1 {
			sel.AddReceive(j.burst, func(c workflow.ReceiveChannel, _ bool) {
				c.Receive(ctx, &burst)
				gotBurst = true
			})
		}
		sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) {})
		sel.Select(ctx)
		switch {
		case gotBurst && burst.Attempt == attempt && len(burst.Offers) > 0:
			j.view.Queued = false // the dispatch loop took it off the queue
			return gangway.Assignment{}, &burst, true
		case gotBurst:
			workflow.GetLogger(ctx).Info("ignoring burst for another attempt", "attempt", attempt, "signalAttempt", burst.Attempt)
			continue
		case !got:
			return gangway.Assignment{}, nil, false
		}
		if asg.Attempt == attempt && len(asg.Members) == j.spec.Gang.Replicas {
			if ok, cancelled := j.committed(ctx, asg); cancelled {
				return gangway.Assignment{}, nil, false
			} else if ok {
				return asg, nil, true
			}
			continue
		}
		workflow.GetLogger(ctx).Info("ignoring placement for another attempt",
			"attempt", attempt, "signalAttempt", asg.Attempt)
	}
}

// committed checks a placed signal for this attempt against the allocation
// the dispatch loop committed: only that one is acted on. Anyone who can
// signal the workflow could otherwise send its tasks to any node.
func (j *job) committed(ctx workflow.Context, asg gangway.Assignment) (ok, cancelled bool) {
	if !j.checkPlaced {
		return true, false
	}
	var res CheckPlacementResult
	err := j.server(ctx, ActivityCheckPlacement, CheckPlacementInput{Assignment: asg}).Get(ctx, &res)
	if err != nil {
		// Only a cancel ends a retry without limit.
		return false, true
	}
	if !res.Committed {
		j.st.IgnoredPlacements++
		workflow.GetLogger(ctx).Warn("ignoring a placed signal that does not match the committed allocation",
			"attempt", asg.Attempt, "where", asg.Where(), "reason", res.Reason)
	}
	return res.Committed, false
}

// runGang starts one RunTask per member on its task queue and waits
// for all of them. The first failure cancels the rest; because activities
// wait for cancellation, every process is gone when runGang returns (or its
// node is lost), so the GPUs can be released. A preempt request (the
// scheduler, a drain, a GPU fault, a cloud notice) cancels the gang the same
// way; the agents checkpoint on the way down.
func (j *job) runGang(ctx workflow.Context, asg gangway.Assignment) attemptEnd {
	gctx, cancelGang := workflow.WithCancel(ctx)
	defer cancelGang()
	runStart := workflow.Now(ctx)
	rec := j.startAttempt(asg, runStart)
	j.recordRecovery(ctx, rec)
	sel := workflow.NewSelector(ctx)
	var firstErr error
	var firstRank, done int
	var preempted *PreemptRequest
	var stopAt time.Time
	sel.AddReceive(j.preempt, func(c workflow.ReceiveChannel, _ bool) {
		var req PreemptRequest
		c.Receive(ctx, &req)
		if req.Attempt == asg.Attempt && preempted == nil && firstErr == nil {
			preempted = &req
			stopAt = workflow.Now(ctx)
			cancelGang()
		}
	})
	// run starts a member's task; after Temporal lost track of it (a
	// heartbeat timeout, as a Temporal outage leaves), it adopts the task
	// still running on the node instead of giving the node up (v4).
	var run func(m gangway.Member, adopts int)
	run = func(m gangway.Member, adopts int) {
		opts := workflow.ActivityOptions{
			TaskQueue:              MemberTaskQueue(m),
			ScheduleToStartTimeout: j.timing.StartTimeout,
			StartToCloseTimeout:    j.spec.MaxRuntime.Duration + runGrace,
			HeartbeatTimeout:       j.timing.HeartbeatTimeout,
			WaitForCancellation:    true,
			RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
		}
		in := j.taskInput(asg, m)
		mctx := gctx
		if adopts > 0 {
			in.Adopt = true
			opts.ScheduleToStartTimeout = adoptStartTimeout(j.timing)
			// The task's run time counts from its start, not from the
			// adoption.
			opts.StartToCloseTimeout = max(runStart.Add(j.spec.MaxRuntime.Duration+runGrace).Sub(workflow.Now(ctx)), time.Minute)
			if gctx.Err() != nil {
				// The gang is stopping: adopt the task to stop it, so
				// nothing runs on once the GPUs are released.
				mctx, _ = workflow.NewDisconnectedContext(ctx)
				in.AdoptToStop = true
			}
		}
		rank := m.Rank
		f := workflow.ExecuteActivity(workflow.WithActivityOptions(mctx, opts), ActivityRunTask, in)
		finish := func(err error) {
			done++
			if err != nil && firstErr == nil && preempted == nil {
				firstErr, firstRank = err, rank
				cancelGang()
			}
		}
		sel.AddFuture(f, func(f workflow.Future) {
			err := f.Get(ctx, nil)
			if j.v4 && adopts < maxAdopts && lostTrack(err) {
				workflow.GetLogger(ctx).Warn("Temporal lost track of a task; adopting it", "rank", rank, "adopts", adopts+1)
				run(m, adopts+1)
				return
			}
			if err == nil || classify(err, rank, asg).lostNode == "" ||
				workflow.GetVersion(ctx, versionTaskDone, workflow.DefaultVersion, 1) < 1 {
				finish(err)
				return
			}
			// The node is lost: it may have gone after the task exited 0
			// and before the agent could say so.
			in := TaskDoneInput{TaskRef: TaskRef{JobID: j.spec.Name, Attempt: asg.Attempt, Rank: rank, NodeID: m.NodeID}, Pool: m.Pool}
			sel.AddFuture(j.server(ctx, ActivityTaskDone, in), func(df workflow.Future) {
				var exited0 bool
				if df.Get(ctx, &exited0) == nil && exited0 {
					workflow.GetLogger(ctx).Info("node lost after the task exited 0; the member counts as done", "rank", rank, "node", m.NodeID)
					err = nil
				}
				finish(err)
			})
		})
	}
	for _, m := range asg.Members {
		run(m, 0)
	}
	for done < len(asg.Members) {
		sel.Select(ctx)
	}
	j.addRun(workflow.Now(ctx).Sub(runStart), asg)
	var end attemptEnd
	switch {
	case ctx.Err() != nil:
		end = attemptEnd{out: outcomeCancelled, cause: CauseCancelled, reason: "cancelled while running"}
	case preempted != nil:
		end = preemptEnd(*preempted)
		end.stopAt = stopAt
	case firstErr == nil:
		end = attemptEnd{out: outcomeSucceeded, cause: CauseCompleted, reason: "all members exited 0"}
	default:
		end = classify(firstErr, firstRank, asg)
	}
	j.endAttempt(ctx, rec, asg, end)
	return end
}

// preemptEnd turns a preempt request into the attempt's end.
func preemptEnd(req PreemptRequest) attemptEnd {
	cause := req.Cause
	if cause == "" {
		cause = CausePreempted
	}
	what := map[string]string{CauseNotice: "cloud preemption notice", CauseDrain: "node drained",
		CauseFault: "GPU fault", CauseIdle: "idle"}[cause]
	if what == "" {
		what = "preempted"
	}
	reason := what
	if req.Reason != "" {
		reason += ": " + req.Reason
	}
	return attemptEnd{out: outcomeInfraFailure, cause: cause, reason: reason, by: req.By}
}

// classify turns the first member failure into the attempt's end.
func classify(err error, rank int, asg gangway.Assignment) attemptEnd {
	node := ""
	for _, m := range asg.Members {
		if m.Rank == rank {
			node = m.NodeID
		}
	}
	where := fmt.Sprintf("rank %d on node %s", rank, node)
	var te *temporal.TimeoutError
	if errors.As(err, &te) {
		switch te.TimeoutType() {
		case enumspb.TIMEOUT_TYPE_HEARTBEAT:
			return attemptEnd{out: outcomeInfraFailure, cause: CauseNodeLost, lostNode: node,
				reason: fmt.Sprintf("node lost: %s stopped heartbeating", where)}
		case enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START:
			return attemptEnd{out: outcomeInfraFailure, cause: CauseNodeLost, lostNode: node,
				reason: fmt.Sprintf("node lost: no agent picked up %s", where)}
		case enumspb.TIMEOUT_TYPE_START_TO_CLOSE, enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE:
			return attemptEnd{out: outcomeFatal, cause: CauseTimeout, reason: fmt.Sprintf("%s exceeded maxRuntime", where)}
		}
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		switch ae.Type() {
		case ErrTypeGPUBusy, ErrTypeRestoreFailed:
			return attemptEnd{out: outcomeInfraFailure, cause: CauseInfra, reason: fmt.Sprintf("%s: %s", where, ae.Message())}
		case ErrTypeNodeShutdown:
			// The agent stopped heartbeating as it began to shut down, but
			// the node looks alive for a node TTL yet: reported like a lost
			// node, it gets no new work (the requeued job included) until
			// its agent is back.
			return attemptEnd{out: outcomeInfraFailure, cause: CauseInfra, lostNode: node, reason: fmt.Sprintf("%s: %s", where, ae.Message())}
		case ErrTypeGPUFault:
			return attemptEnd{out: outcomeInfraFailure, cause: CauseFault, reason: fmt.Sprintf("GPU fault: %s: %s", where, ae.Message())}
		case ErrTypeIdle:
			return attemptEnd{out: outcomeReleased, cause: CauseIdle, reason: fmt.Sprintf("released by the idle policy: %s", ae.Message())}
		case ErrTypeTaskUnknown:
			return attemptEnd{out: outcomeInfraFailure, cause: CauseNodeLost, lostNode: node,
				reason: fmt.Sprintf("node lost: %s: %s", where, ae.Message())}
		}
		return attemptEnd{out: outcomeUserFailure, cause: CauseFailed, reason: fmt.Sprintf("%s failed: %s", where, ae.Message())}
	}
	return attemptEnd{out: outcomeUserFailure, cause: CauseFailed, reason: fmt.Sprintf("%s failed: %v", where, err)}
}

func (j *job) taskInput(asg gangway.Assignment, m gangway.Member) RunTaskInput {
	return RunTaskInput{
		JobID:       j.spec.Name,
		Team:        j.spec.Team,
		Project:     j.spec.Project,
		Attempt:     asg.Attempt,
		Rank:        m.Rank,
		WorldSize:   len(asg.Members),
		MasterAddr:  asg.MasterAddr(),
		NodeID:      m.NodeID,
		GPUs:        m.GPUs,
		GPUMilli:    m.Milli,
		Sharing:     j.spec.Gang.Sharing,
		MIGProfile:  m.MIG,
		Command:     j.spec.Command,
		Args:        j.spec.Args,
		Env:         j.spec.Env,
		WorkingDir:  j.spec.WorkingDir,
		RunAs:       j.spec.RunAs,
		StopSignal:  j.spec.Checkpoint.Signal,
		GracePeriod: j.spec.Checkpoint.GracePeriod.Duration,
		Checkpoint:  j.spec.Checkpoint.Enabled,
		ResumeFrom:  resumeID(j.resumeFrom),
		Keep:        j.spec.Checkpoint.Keep,
		Idle:        j.spec.Idle,
	}
}

func resumeID(r *CheckpointRef) string {
	if r == nil {
		return ""
	}
	return r.ID
}

// release frees the attempt's GPUs and reports a lost node. It runs on a
// disconnected context so it happens even when the workflow is being
// cancelled.
func (j *job) release(ctx workflow.Context, attempt int, lostNode string) {
	in := ReleaseInput{JobID: j.spec.Name, Attempt: attempt}
	if lostNode != "" && j.v1 {
		in.LostNodes = []string{lostNode}
	}
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	err := j.server(dctx, ActivityRelease, in).Get(dctx, nil)
	if err != nil {
		// Release retries without limit, so this is only reachable if the
		// activity is misregistered; the reconciler frees the GPUs then.
		workflow.GetLogger(ctx).Error("release failed", "attempt", attempt, "error", err)
	}
}

// cancelled takes the job out of the queue, frees anything a racing commit
// gave it, and ends it Cancelled. Dequeue comes first: a commit after it is
// rejected because the job is no longer queued.
func (j *job) cancelled(ctx workflow.Context, reason string) Status {
	j.withdraw(ctx)
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	return j.finish(dctx, gangway.PhaseCancelled, reason)
}

// withdraw takes the job out of the queue and frees anything a racing
// commit gave the current attempt.
func (j *job) withdraw(ctx workflow.Context) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	err := j.server(dctx, ActivityDequeue, DequeueInput{JobID: j.spec.Name}).Get(dctx, nil)
	if err != nil {
		workflow.GetLogger(ctx).Error("dequeue failed", "error", err)
	}
	j.release(ctx, j.st.Attempt, "")
	j.view.Queued, j.view.Holding = false, nil
}

func (j *job) finish(ctx workflow.Context, p gangway.Phase, reason string) Status {
	j.setPhase(ctx, p, reason)
	return j.st
}

// setPhase records a transition and publishes it: the GangwayPhase search
// attribute and, without search attributes or before versionLean, the memo
// `gangway list` reads.
func (j *job) setPhase(ctx workflow.Context, p gangway.Phase, reason string) {
	j.recordPhase(ctx, p, reason)
	j.publishPhase(ctx, p)
}

// recordPhase records a transition in the status and accrues wait time.
func (j *job) recordPhase(ctx workflow.Context, p gangway.Phase, reason string) {
	now := workflow.Now(ctx)
	switch j.st.Phase {
	case gangway.PhaseSubmitted, gangway.PhaseQueued, gangway.PhaseRequeued, gangway.PhaseProvisioning:
		j.st.WaitTime += now.Sub(j.since) // waiting, as the user sees it
	}
	j.st.Phase, j.st.Reason, j.since = p, reason, now
	j.st.Phases = append(j.st.Phases, PhaseChange{Phase: p, At: now, Attempt: j.st.Attempt, Reason: reason})
	if j.v3 {
		j.trimPhases()
	}
}

// publishPhase mirrors phase p into the search attributes and the memo.
func (j *job) publishPhase(ctx workflow.Context, p gangway.Phase) {
	if !j.lean || !j.search {
		memo := map[string]any{MemoPhase: string(p), MemoTeam: j.spec.Team,
			MemoGPUs: j.spec.Gang.Replicas * j.spec.Gang.GPUsPerReplica}
		if err := workflow.UpsertMemo(ctx, memo); err != nil {
			workflow.GetLogger(ctx).Warn("memo update failed", "error", err)
		}
	}
	if j.search {
		var updates []temporal.SearchAttributeUpdate
		if !j.lean || string(p) != j.phase {
			updates = append(updates, SearchPhase.ValueSet(string(p)))
			j.phase = string(p)
		}
		if a := j.st.Assignment; a != nil && len(a.Members) > 0 && a.Members[0].Pool != "" && a.Members[0].Pool != j.pool {
			j.pool = a.Members[0].Pool
			updates = append(updates, SearchPool.ValueSet(j.pool))
		}
		if len(updates) == 0 {
			return
		}
		if err := workflow.UpsertTypedSearchAttributes(ctx, updates...); err != nil {
			workflow.GetLogger(ctx).Warn("search attribute update failed", "error", err)
		}
	}
}

// addRun adds a run of asg lasting d: GPU time at each GPU's share.
func (j *job) addRun(d time.Duration, asg gangway.Assignment) {
	j.st.RunTime += d
	j.st.GPUSeconds += gangway.MeteredGPUSeconds(d.Seconds(), asg.GPUCount(), asg.GPUMilli())
}

// placedReasonMembers bounds the members placedReason names, so a large
// gang's phase changes stay small.
const placedReasonMembers = 8

func placedReason(a gangway.Assignment) string {
	s := ""
	for i, m := range a.Members {
		if i == placedReasonMembers {
			s += fmt.Sprintf(", and %d more", len(a.Members)-i)
			break
		}
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("rank %d on %s GPUs %v", m.Rank, m.NodeID, m.GPUs)
	}
	return s
}
