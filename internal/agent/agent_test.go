package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/workflows"
)

// fakeCapacity stands in for the Redis view and records what the agent
// tells it.
type fakeCapacity struct {
	mu           sync.Mutex
	registered   []string          // node IDs, one per RegisterNode
	heartbeats   []string          // node IDs, one per Heartbeat
	beatTasks    [][]capacity.Task // the tasks each Heartbeat carried
	heartbeatErr error
	logs         map[gangway.JobID][]gangway.LogLine
	checkpoints  []string // "<job>/<attempt>", one per RecordCheckpoint
	checkpointAt []time.Time
	done         []string // "<job>/<attempt>/<rank>", one per RecordTaskDone
}

var _ Capacity = (*fakeCapacity)(nil)

func (c *fakeCapacity) RegisterNode(_ context.Context, n gangway.Node) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.registered = append(c.registered, n.ID)
	return nil
}

func (c *fakeCapacity) Heartbeat(_ context.Context, nodeID string, tasks []capacity.Task) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.heartbeats = append(c.heartbeats, nodeID)
	c.beatTasks = append(c.beatTasks, tasks)
	return c.heartbeatErr
}

func (c *fakeCapacity) AppendLog(_ context.Context, jobID gangway.JobID, l gangway.LogLine) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.logs == nil {
		c.logs = map[gangway.JobID][]gangway.LogLine{}
	}
	c.logs[jobID] = append(c.logs[jobID], l)
	return nil
}

func (c *fakeCapacity) RecordCheckpoint(_ context.Context, jobID gangway.JobID, attempt int, at time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checkpoints = append(c.checkpoints, fmt.Sprintf("%s/%d", jobID, attempt))
	c.checkpointAt = append(c.checkpointAt, at)
	return nil
}

func (c *fakeCapacity) taskDone() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.done)
}

func (c *fakeCapacity) RecordTaskDone(_ context.Context, d workflows.TaskDone) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done = append(c.done, fmt.Sprintf("%s/%d/%d", d.JobID, d.Attempt, d.Rank))
	return nil
}

func (c *fakeCapacity) logLines(jobID gangway.JobID) []gangway.LogLine {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]gangway.LogLine(nil), c.logs[jobID]...)
}

// recorder keeps every event, in order.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) Record(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) all() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// harness is an agent for node n1 (4 H100s) with a fake view, a recorder
// and a scratch directory for the files test scripts leave behind.
type harness struct {
	a       *Agent
	cap     *fakeCapacity
	rec     *recorder
	dataDir string
	scratch string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{cap: &fakeCapacity{}, rec: &recorder{}, dataDir: t.TempDir(), scratch: t.TempDir()}
	h.a = New(Config{
		Node:     FakeNode("n1", "onprem", "10.0.0.1", 4, "H100"),
		DataDir:  h.dataDir,
		Recorder: h.rec,
	}, h.cap)
	return h
}

// task is rank 1 of a two-member gang of job train-1, attempt 2, on GPUs 1
// and 3 of n1, running script under /bin/sh. PIDFILE names a file in the
// scratch directory for scripts that report their process group.
func (h *harness) task(script string) workflows.RunTaskInput {
	return workflows.RunTaskInput{
		JobID: "train-1", Team: "ml", Attempt: 2, Rank: 1, WorldSize: 2,
		MasterAddr: "10.0.0.9", NodeID: "n1", GPUs: []int{1, 3},
		Command: []string{"/bin/sh", "-c", script},
		Env:     map[string]string{"PIDFILE": h.path("pid")},
	}
}

func (h *harness) path(name string) string { return filepath.Join(h.scratch, name) }

// writePID is a script prefix that records the shell's PID and its process
// group, as the kernel has them (field 5 of /proc/PID/stat). The rename
// makes the write atomic for waitPGID.
const writePID = `echo "$$ $(cut -d' ' -f5 /proc/$$/stat)" > "$PIDFILE.tmp" && mv "$PIDFILE.tmp" "$PIDFILE"; `

