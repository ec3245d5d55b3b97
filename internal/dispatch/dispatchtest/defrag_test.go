package dispatchtest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/dispatch"
	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/workflows"
)

// recordingPlacer is the engine, remembering the options of its last call.
type recordingPlacer struct{ last placement.Options }

func (p *recordingPlacer) Place(s placement.Snapshot, q []gangway.QueueEntry, o placement.Options) placement.Plan {
	p.last = o
	return placement.Place(s, q, o)
}

// TestLoopDefragments runs the dispatch loop on a fragmented fleet — two
// 8-GPU nodes, each half held, one by a checkpointing preemptible job —
// with an 8-GPU job waiting: the loop asks the cheap job to move (a
// preemption for the waiting job, through the lease-fenced preemption
// path), says why the job waits, keeps the plan's reservations while the
// moved job stops (asking it once), and once it has stopped and is queued
// again the waiting job starts on its destination and the moved job on
// its landing spot. The hour's budget counts the moves until an hour has
// passed.
func TestLoopDefragments(t *testing.T) {
	ctx := t.Context()
	clock := NewClock(t0)
	c := NewCapacity(clock)
	wf := NewWorkflows()
	for _, id := range []string{"n1", "n2"} {
		n := gangway.Node{ID: id, Pool: "onprem", CPUMilli: 64000, MemMiB: 1 << 20}
		for i := range 8 {
			n.GPUs = append(n.GPUs, gangway.GPU{Index: i, Model: "H100", Healthy: true})
		}
		c.RegisterNode(n)
	}
	entry := func(id string, gpus, prio int, movable bool) gangway.QueueEntry {
		return gangway.QueueEntry{JobID: id, Team: "ml", Attempt: 1, Replicas: 1, GPUsPerReplica: gpus, Priority: prio,
			Preemptible: movable, Checkpointable: movable, SubmittedAt: t0, EnqueuedAt: t0}
	}
	member := func(node string, gpus ...int) gangway.Member {
		return gangway.Member{NodeID: node, Pool: "onprem", GPUs: gpus}
	}
	running := func(e gangway.QueueEntry, m gangway.Member) {
		t.Helper()
		c.Enqueue(e)
		wf.Start(e.JobID)
		a := gangway.Assignment{JobID: e.JobID, Attempt: 1, Members: []gangway.Member{m}, At: t0, Team: e.Team,
			Priority: e.Priority, Preemptible: e.Preemptible, Checkpointable: e.Checkpointable}
		if err := c.Commit(ctx, "me", []gangway.Assignment{a}); err != nil {
			t.Fatal(err)
		}
	}
	if ok, _ := c.AcquireLease(ctx, "me", time.Minute); !ok {
		t.Fatal("no lease")
	}
	running(entry("a", 4, 0, true), member("n1", 0, 1, 2, 3))
	running(entry("b", 4, 100, false), member("n2", 0, 1, 2, 3))
	clock.Set(t0.Add(5 * time.Minute))
	if err := c.RecordCheckpoint(ctx, "a", 1, t0.Add(4*time.Minute)); err != nil {
		t.Fatal(err)
	}
	big := entry("big", 8, 100, false)
	big.SubmittedAt, big.EnqueuedAt = clock.Now(), clock.Now()
	c.Enqueue(big)
	wf.Start("big")

	placer := &recordingPlacer{}
	// No start estimates: the reasons compared are the defragmentation's.
	l := dispatch.New(dispatch.Config{Holder: "me", Clock: clock, Placer: placer, SignalParallelism: 1, NoETA: true,
		Placement: placement.Options{Defrag: placement.Defrag{Enabled: true, MaxMovesPerHour: 4,
			MaxLostGPUSecondsPerHour: 10000, RestartOverhead: 30 * time.Second}}}, c, wf)
	tick := func() []Signal {
		t.Helper()
		c.Heartbeat() // the agents are alive
		if err := l.Tick(ctx); err != nil {
			t.Fatal(err)
		}
		return wf.TakeSignals()
	}

	// The cycle plans the move and asks a to stop (a new leader also
	// signals every allocation again: those are left out).
	move := workflows.PreemptRequest{Attempt: 1, Cause: workflows.CausePreempted, By: "big",
		Reason: "moved from n1 to n2 to make room for big (defragmentation)"}
	var preempts []Signal
	for _, s := range tick() {
		if s.Name != workflows.SignalPlaced {
			preempts = append(preempts, s)
		}
	}
	if d := cmp.Diff([]Signal{{Name: workflows.SignalPreempt, JobID: "a", Preempt: move}}, preempts); d != "" {
		t.Fatalf("first cycle's signals (-want +got):\n%s", d)
	}
	wantWaiting := gangway.Waiting{Reason: string(placement.ReasonDefragmenting), Retry: true,
		Detail:        "1 × 8 GPUs: waiting for defragmentation: moving 1 job (a), about 360 GPU-seconds lost; GPUs on n1 reserved for it",
		ReservedNodes: []string{"n1"}, Moving: []gangway.JobID{"a"}, MoveLostGPUSeconds: 360}
	if d := cmp.Diff(wantWaiting, c.Reasons()["big"]); d != "" {
		t.Errorf("big's reason (-want +got):\n%s", d)
	}

	// While a checkpoints and stops the plan holds, and a is not asked
	// again so soon.
	clock.Set(t0.Add(5*time.Minute + 2*time.Second))
	if got := tick(); len(got) != 0 {
		t.Errorf("second cycle's signals %+v, want none", got)
	}
	if got := placer.last.Defrag; len(got.InFlight) != 1 || got.InFlight[0].Job != "big" ||
		got.Spent != (placement.DefragSpent{Moves: 1, LostGPUSeconds: 360}) {
		t.Errorf("second cycle's defrag options: in flight %+v, spent %+v; want big's plan, one move of 360 GPU-seconds",
			got.InFlight, got.Spent)
	}
	if d := cmp.Diff(wantWaiting, c.Reasons()["big"]); d != "" {
		t.Errorf("big's reason in the second cycle (-want +got):\n%s", d)
	}

	// a stopped and is queued again, keeping its place in line: big starts
	// on n1, a on its landing spot on n2.
	if _, err := c.Release(ctx, "a", 1); err != nil {
		t.Fatal(err)
	}
	again := entry("a", 4, 0, true)
	again.Attempt = 2
	c.Enqueue(again)
	clock.Set(t0.Add(5*time.Minute + 4*time.Second))
	placed := map[gangway.JobID]gangway.Member{}
	for _, s := range tick() {
		if s.Name == workflows.SignalPlaced {
			placed[s.JobID] = s.Placed.Members[0]
		}
	}
	want := map[gangway.JobID][]int{"big": {0, 1, 2, 3, 4, 5, 6, 7}, "a": {4, 5, 6, 7}}
	for id, gpus := range want {
		if m := placed[id]; m.NodeID != map[gangway.JobID]string{"big": "n1", "a": "n2"}[id] || !cmp.Equal(m.GPUs, gpus) {
			t.Errorf("%s placed on %s GPUs %v; want big on n1 [0-7], a on n2 [4-7]", id, m.NodeID, m.GPUs)
		}
	}
	clock.Set(t0.Add(5*time.Minute + 6*time.Second))
	tick()
	if got := placer.last.Defrag; len(got.InFlight) != 0 || got.Spent.Moves != 1 {
		t.Errorf("after big started: in flight %+v, spent %+v; want none in flight, the move still counted", got.InFlight, got.Spent)
	}
	clock.Set(t0.Add(66 * time.Minute))
	tick()
	if got := placer.last.Defrag.Spent; got != (placement.DefragSpent{}) {
		t.Errorf("an hour on, spent %+v, want nothing", got)
	}
}
