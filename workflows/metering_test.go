package workflows

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/gangwayhq/gangway"
)

// TestJobWorkflowMetersShares: a job on GPU shares or MIG devices is billed
// each GPU at its share — in the ledger segment, the job's GPU-seconds and
// dollars, and the work a preemption throws away — and a MIG task is told
// its profile.
func TestJobWorkflowMetersShares(t *testing.T) {
	tests := map[string]struct {
		member      func(m gangway.Member) gangway.Member
		share, mig  string
		wantMilli   int64 // the segment's
		wantProfile string
	}{
		"two half-GPU shares": {
			share:     "0.5",
			member:    func(m gangway.Member) gangway.Member { m.Milli = 500; return m },
			wantMilli: 2 * 500,
		},
		"two 3g.40gb MIG devices": {
			mig:         "3g.40gb",
			member:      func(m gangway.Member) gangway.Member { m.MIG, m.MIGMilli = "3g.40gb", 428; return m },
			wantMilli:   2 * 428,
			wantProfile: "3g.40gb",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			f := &fakeActivities{}
			f.register(env)
			spec := testSpec(2, 1, 0)
			spec.Gang.GPUShare, spec.Gang.MIGProfile, spec.Preemptible = tc.share, tc.mig, true
			spec.Default()
			asg := func(attempt int) gangway.Assignment {
				a := priced(assignment(attempt, 2, 1), "onprem", "", 2.0)
				for i := range a.Members {
					a.Members[i] = tc.member(a.Members[i])
				}
				return a
			}
			// Placed at 1 s, preempted at 3 s, placed again at 4 s.
			env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalPlaced, asg(1)) }, time.Second)
			env.RegisterDelayedCallback(func() {
				env.SignalWorkflow(SignalPreempt, PreemptRequest{Attempt: 1, Cause: CausePreempted, Reason: "for a higher-priority job"})
			}, 3*time.Second)
			env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalPlaced, asg(2)) }, 4*time.Second)
			f.run = func(ctx context.Context, in RunTaskInput) error {
				if in.Attempt == 1 {
					return blockUntilCancelled(ctx)
				}
				return nil
			}
			st := runJob(t, env, spec)
			if st.Phase != gangway.PhaseSucceeded {
				t.Fatalf("phase %s (%s), want Succeeded", st.Phase, st.Reason)
			}
			if len(f.usage) == 0 {
				t.Fatal("no usage recorded")
			}
			first := f.usage[0]
			secs := first.End.Sub(first.Start).Seconds()
			if first.GPUs != 2 || first.GPUMilli != tc.wantMilli {
				t.Errorf("segment holds %d GPUs counting %d milli-GPU, want 2 counting %d", first.GPUs, first.GPUMilli, tc.wantMilli)
			}
			if want := secs * float64(tc.wantMilli) / 1000; first.GPUSeconds() != want || secs <= 0 {
				t.Errorf("segment of %vs bills %v GPU-seconds, want %v", secs, first.GPUSeconds(), want)
			}
			if want := first.GPUSeconds() / 3600 * 2.0; first.Dollars() != want {
				t.Errorf("segment costs $%v, want $%v", first.Dollars(), want)
			}
			a1 := st.Attempts[0]
			if a1.GPUMilli != tc.wantMilli || a1.LostGPUSeconds != first.GPUSeconds() {
				t.Errorf("attempt 1 counts %d milli-GPU and lost %v GPU-seconds; want %d and the whole run, %v",
					a1.GPUMilli, a1.LostGPUSeconds, tc.wantMilli, first.GPUSeconds())
			}
			total := 0.0
			for _, seg := range f.usage {
				total += seg.GPUSeconds()
			}
			if st.GPUSeconds != total {
				t.Errorf("the job reports %v GPU-seconds, its segments %v", st.GPUSeconds, total)
			}
			for _, task := range f.tasks {
				if task.MIGProfile != tc.wantProfile {
					t.Errorf("task of rank %d told MIG profile %q, want %q", task.Rank, task.MIGProfile, tc.wantProfile)
				}
			}
		})
	}
}
