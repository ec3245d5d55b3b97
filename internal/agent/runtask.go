package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/workflows"
)

// DefaultShutdownGrace is Config.ShutdownGrace by default: how long a task
// may take to stop and save its final checkpoint when the agent itself
// shuts down, whatever the job asks. A stop the workflow or StopTasks asks for gives
// the job its whole grace period (a cloud notice's deadline may shorten
// it).
const DefaultShutdownGrace = 30 * time.Second

// shutdownSave is how long past the shutdown grace the worker waits for
// its tasks: a final upload that takes longer than expected.
const shutdownSave = 5 * time.Second

// exitBeatTimeout bounds the heartbeat a task's exit sends, once any
// heartbeat under way has landed: a slow view delays the result by at most
// that, and the periodic heartbeats report the exit anyway.
const exitBeatTimeout = 5 * time.Second

// RunTask runs one gang member to completion. It returns nil when the
// process exits 0; an ApplicationError of type TaskFailed when it exits
// non-zero or cannot start; GPUBusy when a GPU is already in use here;
// RestoreFailed when the checkpoint it resumes from cannot be restored;
// NodeShutdown when the agent is stopping; the type StopTasks names when
// the agent stopped it; and, when the workflow cancelled it, a
// CanceledError (the context's error outside a server cancel). Whenever
// the process is stopped, the checkpoint it left is saved before RunTask
// returns; the errors of stopped tasks carry a RunTaskProgress naming the
// newest checkpoint saved, as the heartbeats do. A task Temporal loses
// track of keeps running for an adopting RunTask (adopt.go), which then
// gets its result.
func (a *Agent) RunTask(ctx context.Context, in workflows.RunTaskInput) (_ workflows.RunTaskResult, err error) {
	if in.Adopt {
		return a.adopt(ctx, in)
	}
	log := a.log.With("job_id", in.JobID, "attempt", in.Attempt, "rank", in.Rank)
	if in.NodeID != a.cfg.Node.ID {
		return workflows.RunTaskResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("task for node %s reached node %s", in.NodeID, a.cfg.Node.ID), workflows.ErrTypeGPUBusy, nil)
	}
	task := fmt.Sprintf("%s/attempt-%d/rank-%d", in.JobID, in.Attempt, in.Rank)
	if err := a.claimMIG(in.GPUs, in.MIGProfile); err != nil {
		log.Error("refusing task", "error", err)
		return workflows.RunTaskResult{}, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeGPUBusy, err)
	}
	if err := a.claim(in.GPUs, in.GPUMilli, task); err != nil {
		log.Error("refusing task", "error", err)
		return workflows.RunTaskResult{}, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeGPUBusy, err)
	}
	defer a.unclaim(in.GPUs, task)
	rt := a.tasks.add(ctx, in)
	defer a.tasks.remove(rt)
	res := workflows.RunTaskResult{LogPath: a.logPath(in)}
	defer func() { a.settle(rt, in, taskResult{res, err}) }()

	dirs := a.taskDirs(in)
	up := a.newUploader(in, dirs, log)
	stopHeartbeats := a.heartbeats(ctx, rt, up.progress)
	defer stopHeartbeats()
	a.preemptIfNoticed(in)

	tu, err := a.taskUserFor(in)
	if err != nil {
		log.Error("refusing task", "error", err)
		return res, temporal.NewNonRetryableApplicationError(fmt.Sprintf("node %s: %v", a.cfg.Node.ID, err), workflows.ErrTypeTaskFailed, err)
	}
	if err := dirs.prepare(tu); err != nil {
		return res, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeNodeShutdown, err)
	}
	defer up.cleanup(dirs, log)
	resumeDir := ""
	if in.ResumeFrom != "" {
		if err := a.restore(ctx, in, dirs, tu, log); err != nil {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			log.Error("cannot resume", "error", err)
			return res, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeRestoreFailed, err)
		}
		resumeDir = dirs.resume
	}

	cmd, out, err := a.command(in, tu, res.LogPath, dirs.checkpoint, resumeDir)
	if err != nil {
		return res, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeTaskFailed, err)
	}
	defer out.Close()

	select {
	case req := <-rt.stop: // stopped while it restored
		return res, temporal.NewNonRetryableApplicationError(req.reason, req.errType, nil, up.progress())
	default:
	}
	a.record(in, true)
	res.StartedAt = time.Now()
	if err := cmd.Start(); err != nil {
		a.record(in, false)
		msg := fmt.Sprintf("start %q: %v", in.Command[0], err)
		fmt.Fprintln(out, "gangway: "+msg)
		return res, temporal.NewNonRetryableApplicationError(msg, workflows.ErrTypeTaskFailed, err)
	}
	log.Info("task started", "pid", cmd.Process.Pid, "gpus", in.GPUs, "resume_from", in.ResumeFrom, "user", tu.String())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Periodic saves outlive a cancel: one in flight when the task is
	// stopped is still worth having.
	up.start(context.WithoutCancel(ctx))

	waitErr, why := a.supervise(ctx, cmd, in, rt, up, done)
	// The activity the task ends under: the one that started it, or the
	// one that adopted it.
	ctx = rt.activity()
	// Whatever the task left running in its group goes with it: a
	// background process must not keep holding the GPUs after release.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	res.FinishedAt = time.Now()
	if why.reason == stopExited && waitErr == nil {
		// First of all: the agent may die in what follows (the output's
		// drain, the heartbeat, the final upload), and a task that
		// exited 0 must not run again.
		a.recordDone(ctx, in, log)
	}
	out.Close() // flush the log streamer before reporting
	// The GPUs are free once the group is gone; the save that follows
	// uses only the disk and the network. The view counts the GPUs of a
	// task the node reports as held (a process may outlive its release),
	// so the node says at once that this one no longer runs: its GPUs are
	// free as soon as the workflow releases them, not a heartbeat later.
	a.record(in, false)
	rt.exited.Store(true)
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), exitBeatTimeout)
	a.heartbeat(bctx)
	cancel()
	up.finish(ctx, a.cfg.UploadTimeout)
	progress := up.progress()

	switch why.reason {
	case stopCancelled:
		log.Info("task cancelled", "ran", res.FinishedAt.Sub(res.StartedAt), "checkpoint", progress.Checkpoint.ID)
		var ce *temporal.CanceledError
		if errors.Is(ctx.Err(), context.Canceled) && errors.As(context.Cause(ctx), &ce) {
			// A cancel from the server: the workflow gets the details.
			return res, temporal.NewCanceledError(progress)
		}
		return res, ctx.Err()
	case stopShutdown:
		return res, temporal.NewNonRetryableApplicationError("agent shut down while the task ran",
			workflows.ErrTypeNodeShutdown, nil, progress)
	case stopRequested:
		log.Info("task stopped by the agent", "type", why.errType, "reason", why.message, "checkpoint", progress.Checkpoint.ID)
		return res, temporal.NewNonRetryableApplicationError(why.message, why.errType, nil, progress)
	}
	if waitErr != nil {
		msg := exitMessage(waitErr, out.tail())
		log.Info("task failed", "error", msg)
		return res, temporal.NewNonRetryableApplicationError(msg, workflows.ErrTypeTaskFailed, nil, progress)
	}
	log.Info("task succeeded", "ran", res.FinishedAt.Sub(res.StartedAt))
	return res, nil
}