type envOption func(*testsuite.TestActivityEnvironment)

// withContext makes ctx the parent of the activity's context: cancelling
// it cancels the running activity, as a cancel from the workflow does.
func withContext(ctx context.Context) envOption {
	return func(env *testsuite.TestActivityEnvironment) {
		env.SetWorkerOptions(worker.Options{BackgroundActivityContext: ctx})
	}
}

func withWorkerStop(ch chan struct{}) envOption {
	return func(env *testsuite.TestActivityEnvironment) { env.SetWorkerStopChannel(ch) }
}

// run executes RunTask through Temporal's activity test environment, so
// inputs and results go through the data converter and errors through the
// failure converter as they do in production.
func (h *harness) run(in workflows.RunTaskInput, opts ...envOption) (workflows.RunTaskResult, error) {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestActivityEnvironment()
	for _, o := range opts {
		o(env)
	}
	env.RegisterActivity(h.a.RunTask)
	val, err := env.ExecuteActivity(h.a.RunTask, in)
	var res workflows.RunTaskResult
	if err != nil {
		return res, err
	}
	if err := val.Get(&res); err != nil {
		return res, err
	}
	return res, nil
}

type outcome struct {
	res workflows.RunTaskResult
	err error
}

// start runs the task in the background.
func (h *harness) start(in workflows.RunTaskInput, opts ...envOption) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		res, err := h.run(in, opts...)
		ch <- outcome{res, err}
	}()
	return ch
}

func wait(t *testing.T, ch <-chan outcome) outcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(10 * time.Second):
		t.Fatal("RunTask did not return within 10s")
		return outcome{}
	}
}

// waitPGID waits for a script to write its PID file, checks the task leads
// its own process group, and returns the group. Whatever happens, the group
// is killed when the test ends.
func (h *harness) waitPGID(t *testing.T) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(h.path("pid"))
		if err == nil {
			var pid, pgid int
			if _, err := fmt.Sscan(string(b), &pid, &pgid); err != nil || pgid <= 1 {
				t.Fatalf("bad pid file %q: %v", b, err)
			}
			if pgid != pid || pgid == syscall.Getpgrp() {
				t.Fatalf("task %d runs in process group %d, want a group of its own (the test's is %d)", pid, pgid, syscall.Getpgrp())
			}
			t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
			return pgid
		}
		if time.Now().After(deadline) {
			t.Fatal("task did not write its pid file within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// requireGroupGone fails unless every process in group pgid has exited.
// kill(-pgid, 0) reports ESRCH once they are all reaped; where PID 1 does
// not reap orphans (some containers), exited members linger as zombies,
// which hold nothing, so those count as gone too.
func requireGroupGone(t *testing.T, pgid int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		err := syscall.Kill(-pgid, 0)
		if errors.Is(err, syscall.ESRCH) {
			return
		}
		live := liveMembers(pgid)
		if len(live) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process group %d still has live processes %v (kill: %v)", pgid, live, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// liveMembers lists processes in group pgid that are not zombies, from
// /proc/<pid>/stat: "pid (comm) state ppid pgrp ...".
func liveMembers(pgid int) []string {
	entries, _ := os.ReadDir("/proc")
	var live []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 3 || f[2] != strconv.Itoa(pgid) || f[0] == "Z" || f[0] == "X" {
			continue
		}
		live = append(live, e.Name()+" "+s[:i+1]+" "+f[0])
	}
	return live
}

// appError unwraps the ApplicationError RunTask returned and checks its
// type; every error RunTask types is non-retryable (the workflow decides).
func appError(t *testing.T, err error, wantType string) *temporal.ApplicationError {
	t.Helper()
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) {
		t.Fatalf("got error %v (%T), want an ApplicationError of type %s", err, err, wantType)
	}
	if ae.Type() != wantType {
		t.Fatalf("error type %q, want %q (message %q)", ae.Type(), wantType, ae.Message())
	}
	if !ae.NonRetryable() {
		t.Errorf("error %q is retryable; the workflow, not the activity retry policy, decides", ae.Message())
	}
	return ae
}

// wantEvents checks the recorder saw exactly this start/stop sequence on
// n1 for train-1's rank 1, attempt 2, and that each stop follows its start.
func wantEvents(t *testing.T, rec *recorder, gpus []int, starts ...bool) {
	t.Helper()
	var want []Event
	for _, s := range starts {
		want = append(want, Event{Node: "n1", GPUs: gpus, JobID: "train-1", Attempt: 2, Rank: 1, Start: s})
	}
	got := rec.all()
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Event{}, "At"), cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("recorded events mismatch (-want +got):\n%s", diff)
	}
	for i := 1; i < len(got); i++ {
		if got[i].At.Before(got[i-1].At) {
			t.Errorf("event %d at %v is before event %d at %v", i, got[i].At, i-1, got[i-1].At)
		}
	}
}

