package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/gpuinfo"
	"github.com/gangwayhq/gangway/internal/metrics"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// Reclaim event kinds, in the GPU event stream.
const (
	EventZombieKilled = "zombie-killed"
	EventOrphanKilled = "orphan-killed"
	EventIdleReleased = "idle-released"
)

// gpuTask is a task RunTask runs, with what GPU health and reclaim need to
// know of it: its GPUs, its team (for metrics), its idle policy and how
// many ranks its gang has.
type gpuTask struct {
	JobID     gangway.JobID
	Attempt   int
	Rank      int
	WorldSize int
	GPUs      []int
	Team      string
	Idle      gangway.Idle
}

type taskKey struct {
	job           gangway.JobID
	attempt, rank int
}

type jobAttempt struct {
	job     gangway.JobID
	attempt int
}

func (t gpuTask) key() taskKey      { return taskKey{t.JobID, t.Attempt, t.Rank} }
func (t gpuTask) job() jobAttempt   { return jobAttempt{t.JobID, t.Attempt} }
func (j jobAttempt) String() string { return fmt.Sprintf("%s/attempt-%d", j.job, j.attempt) }
func cmpJob(a, b jobAttempt) int    { return cmp.Or(strings.Compare(a.job, b.job), a.attempt-b.attempt) }
func taskOf(in workflows.RunTaskInput) gpuTask {
	return gpuTask{JobID: in.JobID, Attempt: in.Attempt, Rank: in.Rank, WorldSize: in.WorldSize,
		GPUs: slices.Clone(in.GPUs), Team: in.Team, Idle: in.Idle}
}

// runTaskTracked is RunTask as the node's worker serves it: the task is
// known to GPU health and reclaim while it runs.
func (a *Agent) runTaskTracked(ctx context.Context, in workflows.RunTaskInput) (workflows.RunTaskResult, error) {
	t := taskOf(in)
	a.gpu.mu.Lock()
	a.gpu.init()
	a.gpu.tasks[t.key()] = t
	a.gpu.mu.Unlock()
	defer func() {
		a.gpu.mu.Lock()
		delete(a.gpu.tasks, t.key())
		a.gpu.mu.Unlock()
	}()
	return a.RunTask(ctx, in)
}

// trackedTasks lists the running tasks, in job, attempt, rank order.
func (a *Agent) trackedTasks() []gpuTask {
	a.gpu.mu.Lock()
	defer a.gpu.mu.Unlock()
	out := make([]gpuTask, 0, len(a.gpu.tasks))
	for _, t := range a.gpu.tasks {
		out = append(out, t)
	}
	slices.SortFunc(out, func(x, y gpuTask) int { return cmp.Or(cmpJob(x.job(), y.job()), x.Rank-y.Rank) })
	return out
}

// tasksOn lists the running tasks holding any of gpus.
func (a *Agent) tasksOn(gpus []int) []gpuTask {
	var out []gpuTask
	for _, t := range a.trackedTasks() {
		if slices.ContainsFunc(t.GPUs, func(g int) bool { return slices.Contains(gpus, g) }) {
			out = append(out, t)
		}
	}
	return out
}

// teamOn is the team of the job running on GPU g ("" when none).
func (a *Agent) teamOn(g int) string {
	if ts := a.tasksOn([]int{g}); len(ts) > 0 {
		return ts[0].Team
	}
	return ""
}

// stopTasks is StopTasks, unless a test watches.
func (a *Agent) stopTasks(gpus []int, errType, reason string) int {
	if a.gpu.stop != nil {
		return a.gpu.stop(gpus, errType, reason)
	}
	return a.StopTasks(gpus, errType, reason)
}

// ProcessOwner says whose a process on a GPU is.
type ProcessOwner int

const (
	OwnerGone  ProcessOwner = iota // the process no longer exists
	OwnerTask                      // in the process group of a task this agent runs
	OwnerOther                     // anyone else's: a zombie once its grace is over
)

// Processes is how reclaim looks at and kills processes.
type Processes interface {
	Owner(pid int) (ProcessOwner, error)
	Kill(pid int) error
}

// hostProcesses are this machine's processes. A task is the process group
// RunTask started (Setpgid), so a process belongs to a live task when its
// group's leader is still a child of the agent. NVML reports host PIDs:
// the agent must run in the host's PID namespace, as the systemd unit does.
type hostProcesses struct{ self int }