// recordDone tells the view the task exited 0 as soon as the agent knows
// it, before it drains the output, heartbeats, saves the last checkpoint
// and reports: if the node dies before Temporal has the report, the
// workflow finds the record rather than running the task again
// (workflows.TaskDone). A record that cannot be written only loses that.
func (a *Agent) recordDone(ctx context.Context, in workflows.RunTaskInput, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := a.writeDone(ctx, keyOf(in), time.Now()); err != nil {
		log.Warn("cannot record in the view that the task exited 0", "error", err)
	}
}

// writeDone writes the record that this node's task k exited 0 at at.
func (a *Agent) writeDone(ctx context.Context, k taskKey, at time.Time) error {
	return a.cap.RecordTaskDone(ctx, workflows.TaskDone{
		TaskRef: workflows.TaskRef{JobID: k.job, Attempt: k.attempt, Rank: k.rank, NodeID: a.cfg.Node.ID}, At: at})
}

// recordDoneAgain writes again the task-done records of the tasks that
// exited 0 in the last hour (endedRetention), into a view that lost the
// node and so may have lost them too (Redis restarted empty): a job whose
// node is lost now must still find that its task finished.
func (a *Agent) recordDoneAgain(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for k, at := range a.ended.exited0() {
		if err := a.writeDone(ctx, k, at); err != nil {
			a.log.Warn("cannot record again in the view that a task exited 0", "job_id", k.job, "attempt", k.attempt, "rank", k.rank, "error", err)
			return
		}
	}
}

