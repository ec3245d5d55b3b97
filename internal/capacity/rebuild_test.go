package capacity

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/devstack/devstacktest"
)

// TestRebuildPieces, on a real redis-server: a new view has a generation
// that is not rebuilt until the lease holder marks it; a FLUSHALL starts a
// new one, which fences plans made from the old; the GPUs of tasks the
// agents report running are held by their jobs though the view has no
// allocation for them; and Restore brings back the workflows'
// allocations (refusing one whose GPU another holds) and cordons, even of
// a node not registered again yet.
func TestRebuildPieces(t *testing.T) {
	rdb := startRedis(t)
	ctx := t.Context()
	v := newView(rdb, Options{})
	must(t, v.RegisterNode(ctx, node("n1", 4)))
	snap, err := v.Snapshot(ctx)
	must(t, err)
	if snap.Generation == "" || snap.Rebuilt {
		t.Fatalf("a new view: generation %q, rebuilt %t; want one, not rebuilt", snap.Generation, snap.Rebuilt)
	}
	if d := time.Since(GenerationStart(snap.Generation)); d < 0 || d > time.Hour {
		t.Errorf("generation %q starts %v ago", snap.Generation, d)
	}
	if ok, err := v.AcquireLease(ctx, leader, time.Minute); !ok || err != nil {
		t.Fatalf("lease: %t %v", ok, err)
	}
	if err := v.MarkRebuilt(ctx, "someone-else", snap.Generation); !errors.Is(err, ErrNotLeader) {
		t.Errorf("MarkRebuilt by a non-leader: %v, want ErrNotLeader", err)
	}
	must(t, v.MarkRebuilt(ctx, leader, snap.Generation))
	if ok, err := v.Rebuilt(ctx); !ok || err != nil {
		t.Errorf("Rebuilt after marking: %t %v", ok, err)
	}

	// The agent reports a whole-GPU task and a share the view has no
	// allocation for: their GPUs are held.
	must(t, v.Heartbeat(ctx, "n1", []Task{{JobID: "orphan", Attempt: 1, GPUs: []int{0, 1}},
		{JobID: "sharer", Attempt: 2, GPUs: []int{2}, Milli: 500}}))
	nodes, err := v.Nodes(ctx)
	must(t, err)
	if d := cmp.Diff(map[int]gangway.JobID{0: "orphan", 1: "orphan"}, nodes[0].Allocated); d != "" {
		t.Errorf("GPUs of reported tasks (-want +got):\n%s", d)
	}
	if got := nodes[0].Shared[2]["sharer"]; got != 500 || len(nodes[0].FreeGPUs()) != 1 {
		t.Errorf("reported share %d, free GPUs %v; want 500 and [3]", got, nodes[0].FreeGPUs())
	}

	// A flush: a new generation, not rebuilt; a plan from the old one is
	// stale.
	old := snap.Generation
	must(t, devstacktest.FlushAll(ctx, rdb))
	time.Sleep(2 * time.Millisecond) // the new epoch is a later TIME
	must(t, v.RegisterNode(ctx, node("n1", 4)))
	e := entry("j", 1, 1, 1)
	if ok, err := v.Enqueue(ctx, e); !ok || err != nil {
		t.Fatalf("enqueue: %t %v", ok, err)
	}
	snap, err = v.Snapshot(ctx)
	must(t, err)
	if snap.Generation == old || snap.Rebuilt {
		t.Fatalf("after FLUSHALL: generation %q (was %q), rebuilt %t", snap.Generation, old, snap.Rebuilt)
	}
	if ok, err := v.AcquireLease(ctx, leader, time.Minute); !ok || err != nil {
		t.Fatalf("lease: %t %v", ok, err)
	}
	plan := []gangway.Assignment{assign("j", 1, member(0, "n1", 0))}
	var ce *CommitError
	if err := v.CommitIn(ctx, leader, old, plan); !errors.As(err, &ce) || ce.Check != CheckGeneration || !errors.Is(err, ErrStale) {
		t.Errorf("commit of a plan from the old generation: %v, want stale (%s)", err, CheckGeneration)
	}

	// Restore: the workflows' allocations and the durable cordons.
	held := []Held{
		{Assignment: assign("a", 3, member(0, "n1", 1, 2)), CPUMilli: 4000, MemMiB: 1024},
		{Assignment: assign("shared-a", 1, gangway.Member{Rank: 0, NodeID: "n1", Pool: "onprem", GPUs: []int{3}, Milli: 250})},
		{Assignment: assign("b", 1, member(0, "n1", 2))}, // GPU 2 is a's
	}
	if _, _, err := v.Restore(ctx, leader, Snapshot{Generation: old}, held, nil); !errors.Is(err, ErrGenerationChanged) {
		t.Errorf("restore into an older generation: %v, want ErrGenerationChanged", err)
	}
	n, refused, err := v.Restore(ctx, leader, snap, held, map[string]string{"n2": gangway.NodeCordoned})
	must(t, err)
	if n != 2 || len(refused) != 1 || refused[0] != "b: n1/2 is held by a" {
		t.Errorf("restored %d, refused %q; want 2 and b's", n, refused)
	}
	allocs, err := v.Allocations(ctx)
	must(t, err)
	if len(allocs) != 2 || allocs[0].JobID != "a" || allocs[0].Attempt != 3 {
		t.Errorf("allocations after restore: %+v", allocs)
	}
	must(t, v.RegisterNode(ctx, node("n2", 1)))
	nodes, err = v.Nodes(ctx)
	must(t, err)
	if nodes[1].State != gangway.NodeCordoned || nodes[0].UsedCPUMilli != 4000 {
		t.Errorf("n2 is %s after registering (want cordoned); n1 uses %d CPU milli (want 4000)", nodes[1].State, nodes[0].UsedCPUMilli)
	}
	must(t, v.CommitIn(ctx, leader, snap.Generation, plan))
}

