package workflows

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/gangwayhq/gangway"
)

// runChain runs a job through every workflow run it continues into, each
// in a fresh test environment (as Temporal starts each run from its input
// alone), placing each run's next attempt one virtual second in. history
// is the history length each run reports, as the server would. It returns
// the final status, the input of every run after the first, and the task
// inputs seen.
func runChain(t *testing.T, in JobInput, history int, run func(context.Context, RunTaskInput) error) (Status, []JobInput, []RunTaskInput) {
	t.Helper()
	var continued []JobInput
	var tasks []RunTaskInput
	for range 50 {
		var s testsuite.WorkflowTestSuite
		env := s.NewTestWorkflowEnvironment()
		env.SetCurrentHistoryLength(history)
		f := &fakeActivities{run: run, checkpoint: CheckpointRef{ID: "ck-1"}}
		f.register(env)
		next := 1
		if in.Continued != nil {
			next = in.Continued.Status.Attempt + 1
		}
		spec := in.Spec
		for k := range 20 {
			env.RegisterDelayedCallback(func() {
				env.SignalWorkflow(SignalPlaced, assignment(next+k, spec.Gang.Replicas, spec.Gang.GPUsPerReplica))
			}, time.Duration(k+1)*time.Second)
		}
		env.ExecuteWorkflow(WorkflowName, in)
		if !env.IsWorkflowCompleted() {
			t.Fatal("workflow run did not complete")
		}
		tasks = append(tasks, f.tasks...)
		err := env.GetWorkflowError()
		var can *workflow.ContinueAsNewError
		if errors.As(err, &can) {
			if can.WorkflowType.Name != WorkflowName {
				t.Fatalf("continued as %q, want %q", can.WorkflowType.Name, WorkflowName)
			}
			in = JobInput{}
			if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &in); err != nil {
				t.Fatalf("decode continued input: %v", err)
			}
			continued = append(continued, in)
			continue
		}
		if err != nil {
			st, ok := StatusFromError(err)
			if !ok {
				t.Fatalf("workflow error without a status: %v", err)
			}
			return st, continued, tasks
		}
		var st Status
		if err := env.GetWorkflowResult(&st); err != nil {
			t.Fatalf("result: %v", err)
		}
		return st, continued, tasks
	}
	t.Fatal("job never finished")
	return Status{}, nil, nil
}

// infraUntil fails every member of attempts before last with an
// infrastructure error (a busy GPU), and lets attempt last succeed.
func infraUntil(last int) func(context.Context, RunTaskInput) error {
	return func(_ context.Context, in RunTaskInput) error {
		if in.Attempt < last {
			return temporal.NewNonRetryableApplicationError("GPU busy", ErrTypeGPUBusy, nil)
		}
		return nil
	}
}

