package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// TestPreemptionOnRealServers: on one full 8-GPU node, a high-priority job
// preempts a low-priority preemptible one through the real dispatch loop;
// the victim is requeued without spending a retry, the preemptor runs, and
// the victim then finishes too. Then a drained node's job is requeued and
// finishes after the node is uncordoned. The agents' record shows no GPU
// held twice.
func TestPreemptionOnRealServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers and runs real processes")
	}
	s := newStack(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	tc, view := s.TemporalClient, s.View

	rec := &record{}
	s.startAgent(agent.FakeNode("node-0", "onprem", "127.0.0.1", 8, "H100"), agent.Config{Recorder: rec})
	waitFor(t, ctx, "node registered", func() bool {
		nodes, err := view.FleetNodes(ctx)
		return err == nil && len(nodes) == 1
	})
	s.startServer("--preempt", "--min-runtime", "0s")

	cl := client.New(jobs.New(tc), view)
	timing := client.SubmitOptions{Timing: workflows.Timing{HeartbeatTimeout: 5 * time.Second}}
	low := spec("low-batch", "vision", 1, 8, s.bin, 60) // 6 s of work
	low.PriorityClass, low.Preemptible = gangway.PriorityLow, true
	if _, err := cl.Submit(ctx, low, timing); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "low job running", func() bool {
		st, err := cl.Status(ctx, low.Name)
		return err == nil && st.Phase == gangway.PhaseRunning
	})
	high := spec("urgent-eval", "nlp", 1, 8, s.bin, 10)
	high.PriorityClass = gangway.PriorityHigh
	if _, err := cl.Submit(ctx, high, timing); err != nil {
		t.Fatal(err)
	}

	hs, err := cl.Result(ctx, high.Name)
	if err != nil || hs.Phase != gangway.PhaseSucceeded {
		t.Fatalf("high job: %s %s (err %v)", hs.Phase, hs.Reason, err)
	}
	ls, err := cl.Result(ctx, low.Name)
	if err != nil || ls.Phase != gangway.PhaseSucceeded {
		t.Fatalf("low job: %s %s (err %v)", ls.Phase, ls.Reason, err)
	}
	if ls.InfraRestarts != 1 || ls.UserRetries != 0 || ls.Attempt != 2 {
		t.Errorf("low job: attempt %d, infra restarts %d, user retries %d; want 2, 1, 0", ls.Attempt, ls.InfraRestarts, ls.UserRetries)
	}
	preempted := false
	for _, p := range ls.Phases {
		preempted = preempted || strings.Contains(p.Reason, "preempted for urgent-eval")
	}
	if !preempted {
		t.Errorf("low job's history does not say it was preempted for urgent-eval: %+v", ls.Phases)
	}
	// The high job started only after the low one let go of the GPUs.
	if !hs.Phases[len(hs.Phases)-1].At.After(ls.Phases[2].At) {
		t.Errorf("phases out of order: high %+v low %+v", hs.Phases, ls.Phases)
	}

	// Drain: the job on the node is stopped and requeued; it waits while
	// the node is cordoned, and runs to the end once it is uncordoned.
	moved := spec("moved-by-drain", "vision", 1, 4, s.bin, 40)
	if _, err := cl.Submit(ctx, moved, timing); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "job running", func() bool {
		st, err := cl.Status(ctx, moved.Name)
		return err == nil && st.Phase == gangway.PhaseRunning
	})
	asked, err := cl.Drain(ctx, "node-0")
	if err != nil || len(asked) != 1 || asked[0] != moved.Name {
		t.Fatalf("drain asked %v (err %v), want [%s]", asked, err, moved.Name)
	}
	waitFor(t, ctx, "drained job requeued and waiting", func() bool {
		st, err := cl.Status(ctx, moved.Name)
		return err == nil && st.Attempt == 2 && st.Phase == gangway.PhaseQueued && st.Waiting != nil
	})
	if err := cl.Uncordon(ctx, "node-0"); err != nil {
		t.Fatal(err)
	}
	ms, err := cl.Result(ctx, moved.Name)
	if err != nil || ms.Phase != gangway.PhaseSucceeded || ms.InfraRestarts != 1 || ms.UserRetries != 0 {
		t.Fatalf("drained job: %s %q, infra restarts %d, user retries %d (err %v)", ms.Phase, ms.Reason, ms.InfraRestarts, ms.UserRetries, err)
	}
	rec.checkNoDoubleBooking(t)
}