// requireIdle fails if the agent still holds any GPU.
func requireIdle(t *testing.T, a *Agent) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.busy) != 0 {
		t.Fatalf("GPUs still claimed after the task: %v", a.busy)
	}
}

func TestRunTaskSucceeds(t *testing.T) {
	h := newHarness(t)
	res, err := h.run(h.task(`echo hello; echo "to stderr" >&2; printf 'no newline'`))
	if err != nil {
		t.Fatalf("RunTask: %v", err)
	}

	wantLog := filepath.Join(h.dataDir, "logs", "train-1", "attempt-2-rank-1.log")
	if res.LogPath != wantLog {
		t.Errorf("LogPath = %q, want %q", res.LogPath, wantLog)
	}
	b, err := os.ReadFile(wantLog)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), "hello\nto stderr\nno newline\n"; got != want {
		t.Errorf("log file = %q, want %q", got, want)
	}
	want := []gangway.LogLine{
		{Rank: 1, Attempt: 2, Text: "hello"},
		{Rank: 1, Attempt: 2, Text: "to stderr"},
		{Rank: 1, Attempt: 2, Text: "no newline"},
	}
	if diff := cmp.Diff(want, h.cap.logLines("train-1"), cmpopts.IgnoreFields(gangway.LogLine{}, "Time")); diff != "" {
		t.Errorf("log stream mismatch (-want +got):\n%s", diff)
	}
	if res.StartedAt.IsZero() || res.FinishedAt.Before(res.StartedAt) {
		t.Errorf("StartedAt %v, FinishedAt %v: want a start and a finish after it", res.StartedAt, res.FinishedAt)
	}
	wantEvents(t, h.rec, []int{1, 3}, true, false)
	requireIdle(t, h.a)
	if got := h.cap.taskDone(); !slices.Equal(got, []string{"train-1/2/1"}) {
		t.Errorf("task-done records %v, want train-1/2/1's before RunTask returned", got)
	}
}

