package workflows

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/gangwayhq/gangway"
)

// fakeActivities stands in for the Redis view and the agents. run decides
// what each RunTask does.
type fakeActivities struct {
	mu        sync.Mutex
	enqueued  []int // attempts
	dequeued  int
	released  []int // attempts
	tasks     []RunTaskInput
	run       func(ctx context.Context, in RunTaskInput) error
	entries   []gangway.QueueEntry
	lostNodes []string
	usage     []gangway.UsageSegment
	runs      []RecordRunInput
	// checkpoint is what LatestCheckpoint returns.
	checkpoint CheckpointRef
	// Cloud: provision decides a launch's outcome per offer pool.
	provision   func(in ProvisionInput) (ProvisionResult, error)
	awaitErr    func(in AwaitNodesInput) error
	provisioned []ProvisionInput
	terminated  []TerminateInput
	// forged reports placed signals that are not the committed allocation
	// (nil: every signal is).
	forged  func(gangway.Assignment) bool
	checked int
	// taskDone answers TaskDone (nil: no task-done records).
	taskDone func(TaskDoneInput) bool
	asked    []TaskDoneInput
	// down, when set, is asked before each server-side activity runs
	// (Enqueue, Dequeue, Release, RecordUsage, LatestCheckpoint,
	// CheckPlacement), with whether it runs as a local activity: an error
	// fails that try, as an outage of Redis or the ledger would.
	down func(activity string, local bool) error
}

// outage is down's answer for one try of an activity.
func (f *fakeActivities) outage(ctx context.Context, name string) error {
	if f.down == nil {
		return nil
	}
	return f.down(name, activity.GetInfo(ctx).IsLocalActivity)
}

