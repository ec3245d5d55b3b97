package agent

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// A Temporal outage is not a node loss. While Temporal is unreachable a
// task's heartbeats fail, and once they have failed for its heartbeat
// timeout the SDK cancels the activity; when Temporal comes back it times
// the activity out. Neither means the task is in trouble: the process runs
// on. So the agent keeps it running, orphaned, and the job's workflow,
// seeing the heartbeat timeout, sends an adopting RunTask
// (RunTaskInput.Adopt) for the same job, attempt and rank. That attaches
// to the process (heartbeats, cancellation, the result go to the new
// activity), or, when the process ended meanwhile, returns how it ended —
// the exit code the agent kept. An orphaned task whose attempt
// the job's workflow no longer runs for is stopped (checkpointing first), so
// an orphan never holds GPUs long after its workflow let go of them.

// DefaultAdoptGrace is how long an orphaned task waits to be adopted, when
// Config.AdoptGrace is zero, on an agent that has no Temporal client to ask
// its workflow (tests that call RunTask directly).
const DefaultAdoptGrace = 5 * time.Minute

// endedRetention is how long the agent keeps how a task ended, for a
// workflow that learns of it late (adopting after an outage).
const (
	endedRetention = time.Hour
	endedMax       = 10000
)

// adoption is an adopting RunTask handing its activity to a running task.
type adoption struct {
	ctx    context.Context
	stop   bool // RunTaskInput.AdoptToStop
	result chan taskResult
}

type taskResult struct {
	res workflows.RunTaskResult
	err error
}

// ended is how a task ended, kept for adoption.
type ended struct {
	taskResult
	at time.Time
}

// endedTasks remembers how tasks ended.
type endedTasks struct {
	mu sync.Mutex
	m  map[taskKey]ended
}

func keyOf(in workflows.RunTaskInput) taskKey { return taskKey{in.JobID, in.Attempt, in.Rank} }

func (e *endedTasks) put(k taskKey, r taskResult) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[taskKey]ended{}
	}
	now := time.Now()
	for old, v := range e.m {
		if now.Sub(v.at) > endedRetention || len(e.m) >= endedMax {
			delete(e.m, old)
		}
	}
	e.m[k] = ended{taskResult: r, at: now}
}

// exited0 is the tasks kept that exited 0, each with when it did.
func (e *endedTasks) exited0() map[taskKey]time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[taskKey]time.Time{}
	for k, v := range e.m {
		if v.err == nil {
			out[k] = v.res.FinishedAt
		}
	}
	return out
}

func (e *endedTasks) get(k taskKey) (taskResult, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	v, ok := e.m[k]
	return v.taskResult, ok
}

// lostTrack reports whether the activity behind ctx ended because
// Temporal lost track of it: the SDK cancels an activity with the service's
// error as the cause when the server no longer knows it, or could not be
// reached for its heartbeat timeout. Not: the workflow cancelled it (a
// CanceledError), its run time ran out (the context's deadline), or a
// plain cancel (the worker shutting down, a caller's context).
func lostTrack(ctx context.Context) bool {
	if !errors.Is(ctx.Err(), context.Canceled) {
		return false
	}
	cause := context.Cause(ctx)
	var ce *temporal.CanceledError
	return cause != nil && cause != context.Canceled && !errors.As(cause, &ce)
}

// adopt serves an adopting RunTask: it attaches to the running task, or
// returns how the task ended, or ErrTypeTaskUnknown.
func (a *Agent) adopt(ctx context.Context, in workflows.RunTaskInput) (workflows.RunTaskResult, error) {
	log := a.log.With("job_id", in.JobID, "attempt", in.Attempt, "rank", in.Rank)
	k := keyOf(in)
	for {
		if r, ok := a.ended.get(k); ok {
			log.Info("adopted a task that ended while Temporal had lost track of it", "error", r.err)
			return r.res, r.err
		}
		rt := a.tasks.find(k)
		if rt == nil {
			return workflows.RunTaskResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("node %s runs no task %s attempt %d rank %d and has no record of one (the agent restarted, or it never ran here)",
					a.cfg.Node.ID, in.JobID, in.Attempt, in.Rank), workflows.ErrTypeTaskUnknown, nil)
		}
		ad := adoption{ctx: ctx, stop: in.AdoptToStop, result: make(chan taskResult, 1)}
		select {
		case rt.adopt <- ad:
			log.Info("adopted a running task", "stop", in.AdoptToStop)
			r := <-ad.result
			return r.res, r.err
		case <-rt.done:
			// It ended as we came: its record is in a.ended.
		case <-ctx.Done():
			return workflows.RunTaskResult{}, ctx.Err()
		}
	}
}