// TestRunTaskReportsExitAtOnce: when a task's processes are gone the node
// heartbeats before RunTask returns, without the task and with the ones
// still running, so the view frees its GPUs as soon as the workflow
// releases them rather than a heartbeat later.
func TestRunTaskReportsExitAtOnce(t *testing.T) {
	h := newHarness(t)
	other := h.task(writePID + `while [ ! -e "$PIDFILE.go" ]; do sleep 0.05; done`)
	other.JobID, other.Rank, other.GPUs = "eval-1", 0, []int{0}
	running := h.start(other)
	waitFile(t, h.path("pid"), running)

	if _, err := h.run(h.task(`exit 0`)); err != nil {
		t.Fatalf("RunTask: %v", err)
	}
	h.cap.mu.Lock()
	beats := slices.Clone(h.cap.beatTasks)
	h.cap.mu.Unlock()
	want := [][]capacity.Task{{{JobID: "eval-1", Attempt: 2, Rank: 0, GPUs: []int{0}}}}
	if diff := cmp.Diff(want, beats); diff != "" {
		t.Errorf("heartbeats before RunTask returned (-want +got):\n%s", diff)
	}

	if err := os.WriteFile(h.path("pid.go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if o := <-running; o.err != nil {
		t.Fatalf("RunTask of the other task: %v", o.err)
	}
	h.cap.mu.Lock()
	beats = slices.Clone(h.cap.beatTasks)
	h.cap.mu.Unlock()
	if len(beats) != 2 || len(beats[1]) != 0 {
		t.Errorf("heartbeats %v, want a second one when the other task ended, reporting no task", beats)
	}
	requireIdle(t, h.a)
}

func TestRunTaskEnvironment(t *testing.T) {
	h := newHarness(t)
	in := h.task(`env; echo "cwd=$(pwd)"; test -d "$GANGWAY_CHECKPOINT_DIR" && echo "ckpt_dir=exists"`)
	in.WorkingDir = h.scratch
	in.Env["USER_SETTING"] = "a b=c"
	in.Env["GANGWAY_RANK"] = "99" // Gangway's own variables win
	if _, err := h.run(in); err != nil {
		t.Fatalf("RunTask: %v", err)
	}

	got := map[string]string{}
	for _, l := range h.cap.logLines("train-1") {
		if k, v, ok := strings.Cut(l.Text, "="); ok {
			got[k] = v
		}
	}
	ckpt := filepath.Join(h.dataDir, "tasks", "train-1", "attempt-2-rank-1", "checkpoint")
	want := map[string]string{
		"CUDA_VISIBLE_DEVICES":   "1,3",
		"GANGWAY_JOB_ID":         "train-1",
		"GANGWAY_TEAM":           "ml",
		"GANGWAY_NODE_ID":        "n1",
		"GANGWAY_ATTEMPT":        "2",
		"GANGWAY_RANK":           "1",
		"GANGWAY_WORLD_SIZE":     "2",
		"GANGWAY_MASTER_ADDR":    "10.0.0.9",
		"GANGWAY_CHECKPOINT_DIR": ckpt,
		"GANGWAY_RESUME_DIR":     "", // a fresh start
		"ckpt_dir":               "exists",
		"MASTER_ADDR":            "10.0.0.9",
		"RANK":                   "1",
		"WORLD_SIZE":             "2",
		"USER_SETTING":           "a b=c",
		"cwd":                    h.scratch,
	}
	for k, v := range want {
		if gv, ok := got[k]; !ok || gv != v {
			t.Errorf("%s = %q (set: %v), want %q", k, gv, ok, v)
		}
	}
	if _, err := os.Stat(filepath.Dir(ckpt)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the task's directory is left after it ended (stat: %v)", err)
	}
}

func TestRunTaskFailures(t *testing.T) {
	cases := map[string]struct {
		command []string
		// wantMsg is the whole error message, or wantIn parts of it where the
		// shell's wording varies.
		wantMsg    string
		wantIn     []string
		wantLog    string // in the log file
		wantEvents []bool
	}{
		"non-zero exit reports the code and the last lines": {
			command:    []string{"/bin/sh", "-c", "echo one; echo two; echo three >&2; echo four; exit 3"},
			wantMsg:    "exit code 3; last output: two | three | four",
			wantLog:    "one\ntwo\nthree\nfour\n",
			wantEvents: []bool{true, false},
		},
		"non-zero exit without output": {
			command:    []string{"/bin/sh", "-c", "exit 1"},
			wantMsg:    "exit code 1",
			wantEvents: []bool{true, false},
		},
		"command not found by the shell": {
			command:    []string{"/bin/sh", "-c", "gangway-no-such-command --flag"},
			wantIn:     []string{"exit code 127; last output: ", "gangway-no-such-command", "not found"},
			wantEvents: []bool{true, false},
		},
		"killed by a signal": {
			command:    []string{"/bin/sh", "-c", "echo bye; kill -KILL $$"},
			wantIn:     []string{"killed by ", "; last output: bye"},
			wantEvents: []bool{true, false},
		},
		"executable does not exist": {
			command:    []string{"/nonexistent/gangway-trainer", "--epochs", "3"},
			wantMsg:    `start "/nonexistent/gangway-trainer": fork/exec /nonexistent/gangway-trainer: no such file or directory`,
			wantLog:    "gangway: start \"/nonexistent/gangway-trainer\": fork/exec /nonexistent/gangway-trainer: no such file or directory\n",
			wantEvents: []bool{true, false},
		},
		"empty command": {
			wantMsg: "empty command",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			in := h.task("")
			in.Command = tc.command
			_, err := h.run(in)
			msg := appError(t, err, workflows.ErrTypeTaskFailed).Message()
			if tc.wantMsg != "" && msg != tc.wantMsg {
				t.Errorf("message = %q, want %q", msg, tc.wantMsg)
			}
			for _, part := range tc.wantIn {
				if !strings.Contains(msg, part) {
					t.Errorf("message %q does not contain %q", msg, part)
				}
			}
			if tc.wantLog != "" {
				b, err := os.ReadFile(filepath.Join(h.dataDir, "logs", "train-1", "attempt-2-rank-1.log"))
				if err != nil {
					t.Fatal(err)
				}
				if string(b) != tc.wantLog {
					t.Errorf("log file = %q, want %q", b, tc.wantLog)
				}
			}
			wantEvents(t, h.rec, []int{1, 3}, tc.wantEvents...)
			requireIdle(t, h.a)
			if got := h.cap.taskDone(); len(got) != 0 {
				t.Errorf("a failed task left task-done records %v", got)
			}
		})
	}
}

