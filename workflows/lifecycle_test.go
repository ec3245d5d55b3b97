package workflows

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/gangwayhq/gangway"
)

// priced places every member in pool p at price $ per GPU-hour.
func priced(a gangway.Assignment, pool string, ct gangway.CapacityType, price float64) gangway.Assignment {
	for i := range a.Members {
		a.Members[i].Pool, a.Members[i].CapacityType, a.Members[i].PricePerGPUHour = pool, ct, price
	}
	return a
}

// TestJobWorkflowCheckpointResume: a checkpointable job stopped by a cloud
// notice requeues without spending a retry, resumes from the newest
// checkpoint, and its attempts record how each ended; a node lost after a
// periodic checkpoint loses exactly the time since it.
func TestJobWorkflowCheckpointResume(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	f := &fakeActivities{}
	f.register(env)
	spec := testSpec(1, 4, 0)
	spec.Checkpoint.Enabled = true
	start := env.Now()
	ckptAt := start.Add(2 * time.Second)
	step := int64(40)

	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalPlaced, priced(assignment(1, 1, 4), "spot-a", gangway.CapacitySpot, 1.0))
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		f.mu.Lock()
		f.checkpoint = CheckpointRef{ID: "ck-1", Step: &step, At: ckptAt}
		f.mu.Unlock()
		env.SignalWorkflow(SignalPreempt, PreemptRequest{Attempt: 1, Cause: CauseNotice, NodeID: "n0",
			Reason: "spot interruption at 12:00", Deadline: start.Add(2 * time.Minute)})
	}, 3*time.Second)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalPlaced, priced(assignment(2, 1, 4), "onprem", "", 0.5))
	}, 4*time.Second)
	f.run = func(ctx context.Context, in RunTaskInput) error {
		if in.Attempt == 1 {
			return blockUntilCancelled(ctx)
		}
		return nil
	}
	st := runJob(t, env, spec)

	if st.Phase != gangway.PhaseSucceeded || st.UserRetries != 0 || st.InfraRestarts != 1 {
		t.Fatalf("phase %s, user retries %d, infra restarts %d; want Succeeded, 0, 1 (%s)", st.Phase, st.UserRetries, st.InfraRestarts, st.Reason)
	}
	if got := f.tasks[len(f.tasks)-1]; got.ResumeFrom != "ck-1" || !got.Checkpoint {
		t.Errorf("attempt 2 resumes from %q (checkpoint %v), want ck-1", got.ResumeFrom, got.Checkpoint)
	}
	if len(st.Attempts) != 2 {
		t.Fatalf("%d attempt records, want 2: %+v", len(st.Attempts), st.Attempts)
	}
	a1, a2 := st.Attempts[0], st.Attempts[1]
	if a1.Ended != CauseNotice || a1.Pool != "spot-a" || a1.CapacityType != gangway.CapacitySpot || a1.Checkpoint == nil || a1.Checkpoint.ID != "ck-1" {
		t.Errorf("attempt 1 = %+v; want ended by notice on spot-a with checkpoint ck-1", a1)
	}
	// Stopped at 3s, checkpoint at 2s: one second of 4 GPUs is lost.
	if a1.LostGPUSeconds != 4 {
		t.Errorf("attempt 1 lost %v GPU-seconds, want 4", a1.LostGPUSeconds)
	}
	if a2.Ended != CauseCompleted || a2.ResumedFrom == nil || a2.ResumedFrom.ID != "ck-1" || a2.CapacityType != gangway.CapacityOnPrem {
		t.Errorf("attempt 2 = %+v; want completed on-prem, resumed from ck-1", a2)
	}
	// The requeued entry asks for what is left: 24 h less the second the
	// first run kept (2 s run, 1 s lost).
	if got := f.entries[len(f.entries)-1]; got.Runtime != 24*time.Hour-time.Second || got.Kept != time.Second {
		t.Errorf("requeued with runtime %v after %v kept, want 23h59m59s after 1s", got.Runtime, got.Kept)
	}
	// The ledger gets one segment per attempt; its dollars are the job's.
	sum := 0.0
	for _, seg := range f.usage {
		sum += seg.Dollars()
	}
	if len(f.usage) != 2 || sum != st.Dollars || st.Dollars != a1.Dollars+a2.Dollars {
		t.Errorf("usage %+v sums to $%v; status says $%v (attempts $%v + $%v)", f.usage, sum, st.Dollars, a1.Dollars, a2.Dollars)
	}
	// The run metrics hear of both ends and of the recovery: stop asked
	// at 3 s, running again at 4 s.
	var ended []string
	var recovered time.Duration
	for _, r := range f.runs {
		if r.Ended != nil {
			ended = append(ended, r.Ended.Ended)
		} else if r.RecoveredCause == CauseNotice {
			recovered = r.RecoveredAfter
		}
	}
	if d := cmp.Diff([]string{CauseNotice, CauseCompleted}, ended); d != "" || recovered != time.Second {
		t.Errorf("runs reported (-want +got):\n%s; recovery after %v, want 1s", d, recovered)
	}
	if want := 2.0 * 4 / 3600 * 1.0; a1.Dollars != want {
		t.Errorf("attempt 1 cost $%v, want $%v (2 s × 4 GPUs at $1/GPU-h)", a1.Dollars, want)
	}
}

