package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/internal/devstack/fullstack"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// starts counts the members the agents started, per job and attempt.
type starts struct {
	mu sync.Mutex
	n  map[string]int
}

func (s *starts) Record(e agent.Event) {
	if !e.Start {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n[fmt.Sprintf("%s/%d", e.JobID, e.Attempt)]++
}

func (s *starts) of(job gangway.JobID, attempt int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[fmt.Sprintf("%s/%d", job, attempt)]
}

// TestContinueAsNewOnRealServers: a 2 × 1 gang run by real agents and
// placed by the real dispatch loop, with a run budget so tight that the job
// continues as new after every attempt, is preempted four times while both
// members run and still ends as one job: Succeeded at attempt 5, no retry
// spent, each attempt placed and started once, and every attempt's usage
// in the ledger adding up to the job's cost. (workflows'
// TestLimitsOnRealServer holds a 256 × 8 gang to Temporal's limits.)
func TestContinueAsNewOnRealServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers and runs real processes")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	rec := &starts{n: map[string]int{}}
	dir := t.TempDir()
	st, err := fullstack.Start(ctx, fullstack.Options{
		Dir: dir, Headless: true, Log: slog.New(slog.DiscardHandler),
		Nodes:  agent.FakeFleet("node", "onprem", []agent.NodeShape{{Count: 2, GPUs: 1, Model: "H100"}}),
		Agent:  agent.Config{HeartbeatInterval: 500 * time.Millisecond, Recorder: rec},
		Server: &fullstack.ServerOptions{},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	j := jobs.New(st.TemporalClient)
	cl := client.New(j, st.View)

	const preemptions = 4
	spec := gangway.JobSpec{Name: "continued", Team: "ml", Gang: gangway.Gang{Replicas: 2, GPUsPerReplica: 1},
		Command: []string{"/bin/sh", "-c", fmt.Sprintf(`test "$GANGWAY_ATTEMPT" -gt %d && exit 0; exec sleep 600`, preemptions)}}
	spec.Checkpoint.GracePeriod = gangway.Duration{Duration: time.Second}
	if _, err := cl.Submit(ctx, spec, client.SubmitOptions{Limits: workflows.Limits{RunEvents: 90}}); err != nil {
		t.Fatal(err)
	}
	for attempt := 1; attempt <= preemptions; attempt++ {
		waitFor(t, ctx, fmt.Sprintf("attempt %d running", attempt), func() bool { return rec.of(spec.Name, attempt) == 2 })
		if err := j.SignalPreempt(ctx, spec.Name, workflows.PreemptRequest{Attempt: attempt, Cause: workflows.CausePreempted,
			Reason: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := cl.Result(ctx, spec.Name)
	if err != nil {
		t.Fatal(err)
	}
	if res.Phase != gangway.PhaseSucceeded || res.Attempt != preemptions+1 || res.InfraRestarts != preemptions || res.UserRetries != 0 {
		t.Fatalf("ended %s at attempt %d, %d infra restarts, %d user retries: %s", res.Phase, res.Attempt, res.InfraRestarts, res.UserRetries, res.Reason)
	}
	if res.Runs < 3 {
		t.Errorf("the job ran in %d workflow runs, want it to have continued as new at least twice", res.Runs)
	}
	for attempt := 1; attempt <= preemptions+1; attempt++ {
		if n := rec.of(spec.Name, attempt); n != 2 {
			t.Errorf("attempt %d started %d members, want 2", attempt, n)
		}
	}
	segs, err := st.Ledger.JobSegments(ctx, spec.Name)
	if err != nil {
		t.Fatal(err)
	}
	sum, attempts := 0.0, map[int]bool{}
	for _, s := range segs {
		sum += s.Dollars()
		attempts[s.Attempt] = true
	}
	if len(attempts) != preemptions+1 || fmt.Sprintf("%.6f", sum) != fmt.Sprintf("%.6f", res.Dollars) {
		t.Errorf("ledger: %d segments over %d attempts, $%.6f; the job says $%.6f over %d attempts",
			len(segs), len(attempts), sum, res.Dollars, res.Attempt)
	}
	if allocs := mustAllocations(t, ctx, st.View); len(allocs) != 0 {
		t.Errorf("allocations left: %+v", allocs)
	}
	t.Logf("%d attempts in %d workflow runs", res.Attempt, res.Runs)
}