func TestRunTaskRefusesTaskForAnotherNode(t *testing.T) {
	h := newHarness(t)
	in := h.task(`touch "$PIDFILE"`)
	in.NodeID = "n2"
	_, err := h.run(in)
	// GPUBusy, so the workflow requeues the job instead of failing it.
	ae := appError(t, err, workflows.ErrTypeGPUBusy)
	if want := "task for node n2 reached node n1"; ae.Message() != want {
		t.Errorf("message = %q, want %q", ae.Message(), want)
	}
	if _, err := os.Stat(h.path("pid")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the task ran on the wrong node (stat: %v)", err)
	}
	wantEvents(t, h.rec, nil)
	requireIdle(t, h.a)
}

func TestRunTaskRefusesGPUOutsideNode(t *testing.T) {
	h := newHarness(t)
	in := h.task(`touch "$PIDFILE"`)
	in.GPUs = []int{3, 4}
	_, err := h.run(in)
	ae := appError(t, err, workflows.ErrTypeGPUBusy)
	if want := "GPU 4 does not exist on node n1 (4 GPUs)"; ae.Message() != want {
		t.Errorf("message = %q, want %q", ae.Message(), want)
	}
	if _, err := os.Stat(h.path("pid")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the task ran (stat: %v)", err)
	}
	wantEvents(t, h.rec, nil)
	requireIdle(t, h.a) // GPU 3 was not claimed on the way
}