// TestJobWorkflowEndsByCause checks how each failure a RunTask reports is
// treated: a GPU fault moves the job for free, the idle policy ends it.
func TestJobWorkflowEndsByCause(t *testing.T) {
	tests := map[string]struct {
		err       error
		wantPhase gangway.Phase
		wantCause string
		attempts  int
	}{
		"GPU fault moves the job": {
			err:       temporal.NewNonRetryableApplicationError("Xid 79: GPU has fallen off the bus", ErrTypeGPUFault, nil),
			wantPhase: gangway.PhaseSucceeded, wantCause: CauseFault, attempts: 2,
		},
		"restore failure moves the job": {
			err:       temporal.NewNonRetryableApplicationError("store unreachable", ErrTypeRestoreFailed, nil),
			wantPhase: gangway.PhaseSucceeded, wantCause: CauseInfra, attempts: 2,
		},
		"idle policy ends the job": {
			err:       temporal.NewNonRetryableApplicationError("idle for 1h0m0s below 5% GPU utilization", ErrTypeIdle, nil),
			wantPhase: gangway.PhaseCancelled, wantCause: CauseIdle, attempts: 1,
		},
		"application Xid fails the job": {
			err:       temporal.NewNonRetryableApplicationError("Xid 13: graphics engine exception", ErrTypeTaskFailed, nil),
			wantPhase: gangway.PhaseFailed, wantCause: CauseFailed, attempts: 1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			f := &fakeActivities{}
			f.register(env)
			placeEachAttempt(env, 2, 1, 1)
			f.run = func(_ context.Context, in RunTaskInput) error {
				if in.Attempt == 1 {
					return tc.err
				}
				return nil
			}
			st := runJob(t, env, testSpec(1, 1, 0))
			if st.Phase != tc.wantPhase || len(st.Attempts) != tc.attempts || st.Attempts[0].Ended != tc.wantCause {
				t.Errorf("phase %s after %d attempts, first ended %q; want %s, %d, %q (%s)",
					st.Phase, len(st.Attempts), st.Attempts[0].Ended, tc.wantPhase, tc.attempts, tc.wantCause, st.Reason)
			}
		})
	}
}

// burstRequest offers two pools in order.
func burstRequest(attempt int) BurstRequest {
	return BurstRequest{Attempt: attempt, Reason: "on-prem ETA 3h; spot is cheaper", Offers: []gangway.BurstOffer{
		{Offer: gangway.Offer{Provider: "fake", Pool: "spot-a", Zone: "z1", InstanceType: "p4", GPUModel: "A100", GPUsPerInstance: 8,
			CapacityType: gangway.CapacitySpot, PricePerHour: 8}, Count: 2},
		{Offer: gangway.Offer{Provider: "fake", Pool: "od-b", Zone: "z2", InstanceType: "p4", GPUModel: "A100", GPUsPerInstance: 8,
			CapacityType: gangway.CapacityOnDemand, PricePerHour: 24}, Count: 2},
	}}
}