// TestJobWorkflowContinuesAsNew: a job whose history is near its limit
// continues as new after every attempt, carrying its status, and still
// ends as one job: attempts counted on, retries not reset, its checkpoint
// resumed from, its submit time kept; the status keeps only the newest
// attempt records and phase changes and sums the rest.
func TestJobWorkflowContinuesAsNew(t *testing.T) {
	spec := testSpec(2, 4, 0)
	spec.Checkpoint.Enabled = true
	limits := Limits{AttemptRecords: 3, PhaseChanges: 5}
	const attempts = 7
	// Every run reports a history one attempt short of full.
	history := DefaultRunEvents - attemptEvents(2) + 1
	st, continued, tasks := runChain(t, JobInput{Spec: spec, Limits: limits}, history, infraUntil(attempts))

	if st.Phase != gangway.PhaseSucceeded || st.Attempt != attempts || st.InfraRestarts != attempts-1 {
		t.Fatalf("ended %s at attempt %d with %d infra restarts (%s), want Succeeded at %d with %d",
			st.Phase, st.Attempt, st.InfraRestarts, st.Reason, attempts, attempts-1)
	}
	if len(continued) != attempts-1 || st.Runs != attempts {
		t.Errorf("continued %d times, %d runs in the status; want %d and %d", len(continued), st.Runs, attempts-1, attempts)
	}
	for i, in := range continued {
		c := in.Continued
		if c == nil || c.Status.Attempt != i+1 || c.Status.Runs != i+2 || in.Limits != limits {
			t.Fatalf("run %d's input: %+v", i+2, in)
		}
		if c.Resume == nil || c.Resume.ID != "ck-1" {
			t.Errorf("run %d carries resume %v, want ck-1", i+2, c.Resume)
		}
		if !c.Status.SubmittedAt.Equal(continued[0].Continued.Status.SubmittedAt) {
			t.Errorf("run %d: submitted at %v, want the first run's %v", i+2, c.Status.SubmittedAt, continued[0].Continued.Status.SubmittedAt)
		}
	}
	ran := map[int]bool{}
	for _, task := range tasks {
		ran[task.Attempt] = true
		if task.Attempt > 1 && task.ResumeFrom != "ck-1" {
			t.Errorf("attempt %d rank %d resumed from %q, want ck-1", task.Attempt, task.Rank, task.ResumeFrom)
		}
	}
	if len(ran) != attempts {
		t.Errorf("tasks of %d attempts ran, want %d", len(ran), attempts)
	}

	if got := len(st.Attempts); got != limits.AttemptRecords {
		t.Fatalf("%d attempt records kept, want %d", got, limits.AttemptRecords)
	}
	if st.Attempts[0].Attempt != attempts-2 || st.Attempts[2].Ended != CauseCompleted {
		t.Errorf("kept records %d..%d, last ended %q", st.Attempts[0].Attempt, st.Attempts[2].Attempt, st.Attempts[2].Ended)
	}
	e := st.EarlierAttempts
	if e == nil {
		t.Fatal("no summary of the earlier attempts")
	}
	want := AttemptSummary{Count: attempts - 3, First: 1, Last: attempts - 3, Ended: map[string]int{CauseInfra: attempts - 3}}
	if d := cmp.Diff(want, *e); d != "" {
		t.Errorf("earlier attempts (-want +got):\n%s", d)
	}
	if len(st.Phases) != limits.PhaseChanges || st.Phases[len(st.Phases)-1].Phase != gangway.PhaseSucceeded {
		t.Errorf("phases kept: %+v", st.Phases)
	}
	// Submitted, then per attempt Queued, Placed, Running (and Requeued
	// from the second on), then Succeeded.
	if total := st.EarlierPhases + len(st.Phases); total != 1+3*attempts+(attempts-1)+1 {
		t.Errorf("%d phase changes counted, want %d", total, 1+3*attempts+(attempts-1)+1)
	}
}

// TestJobWorkflowContinuesOnlyWhenFull: with a short history a job never
// continues as new; a task input so large that one attempt would pass the
// byte budget makes it continue as new after every attempt.
func TestJobWorkflowContinuesOnlyWhenFull(t *testing.T) {
	spec := testSpec(4, 1, 0)
	_, continued, _ := runChain(t, JobInput{Spec: spec}, 100, infraUntil(4))
	if len(continued) != 0 {
		t.Errorf("a short history continued as new %d times", len(continued))
	}
	big := testSpec(4, 1, 0)
	big.Env = map[string]string{"BIG": strings.Repeat("x", 60<<10)}
	_, continued, _ = runChain(t, JobInput{Spec: big, Limits: Limits{RunBytes: 200 << 10}}, 100, infraUntil(4))
	if len(continued) != 3 {
		t.Errorf("a job whose attempt passes the byte budget continued as new %d times, want 3", len(continued))
	}
}

// TestJobWorkflowStatusBoundedWithoutContinuing: the status stays bounded
// within one run too.
func TestJobWorkflowStatusBoundedWithoutContinuing(t *testing.T) {
	spec := testSpec(1, 1, 0)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	f := &fakeActivities{run: infraUntil(30)}
	f.register(env)
	placeEachAttempt(env, 30, 1, 1)
	st := runJobWith(t, env, JobInput{Spec: spec})
	if st.Phase != gangway.PhaseSucceeded || st.Attempt != 30 {
		t.Fatalf("ended %s at attempt %d: %s", st.Phase, st.Attempt, st.Reason)
	}
	if len(st.Attempts) != DefaultAttemptRecords || st.EarlierAttempts == nil || st.EarlierAttempts.Count != 30-DefaultAttemptRecords {
		t.Errorf("%d records kept, earlier %+v", len(st.Attempts), st.EarlierAttempts)
	}
	if len(st.Phases) != DefaultPhaseChanges || st.EarlierPhases == 0 {
		t.Errorf("%d phase changes kept, %d earlier", len(st.Phases), st.EarlierPhases)
	}
	if st.Runs != 1 {
		t.Errorf("runs %d, want 1", st.Runs)
	}
}

func TestPlacedReasonBounded(t *testing.T) {
	r := placedReason(assignment(1, 256, 8))
	if !strings.HasSuffix(r, ", and 248 more") || strings.Count(r, "rank ") != placedReasonMembers {
		t.Errorf("placed reason of a 256-member gang: %q", r)
	}
}