type stopReason int

const (
	stopExited stopReason = iota
	stopCancelled
	stopShutdown
	stopRequested // StopTasks
)

// stopCause is why supervise stopped the process.
type stopCause struct {
	reason           stopReason
	errType, message string // stopRequested
}

// heartbeats records progress every interval, to the activity the task
// runs under (the adopting one after an adoption), until the returned func
// is called (which waits for the loop to end). It keeps going after the
// activity is cancelled: the final save that follows a stop may take
// longer than the heartbeat timeout, and the server still takes
// heartbeats from a cancelled activity.
func (a *Agent) heartbeats(ctx context.Context, rt *runningTask, progress func() workflows.RunTaskProgress) func() {
	interval := a.cfg.TaskHeartbeat
	if hb := activity.GetInfo(ctx).HeartbeatTimeout; hb > 0 {
		interval = min(interval, hb/4)
	}
	record := a.recordHeartbeat
	if record == nil {
		record = activity.RecordHeartbeat
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				record(context.WithoutCancel(rt.activity()), progress())
			}
		}
	}()
	return func() {
		close(stop)
		<-done
	}
}

// supervise waits for the process to exit, and stops it (stop signal,
// grace period, kill) when the activity is cancelled, the worker stops or
// StopTasks asks. When Temporal lost track of the activity it keeps the
// process for adoption instead (orphaned); an adopting activity may also
// take the task over before this one notices.
func (a *Agent) supervise(ctx context.Context, cmd *exec.Cmd, in workflows.RunTaskInput, rt *runningTask,
	up *uploader, done <-chan error) (error, stopCause) {
	workerStop := activity.GetWorkerStopChannel(ctx)
	for {
		actx := rt.activity()
		select {
		case err := <-done:
			return err, stopCause{reason: stopExited}
		case <-actx.Done():
			if !lostTrack(actx) {
				return a.stop(cmd, in, up, done, false), stopCause{reason: stopCancelled}
			}
			if err, why, over := a.orphaned(cmd, in, rt, up, done, workerStop); over {
				return err, why
			}
		case <-workerStop:
			return a.stop(cmd, in, up, done, true), stopCause{reason: stopShutdown}
		case req := <-rt.stop:
			return a.stop(cmd, in, up, done, false), stopCause{reason: stopRequested, errType: req.errType, message: req.reason}
		case ad := <-rt.adopt:
			if err, why, over := a.adopted(cmd, in, rt, up, done, ad); over {
				return err, why
			}
		}
	}
}

// stop sends the job's stop signal to the process group, waits the grace
// period (at least a second; when the agent shuts down, at most
// Config.ShutdownGrace less the time the final save is expected to take),
// then kills the group. A cloud notice's deadline shortens the grace
// period so the final save still fits before it.
func (a *Agent) stop(cmd *exec.Cmd, in workflows.RunTaskInput, up *uploader, done <-chan error, shutdown bool) error {
	pgid := cmd.Process.Pid
	sig := signalByName(in.StopSignal)
	up.markStopping()
	_ = syscall.Kill(-pgid, sig)
	grace := max(in.GracePeriod, time.Second)
	if shutdown {
		// The agent is going: the task and its final save share
		// ShutdownGrace, as they share a cloud notice's time.
		grace = min(grace, max(a.cfg.ShutdownGrace-up.reserve(), time.Second))
	}
	if d := a.noticeDeadline(); !d.IsZero() {
		grace = min(grace, max(time.Until(d)-up.reserve(), time.Second))
	}
	select {
	case err := <-done:
		_ = syscall.Kill(-pgid, syscall.SIGKILL) // stragglers in the group
		return err
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		return <-done
	}
}