func (h hostProcesses) Owner(pid int) (ProcessOwner, error) {
	pgid, err := syscall.Getpgid(pid)
	if errors.Is(err, syscall.ESRCH) {
		return OwnerGone, nil
	}
	if err != nil {
		return OwnerOther, fmt.Errorf("process %d: %w", pid, err)
	}
	ppid, err := parentPID(pgid)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return OwnerOther, nil // the group's leader is gone: no task of ours runs it
	case err != nil:
		return OwnerOther, err
	case ppid == h.self:
		return OwnerTask, nil
	}
	return OwnerOther, nil
}

func (hostProcesses) Kill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// parentPID reads a process's parent from /proc/PID/stat (the field after
// the state, which follows the parenthesised command name).
func parentPID(pid int) (int, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	f := strings.Fields(s[i+1:])
	if i < 0 || len(f) < 2 {
		return 0, fmt.Errorf("process %d: unreadable stat %q", pid, s)
	}
	return strconv.Atoi(f[1])
}

func (a *Agent) processes() Processes {
	if a.cfg.GPU.Processes != nil {
		return a.cfg.GPU.Processes
	}
	return hostProcesses{self: os.Getpid()}
}

// gpuTick is one sample period: retry what the view could not take, let
// flakiness decay, sample the GPUs, reclaim zombies, orphans and idle
// GPUs, and export the readings.
func (a *Agent) gpuTick(ctx context.Context, alive JobAliveFunc) {
	now := a.gpuNow()
	a.retryPending(ctx)
	a.refreshFlakiness(ctx)
	samples, err := a.cfg.GPU.Source.Sample(ctx)
	if err != nil && ctx.Err() == nil {
		a.log.Warn("cannot sample GPUs", "error", err)
	}
	tasks := a.trackedTasks()
	idle := a.checkIdle(ctx, now, samples, tasks)
	a.checkZombies(ctx, now, samples)
	a.checkOrphans(ctx, now, tasks, alive)
	a.exportReadings(now, samples, tasks, idle)
}

func (a *Agent) grace() time.Duration {
	if a.cfg.GPU.ZombieGrace > 0 {
		return a.cfg.GPU.ZombieGrace
	}
	return DefaultZombieGrace
}

// checkZombies kills the processes that have held a GPU without belonging
// to a running task for longer than the grace period.
func (a *Agent) checkZombies(ctx context.Context, now time.Time, samples []gpuinfo.Sample) {
	onGPU := map[int][]int{} // PID → slots
	for _, s := range samples {
		for _, p := range s.Processes {
			onGPU[p.PID] = append(onGPU[p.PID], s.Slot)
		}
	}
	a.gpu.mu.Lock()
	a.gpu.init()
	for pid := range a.gpu.zombies {
		if _, still := onGPU[pid]; !still {
			delete(a.gpu.zombies, pid)
		}
	}
	a.gpu.mu.Unlock()
	procs := a.processes()
	for _, pid := range slices.Sorted(func(yield func(int) bool) {
		for pid := range onGPU {
			if !yield(pid) {
				return
			}
		}
	}) {
		if pid <= 1 || pid == os.Getpid() {
			continue
		}
		slots := onGPU[pid]
		owner, err := procs.Owner(pid)
		if err != nil {
			a.log.Debug("cannot tell whose a GPU process is", "pid", pid, "error", err)
			continue
		}
		a.gpu.mu.Lock()
		first, tracked := a.gpu.zombies[pid]
		switch {
		case owner != OwnerOther:
			delete(a.gpu.zombies, pid)
		case !tracked:
			a.gpu.zombies[pid] = now
		}
		a.gpu.mu.Unlock()
		if owner != OwnerOther {
			continue
		}
		if !tracked {
			a.log.Warn("a process holds GPUs without a task; it is killed if it is still there after the grace period",
				"pid", pid, "gpus", slots, "grace", a.grace())
			continue
		}
		held := now.Sub(first)
		if held < a.grace() {
			continue
		}
		if err := procs.Kill(pid); err != nil {
			a.log.Warn("cannot kill a zombie GPU process", "pid", pid, "gpus", slots, "error", err)
			continue
		}
		a.gpu.mu.Lock()
		delete(a.gpu.zombies, pid)
		a.gpu.mu.Unlock()
		msg := fmt.Sprintf("process %d held GPU %s for %s without a task; killed", pid, intList(slots), fmtDuration(held))
		a.log.Warn("killed a zombie GPU process", "pid", pid, "gpus", slots, "held", held)
		a.cfg.GPU.Metrics.Reclaimed(a.cfg.Node.ID, metrics.ReclaimZombie, 1)
		a.publish(ctx, gangway.GPUEvent{Node: a.cfg.Node.ID, GPUs: slots, Kind: EventZombieKilled, Meaning: msg, PIDs: []int{pid}, At: now}, false)
	}
}

