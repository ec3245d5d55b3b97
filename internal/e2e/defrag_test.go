package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// TestDefragOnRealServers: three 8-GPU nodes on a real Temporal and Redis,
// `gangway server --defrag` (first-fit, so the layout is known), fragmented
// so that 8 GPUs are free but no node has 8:
//
//	node-0: move-a (4 GPUs) and move-b (2), preemptible, checkpointing; 2 free
//	node-1: hold-c (4), not preemptible;                              4 free
//	node-2: hold-d (6), not preemptible;                              2 free
//
// An 8-GPU job waits for defragmentation (its reason says which jobs move
// and what it costs); the dispatch loop moves move-a and move-b — each
// saves a checkpoint, stops and resumes on the GPUs reserved for it, on
// node-1 and node-2 — and the 8-GPU job starts on node-0. Each moved job
// resumes from the checkpoint it stopped at and does every step exactly
// once over its two runs, spending no retry; no GPU ever runs two tasks.
func TestDefragOnRealServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers and runs real processes")
	}
	s := newStack(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	tc, view := s.TemporalClient, s.View

	rec := &record{}
	for i := range 3 {
		s.startAgent(agent.FakeNode(fmt.Sprintf("node-%d", i), "onprem", "127.0.0.1", 8, "H100"), agent.Config{Recorder: rec})
	}
	waitFor(t, ctx, "nodes registered", func() bool {
		nodes, err := view.FleetNodes(ctx)
		return err == nil && len(nodes) == 3
	})
	s.startServer("--policy", "first-fit", "--defrag", "--checkpoint-store", s.CheckpointURL)

	cl := client.New(jobs.New(tc), view)
	timing := client.SubmitOptions{Timing: workflows.Timing{HeartbeatTimeout: 5 * time.Second}}
	start := func(sp gangway.JobSpec, node string) {
		t.Helper()
		if _, err := cl.Submit(ctx, sp, timing); err != nil {
			t.Fatalf("submit %s: %v", sp.Name, err)
		}
		var at string
		waitFor(t, ctx, sp.Name+" running", func() bool {
			st, err := cl.Status(ctx, sp.Name)
			if err == nil && st.Phase == gangway.PhaseRunning && st.Assignment != nil {
				at = st.Assignment.Members[0].NodeID
			}
			return at != ""
		})
		if at != node {
			t.Fatalf("%s runs on %s, want %s (first-fit)", sp.Name, at, node)
		}
	}
	movable := func(name string, gpus, steps int) gangway.JobSpec {
		sp := ckptSpec(name, "vision", s.bin, steps) // 50 ms a step, a checkpoint every 20
		sp.Gang.GPUsPerReplica = gpus
		sp.PriorityClass, sp.Preemptible = gangway.PriorityLow, true
		return sp
	}
	const steps = 500 // 25 s
	a, b := movable("move-a", 4, steps), movable("move-b", 2, steps)
	start(a, "node-0")
	start(b, "node-0")
	start(spec("hold-c", "nlp", 1, 4, s.bin, 400), "node-1")
	start(spec("hold-d", "nlp", 1, 6, s.bin, 400), "node-2")
	for _, id := range []string{a.Name, b.Name} {
		waitFor(t, ctx, id+"'s first checkpoint", func() bool {
			ms, err := s.Checkpoints.List(ctx, id)
			return err == nil && len(ms) > 0
		})
	}

	wide := spec("wide", "nlp", 1, 8, s.bin, 20)
	if _, err := cl.Submit(ctx, wide, timing); err != nil {
		t.Fatal(err)
	}
	var why gangway.Waiting
	waitFor(t, ctx, "wide waiting for defragmentation", func() bool {
		st, err := cl.Status(ctx, wide.Name)
		if err == nil && st.Waiting != nil && st.Waiting.Reason == string(placement.ReasonDefragmenting) {
			why = *st.Waiting
		}
		return why.Reason != "" || (err == nil && st.Phase == gangway.PhaseRunning)
	})
	if why.Reason == "" {
		t.Fatalf("wide started without ever waiting for defragmentation")
	}
	if got := slices.Sorted(slices.Values(why.Moving)); !slices.Equal(got, []gangway.JobID{a.Name, b.Name}) ||
		!slices.Equal(why.ReservedNodes, []string{"node-0"}) || why.MoveLostGPUSeconds <= 0 ||
		!strings.Contains(why.Detail, "waiting for defragmentation: moving 2 jobs") {
		t.Errorf("wide waits: %+v; want move-a and move-b moving for GPUs on node-0, at a cost", why)
	}
	t.Logf("gangway why wide: %s", why)

	ws, err := cl.Result(ctx, wide.Name)
	if err != nil || ws.Phase != gangway.PhaseSucceeded || len(ws.Attempts) != 1 || ws.Attempts[0].Nodes[0] != "node-0" {
		t.Fatalf("wide: %s %q, runs %+v (err %v); want one run on node-0", ws.Phase, ws.Reason, ws.Attempts, err)
	}
	landed := map[gangway.JobID]string{a.Name: "node-1", b.Name: "node-2"}
	for _, sp := range []gangway.JobSpec{a, b} {
		st, err := cl.Result(ctx, sp.Name)
		if err != nil {
			t.Fatal(err)
		}
		if st.Phase != gangway.PhaseSucceeded || st.UserRetries != 0 || len(st.Attempts) != 2 {
			t.Fatalf("%s: %s %q, user retries %d, runs %+v; want Succeeded after one move, no retry spent",
				sp.Name, st.Phase, st.Reason, st.UserRetries, st.Attempts)
		}
		first, second := st.Attempts[0], st.Attempts[1]
		if first.Ended != workflows.CausePreempted || first.By != wide.Name || !strings.Contains(first.Reason, "defragmentation") {
			t.Errorf("%s's first run ended %q by %q (%s), want moved for %s", sp.Name, first.Ended, first.By, first.Reason, wide.Name)
		}
		if first.Checkpoint == nil || second.ResumedFrom == nil || second.ResumedFrom.ID != first.Checkpoint.ID {
			t.Errorf("%s: first run saved %+v, second resumed from %+v; want the same checkpoint", sp.Name, first.Checkpoint, second.ResumedFrom)
		}
		if second.Nodes[0] != landed[sp.Name] || first.Nodes[0] != "node-0" {
			t.Errorf("%s ran on %v then %v; want node-0, then its landing spot on %s", sp.Name, first.Nodes, second.Nodes, landed[sp.Name])
		}
		if n := stepsInLogs(t, ctx, view, sp.Name); n != steps {
			t.Errorf("%s did %d steps over its runs, want exactly %d: none lost, none twice", sp.Name, n, steps)
		}
		stopped := int64(-1)
		if first.Checkpoint != nil && first.Checkpoint.Step != nil {
			stopped = *first.Checkpoint.Step
		}
		t.Logf("%s: moved at step %d from node-0 to %s (%.0f GPU-seconds lost), resumed %v after it stopped; %d steps in all",
			sp.Name, stopped, second.Nodes[0], first.LostGPUSeconds, second.StartedAt.Sub(first.EndedAt).Round(10*time.Millisecond),
			stepsInLogs(t, ctx, view, sp.Name))
	}
	for _, id := range []string{"hold-c", "hold-d"} {
		if st, err := cl.Result(ctx, id); err != nil || st.Phase != gangway.PhaseSucceeded || len(st.Attempts) != 1 {
			t.Errorf("%s: %s %q, %d runs (err %v); want one undisturbed run", id, st.Phase, st.Reason, len(st.Attempts), err)
		}
	}
	rec.checkNoDoubleBooking(t)
}