func (f *fakeActivities) register(env *testsuite.TestWorkflowEnvironment) {
	env.RegisterWorkflowWithOptions(JobWorkflow, workflow.RegisterOptions{Name: WorkflowName})
	env.RegisterActivityWithOptions(func(ctx context.Context, in EnqueueInput) error {
		if err := f.outage(ctx, ActivityEnqueue); err != nil {
			return err
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.enqueued = append(f.enqueued, in.Entry.Attempt)
		f.entries = append(f.entries, in.Entry)
		return nil
	}, activity.RegisterOptions{Name: ActivityEnqueue})
	env.RegisterActivityWithOptions(func(ctx context.Context, _ DequeueInput) error {
		if err := f.outage(ctx, ActivityDequeue); err != nil {
			return err
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.dequeued++
		return nil
	}, activity.RegisterOptions{Name: ActivityDequeue})
	env.RegisterActivityWithOptions(func(ctx context.Context, in ReleaseInput) (int, error) {
		if err := f.outage(ctx, ActivityRelease); err != nil {
			return 0, err
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.released = append(f.released, in.Attempt)
		f.lostNodes = append(f.lostNodes, in.LostNodes...)
		return 0, nil
	}, activity.RegisterOptions{Name: ActivityRelease})
	env.RegisterActivityWithOptions(func(ctx context.Context, in RunTaskInput) (RunTaskResult, error) {
		f.mu.Lock()
		f.tasks = append(f.tasks, in)
		f.mu.Unlock()
		if f.run == nil {
			return RunTaskResult{}, nil
		}
		return RunTaskResult{}, f.run(ctx, in)
	}, activity.RegisterOptions{Name: ActivityRunTask})
	env.RegisterActivityWithOptions(func(ctx context.Context, in RecordUsageInput) error {
		if err := f.outage(ctx, ActivityRecordUsage); err != nil {
			return err
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.usage = append(f.usage, in.Segment)
		return nil
	}, activity.RegisterOptions{Name: ActivityRecordUsage})
	env.RegisterActivityWithOptions(func(_ context.Context, in RecordRunInput) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.runs = append(f.runs, in)
		return nil
	}, activity.RegisterOptions{Name: ActivityRecordRun})
	env.RegisterActivityWithOptions(func(ctx context.Context, _ LatestCheckpointInput) (CheckpointRef, error) {
		if err := f.outage(ctx, ActivityLatestCheckpoint); err != nil {
			return CheckpointRef{}, err
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.checkpoint, nil
	}, activity.RegisterOptions{Name: ActivityLatestCheckpoint})
	env.RegisterActivityWithOptions(func(_ context.Context, in ProvisionInput) (ProvisionResult, error) {
		f.mu.Lock()
		f.provisioned = append(f.provisioned, in)
		f.mu.Unlock()
		if f.provision == nil {
			return ProvisionResult{}, errors.New("no cloud in this test")
		}
		return f.provision(in)
	}, activity.RegisterOptions{Name: ActivityProvision})
	env.RegisterActivityWithOptions(func(_ context.Context, in AwaitNodesInput) (AwaitNodesResult, error) {
		if f.awaitErr != nil {
			if err := f.awaitErr(in); err != nil {
				return AwaitNodesResult{}, err
			}
		}
		return AwaitNodesResult{}, nil
	}, activity.RegisterOptions{Name: ActivityAwaitNodes})
	env.RegisterActivityWithOptions(func(ctx context.Context, in CheckPlacementInput) (CheckPlacementResult, error) {
		if err := f.outage(ctx, ActivityCheckPlacement); err != nil {
			return CheckPlacementResult{}, err
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.checked++
		if f.forged != nil && f.forged(in.Assignment) {
			return CheckPlacementResult{Reason: "not committed"}, nil
		}
		return CheckPlacementResult{Committed: true}, nil
	}, activity.RegisterOptions{Name: ActivityCheckPlacement})
	env.RegisterActivityWithOptions(func(_ context.Context, in TaskDoneInput) (bool, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.asked = append(f.asked, in)
		return f.taskDone != nil && f.taskDone(in), nil
	}, activity.RegisterOptions{Name: ActivityTaskDone})
	env.RegisterActivityWithOptions(func(_ context.Context, in TerminateInput) (int, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.terminated = append(f.terminated, in)
		return len(in.NodeIDs), nil
	}, activity.RegisterOptions{Name: ActivityTerminate})
}

func testSpec(replicas, gpus, retries int) gangway.JobSpec {
	s := gangway.JobSpec{
		Name: "train-1", Team: "vision", Command: []string{"train"},
		Gang:    gangway.Gang{Replicas: replicas, GPUsPerReplica: gpus},
		Retries: retries,
	}
	s.Default()
	return s
}

// assignment places replica r on node n<r>, GPUs 0..gpus-1.
func assignment(attempt, replicas, gpus int) gangway.Assignment {
	a := gangway.Assignment{JobID: "train-1", Attempt: attempt}
	for r := range replicas {
		m := gangway.Member{Rank: r, NodeID: fmt.Sprintf("n%d", r), Addr: fmt.Sprintf("10.0.0.%d", r)}
		for g := range gpus {
			m.GPUs = append(m.GPUs, g)
		}
		a.Members = append(a.Members, m)
	}
	return a
}

// placeEachAttempt signals a placement for attempts 1..n, one per virtual
// second, so each requeue finds its signal.
func placeEachAttempt(env *testsuite.TestWorkflowEnvironment, n, replicas, gpus int) {
	for attempt := 1; attempt <= n; attempt++ {
		env.RegisterDelayedCallback(func() {
			env.SignalWorkflow(SignalPlaced, assignment(attempt, replicas, gpus))
		}, time.Duration(attempt)*time.Second)
	}
}

// blockUntilCancelled is a RunTask that runs until the workflow cancels it.
func blockUntilCancelled(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(20 * time.Second):
		return errors.New("test task was never cancelled")
	}
}

func phases(st Status) []gangway.Phase {
	var out []gangway.Phase
	for _, p := range st.Phases {
		out = append(out, p.Phase)
	}
	return out
}

func runJob(t *testing.T, env *testsuite.TestWorkflowEnvironment, spec gangway.JobSpec) Status {
	t.Helper()
	return runJobWith(t, env, JobInput{Spec: spec})
}

func runJobWith(t *testing.T, env *testsuite.TestWorkflowEnvironment, in JobInput) Status {
	t.Helper()
	env.ExecuteWorkflow(WorkflowName, in)
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	// A Failed or Cancelled job closes its workflow failed or cancelled,
	// its Status in the error.
	if err := env.GetWorkflowError(); err != nil {
		st, ok := StatusFromError(err)
		if !ok {
			t.Fatalf("workflow error without a status: %v", err)
		}
		checkClose(t, st, err)
		return st
	}
	var st Status
	if err := env.GetWorkflowResult(&st); err != nil {
		t.Fatalf("result: %v", err)
	}
	checkClose(t, st, nil)
	return st
}

// checkClose checks a job's workflow closed as its phase says: Failed as a
// JobFailed application error, Cancelled as cancelled, others completed.
func checkClose(t *testing.T, st Status, err error) {
	t.Helper()
	var app *temporal.ApplicationError
	var canceled *temporal.CanceledError
	switch {
	case st.Phase == gangway.PhaseFailed && !(errors.As(err, &app) && app.Type() == ErrTypeJobFailed):
		t.Errorf("a Failed job closed with %v, want a %s application error", err, ErrTypeJobFailed)
	case st.Phase == gangway.PhaseCancelled && !errors.As(err, &canceled):
		t.Errorf("a Cancelled job closed with %v, want cancelled", err)
	case st.Phase == gangway.PhaseSucceeded && err != nil:
		t.Errorf("a Succeeded job closed with %v, want completed", err)
	}
}

func TestJobWorkflow(t *testing.T) {
	type want struct {
		phase         gangway.Phase
		phases        []gangway.Phase
		attempt       int
		userRetries   int
		infraRestarts int
		enqueued      []int
		released      []int
		dequeued      int
		reason        string // substring of the final reason
	}
	q, pl, ru, rq := gangway.PhaseQueued, gangway.PhasePlaced, gangway.PhaseRunning, gangway.PhaseRequeued
	sub := gangway.PhaseSubmitted
	cases := map[string]struct {
		spec     gangway.JobSpec
		placed   int // attempts to signal placements for
		cancelAt time.Duration
		// preemptAt sends a preempt signal for preemptAttempt at that time.
		preemptAt      time.Duration
		preemptAttempt int
		run            func(ctx context.Context, in RunTaskInput) error
		// taskDone answers TaskDone for a lost member's task.
		taskDone func(TaskDoneInput) bool
		want     want
	}{
		"happy path 2x8 gang": {
			spec: testSpec(2, 8, 0), placed: 1,
			want: want{phase: gangway.PhaseSucceeded, attempt: 1, enqueued: []int{1}, released: []int{1},
				phases: []gangway.Phase{sub, q, pl, ru, gangway.PhaseSucceeded}},
		},
		"cancel while queued": {
			spec: testSpec(1, 1, 0), cancelAt: 500 * time.Millisecond,
			want: want{phase: gangway.PhaseCancelled, attempt: 1, enqueued: []int{1}, released: []int{1}, dequeued: 1,
				phases: []gangway.Phase{sub, q, gangway.PhaseCancelled}, reason: "cancelled while queued"},
		},
		"cancel while running": {
			spec: testSpec(2, 4, 0), placed: 1, cancelAt: 1500 * time.Millisecond,
			run: func(ctx context.Context, _ RunTaskInput) error { return blockUntilCancelled(ctx) },
			want: want{phase: gangway.PhaseCancelled, attempt: 1, enqueued: []int{1}, released: []int{1},
				phases: []gangway.Phase{sub, q, pl, ru, gangway.PhaseCancelled}, reason: "cancelled while running"},
		},
		"one member fails, gang retried and succeeds": {
			spec: testSpec(2, 8, 1), placed: 2,
			run: func(ctx context.Context, in RunTaskInput) error {
				if in.Attempt == 1 && in.Rank == 1 {
					return temporal.NewNonRetryableApplicationError("exit code 3", ErrTypeTaskFailed, nil)
				}
				if in.Attempt == 1 {
					return blockUntilCancelled(ctx) // the healthy member is stopped
				}
				return nil
			},
			want: want{phase: gangway.PhaseSucceeded, attempt: 2, userRetries: 1, enqueued: []int{1, 2}, released: []int{1, 2},
				phases: []gangway.Phase{sub, q, pl, ru, rq, q, pl, ru, gangway.PhaseSucceeded}},
		},
		"member fails with no retries left": {
			spec: testSpec(2, 8, 0), placed: 1,
			run: func(ctx context.Context, in RunTaskInput) error {
				if in.Rank == 0 {
					return temporal.NewNonRetryableApplicationError("exit code 1", ErrTypeTaskFailed, nil)
				}
				return blockUntilCancelled(ctx)
			},
			want: want{phase: gangway.PhaseFailed, attempt: 1, enqueued: []int{1}, released: []int{1},
				phases: []gangway.Phase{sub, q, pl, ru, gangway.PhaseFailed}, reason: "rank 0 on node n0 failed: exit code 1; no retries left"},
		},
		"node heartbeat lost: requeued without spending a retry": {
			spec: testSpec(2, 8, 0), placed: 2,
			run: func(ctx context.Context, in RunTaskInput) error {
				if in.Attempt == 1 && in.Rank == 1 {
					return temporal.NewHeartbeatTimeoutError()
				}
				if in.Attempt == 1 {
					return blockUntilCancelled(ctx)
				}
				return nil
			},
			want: want{phase: gangway.PhaseSucceeded, attempt: 2, infraRestarts: 1, enqueued: []int{1, 2}, released: []int{1, 2},
				phases: []gangway.Phase{sub, q, pl, ru, rq, q, pl, ru, gangway.PhaseSucceeded}},
		},
		"node lost after its task exited 0: the job succeeds without running again": {
			spec: testSpec(2, 8, 0), placed: 2,
			run: func(_ context.Context, in RunTaskInput) error {
				if in.Attempt == 1 && in.Rank == 1 {
					return temporal.NewNonRetryableApplicationError("no such task", ErrTypeTaskUnknown, nil)
				}
				return nil
			},
			taskDone: func(in TaskDoneInput) bool { return in.Attempt == 1 && in.Rank == 1 && in.NodeID == "n1" },
			want: want{phase: gangway.PhaseSucceeded, attempt: 1, enqueued: []int{1}, released: []int{1},
				phases: []gangway.Phase{sub, q, pl, ru, gangway.PhaseSucceeded}},
		},
		"node lost and no record that its task exited 0: requeued": {
			spec: testSpec(1, 8, 0), placed: 2,
			run: func(_ context.Context, in RunTaskInput) error {
				if in.Attempt == 1 {
					return temporal.NewTimeoutError(0x2 /* SCHEDULE_TO_START */, nil)
				}
				return nil
			},
			taskDone: func(TaskDoneInput) bool { return false },
			want: want{phase: gangway.PhaseSucceeded, attempt: 2, infraRestarts: 1, enqueued: []int{1, 2}, released: []int{1, 2},
				phases: []gangway.Phase{sub, q, pl, ru, rq, q, pl, ru, gangway.PhaseSucceeded}},
		},
		"agent refuses a busy GPU: requeued without spending a retry": {
			spec: testSpec(1, 2, 0), placed: 2,
			run: func(_ context.Context, in RunTaskInput) error {
				if in.Attempt == 1 {
					return temporal.NewNonRetryableApplicationError("GPU 0 busy", ErrTypeGPUBusy, nil)
				}
				return nil
			},
			want: want{phase: gangway.PhaseSucceeded, attempt: 2, infraRestarts: 1, enqueued: []int{1, 2}, released: []int{1, 2},
				phases: []gangway.Phase{sub, q, pl, ru, rq, q, pl, ru, gangway.PhaseSucceeded}},
		},
		"preempted while running: requeued without spending a retry": {
			spec: testSpec(2, 8, 0), placed: 2, preemptAt: 1500 * time.Millisecond, preemptAttempt: 1,
			run: func(ctx context.Context, in RunTaskInput) error {
				if in.Attempt == 1 {
					return blockUntilCancelled(ctx)
				}
				return nil
			},
			want: want{phase: gangway.PhaseSucceeded, attempt: 2, infraRestarts: 1, enqueued: []int{1, 2}, released: []int{1, 2},
				phases: []gangway.Phase{sub, q, pl, ru, rq, q, pl, ru, gangway.PhaseSucceeded}},
		},
		"preempt for another attempt is ignored": {
			spec: testSpec(1, 1, 0), placed: 1, preemptAt: 500 * time.Millisecond, preemptAttempt: 7,
			run: func(context.Context, RunTaskInput) error { return nil },
			want: want{phase: gangway.PhaseSucceeded, attempt: 1, enqueued: []int{1}, released: []int{1},
				phases: []gangway.Phase{sub, q, pl, ru, gangway.PhaseSucceeded}},
		},
		"max runtime exceeded fails for good": {
			spec: testSpec(1, 1, 3), placed: 1,
			run: func(context.Context, RunTaskInput) error {
				return temporal.NewTimeoutError(0x1 /* START_TO_CLOSE */, nil)
			},
			want: want{phase: gangway.PhaseFailed, attempt: 1, enqueued: []int{1}, released: []int{1},
				phases: []gangway.Phase{sub, q, pl, ru, gangway.PhaseFailed}, reason: "exceeded maxRuntime"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			f := &fakeActivities{run: tc.run, taskDone: tc.taskDone}
			f.register(env)
			placeEachAttempt(env, tc.placed, tc.spec.Gang.Replicas, tc.spec.Gang.GPUsPerReplica)
			if tc.cancelAt > 0 {
				env.RegisterDelayedCallback(env.CancelWorkflow, tc.cancelAt)
			}
			if tc.preemptAt > 0 {
				env.RegisterDelayedCallback(func() {
					env.SignalWorkflow(SignalPreempt, PreemptRequest{Attempt: tc.preemptAttempt, Reason: "for a high job"})
				}, tc.preemptAt)
			}
			st := runJob(t, env, tc.spec)
			got := want{phase: st.Phase, phases: phases(st), attempt: st.Attempt, userRetries: st.UserRetries,
				infraRestarts: st.InfraRestarts, enqueued: f.enqueued, released: f.released, dequeued: f.dequeued, reason: tc.want.reason}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("job (-want +got):\n%s\nreason: %s", diff, st.Reason)
			}
			if tc.taskDone != nil && len(f.asked) != 1 {
				t.Errorf("TaskDone asked %d times (%v), want once for the lost member", len(f.asked), f.asked)
			}
			if tc.want.reason != "" && !contains(st.Reason, tc.want.reason) {
				t.Errorf("reason = %q, want it to contain %q", st.Reason, tc.want.reason)
			}
		})
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && indexOf(s, sub) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// TestJobWorkflowTaskInputs checks what each gang member is told: its rank,
// the world size, rank 0's address as master, its node and GPUs.
func TestJobWorkflowTaskInputs(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	f := &fakeActivities{}
	f.register(env)
	placeEachAttempt(env, 1, 2, 4)
	spec := testSpec(2, 4, 0)
	spec.Args = []string{"--lr", "0.1"}
	spec.Env = map[string]string{"A": "1"}
	runJob(t, env, spec)

	byRank := map[int]RunTaskInput{}
	for _, in := range f.tasks {
		byRank[in.Rank] = in
	}
	want := map[int]RunTaskInput{}
	for r := range 2 {
		want[r] = RunTaskInput{JobID: "train-1", Team: "vision", Attempt: 1, Rank: r, WorldSize: 2, MasterAddr: "10.0.0.0",
			NodeID: fmt.Sprintf("n%d", r), GPUs: []int{0, 1, 2, 3}, Command: []string{"train"}, Args: []string{"--lr", "0.1"},
			Env: map[string]string{"A": "1"}, StopSignal: "SIGTERM", GracePeriod: spec.Checkpoint.GracePeriod.Duration,
			Keep: gangway.DefaultKeep}
	}
	if diff := cmp.Diff(want, byRank); diff != "" {
		t.Errorf("task inputs (-want +got):\n%s", diff)
	}
}

// TestJobWorkflowIgnoresOtherAttempts: a re-signal for an old attempt (from
// a new dispatch leader) must not start the job on GPUs it no longer holds.
func TestJobWorkflowIgnoresOtherAttempts(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	f := &fakeActivities{}
	f.register(env)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalPlaced, assignment(7, 1, 1)) }, time.Second)
	env.RegisterDelayedCallback(func() {
		var st Status
		v, err := env.QueryWorkflow(QueryStatus)
		if err != nil || v.Get(&st) != nil {
			t.Errorf("query: %v", err)
		}
		if st.Phase != gangway.PhaseQueued {
			t.Errorf("phase after a stale signal = %s, want Queued", st.Phase)
		}
	}, 2*time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalPlaced, assignment(1, 1, 1)) }, 3*time.Second)
	st := runJob(t, env, testSpec(1, 1, 0))
	if st.Phase != gangway.PhaseSucceeded || len(f.tasks) != 1 || f.tasks[0].Attempt != 1 {
		t.Errorf("phase %s, tasks %+v; want Succeeded with one task for attempt 1", st.Phase, f.tasks)
	}
	if st.WaitTime < 2*time.Second {
		t.Errorf("wait time %v, want >= 2s of queueing", st.WaitTime)
	}
}

