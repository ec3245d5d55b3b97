package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// TaskInfo is a task running on this node.
type TaskInfo struct {
	JobID   gangway.JobID
	Attempt int
	Rank    int
	GPUs    []int
	// Milli is the share of each GPU the task holds (0: whole GPUs).
	Milli int
	// WorkflowID is the job's workflow (the job ID).
	WorkflowID string
	StartedAt  time.Time
}

// runningTask is a task RunTask is running, with the channel StopTasks
// asks it to stop on.
type runningTask struct {
	info TaskInfo
	stop chan stopRequest // buffered 1: the first request wins
	// adopt takes an adopting RunTask (adopt.go); done is closed once the
	// task's result is settled.
	adopt chan adoption
	done  chan struct{}

	mu sync.Mutex
	// ctx is the context of the activity the task runs under: the RunTask
	// that started it, or the one that adopted it; adopter is that one.
	ctx     context.Context
	adopter *adoption
	// exited: its process group is gone; heartbeats no longer report it,
	// although RunTask has yet to save its checkpoint and return.
	exited atomic.Bool
}

// activity is the context of the activity the task runs under now.
func (rt *runningTask) activity() context.Context {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.ctx
}

type stopRequest struct{ errType, reason string }

// taskTable is the set of running tasks.
type taskTable struct {
	mu    sync.Mutex
	tasks map[*runningTask]struct{}
}

func (t *taskTable) add(ctx context.Context, in workflows.RunTaskInput) *runningTask {
	rt := &runningTask{info: TaskInfo{JobID: in.JobID, Attempt: in.Attempt, Rank: in.Rank,
		GPUs: slices.Clone(in.GPUs), Milli: in.GPUMilli, WorkflowID: in.JobID, StartedAt: time.Now()},
		stop: make(chan stopRequest, 1), adopt: make(chan adoption), done: make(chan struct{}), ctx: ctx}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tasks == nil {
		t.tasks = map[*runningTask]struct{}{}
	}
	t.tasks[rt] = struct{}{}
	return rt
}

func (t *taskTable) remove(rt *runningTask) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.tasks, rt)
}

// reports lists the running tasks as the node's heartbeat carries them:
// those whose processes still run.
func (t *taskTable) reports() []capacity.Task {
	var out []capacity.Task
	for _, rt := range t.all() {
		if rt.exited.Load() {
			continue
		}
		out = append(out, capacity.Task{JobID: rt.info.JobID, Attempt: rt.info.Attempt, Rank: rt.info.Rank,
			GPUs: rt.info.GPUs, Milli: rt.info.Milli})
	}
	return out
}

// find returns the running task of job, attempt and rank, nil if none.
func (t *taskTable) find(k taskKey) *runningTask {
	t.mu.Lock()
	defer t.mu.Unlock()
	for rt := range t.tasks {
		if rt.info.JobID == k.job && rt.info.Attempt == k.attempt && rt.info.Rank == k.rank {
			return rt
		}
	}
	return nil
}

func (t *taskTable) all() []*runningTask {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*runningTask
	for rt := range t.tasks {
		out = append(out, rt)
	}
	slices.SortFunc(out, func(x, y *runningTask) int {
		if x.info.JobID != y.info.JobID {
			if x.info.JobID < y.info.JobID {
				return -1
			}
			return 1
		}
		if x.info.Attempt != y.info.Attempt {
			return x.info.Attempt - y.info.Attempt
		}
		return x.info.Rank - y.info.Rank
	})
	return out
}

// RunningTasks lists the tasks running on this node, by job, attempt and
// rank.
func (a *Agent) RunningTasks() []TaskInfo {
	var out []TaskInfo
	for _, rt := range a.tasks.all() {
		info := rt.info
		info.GPUs = slices.Clone(info.GPUs)
		out = append(out, info)
	}
	return out
}

// StopTasks stops every task running on any of gpus as a preemption would
// (stop signal, grace period, kill, final checkpoint saved) and makes its
// RunTask fail with a non-retryable ApplicationError of type errType and
// message reason: workflows.ErrTypeGPUFault for a GPU fault, so the job
// moves without spending a retry, or workflows.ErrTypeTaskFailed for an
// error the application caused. It returns how many tasks it asked to stop
// and does not wait for them. A task asked twice keeps the first request.
func (a *Agent) StopTasks(gpus []int, errType, reason string) int {
	n := 0
	for _, rt := range a.tasks.all() {
		if !slices.ContainsFunc(rt.info.GPUs, func(g int) bool { return slices.Contains(gpus, g) }) {
			continue
		}
		select {
		case rt.stop <- stopRequest{errType: errType, reason: reason}:
			a.log.Info("stopping task", "job_id", rt.info.JobID, "attempt", rt.info.Attempt, "rank", rt.info.Rank,
				"type", errType, "reason", reason)
		default: // already asked
		}
		n++
	}
	return n
}

// Preempter asks a job's workflow to preempt an attempt; *jobs.Jobs is
// one.
type Preempter interface {
	SignalPreempt(ctx context.Context, jobID gangway.JobID, req workflows.PreemptRequest) error
}