// TestViewWentBack, on a real redis-server: the view goes back in time,
// as a failover to a replica that missed writes takes it — its keys are
// put back as they were at an earlier moment (DUMP, then FLUSHALL and
// RESTORE) — and writes made after that take revisions from the old count
// again, past the revision the readers last saw. The next snapshot of a
// reader that saw the lost writes begins a new generation, not rebuilt,
// without the older moment's queue and allocations (the rebuild restores
// them from the workflows) and with its nodes; a second reader finds the
// same generation; Restore lifts the cordon the older moment still held
// and the durable store no longer does, but not one set after the
// rebuild's snapshot. A view that lost only a commit made since the
// committer's last read, and a restart from a snapshot taken before the
// view was last flushed (an older generation), are found too.
func TestViewWentBack(t *testing.T) {
	rdb := startRedis(t)
	ctx := t.Context()
	opts := Options{Prefix: "{went-back}"}
	v, v2 := New(rdb, opts), New(rdb, opts)
	must(t, v.RegisterNode(ctx, node("n1", 4)))
	must(t, v.RegisterNode(ctx, node("n2", 4)))
	if ok, err := v.AcquireLease(ctx, leader, time.Hour); !ok || err != nil {
		t.Fatalf("lease: %t %v", ok, err)
	}
	snap, err := v.Snapshot(ctx)
	must(t, err)
	gen := snap.Generation
	must(t, v.MarkRebuilt(ctx, leader, gen))
	must(t, v.SetNodeState(ctx, "n2", gangway.NodeCordoned))
	for _, j := range []string{"a", "b"} {
		if ok, err := v.Enqueue(ctx, entry(j, 1, 1, 1)); !ok || err != nil {
			t.Fatalf("enqueue %s: %t %v", j, ok, err)
		}
	}
	for _, r := range []*View{v, v2} {
		_, err := r.Snapshot(ctx)
		must(t, err)
	}
	replica := devstacktest.Dump(t, rdb)

	// What the replica misses: a placed, c queued, n2 uncordoned. Both
	// readers see it, in the same generation.
	must(t, v.CommitIn(ctx, leader, gen, []gangway.Assignment{assign("a", 1, member(0, "n1", 0))}))
	if ok, err := v.Enqueue(ctx, entry("c", 1, 1, 1)); !ok || err != nil {
		t.Fatalf("enqueue c: %t %v", ok, err)
	}
	must(t, v.SetNodeState(ctx, "n2", gangway.NodeReady))
	var seen Snapshot
	for _, r := range []*View{v, v2} {
		seen, err = r.Snapshot(ctx)
		must(t, err)
		if seen.Generation != gen || !seen.Rebuilt || len(seen.Queue) != 2 || len(seen.Allocations) != 1 {
			t.Fatalf("before the failover: generation %q (want %q), rebuilt %t, %d queued, %d allocations; want b and c queued, a placed",
				seen.Generation, gen, seen.Rebuilt, len(seen.Queue), len(seen.Allocations))
		}
	}

	devstacktest.PutBack(t, rdb, replica)
	for _, j := range []string{"d", "e", "f", "g"} {
		if ok, err := v.Enqueue(ctx, entry(j, 1, 1, 1)); !ok || err != nil {
			t.Fatalf("enqueue %s: %t %v", j, ok, err)
		}
	}
	if rev, err := rdb.Get(ctx, "{went-back}:rev").Int64(); err != nil || rev <= seen.Revision {
		t.Fatalf("the view's revision after the failover's writes: %d %v; want past the %d the readers saw, which alone then tells nothing", rev, err, seen.Revision)
	}
	after, err := v.Snapshot(ctx)
	must(t, err)
	if after.Generation == gen || after.Rebuilt {
		t.Fatalf("after going back: generation %q (was %q), rebuilt %t; want a new one, not rebuilt", after.Generation, gen, after.Rebuilt)
	}
	if len(after.Queue) != 0 || len(after.Allocations) != 0 || len(after.Nodes) != 2 {
		t.Errorf("after going back: %d queued, %d allocations, %d nodes; want the queue and allocations dropped, both nodes kept",
			len(after.Queue), len(after.Allocations), len(after.Nodes))
	}
	other, err := v2.Snapshot(ctx)
	must(t, err)
	if other.Generation != after.Generation {
		t.Errorf("the second reader found generation %q, the first %q: want one new generation", other.Generation, after.Generation)
	}

	// The rebuild: n1 is cordoned after its snapshot (the durable store's
	// states, read before that, do not have it) and stays so; n2's cordon
	// is of the older moment, lifted since, and goes.
	must(t, v.SetNodeState(ctx, "n1", gangway.NodeCordoned))
	n, refused, err := v.Restore(ctx, leader, after, []Held{{Assignment: assign("a", 1, member(0, "n1", 0))}}, map[string]string{})
	must(t, err)
	if n != 1 || len(refused) != 0 {
		t.Errorf("restored %d, refused %q; want a's allocation", n, refused)
	}
	nodes, err := v.Nodes(ctx)
	must(t, err)
	if nodes[0].State != gangway.NodeCordoned || nodes[1].State != gangway.NodeReady {
		t.Errorf("after the rebuild n1 is %s (want cordoned), n2 %s (want ready)", nodes[0].State, nodes[1].State)
	}
	must(t, v.MarkRebuilt(ctx, leader, after.Generation))

	// The view loses only a commit, made after the committer's last read:
	// what the commit returned tells.
	if ok, err := v.Enqueue(ctx, entry("h", 1, 1, 1)); !ok || err != nil {
		t.Fatalf("enqueue h: %t %v", ok, err)
	}
	read, err := v.Snapshot(ctx)
	must(t, err)
	beforeCommit := devstacktest.Dump(t, rdb)
	must(t, v.CommitIn(ctx, leader, read.Generation, []gangway.Assignment{assign("h", 1, member(0, "n2", 1))}))
	devstacktest.PutBack(t, rdb, beforeCommit)
	lostCommit, err := v.Snapshot(ctx)
	must(t, err)
	if lostCommit.Generation == read.Generation || lostCommit.Rebuilt {
		t.Errorf("after losing a commit: generation %q (was %q), rebuilt %t; want a new one, not rebuilt",
			lostCommit.Generation, read.Generation, lostCommit.Rebuilt)
	}
	must(t, v.MarkRebuilt(ctx, leader, lostCommit.Generation))

	// A restart from a snapshot of the view before its last flush.
	older := devstacktest.Dump(t, rdb)
	must(t, devstacktest.FlushAll(ctx, rdb))
	time.Sleep(2 * time.Millisecond) // the new epoch is a later TIME
	flushed, err := v.Snapshot(ctx)
	must(t, err)
	devstacktest.PutBack(t, rdb, older)
	back, err := v.Snapshot(ctx)
	must(t, err)
	if back.Generation == lostCommit.Generation || back.Rebuilt {
		t.Errorf("a restart from before the flush: generation %q, rebuilt %t; want a new one (not %q, of the snapshot, nor %q), not rebuilt",
			back.Generation, back.Rebuilt, lostCommit.Generation, flushed.Generation)
	}
}