// TestJobWorkflowIgnoresForgedPlacement: a placed signal for the current
// attempt that is not the committed allocation (here: rank 0 sent to a
// node "evil") starts nothing; the committed one that follows runs.
func TestJobWorkflowIgnoresForgedPlacement(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	f := &fakeActivities{forged: func(a gangway.Assignment) bool { return a.Members[0].NodeID == "evil" }}
	f.register(env)
	forged := assignment(1, 1, 1)
	forged.Members[0].NodeID, forged.Members[0].TaskQueue = "evil", "node/evil"
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalPlaced, forged) }, time.Second)
	env.RegisterDelayedCallback(func() {
		var st Status
		v, err := env.QueryWorkflow(QueryStatus)
		if err != nil || v.Get(&st) != nil {
			t.Errorf("query: %v", err)
		}
		if st.Phase != gangway.PhaseQueued || st.IgnoredPlacements != 1 {
			t.Errorf("after a forged signal: phase %s, ignored %d; want Queued, 1", st.Phase, st.IgnoredPlacements)
		}
	}, 2*time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalPlaced, assignment(1, 1, 1)) }, 3*time.Second)
	st := runJob(t, env, testSpec(1, 1, 0))
	if st.Phase != gangway.PhaseSucceeded || len(f.tasks) != 1 || f.tasks[0].NodeID != "n0" {
		t.Errorf("phase %s, tasks %+v; want Succeeded with one task, on n0", st.Phase, f.tasks)
	}
	if f.checked != 2 || st.IgnoredPlacements != 1 {
		t.Errorf("checked %d signals and ignored %d, want 2 and 1", f.checked, st.IgnoredPlacements)
	}
}