// noticeState remembers the node's notice and which attempts were told.
type noticeState struct {
	mu       sync.Mutex
	sig      Preempter       // set once notices are watched
	done     <-chan struct{} // closed when the agent stops watching
	notice   *Notice         // the first interruption or maintenance notice
	deadline time.Time       // the soonest deadline of those notices
	told     map[string]bool // "job/attempt" signalled
}

// signalRetry is how often a failed preempt signal is tried again,
// signalGiveUp how long without a deadline, signalTimeout how long one try
// may take.
const (
	signalRetry   = time.Second
	signalGiveUp  = 2 * time.Minute
	signalTimeout = 10 * time.Second
)

// watchNotices turns cfg.Notices into preempt signals until ctx ends.
func (a *Agent) watchNotices(ctx context.Context, s Preempter) {
	a.notices.mu.Lock()
	a.notices.sig, a.notices.done = s, ctx.Done()
	a.notices.mu.Unlock()
	for {
		select {
		case <-ctx.Done():
			return
		case n, ok := <-a.cfg.Notices:
			if !ok {
				return
			}
			a.handleNotice(n)
		}
	}
}

// handleNotice signals, once per attempt, the workflow of every task
// running here to preempt it, with the notice's deadline. A rebalance
// recommendation is only logged: it says an interruption may come.
func (a *Agent) handleNotice(n Notice) {
	log := a.log.With("kind", n.Kind, "source", n.Source, "detail", n.Detail)
	if !n.Deadline.IsZero() {
		log = log.With("deadline", n.Deadline, "in", time.Until(n.Deadline).Round(time.Second))
	}
	switch n.Kind {
	case NoticeInterruption, NoticeMaintenance:
	case NoticeRebalance:
		log.Info("cloud recommends moving work off this node; waiting for an interruption notice")
		return
	default:
		log.Warn("unknown notice kind; ignored")
		return
	}
	a.notices.mu.Lock()
	if a.notices.notice == nil {
		a.notices.notice = &n
	}
	if !n.Deadline.IsZero() && (a.notices.deadline.IsZero() || n.Deadline.Before(a.notices.deadline)) {
		a.notices.deadline = n.Deadline
	}
	a.notices.mu.Unlock()
	tasks := a.RunningTasks()
	log.Warn("node is going away; preempting its tasks", "tasks", len(tasks))
	for _, t := range tasks {
		a.preempt(t.JobID, t.Attempt, n)
	}
}

// preemptIfNoticed preempts a task that starts after the node got its
// notice: it will not finish here.
func (a *Agent) preemptIfNoticed(in workflows.RunTaskInput) {
	a.notices.mu.Lock()
	n := a.notices.notice
	a.notices.mu.Unlock()
	if n != nil {
		a.preempt(in.JobID, in.Attempt, *n)
	}
}

// preempt signals job's workflow, once per attempt, retrying in the
// background until the signal is taken or the notice's deadline passes.
func (a *Agent) preempt(job gangway.JobID, attempt int, n Notice) {
	key := fmt.Sprintf("%s/%d", job, attempt)
	a.notices.mu.Lock()
	sig, done := a.notices.sig, a.notices.done
	if sig == nil || a.notices.told[key] {
		a.notices.mu.Unlock()
		return
	}
	if a.notices.told == nil {
		a.notices.told = map[string]bool{}
	}
	a.notices.told[key] = true
	deadline := a.notices.deadline
	a.notices.mu.Unlock()

	req := workflows.PreemptRequest{Attempt: attempt, Cause: workflows.CauseNotice, NodeID: a.cfg.Node.ID,
		Deadline: deadline, Reason: noticeReason(n)}
	giveUp := deadline
	if giveUp.IsZero() {
		giveUp = time.Now().Add(signalGiveUp)
	}
	log := a.log.With("job_id", job, "attempt", attempt)
	go func() {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), signalTimeout)
			err := sig.SignalPreempt(ctx, job, req)
			cancel()
			switch {
			case err == nil:
				log.Info("asked the workflow to preempt the attempt", "reason", req.Reason)
				return
			case errors.Is(err, jobs.ErrJobGone):
				log.Info("the job ended before the preempt signal")
				return
			}
			if time.Now().After(giveUp) {
				log.Error("could not signal the workflow to preempt the attempt", "error", err)
				return
			}
			log.Warn("preempt signal failed; retrying", "error", err)
			select {
			case <-done:
				return
			case <-time.After(signalRetry):
			}
		}
	}()
}

func noticeReason(n Notice) string {
	r := n.Kind + " notice"
	if n.Source != "" {
		r += " from " + n.Source
	}
	if n.Detail != "" {
		r += ": " + n.Detail
	}
	return r
}

// noticeDeadline is when the cloud takes this node away; zero when no
// notice named a time.
func (a *Agent) noticeDeadline() time.Time {
	a.notices.mu.Lock()
	defer a.notices.mu.Unlock()
	return a.notices.deadline
}
