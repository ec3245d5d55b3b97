package workflows

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/gangwayhq/gangway"
)

// TestJobWorkflowAdoptsAfterHeartbeatTimeout: a member whose heartbeats
// time out (Temporal was unreachable) is adopted, not given up: the
// adopting RunTask gets the task's end from the agent — still running and
// then done, ended with an exit code, or unknown to it (then the node is
// lost) — and a task whose heartbeats keep timing out is lost after
// maxAdopts adoptions.
func TestJobWorkflowAdoptsAfterHeartbeatTimeout(t *testing.T) {
	timeout := func() error { return temporal.NewHeartbeatTimeoutError() }
	tests := map[string]struct {
		// adopt is what an adopting RunTask of rank 1 returns, by adoption.
		adopt        func(n int) error
		wantPhase    gangway.Phase
		wantAttempts int
		wantAdopts   int
		wantCause    string // the first attempt's end
	}{
		"still running, then done": {adopt: func(int) error { return nil },
			wantPhase: gangway.PhaseSucceeded, wantAttempts: 1, wantAdopts: 1, wantCause: CauseCompleted},
		"ended during the outage with exit code 3": {adopt: func(int) error {
			return temporal.NewNonRetryableApplicationError("exit code 3", ErrTypeTaskFailed, nil)
		}, wantPhase: gangway.PhaseFailed, wantAttempts: 1, wantAdopts: 1, wantCause: CauseFailed},
		"unknown to the agent: the node is lost": {adopt: func(int) error {
			return temporal.NewNonRetryableApplicationError("no such task", ErrTypeTaskUnknown, nil)
		}, wantPhase: gangway.PhaseSucceeded, wantAttempts: 2, wantAdopts: 1, wantCause: CauseNodeLost},
		"heartbeats time out again once, then done": {adopt: func(n int) error {
			if n == 1 {
				return timeout()
			}
			return nil
		}, wantPhase: gangway.PhaseSucceeded, wantAttempts: 1, wantAdopts: 2, wantCause: CauseCompleted},
		"heartbeats keep timing out: the node is lost": {adopt: func(int) error { return timeout() },
			wantPhase: gangway.PhaseSucceeded, wantAttempts: 2, wantAdopts: maxAdopts, wantCause: CauseNodeLost},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			f := &fakeActivities{}
			f.register(env)
			placeEachAttempt(env, 2, 2, 1)
			adopts := 0
			f.run = func(ctx context.Context, in RunTaskInput) error {
				switch {
				case in.Attempt > 1:
					return nil
				case in.Rank == 0:
					return nil
				case in.Adopt:
					adopts++
					return tc.adopt(adopts)
				}
				return timeout()
			}
			st := runJob(t, env, testSpec(2, 1, 0))
			if st.Phase != tc.wantPhase || st.Attempt != tc.wantAttempts || adopts != tc.wantAdopts {
				t.Fatalf("ended %s at attempt %d after %d adoptions (%s); want %s at %d after %d",
					st.Phase, st.Attempt, adopts, st.Reason, tc.wantPhase, tc.wantAttempts, tc.wantAdopts)
			}
			if got := st.Attempts[0].Ended; got != tc.wantCause {
				t.Errorf("first attempt ended %q, want %q", got, tc.wantCause)
			}
			// Nothing is started twice: the one start per member is the
			// first RunTask of each attempt.
			starts := map[[2]int]int{}
			for _, task := range f.tasks {
				if !task.Adopt {
					starts[[2]int{task.Attempt, task.Rank}]++
				}
			}
			for k, n := range starts {
				if n != 1 {
					t.Errorf("attempt %d rank %d started %d times", k[0], k[1], n)
				}
			}
		})
	}
}

// TestJobWorkflowViewQuery: the view query says what the job holds in the
// Redis view — its queue entry while it waits, the assignment while it
// runs, nothing once it has ended — for a rebuild of a lost view.
func TestJobWorkflowViewQuery(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	f := &fakeActivities{}
	f.register(env)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalPlaced, assignment(1, 2, 1)) }, 2*time.Second)
	release := make(chan struct{})
	f.run = func(ctx context.Context, in RunTaskInput) error { <-release; return nil }
	var queued, running ViewState
	query := func(into *ViewState) {
		v, err := env.QueryWorkflow(QueryView)
		if err != nil {
			t.Errorf("query: %v", err)
			return
		}
		if err := v.Get(into); err != nil {
			t.Error(err)
		}
	}
	env.RegisterDelayedCallback(func() { query(&queued) }, time.Second)
	env.RegisterDelayedCallback(func() { query(&running); close(release) }, 3*time.Second)
	st := runJob(t, env, testSpec(2, 1, 0))
	if st.Phase != gangway.PhaseSucceeded {
		t.Fatalf("ended %s", st.Phase)
	}
	if !queued.Queued || queued.Entry == nil || queued.Entry.Attempt != 1 || queued.Holding != nil {
		t.Errorf("while queued: %+v", queued)
	}
	if running.Queued || running.Holding == nil || len(running.Holding.Members) != 2 || running.Entry == nil {
		t.Errorf("while running: %+v", running)
	}
}