// TestJobWorkflowRejectsInvalidSpec: a spec that bypassed the client's
// validation is rejected before anything is queued.
func TestJobWorkflowRejectsInvalidSpec(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	f := &fakeActivities{}
	f.register(env)
	spec := testSpec(1, 12, 0)
	env.ExecuteWorkflow(WorkflowName, JobInput{Spec: spec})
	err := env.GetWorkflowError()
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != ErrTypeInvalidSpec {
		t.Fatalf("error = %v, want ApplicationError %s", err, ErrTypeInvalidSpec)
	}
	if !contains(ae.Error(), "gang.gpusPerReplica") || len(f.enqueued) != 0 {
		t.Errorf("error %q, enqueued %v; want the field named and nothing queued", ae.Error(), f.enqueued)
	}
}

// TestJobWorkflowOutlivesAnOutage: while Redis (or the ledger) does not
// answer, the server-side activities fail, try after try, for longer than
// any one try may take; the job waits them out and ends as it would have —
// queued, run, its GPUs released, its usage recorded — rather than give up
// on the first activity to run out of tries ("cancelled while queueing").
func TestJobWorkflowOutlivesAnOutage(t *testing.T) {
	const failures = 9 // backoffs of 0.2 s doubling to 10 s: about 33 s
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	f := &fakeActivities{}
	tries := map[string]int{}
	f.down = func(name string, _ bool) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if tries[name]++; tries[name] <= failures {
			return fmt.Errorf("%s: dial tcp 127.0.0.1:6379: connect: connection refused", name)
		}
		return nil
	}
	f.register(env)
	spec := testSpec(1, 1, 0)
	// Placed once the enqueue has got through.
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalPlaced, assignment(1, 1, 1)) }, 2*time.Minute)
	st := runJob(t, env, spec)

	if st.Phase != gangway.PhaseSucceeded {
		t.Fatalf("job ended %s (%s), want Succeeded", st.Phase, st.Reason)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if diff := cmp.Diff([]int{1}, f.enqueued); diff != "" {
		t.Errorf("enqueued attempts (-want +got):\n%s", diff)
	}
	if len(f.released) == 0 || len(f.usage) != 1 {
		t.Errorf("released %v, usage segments %d: want the GPUs released and one segment recorded", f.released, len(f.usage))
	}
	for _, name := range []string{ActivityEnqueue, ActivityCheckPlacement, ActivityRelease, ActivityRecordUsage} {
		if tries[name] <= failures {
			t.Errorf("%s tried %d times, want past the %d failures", name, tries[name], failures)
		}
	}
}