// TestRunTaskRefusesBusyGPU is invariant 1 at the edge: while train-1 runs
// on GPUs 1 and 3, a task for GPU 3 is refused without running, and
// train-1 is unaffected.
func TestRunTaskRefusesBusyGPU(t *testing.T) {
	h := newHarness(t)
	first := h.start(h.task(writePID + `while [ ! -e "$PIDFILE.go" ]; do sleep 0.02; done; echo first done`))
	h.waitPGID(t) // train-1 has claimed its GPUs and is running

	second := h.task(`touch "$PIDFILE.second"`)
	second.JobID, second.Attempt, second.Rank, second.GPUs = "train-2", 1, 0, []int{0, 3}
	_, err := h.run(second)
	ae := appError(t, err, workflows.ErrTypeGPUBusy)
	if want := "GPU 3 on node n1 is already running train-1/attempt-2/rank-1"; ae.Message() != want {
		t.Errorf("message = %q, want %q", ae.Message(), want)
	}
	if _, err := os.Stat(h.path("pid.second")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the second task ran on a busy GPU (stat: %v)", err)
	}

	if err := os.WriteFile(h.path("pid.go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if o := wait(t, first); o.err != nil {
		t.Fatalf("first task: %v", o.err)
	}
	wantEvents(t, h.rec, []int{1, 3}, true, false)
	requireIdle(t, h.a)

	// With train-1 gone, the same request goes through.
	if _, err := h.run(second); err != nil {
		t.Fatalf("second task after the first finished: %v", err)
	}
}

func TestRunTaskCancelKillsProcessGroup(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := h.start(h.task(writePID+`sleep 300 & sleep 300`), withContext(ctx))
	pgid := h.waitPGID(t)

	cancel()
	o := wait(t, done)
	if o.err == nil || !strings.Contains(o.err.Error(), context.Canceled.Error()) {
		t.Fatalf("RunTask after cancel returned %v, want the context's cancellation", o.err)
	}
	requireGroupGone(t, pgid)
	wantEvents(t, h.rec, []int{1, 3}, true, false)
	requireIdle(t, h.a)
}

// TestRunTaskCancelSendsStopSignal: the job's stop signal reaches the group
// first, so a trainer can checkpoint before it goes.
func TestRunTaskCancelSendsStopSignal(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The shell waits with the wait builtin, which a trapped signal
	// interrupts: a signal that lands while the shell forks a foreground
	// sleep can reach the child before it resets the shell's handlers, and
	// the shell would then wait out the sleep and miss the grace period.
	in := h.task(`trap 'echo checkpoint saved; exit 0' USR1; ` + writePID + `sleep 300 & wait`)
	in.StopSignal, in.GracePeriod = "SIGUSR1", 5*time.Second
	done := h.start(in, withContext(ctx))
	pgid := h.waitPGID(t)

	cancel()
	if o := wait(t, done); o.err == nil {
		t.Fatal("RunTask after cancel returned no error")
	}
	requireGroupGone(t, pgid)
	// The shell may first report its foreground sleep killed by the signal.
	lines := h.cap.logLines("train-1")
	if len(lines) == 0 || lines[len(lines)-1].Text != "checkpoint saved" {
		t.Errorf("log lines %+v, want the trap's %q last", lines, "checkpoint saved")
	}
	wantEvents(t, h.rec, []int{1, 3}, true, false)
}

// TestRunTaskCancelKillsAfterGrace: a group that ignores the stop signal
// is killed once the grace period (at least a second) is over.
func TestRunTaskCancelKillsAfterGrace(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	in := h.task(`trap '' TERM; ` + writePID + `sleep 300 & while :; do sleep 0.05; done`)
	in.GracePeriod = time.Millisecond // raised to the one-second floor
	done := h.start(in, withContext(ctx))
	pgid := h.waitPGID(t)

	cancel()
	if o := wait(t, done); o.err == nil {
		t.Fatal("RunTask after cancel returned no error")
	}
	requireGroupGone(t, pgid)
	wantEvents(t, h.rec, []int{1, 3}, true, false)
	requireIdle(t, h.a)
}

func TestRunTaskWorkerStop(t *testing.T) {
	h := newHarness(t)
	stop := make(chan struct{})
	done := h.start(h.task(writePID+`sleep 300 & sleep 300`), withWorkerStop(stop))
	pgid := h.waitPGID(t)

	close(stop)
	o := wait(t, done)
	ae := appError(t, o.err, workflows.ErrTypeNodeShutdown)
	if want := "agent shut down while the task ran"; ae.Message() != want {
		t.Errorf("message = %q, want %q", ae.Message(), want)
	}
	requireGroupGone(t, pgid)
	wantEvents(t, h.rec, []int{1, 3}, true, false)
	requireIdle(t, h.a)
}

// TestRunTaskWorkerStopGrace: when the agent shuts down, a task that
// ignores its stop signal is killed after Config.ShutdownGrace, not after
// its job's longer grace period.
func TestRunTaskWorkerStopGrace(t *testing.T) {
	h := newHarness(t)
	h.a.cfg.ShutdownGrace = time.Second
	stop := make(chan struct{})
	in := h.task(`trap '' TERM; ` + writePID + `while :; do sleep 0.05; done`)
	in.GracePeriod = 10 * time.Minute
	done := h.start(in, withWorkerStop(stop))
	pgid := h.waitPGID(t)

	stopped := time.Now()
	close(stop)
	o := wait(t, done) // fails the test if it took the job's grace period
	appError(t, o.err, workflows.ErrTypeNodeShutdown)
	if took := time.Since(stopped); took < time.Second || took > 5*time.Second {
		t.Errorf("task stopped %v after the shutdown began, want about the 1s shutdown grace", took)
	}
	requireGroupGone(t, pgid)
}

// TestRunTaskKillsLeftoverChildren: when the task's main process exits,
// whatever it left running in its group is killed, so nothing keeps using
// the GPUs after they are released.
func TestRunTaskKillsLeftoverChildren(t *testing.T) {
	cases := map[string]struct {
		script  string
		wantErr string // TaskFailed message; "" for success
	}{
		"background child with its own output": {script: writePID + `sleep 300 >/dev/null 2>&1 & echo main done`},
		// The child holds the task's stdout: the task still ends when its
		// main process does, not when the pipe closes.
		"background child sharing the output": {script: writePID + `sleep 300 & echo main done`},
		"background child after a failure": {
			script:  writePID + `sleep 300 >/dev/null 2>&1 & echo main done; exit 4`,
			wantErr: "exit code 4; last output: main done",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			_, err := h.run(h.task(tc.script))
			pgid := h.waitPGID(t)
			if tc.wantErr != "" {
				if msg := appError(t, err, workflows.ErrTypeTaskFailed).Message(); msg != tc.wantErr {
					t.Errorf("message = %q, want %q", msg, tc.wantErr)
				}
			} else if err != nil {
				t.Fatalf("RunTask: %v", err)
			}
			requireGroupGone(t, pgid)
			wantEvents(t, h.rec, []int{1, 3}, true, false)
			requireIdle(t, h.a)
		})
	}
}

