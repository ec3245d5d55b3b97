package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/gangwayhq/gangway"
)

// Temporal bounds a workflow run's history (51,200 events or 50 MB by
// default, with warnings at 10,240 and 10 MB) and every payload (2 MB). A
// job restarted or preempted many times would pass them: a 256-member gang
// writes about 1,500 events per attempt. So between attempts, when one
// more attempt could take the history past Limits, the job continues as
// new, carrying its status (Continued); and the status itself keeps only
// the newest attempt records and phase changes, summing the rest.

// attemptEvents estimates the history events one attempt of a gang of n
// adds: per member a scheduled, started and closing event, a cancel request
// and a workflow task to see it close; and a fixed part for enqueueing,
// placement, the ledger, checkpoints, release and metrics.
func attemptEvents(n int) int { return 8*n + 64 }

// memberEventBytes is the history bytes of one member's events besides its
// task input.
const memberEventBytes = 2048

// historyFull reports whether one more attempt could take this run's
// history past its limits, or Temporal suggests continuing as new.
func (j *job) historyFull(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	if info.GetContinueAsNewSuggested() {
		return true
	}
	n := j.spec.Gang.Replicas
	events := info.GetCurrentHistoryLength() + attemptEvents(n)
	bytes := info.GetCurrentHistorySize() + n*(j.taskInputBytes()+memberEventBytes)
	return events > j.limits.RunEvents || bytes > j.limits.RunBytes
}

// taskInputBytes is about the size of one member's RunTask input as JSON:
// what the spec copies into it (command, args, env) dominates; the rest is
// a few hundred bytes.
func (j *job) taskInputBytes() int {
	n := 512 + len(j.spec.WorkingDir)
	for _, s := range j.spec.Command {
		n += len(s) + 3
	}
	for _, s := range j.spec.Args {
		n += len(s) + 3
	}
	// A sum: the order of the map does not matter.
	//workflowcheck:ignore
	for k, v := range j.spec.Env {
		n += len(k) + len(v) + 6
	}
	return n
}

// continueAsNew ends this run and starts the next with the job's state.
// The attempt that just ended has released its GPUs and the next is not
// yet queued, so every signal still buffered is for an attempt that is
// over (a repeated placement, a late preempt): they are dropped here, as
// the next run would drop them.
func (j *job) continueAsNew(ctx workflow.Context, in JobInput) error {
	for _, ch := range []workflow.ReceiveChannel{j.placed, j.preempt, j.burst} {
		var stale any
		for ch.ReceiveAsync(&stale) {
			workflow.GetLogger(ctx).Info("dropping a signal for an ended attempt before continuing as new", "signal", ch.Name())
		}
	}
	next := JobInput{Spec: in.Spec, Timing: in.Timing, Limits: in.Limits,
		Continued: &Continued{Status: j.st, Resume: j.resumeFrom, Pool: j.pool, Since: j.since}}
	next.Continued.Status.Runs++
	workflow.GetLogger(ctx).Info("continuing as new", "attempt", j.st.Attempt, "run", next.Continued.Status.Runs,
		"historyLength", workflow.GetInfo(ctx).GetCurrentHistoryLength())
	return workflow.NewContinueAsNewError(ctx, WorkflowName, next)
}

// resume takes up the state the previous run carried.
func (j *job) resume(c *Continued) {
	j.st, j.resumeFrom, j.pool, j.since = c.Status, c.Resume, c.Pool, c.Since
	if j.st.Runs == 0 {
		j.st.Runs = 1
	}
}

// foldAttempts makes room for a new attempt record: the oldest records
// beyond Limits.AttemptRecords - 1 are summed into EarlierAttempts. Only
// ended attempts are folded (the new one is not yet added).
func (j *job) foldAttempts() {
	over := len(j.st.Attempts) - (j.limits.AttemptRecords - 1)
	if over <= 0 {
		return
	}
	e := j.st.EarlierAttempts
	if e == nil {
		e = &AttemptSummary{First: j.st.Attempts[0].Attempt, Ended: map[string]int{}}
		j.st.EarlierAttempts = e
	}
	for _, a := range j.st.Attempts[:over] {
		e.Count++
		e.Last = a.Attempt
		e.Ended[a.Ended]++
		e.GPUSeconds += gangway.MeteredGPUSeconds(a.EndedAt.Sub(a.StartedAt).Seconds(), a.GPUs, a.milli())
		e.LostGPUSeconds += a.LostGPUSeconds
		e.Dollars += a.Dollars
		e.KeptRunSeconds += a.keptRunTime().Seconds()
	}
	j.st.Attempts = append(j.st.Attempts[:0:0], j.st.Attempts[over:]...)
}

// trimPhases keeps the newest Limits.PhaseChanges phase changes.
func (j *job) trimPhases() {
	over := len(j.st.Phases) - j.limits.PhaseChanges
	if over <= 0 {
		return
	}
	j.st.EarlierPhases += over
	j.st.Phases = append(j.st.Phases[:0:0], j.st.Phases[over:]...)
}