// checkOrphans stops the tasks whose job's workflow has been gone for
// longer than the grace period.
func (a *Agent) checkOrphans(ctx context.Context, now time.Time, tasks []gpuTask, alive JobAliveFunc) {
	byJob := groupTasks(tasks)
	a.gpu.mu.Lock()
	a.gpu.init()
	for ja := range a.gpu.orphans {
		if _, running := byJob[ja]; !running {
			delete(a.gpu.orphans, ja)
		}
	}
	a.gpu.mu.Unlock()
	if alive == nil {
		return
	}
	for _, ja := range slices.SortedFunc(func(yield func(jobAttempt) bool) {
		for ja := range byJob {
			if !yield(ja) {
				return
			}
		}
	}, cmpJob) {
		ok, err := alive(ctx, ja.job, ja.attempt)
		if err != nil {
			a.log.Debug("cannot tell whether a job's workflow runs", "job_id", ja.job, "error", err)
			ok = true
		}
		a.gpu.mu.Lock()
		first, tracked := a.gpu.orphans[ja]
		switch {
		case ok:
			delete(a.gpu.orphans, ja)
		case !tracked:
			a.gpu.orphans[ja] = now
		}
		a.gpu.mu.Unlock()
		if ok {
			continue
		}
		if !tracked {
			a.log.Warn("a task runs for a job whose workflow is gone; it is stopped if the workflow does not come back within the grace period",
				"job_id", ja.job, "attempt", ja.attempt, "grace", a.grace())
			continue
		}
		if now.Sub(first) < a.grace() || first.IsZero() {
			continue
		}
		gpus := jobGPUs(byJob[ja])
		msg := fmt.Sprintf("the workflow of %s is gone; its task held GPU %s for %s after and was stopped", ja, intList(gpus), fmtDuration(now.Sub(first)))
		n := a.stopTasks(gpus, workflows.ErrTypeTaskFailed, msg)
		a.gpu.mu.Lock()
		a.gpu.orphans[ja] = time.Time{} // stopped: not again
		a.gpu.mu.Unlock()
		a.log.Warn("stopped the tasks of a job whose workflow is gone", "job_id", ja.job, "attempt", ja.attempt, "gpus", gpus, "tasks", n)
		a.cfg.GPU.Metrics.Reclaimed(a.cfg.Node.ID, metrics.ReclaimOrphan, len(gpus))
		a.publish(ctx, gangway.GPUEvent{Node: a.cfg.Node.ID, GPUs: gpus, Kind: EventOrphanKilled, Meaning: msg,
			Jobs: []gangway.JobID{ja.job}, At: now}, false)
	}
}

// checkIdle follows how long each job has kept all its GPUs here below its
// idle threshold, releases the jobs whose idle policy says so, and reports
// the others. It returns how long each GPU has been idle under its job.
//
// A job's idle policy is judged by the agent that runs all of its ranks:
// a gang spread over nodes is reported, never stopped, since the other
// nodes' GPUs may be busy.
func (a *Agent) checkIdle(ctx context.Context, now time.Time, samples []gpuinfo.Sample, tasks []gpuTask) map[int]time.Duration {
	util := map[int]float64{}
	for _, s := range samples {
		util[s.Slot] = s.Utilization
	}
	byJob := groupTasks(tasks)
	out := map[int]time.Duration{}
	report := a.cfg.GPU.IdleReport
	if report <= 0 {
		report = DefaultIdleReport
	}
	a.gpu.mu.Lock()
	a.gpu.init()
	for ja := range a.gpu.idleSince {
		if _, running := byJob[ja]; !running {
			delete(a.gpu.idleSince, ja)
			delete(a.gpu.idleDone, ja)
		}
	}
	a.gpu.mu.Unlock()
	for _, ja := range slices.SortedFunc(func(yield func(jobAttempt) bool) {
		for ja := range byJob {
			if !yield(ja) {
				return
			}
		}
	}, cmpJob) {
		ts := byJob[ja]
		policy := ts[0].Idle
		threshold := policy.Threshold
		if threshold <= 0 {
			threshold = gangway.DefaultIdleThreshold
		}
		gpus := jobGPUs(ts)
		idle := len(gpus) > 0
		for _, g := range gpus {
			u, known := util[g]
			if !known || math.IsNaN(u) || u >= threshold {
				idle = false
			}
		}
		a.gpu.mu.Lock()
		since, was := a.gpu.idleSince[ja]
		switch {
		case !idle:
			delete(a.gpu.idleSince, ja)
			delete(a.gpu.idleDone, ja)
		case !was:
			since = now
			a.gpu.idleSince[ja] = now
		}
		done := a.gpu.idleDone[ja]
		a.gpu.mu.Unlock()
		if !idle {
			continue
		}
		idleFor := now.Sub(since)
		for _, g := range gpus {
			out[g] = idleFor
		}
		after := policy.After.Duration
		whole := ts[0].WorldSize <= len(ts)
		switch {
		case done:
		case after > 0 && whole && idleFor >= after:
			msg := fmt.Sprintf("idle for %s below %s GPU utilization; GPUs released", fmtDuration(after), fmtRatio(threshold))
			n := a.stopTasks(gpus, workflows.ErrTypeIdle, msg)
			a.log.Info("released a job's idle GPUs", "job_id", ja.job, "attempt", ja.attempt, "gpus", gpus, "idle", idleFor, "tasks", n, "action", policy.Action)
			a.cfg.GPU.Metrics.Reclaimed(a.cfg.Node.ID, metrics.ReclaimIdle, len(gpus))
			a.publish(ctx, gangway.GPUEvent{Node: a.cfg.Node.ID, GPUs: gpus, Kind: EventIdleReleased, Meaning: msg,
				Jobs: []gangway.JobID{ja.job}, At: now}, false)
			a.markIdleDone(ja)
		case idleFor >= report && after == 0:
			a.log.Warn("a job keeps its GPUs idle; it has no idle policy, so it keeps them", "job_id", ja.job, "attempt", ja.attempt,
				"gpus", gpus, "idle", idleFor, "threshold", fmtRatio(threshold))
			a.markIdleDone(ja)
		case idleFor >= report && !whole:
			a.log.Warn("a gang keeps its GPUs here idle; its other nodes are not judged here, so it keeps them", "job_id", ja.job,
				"attempt", ja.attempt, "gpus", gpus, "idle", idleFor, "ranks_here", len(ts), "world_size", ts[0].WorldSize)
			a.markIdleDone(ja)
		}
	}
	return out
}

