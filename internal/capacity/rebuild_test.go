package capacity

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
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
	must(t, rdb.FlushAll(ctx).Err())
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
	if _, _, err := v.Restore(ctx, leader, old, held, nil); !errors.Is(err, ErrGenerationChanged) {
		t.Errorf("restore into an older generation: %v, want ErrGenerationChanged", err)
	}
	n, refused, err := v.Restore(ctx, leader, snap.Generation, held, map[string]string{"n2": gangway.NodeCordoned})
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