// launch "launches" Count instances named after the pool.
func launch(in ProvisionInput) ProvisionResult {
	var res ProvisionResult
	for i := range in.Offer.Count {
		id := fmt.Sprintf("%s-%d", in.Offer.Pool, i)
		res.Instances = append(res.Instances, Instance{Provider: in.Offer.Provider, ID: id, NodeID: id})
	}
	return res
}

// placeOn signals the pinned placement on the launched nodes.
func placeOn(attempt int, nodes ...string) gangway.Assignment {
	a := gangway.Assignment{JobID: "train-1", Attempt: attempt}
	for r, n := range nodes {
		a.Members = append(a.Members, gangway.Member{Rank: r, NodeID: n, Pool: "cloud", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}})
	}
	return a
}

// TestJobWorkflowBurst drives the burst saga through each path: every
// instance launched is terminated whatever happens.
func TestJobWorkflowBurst(t *testing.T) {
	noCapacity := temporal.NewNonRetryableApplicationError("no spot capacity in z1", "NoCapacity", nil)
	notReady := temporal.NewNonRetryableApplicationError("2 of 2 nodes never registered", ErrTypeNodesNotReady, nil)
	tests := map[string]struct {
		provision func(ProvisionInput) (ProvisionResult, error)
		awaitErr  func(AwaitNodesInput) error
		placeOn   []string // pinned placement to signal (attempt 1)
		gpus      int      // per replica; 0 means the instance's 8
		placeAt   time.Duration
		cancelAt  time.Duration
		runErr    error
		// want
		phase          gangway.Phase
		reason         string   // the job's end; "": not checked
		terminated     []string // tokens' pools, in order
		launches       int
		firstEnded     string
		capacityType   gangway.CapacityType
		pricePerGPUHrs float64
	}{
		"spot launches, runs, is terminated": {
			provision: func(in ProvisionInput) (ProvisionResult, error) { return launch(in), nil },
			placeOn:   []string{"spot-a-0", "spot-a-1"},
			phase:     gangway.PhaseSucceeded, terminated: []string{"spot-a"}, launches: 1,
			firstEnded: CauseCompleted, capacityType: gangway.CapacitySpot, pricePerGPUHrs: 1,
		},
		"no spot capacity falls back to on-demand": {
			provision: func(in ProvisionInput) (ProvisionResult, error) {
				if in.Offer.Pool == "spot-a" {
					return ProvisionResult{}, noCapacity
				}
				return launch(in), nil
			},
			placeOn: []string{"od-b-0", "od-b-1"},
			phase:   gangway.PhaseSucceeded, terminated: []string{"spot-a", "od-b"}, launches: 2,
			firstEnded: CauseCompleted, capacityType: gangway.CapacityOnDemand, pricePerGPUHrs: 3,
		},
		"instances that never register are terminated; next offer": {
			provision: func(in ProvisionInput) (ProvisionResult, error) { return launch(in), nil },
			awaitErr: func(in AwaitNodesInput) error {
				if in.NodeIDs[0] == "spot-a-0" {
					return notReady
				}
				return nil
			},
			placeOn: []string{"od-b-0", "od-b-1"},
			phase:   gangway.PhaseSucceeded, terminated: []string{"spot-a", "od-b"}, launches: 2,
			firstEnded: CauseCompleted, capacityType: gangway.CapacityOnDemand, pricePerGPUHrs: 3,
		},
		"instances never placed: terminated, next offer": {
			provision: func(in ProvisionInput) (ProvisionResult, error) { return launch(in), nil },
			placeOn:   []string{"od-b-0", "od-b-1"},
			placeAt:   45 * time.Second, // after the 30 s boot timeout of the first offer
			phase:     gangway.PhaseSucceeded, terminated: []string{"spot-a", "od-b"}, launches: 2,
			firstEnded: CauseCompleted, capacityType: gangway.CapacityOnDemand, pricePerGPUHrs: 3,
		},
		"a replica on half an instance pays for all of it": {
			provision: func(in ProvisionInput) (ProvisionResult, error) { return launch(in), nil },
			placeOn:   []string{"spot-a-0", "spot-a-1"}, gpus: 4,
			phase: gangway.PhaseSucceeded, terminated: []string{"spot-a"}, launches: 1,
			// $8 an instance-hour over the 4 GPUs the replica holds.
			firstEnded: CauseCompleted, capacityType: gangway.CapacitySpot, pricePerGPUHrs: 2,
		},
		"gang failure still terminates": {
			provision: func(in ProvisionInput) (ProvisionResult, error) { return launch(in), nil },
			placeOn:   []string{"spot-a-0", "spot-a-1"},
			runErr:    temporal.NewNonRetryableApplicationError("exit code 1", ErrTypeTaskFailed, nil),
			phase:     gangway.PhaseFailed, terminated: []string{"spot-a"}, launches: 1,
			firstEnded: CauseFailed, capacityType: gangway.CapacitySpot, pricePerGPUHrs: 1,
		},
		"cancel while waiting for the pinned placement terminates": {
			provision: func(in ProvisionInput) (ProvisionResult, error) { return launch(in), nil },
			cancelAt:  5 * time.Second,
			phase:     gangway.PhaseCancelled, reason: "cancelled while provisioning", terminated: []string{"spot-a"}, launches: 1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			f := &fakeActivities{provision: tc.provision, awaitErr: tc.awaitErr}
			f.register(env)
			f.run = func(context.Context, RunTaskInput) error { return tc.runErr }
			env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalBurst, burstRequest(1)) }, time.Second)
			if tc.placeOn != nil {
				at := tc.placeAt
				if at == 0 {
					at = 10 * time.Second
				}
				asg := placeOn(1, tc.placeOn...)
				if tc.gpus > 0 {
					for i := range asg.Members {
						asg.Members[i].GPUs = asg.Members[i].GPUs[:tc.gpus]
					}
				}
				env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalPlaced, asg) }, at)
			}
			if tc.cancelAt > 0 {
				env.RegisterDelayedCallback(env.CancelWorkflow, tc.cancelAt)
			}
			gpus := 8
			if tc.gpus > 0 {
				gpus = tc.gpus
			}
			spec := testSpec(2, gpus, 0)
			spec.Burst.Enabled = true
			st := runJobWith(t, env, JobInput{Spec: spec, Timing: Timing{BootTimeout: 30 * time.Second}})

			if st.Phase != tc.phase {
				t.Fatalf("phase %s, want %s (%s)", st.Phase, tc.phase, st.Reason)
			}
			if tc.reason != "" && st.Reason != tc.reason {
				t.Errorf("reason %q, want %q", st.Reason, tc.reason)
			}
			var pools []string
			for _, in := range f.terminated {
				pools = append(pools, in.Token)
			}
			var want []string
			for _, p := range tc.terminated {
				i := map[string]int{"spot-a": 0, "od-b": 1}[p]
				want = append(want, burstToken("train-1", 1, i))
			}
			if diff := cmp.Diff(want, pools); diff != "" {
				t.Errorf("terminated tokens (-want +got):\n%s", diff)
			}
			if len(f.provisioned) != tc.launches {
				t.Errorf("%d launches, want %d", len(f.provisioned), tc.launches)
			}
			if tc.firstEnded == "" {
				return
			}
			a := st.Attempts[0]
			if a.Ended != tc.firstEnded || a.CapacityType != tc.capacityType || f.usage[0].PricePerGPUHour != tc.pricePerGPUHrs {
				t.Errorf("attempt %+v, usage %+v; want ended %q on %s at $%v/GPU-h", a, f.usage, tc.firstEnded, tc.capacityType, tc.pricePerGPUHrs)
			}
			if !hasPhase(st, gangway.PhaseProvisioning) {
				t.Errorf("phases %v lack Provisioning", phases(st))
			}
		})
	}
}