func (a *Agent) markIdleDone(ja jobAttempt) {
	a.gpu.mu.Lock()
	a.gpu.idleDone[ja] = true
	a.gpu.mu.Unlock()
}

// exportReadings hands the samples to the metrics, with each GPU's job's
// team, health and idle time, and the node's heartbeat age.
func (a *Agent) exportReadings(now time.Time, samples []gpuinfo.Sample, tasks []gpuTask, idle map[int]time.Duration) {
	m := a.cfg.GPU.Metrics
	if m == nil {
		return
	}
	team := map[int]string{}
	for _, t := range tasks {
		for _, g := range t.GPUs {
			team[g] = t.Team
		}
	}
	readings := make([]metrics.GPUReading, 0, len(samples))
	for _, s := range samples {
		g := a.slot(s.Slot)
		readings = append(readings, metrics.GPUReading{Index: s.Slot, UUID: s.UUID, Model: g.Model, Team: team[s.Slot],
			Utilization: s.Utilization, SMActivity: s.SMActivity, MemUsedB: s.MemUsedBytes, TempC: s.TempCelsius,
			PowerW: s.PowerWatts, Healthy: a.fencedReason(s.Slot) == "" && !s.Lost, IdleFor: idle[s.Slot]})
	}
	m.Readings(a.nodeLabels(), readings)
	a.gpu.mu.Lock()
	beat := a.gpu.lastBeat
	a.gpu.mu.Unlock()
	if !beat.IsZero() {
		m.HeartbeatAge(a.cfg.Node.ID, max(time.Since(beat), 0))
	}
}

// nodeLabels name this node on its GPU series.
func (a *Agent) nodeLabels() metrics.NodeLabels {
	return metrics.NodeLabels{Node: a.cfg.Node.ID, Pool: a.cfg.Node.Pool}
}

func groupTasks(tasks []gpuTask) map[jobAttempt][]gpuTask {
	out := map[jobAttempt][]gpuTask{}
	for _, t := range tasks {
		out[t.job()] = append(out[t.job()], t)
	}
	return out
}

func jobGPUs(ts []gpuTask) []int {
	var gpus []int
	for _, t := range ts {
		gpus = append(gpus, t.GPUs...)
	}
	slices.Sort(gpus)
	return slices.Compact(gpus)
}

func intList(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// TemporalJobAlive asks Temporal, through the one door to job workflows,
// whether a job's workflow is still running. A workflow that does not
// exist or has closed is gone. The attempt is not checked: a workflow that
// moved on to a newer attempt cancels the old one's tasks itself.
func TemporalJobAlive(tc client.Client) JobAliveFunc {
	j := jobs.New(tc)
	return func(ctx context.Context, jobID gangway.JobID, _ int) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return j.Running(ctx, jobID)
	}
}
