package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// ckptSpec is a demo-train job of steps at 50 ms that checkpoints every
// 20 steps and on its stop signal.
func ckptSpec(name, team, bin string, steps int) gangway.JobSpec {
	sp := spec(name, team, 1, 8, bin, steps)
	sp.Args = append(sp.Args, "--step-time", "50ms", "--checkpoint-every", "20")
	sp.Checkpoint.Enabled = true
	sp.Checkpoint.GracePeriod = gangway.Duration{Duration: 3 * time.Second}
	return sp
}

// TestCheckpointPathsOnRealServers moves checkpointing jobs on a real
// Temporal and Redis, two 8-GPU nodes, along the on-prem paths to a
// checkpoint:
//
//   - scheduler preemption by a higher-priority job, and a drained node:
//     the job saves at the stop and finishes with every step done once;
//   - an agent killed with SIGKILL (no chance to save): the job resumes on
//     the other node from its last periodic checkpoint, and the work it
//     lost is what it did since then.
//
// None of these restarts spends the job's retry budget.
func TestCheckpointPathsOnRealServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers and runs real processes")
	}
	s := newStack(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	tc, view := s.TemporalClient, s.View
	storeURL := s.CheckpointURL

	// node-0 is a `gangway agent` process, so it can be killed outright;
	// node-1 runs in the test.
	// The node TTL (5 s) is longer than the jobs' heartbeat timeout (3 s):
	// the job found lost must still not be placed on the dead node again.
	// The server runs first: node-0's agent joins through it.
	s.startServer("--preempt", "--min-runtime", "0s", "--checkpoint-store", storeURL)
	victim := startAgentProc(t, s, "node-0", storeURL)
	s.startAgent(agent.FakeNode("node-1", "onprem", "127.0.0.1", 8, "H100"), agent.Config{})
	waitFor(t, ctx, "nodes registered", func() bool {
		nodes, err := view.FleetNodes(ctx)
		return err == nil && len(nodes) == 2
	})

	cl := client.New(jobs.New(tc), view)
	timing := client.SubmitOptions{Timing: workflows.Timing{HeartbeatTimeout: 3 * time.Second, StartTimeout: 30 * time.Second}}
	submit := func(sp gangway.JobSpec) {
		t.Helper()
		if _, err := cl.Submit(ctx, sp, timing); err != nil {
			t.Fatalf("submit %s: %v", sp.Name, err)
		}
	}
	runningOn := func(job string) string {
		node := ""
		waitFor(t, ctx, job+" running", func() bool {
			st, err := cl.Status(ctx, job)
			if err == nil && st.Phase == gangway.PhaseRunning && st.Assignment != nil {
				node = st.Assignment.Members[0].NodeID
			}
			return node != ""
		})
		return node
	}
	firstCheckpoint := func(job string) {
		waitFor(t, ctx, job+"'s first checkpoint", func() bool {
			ms, err := s.Checkpoints.List(ctx, job)
			return err == nil && len(ms) > 0
		})
	}
	result := func(job string) workflows.Status {
		st, err := cl.Result(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		if st.Phase != gangway.PhaseSucceeded || st.UserRetries != 0 || len(st.Attempts) < 2 {
			t.Fatalf("%s: %s %q, user retries %d, runs %+v; want Succeeded after a restart, no retry spent",
				job, st.Phase, st.Reason, st.UserRetries, st.Attempts)
		}
		return st
	}

	// Scheduler preemption: a low, preemptible job and a filler take both
	// nodes; a high job preempts the low one.
	low := ckptSpec("low-ckpt", "vision", s.bin, 200)
	low.PriorityClass, low.Preemptible = gangway.PriorityLow, true
	filler := spec("filler", "vision", 1, 8, s.bin, 60)
	submit(low)
	runningOn(low.Name)
	submit(filler)
	runningOn(filler.Name)
	firstCheckpoint(low.Name)
	high := spec("urgent", "nlp", 1, 8, s.bin, 20)
	high.PriorityClass = gangway.PriorityHigh
	submit(high)
	ls := result(low.Name)
	if a := ls.Attempts[0]; a.Ended != workflows.CausePreempted || a.By != high.Name {
		t.Errorf("%s's first run ended %q by %q, want preempted by %s", low.Name, a.Ended, a.By, high.Name)
	}
	if steps := stepsInLogs(t, ctx, view, low.Name); steps != 200 {
		t.Errorf("%s did %d steps over its runs, want exactly 200", low.Name, steps)
	}
	for _, id := range []string{filler.Name, high.Name} {
		if st, err := cl.Result(ctx, id); err != nil || st.Phase != gangway.PhaseSucceeded {
			t.Fatalf("%s: %s %q (err %v)", id, st.Phase, st.Reason, err)
		}
	}

	// Drain: the job on the drained node saves and moves to the other.
	moved := ckptSpec("drained-ckpt", "vision", s.bin, 200)
	submit(moved)
	from := runningOn(moved.Name)
	firstCheckpoint(moved.Name)
	if _, err := cl.Drain(ctx, from); err != nil {
		t.Fatal(err)
	}
	ms := result(moved.Name)
	if a := ms.Attempts[0]; a.Ended != workflows.CauseDrain {
		t.Errorf("%s's first run ended %q, want %q", moved.Name, a.Ended, workflows.CauseDrain)
	}
	if last := ms.Attempts[len(ms.Attempts)-1]; last.Nodes[0] == from {
		t.Errorf("%s resumed on the drained node %s", moved.Name, from)
	}
	if steps := stepsInLogs(t, ctx, view, moved.Name); steps != 200 {
		t.Errorf("%s did %d steps over its runs, want exactly 200", moved.Name, steps)
	}
	if err := cl.Uncordon(ctx, from); err != nil {
		t.Fatal(err)
	}

	// A killed agent: the job is on node-0 (node-1 cordoned meanwhile);
	// after its second checkpoint the agent process dies.
	if err := cl.Cordon(ctx, "node-1"); err != nil {
		t.Fatal(err)
	}
	lost := ckptSpec("lost-node-ckpt", "vision", s.bin, 300)
	submit(lost)
	if node := runningOn(lost.Name); node != "node-0" {
		t.Fatalf("%s runs on %s, want node-0", lost.Name, node)
	}
	if err := cl.Uncordon(ctx, "node-1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, lost.Name+"'s second checkpoint", func() bool {
		ms, err := s.Checkpoints.List(ctx, lost.Name)
		return err == nil && len(ms) >= 2
	})
	time.Sleep(600 * time.Millisecond) // a dozen steps past the checkpoint
	killedAt := time.Now()
	victim.kill()
	ks := result(lost.Name)
	first, last := ks.Attempts[0], ks.Attempts[len(ks.Attempts)-1]
	if len(ks.Attempts) != 2 || first.Ended != workflows.CauseNodeLost || first.Checkpoint == nil || last.ResumedFrom == nil ||
		last.ResumedFrom.ID != first.Checkpoint.ID || last.Nodes[0] != "node-1" {
		t.Fatalf("%s runs %+v: want node lost on node-0, then resumed on node-1 from the last checkpoint", lost.Name, ks.Attempts)
	}
	// Lost work: the GPU time from the last checkpoint until the node was
	// found lost (the heartbeat timeout after the kill).
	sinceCkpt := killedAt.Sub(first.Checkpoint.At).Seconds() * 8
	maxLost := first.EndedAt.Sub(first.Checkpoint.At).Seconds()*8 + 1
	if first.LostGPUSeconds < sinceCkpt || first.LostGPUSeconds > maxLost {
		t.Errorf("%s lost %.1f GPU-seconds; want between %.1f (checkpoint → kill) and %.1f (checkpoint → node lost)",
			lost.Name, first.LostGPUSeconds, sinceCkpt, maxLost)
	}
	if *updateHistories {
		saveHistory(t, ctx, tc, low.Name)  // preempted, checkpointed, resumed
		saveHistory(t, ctx, tc, lost.Name) // node lost, resumed from a periodic checkpoint
	}
	t.Logf("agent killed %.1fs after the last checkpoint (step %d); found lost after %v; %.1f GPU-seconds lost; resumed on node-1 %v after the kill",
		killedAt.Sub(first.Checkpoint.At).Seconds(), *first.Checkpoint.Step, first.EndedAt.Sub(killedAt).Round(100*time.Millisecond),
		first.LostGPUSeconds, last.StartedAt.Sub(killedAt).Round(100*time.Millisecond))
}

// agentProc is a `gangway agent` child process.
type agentProc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// kill SIGKILLs the agent; its tasks die with it (Pdeathsig).
func (p *agentProc) kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

func startAgentProc(t *testing.T, s *stack, nodeID, storeURL string) *agentProc {
	t.Helper()
	logf, err := os.Create(filepath.Join(s.logDir, nodeID+"-agent.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(s.bin, "agent", "--temporal-address", s.Temporal.Addr, "--redis-url", s.Redis.URL,
		"--node-id", nodeID, "--pool", "onprem", "--addr", "127.0.0.1", "--fake-gpus", "8xH100",
		"--data-dir", filepath.Join(s.logDir, nodeID), "--heartbeat-interval", "500ms", "--notices", "none",
		"--metrics-addr", "", "--checkpoint-store", storeURL)
	cmd.Env = append(os.Environ(), "GANGWAY_JOIN_TOKEN="+s.joinToken)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start agent %s: %v", nodeID, err)
	}
	p := &agentProc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				p.kill()
			}
		}
		if t.Failed() {
			data, _ := os.ReadFile(logf.Name())
			t.Logf("agent %s output:\n%s", nodeID, tail(string(data), 4000))
		}
	})
	return p
}
