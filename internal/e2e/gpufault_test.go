package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/internal/gpuinfo"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// TestGPUFaultOnRealServers: two 8-GPU nodes whose agents watch synthetic
// GPUs. A checkpointing 2 × 4 demo-train gang runs; its rank 0's GPU
// reports Xid 79 (fallen off the bus): the GPU is fenced in the view, the
// gang is stopped as a GPU fault (no retry spent) and resumes on healthy
// GPUs from its last checkpoint. Meanwhile a single-GPU job's GPU reports
// Xid 13 (the application's fault): that job fails, its GPU stays in
// service, and the gang is not disturbed by it.
func TestGPUFaultOnRealServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers and runs real processes")
	}
	s := newStack(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	tc, view := s.TemporalClient, s.View

	// One checkpoint store, shared by the agents and the server.
	storeURL := s.CheckpointURL
	config := filepath.Join(s.logDir, "gangway.yaml")
	if err := os.WriteFile(config, []byte("checkpoint:\n  store: "+storeURL+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	rec := &record{}
	gpus := map[string]*gpuinfo.Synthetic{}
	for _, n := range agent.FakeFleet("node", "onprem", []agent.NodeShape{{Count: 2, GPUs: 8, Model: "H100"}}) {
		src := gpuinfo.NewSynthetic(n.GPUs)
		gpus[n.ID] = src
		s.startAgent(n, agent.Config{Recorder: rec, GPU: agent.GPUConfig{Source: src, SampleInterval: 200 * time.Millisecond}})
	}
	waitFor(t, ctx, "2 nodes registered", func() bool {
		nodes, err := view.FleetNodes(ctx)
		return err == nil && len(nodes) == 2
	})
	s.startServer("--config", config)

	cl := client.New(jobs.New(tc), view)
	timing := client.SubmitOptions{Timing: workflows.Timing{HeartbeatTimeout: 5 * time.Second, StartTimeout: 30 * time.Second}}
	gang := spec("gang-ckpt", "nlp", 2, 4, s.bin, 200) // 10 s of work
	gang.Args = append(gang.Args, "--step-time", "50ms", "--checkpoint-every", "10")
	gang.Checkpoint.Enabled = true
	gang.Checkpoint.GracePeriod = gangway.Duration{Duration: 2 * time.Second}
	single := spec("bad-kernel", "vision", 1, 1, s.bin, 600) // 60 s: it fails long before
	for _, sp := range []gangway.JobSpec{gang, single} {
		if _, err := cl.Submit(ctx, sp, timing); err != nil {
			t.Fatalf("submit %s: %v", sp.Name, err)
		}
	}
	running := func(job string) *gangway.Assignment {
		var a *gangway.Assignment
		waitFor(t, ctx, job+" running", func() bool {
			st, err := cl.Status(ctx, job)
			if err == nil && st.Phase == gangway.PhaseRunning && st.Assignment != nil {
				a = st.Assignment
			}
			return a != nil
		})
		return a
	}
	ga, sa := running(gang.Name), running(single.Name)
	waitFor(t, ctx, "the gang's first checkpoint", func() bool {
		ms, err := s.Checkpoints.List(ctx, gang.Name)
		return err == nil && len(ms) > 0
	})

	// Xid 79 on the GPU of the gang's rank 0; Xid 13 on the single job's.
	var rank0 gangway.Member
	for _, m := range ga.Members {
		if m.Rank == 0 {
			rank0 = m
		}
	}
	faulty := rank0.GPUs[0]
	bad := sa.Members[0]
	t.Logf("Xid 79 on %s GPU %d (gang rank 0), Xid 13 on %s GPU %d (%s)", rank0.NodeID, faulty, bad.NodeID, bad.GPUs[0], single.Name)
	gpus[rank0.NodeID].InjectXid(faulty, 79)
	gpus[bad.NodeID].InjectXid(bad.GPUs[0], 13)

	ss, err := cl.Result(ctx, single.Name)
	if err != nil {
		t.Fatal(err)
	}
	if ss.Phase != gangway.PhaseFailed || !strings.Contains(ss.Reason, "Xid 13") {
		t.Errorf("%s: %s %q, want Failed naming Xid 13", single.Name, ss.Phase, ss.Reason)
	}

	gs, err := cl.Result(ctx, gang.Name)
	if err != nil {
		t.Fatal(err)
	}
	if gs.Phase != gangway.PhaseSucceeded || gs.UserRetries != 0 || gs.InfraRestarts < 1 {
		t.Fatalf("%s: %s %q, user retries %d, infra restarts %d; want Succeeded with an infrastructure restart and no retry spent",
			gang.Name, gs.Phase, gs.Reason, gs.UserRetries, gs.InfraRestarts)
	}
	if len(gs.Attempts) < 2 {
		t.Fatalf("%s ran %d attempts, want 2: %+v", gang.Name, len(gs.Attempts), gs.Attempts)
	}
	first, second := gs.Attempts[0], gs.Attempts[1]
	if first.Ended != workflows.CauseFault || !strings.Contains(first.Reason, "Xid 79") {
		t.Errorf("first attempt ended %q (%q), want %q naming Xid 79", first.Ended, first.Reason, workflows.CauseFault)
	}
	if second.ResumedFrom == nil || second.ResumedFrom.Step == nil || *second.ResumedFrom.Step == 0 {
		t.Errorf("second attempt resumed from %+v, want the first attempt's checkpoint", second.ResumedFrom)
	}
	for _, m := range gs.Assignment.Members {
		if m.NodeID == rank0.NodeID && slices.Contains(m.GPUs, faulty) {
			t.Errorf("the gang resumed on the fenced GPU %s/%d: %+v", rank0.NodeID, faulty, gs.Assignment.Members)
		}
	}
	// Invariant 5: the fault cost at most the steps since the last
	// checkpoint (every 10 steps) that rank 0 had to do again.
	if steps := stepsInLogs(t, ctx, view, gang.Name); steps < 200 || steps > 210 {
		t.Errorf("rank 0's runs did %d steps in all, want 200 to 210 (200 once, plus at most the 10 since the last checkpoint)", steps)
	}

	nodes, err := view.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		for _, g := range n.Node.GPUs {
			fenced := n.Node.ID == rank0.NodeID && g.Index == faulty
			if g.Healthy == fenced {
				t.Errorf("%s GPU %d healthy %v, want %v", n.Node.ID, g.Index, g.Healthy, !fenced)
			}
		}
	}
	events, err := view.GPUEvents(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, e := range events {
		seen = append(seen, fmt.Sprintf("%s/%v xid %d blame %s jobs %v", e.Node, e.GPUs, e.Xid, e.Blame, e.Jobs))
	}
	want := []string{
		fmt.Sprintf("%s/[%d] xid 13 blame app jobs [%s]", bad.NodeID, bad.GPUs[0], single.Name),
		fmt.Sprintf("%s/[%d] xid 79 blame gpu jobs [%s]", rank0.NodeID, faulty, gang.Name),
	}
	slices.Sort(seen)
	slices.Sort(want)
	if !slices.Equal(seen, want) {
		t.Errorf("GPU events %q, want %q", seen, want)
	}
	rec.checkNoDoubleBooking(t)
}
