package workflows

import (
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/gangwayhq/gangway"
)

// startAttempt opens the attempt's record.
func (j *job) startAttempt(asg gangway.Assignment, at time.Time) int {
	if !j.v1 {
		return -1
	}
	if j.v3 {
		j.foldAttempts()
	}
	rec := AttemptRecord{Attempt: asg.Attempt, GPUs: asg.GPUCount(), GPUMilli: asg.GPUMilli(), StartedAt: at, ResumedFrom: j.resumeFrom}
	for _, m := range asg.Members {
		if !slices.Contains(rec.Nodes, m.NodeID) {
			rec.Nodes = append(rec.Nodes, m.NodeID)
		}
		rec.Pool, rec.CapacityType = m.Pool, capacityType(m)
	}
	j.st.Attempts = append(j.st.Attempts, rec)
	return len(j.st.Attempts) - 1
}

// recordRecovery reports how long the job took to run again after an
// infrastructure stop of its previous run.
func (j *job) recordRecovery(ctx workflow.Context, idx int) {
	if idx < 1 {
		return
	}
	prev, cur := j.st.Attempts[idx-1], j.st.Attempts[idx]
	switch prev.Ended {
	case CausePreempted, CauseNotice, CauseDrain, CauseFault, CauseNodeLost, CauseInfra:
	default:
		return
	}
	from := prev.StopRequestedAt
	if from.IsZero() {
		from = prev.EndedAt
	}
	j.recordRun(ctx, RecordRunInput{JobID: j.spec.Name, Team: j.spec.Team, RecoveredCause: prev.Ended,
		RecoveredAfter: cur.StartedAt.Sub(from)})
}

// recordRun feeds the run metrics; losing one is not worth failing a job.
func (j *job) recordRun(ctx workflow.Context, in RecordRunInput) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	var f workflow.Future
	if j.lean {
		f = workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(dctx, metricsLocal), ActivityRecordRun, in)
	} else {
		f = workflow.ExecuteActivity(workflow.WithActivityOptions(dctx, metricsActivity), ActivityRecordRun, in)
	}
	if err := f.Get(dctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("record run failed", "error", err)
	}
}

// metricsActivity runs activities whose loss only costs a data point.
var metricsActivity = workflow.ActivityOptions{
	TaskQueue:           TaskQueue,
	StartToCloseTimeout: 10 * time.Second,
	RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 5},
}

// metricsLocal is metricsActivity as a local activity (versionLean).
var metricsLocal = workflow.LocalActivityOptions{
	StartToCloseTimeout: metricsActivity.StartToCloseTimeout,
	RetryPolicy:         metricsActivity.RetryPolicy,
}

func capacityType(m gangway.Member) gangway.CapacityType {
	if m.CapacityType == "" {
		return gangway.CapacityOnPrem
	}
	return m.CapacityType
}

// endAttempt closes the record: how it ended, what it cost (one ledger
// segment per pool the gang ran in), the newest checkpoint (which the next
// attempt resumes from), and the GPU time whose work is lost.
func (j *job) endAttempt(ctx workflow.Context, idx int, asg gangway.Assignment, end attemptEnd) {
	if idx < 0 {
		return
	}
	rec := &j.st.Attempts[idx]
	rec.EndedAt, rec.Ended, rec.By, rec.Reason = workflow.Now(ctx), end.cause, end.by, end.reason
	rec.StopRequestedAt = end.stopAt
	defer func() { j.recordRun(ctx, RecordRunInput{JobID: j.spec.Name, Team: j.spec.Team, Ended: rec}) }()
	for _, seg := range j.segments(asg, rec.StartedAt, rec.EndedAt) {
		j.recordUsage(ctx, seg)
		rec.Dollars += seg.Dollars()
		j.st.Dollars += seg.Dollars()
	}
	// A run followed by another (the infrastructure stopped it, or the
	// job's own failure spends a retry) resumes from the newest checkpoint:
	// the work since it is redone, or the whole run when there is none.
	// Checkpoint times come from the agents' clocks. A job that does not
	// checkpoint starts over after its own failure by design; that is not
	// counted as lost.
	if end.out != outcomeInfraFailure && end.out != outcomeUserFailure {
		return
	}
	since := rec.StartedAt
	if j.spec.Checkpoint.Enabled {
		if ref, ok := j.latestCheckpoint(ctx); ok {
			rec.Checkpoint, j.resumeFrom = &ref, &ref
			if ref.At.After(since) {
				since = ref.At
			}
		}
	} else if end.out == outcomeUserFailure {
		return
	}
	// The last run of a job that now fails redoes nothing: its work is
	// not "lost after a restart", there is no restart. (The checkpoint is
	// still looked up above, so the workflow's commands do not change.)
	if j.lastAttempt(end) {
		return
	}
	j.lose(rec, since)
}