func signalByName(name string) syscall.Signal {
	switch name {
	case "SIGINT":
		return syscall.SIGINT
	case "SIGUSR1":
		return syscall.SIGUSR1
	case "SIGUSR2":
		return syscall.SIGUSR2
	default:
		return syscall.SIGTERM
	}
}

// command builds the process: its own process group (so cancel kills
// everything it spawned), killed if the agent dies (so no task outlives its
// agent holding a GPU), run as its task user, GPUs and the workload
// contract in an environment built for it (isolate.go), never the agent's.
func (a *Agent) command(in workflows.RunTaskInput, tu *taskUser, logPath, ckptDir, resumeDir string) (*exec.Cmd, *taskOutput, error) {
	if len(in.Command) == 0 {
		return nil, nil, errors.New("empty command")
	}
	logDir := filepath.Dir(logPath)
	err := mkdirMode(filepath.Dir(logDir), modeShared)
	if err == nil {
		err = mkdirMode(logDir, modeLogs)
	}
	if err == nil {
		err = tu.own(logDir, modeLogs)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("task log dir: %w", err)
	}
	out, err := newTaskOutput(logPath, tu, a, in)
	if err != nil {
		return nil, nil, err
	}
	argv := append(append([]string{}, in.Command[1:]...), in.Args...)
	cmd := exec.Command(in.Command[0], argv...)
	cmd.Dir = in.WorkingDir
	// The task writes straight into the pipe (an *os.File), so Wait returns
	// as soon as the main process exits, even if a background child still
	// holds the pipe; RunTask then kills the group and drains the output.
	cmd.Stdout, cmd.Stderr = out.w, out.w
	// Pdeathsig fires when the thread that forked the child exits; the Go
	// runtime keeps its threads for the life of the process, so in practice
	// this is "when the agent dies". The kernel clears it on a change of
	// user; Go sets it after the credential, so it holds for a task user.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: tu.credential()}
	cmd.Env = a.environ(in, tu, ckptDir, resumeDir)
	return cmd, out, nil
}

// environ is a task's whole environment, built for it, never the agent's:
// the agent variables PassEnv names and the task user's HOME, USER and
// LOGNAME (baseEnv), then the workload contract and the user's variables
// (taskEnv), then what its share or MIG devices add (shareEnv). tu nil is
// the agent's own user.
func (a *Agent) environ(in workflows.RunTaskInput, tu *taskUser, ckptDir, resumeDir string) []string {
	return slices.Concat(a.baseEnv(tu), taskEnv(in, a.visibleDevices(in.GPUs), ckptDir, resumeDir), a.shareEnv(in))
}

// visibleDevices names the task's GPUs for CUDA_VISIBLE_DEVICES: a whole
// GPU by its index, a MIG device by its UUID (CUDA addresses MIG devices
// only that way). On a node with MIG devices a whole GPU goes by its UUID
// too: the slot indexes no longer match the GPUs' own.
func (a *Agent) visibleDevices(gpus []int) []string {
	nodeGPUs := a.cfg.Node.GPUs
	byUUID := slices.ContainsFunc(nodeGPUs, isMIGDevice)
	out := make([]string, len(gpus))
	for i, g := range gpus {
		out[i] = strconv.Itoa(g)
		if g >= 0 && g < len(nodeGPUs) && (byUUID || isMIGDevice(nodeGPUs[g])) && nodeGPUs[g].UUID != "" {
			out[i] = nodeGPUs[g].UUID
		}
	}
	return out
}

// isMIGDevice reports whether a slot is a MIG device: it says its profile
// or, from inventories older than profiles, has a MIG UUID.
func isMIGDevice(g gangway.GPU) bool { return g.IsMIG() || strings.HasPrefix(g.UUID, "MIG-") }

// claimMIG checks that a task asking for MIG devices of profile got only
// such devices, and one asking for none got no MIG device: either would
// be a stale or forged assignment, as the view never commits one.
func (a *Agent) claimMIG(gpus []int, profile string) error {
	for _, g := range gpus {
		if g < 0 || g >= len(a.cfg.Node.GPUs) {
			continue // claim names it
		}
		got := a.cfg.Node.GPUs[g]
		switch {
		case profile == "" && got.IsMIG():
			return fmt.Errorf("GPU %d on node %s is a MIG device (%s), and the task asks for whole GPUs or a share", g, a.cfg.Node.ID, got.MIGProfile)
		case profile != "" && got.MIGProfile != profile:
			return fmt.Errorf("GPU %d on node %s is not a MIG device of profile %s (it is %s)", g, a.cfg.Node.ID, profile, orWholeGPU(got.MIGProfile))
		}
	}
	return nil
}