// TestBurstTokens: a token is a pure function of job, attempt and offer.
func TestBurstTokens(t *testing.T) {
	a, b := burstToken("j", 1, 0), burstToken("j", 1, 1)
	if a == b || a != burstToken("j", 1, 0) || a == burstToken("j", 2, 0) {
		t.Errorf("tokens %s %s are not distinct and stable", a, b)
	}
}

func hasPhase(st Status, p gangway.Phase) bool {
	for _, c := range st.Phases {
		if c.Phase == p {
			return true
		}
	}
	return false
}

// TestJobWorkflowReportsLostNode: the release after a member whose node
// was lost, or whose agent shut down, names its node, so the requeued gang
// is not placed there again before it heartbeats.
func TestJobWorkflowReportsLostNode(t *testing.T) {
	tests := map[string]struct {
		err   error
		ended string
	}{
		"heartbeats stopped": {err: temporal.NewHeartbeatTimeoutError(), ended: CauseNodeLost},
		"the agent shut down": {err: temporal.NewNonRetryableApplicationError("agent shut down while the task ran", ErrTypeNodeShutdown, nil),
			ended: CauseInfra},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			f := &fakeActivities{}
			f.register(env)
			placeEachAttempt(env, 2, 2, 8)
			f.run = func(ctx context.Context, in RunTaskInput) error {
				switch {
				case in.Attempt == 1 && in.Rank == 1:
					return tc.err
				case in.Attempt == 1:
					return blockUntilCancelled(ctx)
				}
				return nil
			}
			st := runJob(t, env, testSpec(2, 8, 0))
			if st.Phase != gangway.PhaseSucceeded || st.Attempts[0].Ended != tc.ended || st.UserRetries != 0 {
				t.Fatalf("phase %s, first run ended %q, %d user retries; want Succeeded, %q, none", st.Phase, st.Attempts[0].Ended, st.UserRetries, tc.ended)
			}
			if d := cmp.Diff([]string{"n1"}, f.lostNodes); d != "" {
				t.Errorf("lost nodes reported (-want +got):\n%s", d)
			}
		})
	}
}