// TestJobWorkflowTakesLongOutagesOffTheWorkflowTask: a server-side
// activity is tried as a local activity for 20 s — the workflow task held
// open and heartbeated meanwhile — and then on the server task queue: the
// job ends as it would have, each activity tried locally only for its
// first 20 s. (The test environment caps an activity's tries at 10, where
// a server has no limit: the outage here lasts about a minute.)
func TestJobWorkflowTakesLongOutagesOffTheWorkflowTask(t *testing.T) {
	const failures = 15 // 7 local tries, then 8 remote ones fail
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	f := &fakeActivities{}
	type tries struct{ local, remote int }
	tried := map[string]*tries{}
	f.down = func(name string, local bool) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		n := tried[name]
		if n == nil {
			n = &tries{}
			tried[name] = n
		}
		if local {
			n.local++
		} else {
			n.remote++
		}
		if n.local+n.remote <= failures {
			return fmt.Errorf("%s: dial tcp 127.0.0.1:6379: connect: connection refused", name)
		}
		return nil
	}
	f.register(env)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalPlaced, assignment(1, 1, 1)) }, 2*time.Hour)
	st := runJob(t, env, testSpec(1, 1, 0))
	if st.Phase != gangway.PhaseSucceeded {
		t.Fatalf("job ended %s (%s), want Succeeded", st.Phase, st.Reason)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.enqueued) != 1 || len(f.released) == 0 || len(f.usage) != 1 {
		t.Errorf("enqueued %v, released %v, usage segments %d: want one enqueue, the GPUs released and one segment",
			f.enqueued, f.released, len(f.usage))
	}
	// Backoffs of 0.2 s doubling: tries at 0, 0.2, 0.6, 1.4, 3, 6.2 and
	// 12.6 s fit in 20 s.
	for _, name := range []string{ActivityEnqueue, ActivityCheckPlacement, ActivityRelease, ActivityRecordUsage} {
		n := tried[name]
		if n == nil || n.local != 7 || n.local+n.remote != failures+1 {
			t.Errorf("%s tried %+v, want 7 local tries, then remote ones up to the first past the %d failures", name, n, failures)
		}
	}
}