// settle hands the task's result to the activity that adopted it, and
// keeps it for one that may still come.
func (a *Agent) settle(rt *runningTask, in workflows.RunTaskInput, r taskResult) {
	a.ended.put(keyOf(in), r)
	rt.mu.Lock()
	ad := rt.adopter
	rt.mu.Unlock()
	if ad != nil {
		ad.result <- r
	}
	close(rt.done)
}

// orphanCheck is how often an orphaned task's workflow is asked whether
// it still wants the task.
const orphanCheck = 5 * time.Second

// orphaned waits, after Temporal lost track of the task, for an adopting
// RunTask, the process's exit or a stop. Every orphanCheck it asks the
// job's workflow whether it still runs this attempt; once it does not (it
// ended, or moved on to another attempt) the task is stopped, so an orphan
// never holds GPUs its workflow let go of. Without Temporal to ask (it is
// still down) the task runs on. over is false when the task was adopted
// and goes on under its new activity.
func (a *Agent) orphaned(cmd *exec.Cmd, in workflows.RunTaskInput, rt *runningTask, up *uploader, done <-chan error,
	workerStop <-chan struct{}) (err error, why stopCause, over bool) {
	a.log.Warn("Temporal lost track of a running task; keeping it for its workflow to adopt",
		"job_id", in.JobID, "attempt", in.Attempt, "rank", in.Rank)
	since := time.Now()
	t := time.NewTicker(orphanCheck)
	defer t.Stop()
	for {
		select {
		case ad := <-rt.adopt:
			return a.adopted(cmd, in, rt, up, done, ad)
		case err := <-done:
			return err, stopCause{reason: stopExited}, true
		case <-workerStop:
			return a.stop(cmd, in, up, done, true), stopCause{reason: stopShutdown}, true
		case req := <-rt.stop:
			return a.stop(cmd, in, up, done, false), stopCause{reason: stopRequested, errType: req.errType, message: req.reason}, true
		case <-t.C:
			if why := a.unwanted(in, since); why != "" {
				a.log.Warn("stopping an orphaned task", "job_id", in.JobID, "attempt", in.Attempt, "rank", in.Rank, "why", why)
				return a.stop(cmd, in, up, done, false), stopCause{reason: stopRequested, errType: workflows.ErrTypeNodeShutdown, message: why}, true
			}
		}
	}
}

// unwanted says why an orphaned task should stop, "" while its workflow
// may still adopt it (or cannot be asked). Without a way to ask (an agent
// not run through Run), it waits Config.AdoptGrace.
func (a *Agent) unwanted(in workflows.RunTaskInput, since time.Time) string {
	if a.jobs == nil {
		grace := a.cfg.AdoptGrace
		if grace <= 0 {
			grace = DefaultAdoptGrace
		}
		if time.Since(since) > grace {
			return fmt.Sprintf("no workflow adopted it within %s", grace)
		}
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), orphanCheck)
	defer cancel()
	st, err := a.jobs.Query(ctx, in.JobID)
	switch {
	case errors.Is(err, jobs.ErrJobGone):
		return "its job's workflow has ended"
	case err != nil:
		return "" // Temporal is still unreachable: keep it
	case st.Phase.Terminal():
		return fmt.Sprintf("its job has ended %s", st.Phase)
	case st.Attempt != in.Attempt:
		return fmt.Sprintf("its job has moved on to attempt %d", st.Attempt)
	}
	return ""
}

// jobQuery is what an agent asks a job's workflow about its orphans.
type jobQuery interface {
	Query(ctx context.Context, id string) (workflows.Status, error)
}

// adopted moves the task to the adopting activity; one adopted to stop is
// stopped now.
func (a *Agent) adopted(cmd *exec.Cmd, in workflows.RunTaskInput, rt *runningTask, up *uploader, done <-chan error,
	ad adoption) (error, stopCause, bool) {
	rt.mu.Lock()
	rt.ctx, rt.adopter = ad.ctx, &ad
	rt.mu.Unlock()
	if ad.stop {
		return a.stop(cmd, in, up, done, false), stopCause{reason: stopRequested, errType: workflows.ErrTypeNodeShutdown,
			message: "stopped on adoption: the gang was stopping"}, true
	}
	return nil, stopCause{}, false
}