func TestHeartbeat(t *testing.T) {
	cases := map[string]struct {
		heartbeatErr   error
		wantRegistered []string
		wantBeats      []string
	}{
		"known node only heartbeats": {wantBeats: []string{"n1"}},
		// and heartbeats again, to report its tasks into the new view
		"node missing from the view re-registers": {heartbeatErr: capacity.ErrNotFound, wantRegistered: []string{"n1"},
			wantBeats: []string{"n1", "n1"}},
		"other errors do not re-register": {heartbeatErr: errors.New("redis down"), wantBeats: []string{"n1"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			h.cap.heartbeatErr = tc.heartbeatErr
			h.a.heartbeat(context.Background())
			if diff := cmp.Diff(tc.wantBeats, h.cap.heartbeats); diff != "" {
				t.Errorf("heartbeats mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantRegistered, h.cap.registered); diff != "" {
				t.Errorf("registrations mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHeartbeatRecordsDoneAgain: a node the view lost (Redis restarted
// empty) writes again the records of its tasks that exited 0, and only
// those, when it registers again.
func TestHeartbeatRecordsDoneAgain(t *testing.T) {
	h := newHarness(t)
	if _, err := h.run(h.task(`exit 0`)); err != nil {
		t.Fatalf("RunTask: %v", err)
	}
	failing := h.task(`exit 3`)
	failing.JobID = "eval-1"
	if _, err := h.run(failing); err == nil {
		t.Fatal("RunTask of a task that exits 3 succeeded")
	}
	h.cap.mu.Lock()
	h.cap.done, h.cap.heartbeatErr = nil, nil
	h.cap.mu.Unlock()
	h.a.heartbeat(context.Background())
	if got := h.cap.taskDone(); len(got) != 0 {
		t.Errorf("a node the view knows wrote task-done records again: %v", got)
	}
	h.cap.mu.Lock()
	h.cap.heartbeatErr = capacity.ErrNotFound
	h.cap.mu.Unlock()
	h.a.heartbeat(context.Background())
	if got := h.cap.taskDone(); !slices.Equal(got, []string{"train-1/2/1"}) {
		t.Errorf("task-done records written on registering again: %v, want train-1/2/1's alone", got)
	}
}

// TestClaimShares: shares of one GPU run side by side up to one GPU; a
// whole claim needs the GPU free; a released share makes room again.
func TestClaimShares(t *testing.T) {
	a := New(Config{Node: FakeNode("n", "p", "h", 2, "H100")}, nil)
	steps := []struct {
		gpus    []int
		milli   int
		task    string
		wantErr bool
	}{
		{[]int{0}, 500, "a", false},
		{[]int{0}, 500, "b", false},
		{[]int{0}, 1, "c", true},   // full
		{[]int{0}, 0, "d", true},   // whole on a shared GPU
		{[]int{1}, 0, "e", false},  // whole
		{[]int{1}, 250, "f", true}, // share on a whole GPU
	}
	for _, s := range steps {
		err := a.claim(s.gpus, s.milli, s.task)
		if (err != nil) != s.wantErr {
			t.Fatalf("claim %v %dm for %s: %v, want error %v", s.gpus, s.milli, s.task, err, s.wantErr)
		}
	}
	a.unclaim([]int{0}, "a")
	if err := a.claim([]int{0}, 500, "c"); err != nil {
		t.Errorf("a freed half-GPU was not reusable: %v", err)
	}
	if err := a.claim([]int{0}, 250, "x"); err == nil || !strings.Contains(err.Error(), "already running b, c") {
		t.Errorf("over-full claim: %v, want it to name b, c", err)
	}
}

// TestShareEnv: a share is told its milli-GPU and mode; MPS gets its SM
// and memory limits; a MIG task its profile.
func TestShareEnv(t *testing.T) {
	a := New(Config{Node: FakeNode("n", "p", "h", 1, "H100")}, nil)
	mem := a.cfg.Node.GPUs[0].MemMiB
	tests := map[string]struct {
		in   workflows.RunTaskInput
		want []string
	}{
		"whole":        {in: workflows.RunTaskInput{GPUs: []int{0}}},
		"MIG device":   {in: workflows.RunTaskInput{GPUs: []int{0}, MIGProfile: "1g.10gb"}, want: []string{"GANGWAY_MIG_PROFILE=1g.10gb"}},
		"time-slicing": {in: workflows.RunTaskInput{GPUs: []int{0}, GPUMilli: 250, Sharing: gangway.SharingTimeSlicing}, want: []string{"GANGWAY_GPU_MILLI=250", "GANGWAY_GPU_SHARING=time-slicing"}},
		"mps": {in: workflows.RunTaskInput{GPUs: []int{0}, GPUMilli: 333, Sharing: gangway.SharingMPS}, want: []string{"GANGWAY_GPU_MILLI=333", "GANGWAY_GPU_SHARING=mps",
			"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=34", fmt.Sprintf("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=%dM", mem*333/1000)}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, a.shareEnv(tc.in)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