// lastAttempt reports whether afterAttempt will end the job after end
// rather than run it again.
func (j *job) lastAttempt(end attemptEnd) bool {
	switch end.out {
	case outcomeUserFailure:
		return j.st.UserRetries >= j.spec.Retries
	case outcomeInfraFailure:
		return j.st.InfraRestarts >= maxInfraRestarts
	}
	return true
}

func (j *job) lose(rec *AttemptRecord, since time.Time) {
	if since.After(rec.EndedAt) {
		return
	}
	lost := gangway.MeteredGPUSeconds(rec.EndedAt.Sub(since).Seconds(), rec.GPUs, rec.milli())
	rec.LostGPUSeconds += lost
	j.st.LostGPUSeconds += lost
}

// segments splits the attempt's GPU time by pool, capacity type and price,
// each GPU metered at its share (gangway.Member.MeteredMilli).
func (j *job) segments(asg gangway.Assignment, start, end time.Time) []gangway.UsageSegment {
	var segs []gangway.UsageSegment
	for _, m := range asg.Members {
		i := slices.IndexFunc(segs, func(s gangway.UsageSegment) bool {
			return s.Pool == m.Pool && s.CapacityType == capacityType(m) && s.PricePerGPUHour == m.PricePerGPUHour
		})
		if i < 0 {
			segs = append(segs, gangway.UsageSegment{JobID: j.spec.Name, Attempt: asg.Attempt, Team: j.spec.Team,
				Project: j.spec.Project, Pool: m.Pool, CapacityType: capacityType(m), Start: start, End: end,
				PricePerGPUHour: m.PricePerGPUHour})
			i = len(segs) - 1
		}
		segs[i].GPUs += len(m.GPUs)
		segs[i].GPUMilli += int64(len(m.GPUs)) * int64(m.MeteredMilli())
	}
	return segs
}

// milli is what the attempt's GPUs count for, in milli-GPU.
func (a AttemptRecord) milli() int64 {
	if a.GPUMilli > 0 {
		return a.GPUMilli
	}
	return int64(a.GPUs) * gangway.MilliPerGPU
}

// recordUsage adds a segment to the ledger. It runs on a disconnected
// context: a cancelled job's GPU time is still billed.
func (j *job) recordUsage(ctx workflow.Context, seg gangway.UsageSegment) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	err := j.server(dctx, ActivityRecordUsage, RecordUsageInput{Segment: seg}).Get(dctx, nil)
	if err != nil {
		workflow.GetLogger(ctx).Error("record usage failed", "attempt", seg.Attempt, "error", err)
	}
}

// latestCheckpoint asks the store for the job's newest checkpoint.
func (j *job) latestCheckpoint(ctx workflow.Context) (CheckpointRef, bool) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	var ref CheckpointRef
	err := j.server(dctx, ActivityLatestCheckpoint, LatestCheckpointInput{JobID: j.spec.Name}).Get(dctx, &ref)
	if err != nil {
		workflow.GetLogger(ctx).Error("latest checkpoint failed", "error", err)
		return CheckpointRef{}, false
	}
	return ref, ref.ID != ""
}

// remaining estimates the run time a job resuming from a checkpoint still
// needs: its expected runtime less the time its runs have kept (run time
// minus the time whose work was lost). The burst decision prices the rest
// of the job, not all of it. At least a minute is left for restore and
// wind-down.
func (j *job) remaining() time.Duration {
	return max(j.spec.Runtime()-j.kept(), time.Minute)
}

// kept is the run time the job's ended attempts kept (keptRunTime).
func (j *job) kept() time.Duration {
	kept := time.Duration(0)
	if e := j.st.EarlierAttempts; e != nil {
		kept = time.Duration(e.KeptRunSeconds * float64(time.Second))
	}
	for _, a := range j.st.Attempts {
		kept += a.keptRunTime()
	}
	return kept
}

// keptRunTime is the run time of an ended attempt whose work was kept:
// its run time less the time whose work was lost.
func (a AttemptRecord) keptRunTime() time.Duration {
	if a.EndedAt.IsZero() || a.GPUs == 0 {
		return 0
	}
	lost := time.Duration(a.LostGPUSeconds / gangway.MeteredGPUSeconds(1, a.GPUs, a.milli()) * float64(time.Second))
	return max(a.EndedAt.Sub(a.StartedAt)-lost, 0)
}