// TestJobWorkflowLostOnlyWhenRedone: work is "lost" only when a later run
// redoes it. A checkpointing job that fails with a retry left loses the
// time since its checkpoint; the same failure with no retry left ends the
// job and loses nothing.
func TestJobWorkflowLostOnlyWhenRedone(t *testing.T) {
	tests := map[string]struct {
		retries   int
		wantPhase gangway.Phase
		wantLost  float64
	}{
		"retried: the time since the checkpoint is redone": {retries: 1, wantPhase: gangway.PhaseSucceeded, wantLost: 1},
		"no retry left: nothing is redone":                 {retries: 0, wantPhase: gangway.PhaseFailed, wantLost: 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			f := &fakeActivities{}
			f.register(env)
			spec := testSpec(1, 1, tc.retries)
			spec.Checkpoint.Enabled = true
			start := env.Now()
			f.checkpoint = CheckpointRef{ID: "ck-1", At: start.Add(2 * time.Second)}
			placeEachAttempt(env, 1, 1, 1)
			failNow := make(chan struct{})
			// Placed at 1 s, checkpointed at 2 s, fails at 3 s; a retry is
			// placed at 4 s.
			env.RegisterDelayedCallback(func() { close(failNow) }, 3*time.Second)
			env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalPlaced, assignment(2, 1, 1)) }, 4*time.Second)
			f.run = func(ctx context.Context, in RunTaskInput) error {
				if in.Attempt == 1 {
					<-failNow
					return temporal.NewNonRetryableApplicationError("exit 3", ErrTypeTaskFailed, nil)
				}
				return nil
			}
			st := runJob(t, env, spec)
			if st.Phase != tc.wantPhase {
				t.Fatalf("phase %s, want %s (%s)", st.Phase, tc.wantPhase, st.Reason)
			}
			if st.LostGPUSeconds != tc.wantLost || st.Attempts[0].LostGPUSeconds != tc.wantLost {
				t.Errorf("lost %v GPU-seconds (first run %v), want %v", st.LostGPUSeconds, st.Attempts[0].LostGPUSeconds, tc.wantLost)
			}
		})
	}
}