func orWholeGPU(profile string) string {
	if profile == "" {
		return "a whole GPU"
	}
	return "a MIG device of profile " + profile
}

// shareEnv is what a member holding a share of a GPU or MIG devices is
// told (GANGWAY_MIG_PROFILE for MIG: its GPUs are already partitions), and
// for MPS
// the limits the MPS server enforces on it: its share of the GPU's SMs
// (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) and of its memory
// (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT, per device as CUDA numbers them in
// the process: 0). Time-slicing needs nothing beyond CUDA_VISIBLE_DEVICES;
// the processes take turns on the GPU.
func (a *Agent) shareEnv(in workflows.RunTaskInput) []string {
	if in.MIGProfile != "" {
		return []string{"GANGWAY_MIG_PROFILE=" + in.MIGProfile}
	}
	if in.GPUMilli <= 0 || in.GPUMilli >= gangway.MilliPerGPU {
		return nil
	}
	env := []string{"GANGWAY_GPU_MILLI=" + strconv.Itoa(in.GPUMilli), "GANGWAY_GPU_SHARING=" + string(in.Sharing)}
	if in.Sharing != gangway.SharingMPS {
		return env
	}
	env = append(env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE="+strconv.Itoa((in.GPUMilli+9)/10))
	if len(in.GPUs) == 1 && in.GPUs[0] >= 0 && in.GPUs[0] < len(a.cfg.Node.GPUs) {
		if mem := a.cfg.Node.GPUs[in.GPUs[0]].MemMiB; mem > 0 {
			env = append(env, fmt.Sprintf("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=%dM", mem*in.GPUMilli/gangway.MilliPerGPU))
		}
	}
	return env
}

// taskEnv is the workload contract of DESIGN.md, plus the user's env. The
// user's variables come first so Gangway's own always win. resumeDir is ""
// on a fresh start.
func taskEnv(in workflows.RunTaskInput, devices []string, ckptDir, resumeDir string) []string {
	var env []string
	for k, v := range in.Env {
		env = append(env, k+"="+v)
	}
	return append(env,
		// NVML numbers GPUs in PCI bus order; CUDA must count the same way.
		"CUDA_DEVICE_ORDER=PCI_BUS_ID",
		"CUDA_VISIBLE_DEVICES="+strings.Join(devices, ","),
		"GANGWAY_JOB_ID="+in.JobID,
		"GANGWAY_TEAM="+in.Team,
		"GANGWAY_NODE_ID="+in.NodeID,
		"GANGWAY_ATTEMPT="+strconv.Itoa(in.Attempt),
		"GANGWAY_RANK="+strconv.Itoa(in.Rank),
		"GANGWAY_WORLD_SIZE="+strconv.Itoa(in.WorldSize),
		"GANGWAY_MASTER_ADDR="+in.MasterAddr,
		"GANGWAY_CHECKPOINT_DIR="+ckptDir,
		"GANGWAY_RESUME_DIR="+resumeDir,
		"MASTER_ADDR="+in.MasterAddr,
		"RANK="+strconv.Itoa(in.Rank),
		"WORLD_SIZE="+strconv.Itoa(in.WorldSize),
	)
}

func exitMessage(err error, tail []string) string {
	msg := err.Error()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		msg = fmt.Sprintf("exit code %d", ee.ExitCode())
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			msg = fmt.Sprintf("killed by signal %d (%v)", int(ws.Signal()), ws.Signal())
		}
	}
	if len(tail) > 0 {
		msg += "; last output: " + strings.Join(tail, " | ")
	}
	return msg
}

// taskOutput writes the process's output to its log file and, line by line,
// to the job's log stream in Redis, keeping the last lines for error
// messages.
type taskOutput struct {
	file *os.File
	r, w *os.File // the task writes w; the streamer reads r
	done chan struct{}
	once sync.Once

	mu   sync.Mutex
	last []string
}

const tailLines = 3

// logShipper sends a task's output lines to the view's log stream from its
// own goroutine, through a bounded buffer, so a slow or unreachable Redis
// never holds up the task: the line is in the log file first, and when the
// buffer is full it is dropped from the stream and counted
// (Config.LogDrops) rather than waited for. Each append has
// logAppendTimeout; what is still buffered logCloseWait after the task's
// output ends is dropped too.
type logShipper struct {
	a       *Agent
	jobID   gangway.JobID
	lines   chan gangway.LogLine
	done    chan struct{}
	dropped atomic.Int64
	// abandon: the task has ended and the buffer did not drain in time;
	// run drops what is left instead of sending it.
	abandon atomic.Bool
}

const (
	logBuffer        = 4096
	logAppendTimeout = 5 * time.Second
	logCloseWait     = 2 * time.Second
)

func (a *Agent) newLogShipper(in workflows.RunTaskInput) *logShipper {
	s := &logShipper{a: a, jobID: in.JobID, lines: make(chan gangway.LogLine, logBuffer), done: make(chan struct{})}
	go s.run()
	return s
}

// send queues a line, or drops it if the buffer is full.
func (s *logShipper) send(l gangway.LogLine) {
	select {
	case s.lines <- l:
	default:
		s.drop(1)
	}
}

func (s *logShipper) drop(n int) {
	if s.dropped.Add(int64(n)) == int64(n) {
		s.a.log.Warn("task output is not keeping up with the log stream; dropping lines from it (the log file has them)", "job_id", s.jobID)
	}
	if s.a.cfg.LogDrops != nil {
		s.a.cfg.LogDrops.Dropped(n)
	}
}

func (s *logShipper) run() {
	defer close(s.done)
	warned := false
	for l := range s.lines {
		if s.abandon.Load() {
			s.drop(1)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), logAppendTimeout)
		err := s.a.cap.AppendLog(ctx, s.jobID, l)
		cancel()
		if err != nil {
			s.drop(1)
			if !warned {
				s.a.log.Warn("log stream append failed; the log file still has everything", "job_id", s.jobID, "error", err)
				warned = true
			}
		}
	}
}

// close ends the stream: it waits up to logCloseWait for the buffer to
// drain, then drops what is left.
func (s *logShipper) close() {
	close(s.lines)
	select {
	case <-s.done:
	case <-time.After(logCloseWait):
		// run is blocked on Redis: it drops what it has not sent and ends
		// when its append times out.
		s.abandon.Store(true)
	}
}

// drainTimeout bounds how long Close waits for the task's output to end
// after its group is killed: a process that left the group can hold the
// pipe open forever.
const drainTimeout = 5 * time.Second

func newTaskOutput(path string, tu *taskUser, a *Agent, in workflows.RunTaskInput) (*taskOutput, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, modeLogFile)
	if err != nil {
		return nil, fmt.Errorf("task log: %w", err)
	}
	if err := tu.own(path, modeLogFile); err != nil {
		f.Close()
		return nil, fmt.Errorf("task log: %w", err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("task output pipe: %w", err)
	}
	o := &taskOutput{file: f, r: pr, w: pw, done: make(chan struct{})}
	ship := a.newLogShipper(in)
	go func() {
		defer close(o.done)
		defer ship.close()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(f, line)
			o.mu.Lock()
			o.last = append(o.last, line)
			if len(o.last) > tailLines {
				o.last = o.last[1:]
			}
			o.mu.Unlock()
			ship.send(gangway.LogLine{Time: time.Now(), Rank: in.Rank, Attempt: in.Attempt, Text: line})
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	return o, nil
}

func (o *taskOutput) Write(p []byte) (int, error) { return o.w.Write(p) }

// Close flushes and closes; safe to call twice. Call it after the task's
// group is gone: it waits (up to drainTimeout) for every writer to close.
func (o *taskOutput) Close() error {
	var err error
	o.once.Do(func() {
		o.w.Close()
		select {
		case <-o.done:
		case <-time.After(drainTimeout):
			o.r.Close() // unblocks the streamer
			<-o.done
		}
		o.r.Close()
		err = o.file.Close()
	})
	return err
}

func (o *taskOutput) tail() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.last...)
}
