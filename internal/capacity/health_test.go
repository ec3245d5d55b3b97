package capacity

import (
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gangwayhq/gangway"
)

func xid79(node string, gpus ...int) gangway.GPUEvent {
	return gangway.GPUEvent{Node: node, GPUs: gpus, UUID: "GPU-phys", Kind: "xid", Xid: 79, Meaning: "GPU has fallen off the bus",
		Blame: "gpu", Jobs: []gangway.JobID{"train"}, At: t0}
}

// inventory is node id's GPUs as placement will read them.
func inventory(t *testing.T, v *View, id string) []gangway.GPU {
	t.Helper()
	nodes, err := v.Nodes(t.Context())
	must(t, err)
	for _, n := range nodes {
		if n.Node.ID == id {
			return n.Node.GPUs
		}
	}
	t.Fatalf("node %s not in the view", id)
	return nil
}

func TestFenceGPUs(t *testing.T) {
	rdb := startRedis(t)
	ctx := t.Context()
	v := world(t, rdb, []gangway.Node{node("n1", 8)})

	recs, err := v.FenceGPUs(ctx, xid79("n1", 3))
	must(t, err)
	ev := xid79("n1", 3)
	want := []gangway.GPUHealth{{Node: "n1", GPU: 3, UUID: "GPU-n1-3", Healthy: false, FencedAt: t0, Reason: "GPU has fallen off the bus",
		Fences: 1, Score: 1, ScoreAt: t0, LastFault: &ev}}
	if diff := cmp.Diff(want, recs); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	gpus := inventory(t, v, "n1")
	for i, g := range gpus {
		wantHealthy, wantFlaky := i != 3, map[bool]float64{true: 1, false: 0}[i == 3]
		if g.Healthy != wantHealthy || g.Flakiness != wantFlaky {
			t.Errorf("GPU %d in the inventory: healthy %v flakiness %v, want %v %v", i, g.Healthy, g.Flakiness, wantHealthy, wantFlaky)
		}
	}

	// A second fault on a fenced GPU is recorded but not counted twice.
	later := xid79("n1", 3)
	later.Kind, later.Xid, later.Meaning, later.At = "ecc-dbe", 0, "double-bit ECC error", t0.Add(time.Minute)
	recs, err = v.FenceGPUs(ctx, later)
	must(t, err)
	if r := recs[0]; r.Fences != 1 || r.Score != 1 || r.LastFault.Kind != "ecc-dbe" || r.FencedAt != t0 {
		t.Errorf("second fault on a fenced GPU: %+v", r)
	}

	// Unfenced (the GPU was reset): healthy, flakiness kept, decaying.
	day := t0.Add(24 * time.Hour)
	recs, err = v.UnfenceGPUs(ctx, "n1", []int{3}, day)
	must(t, err)
	decayed := math.Exp2(-1.0 / 7)
	if r := recs[0]; !r.Healthy || r.Fences != 1 || math.Abs(r.Flakiness(day)-decayed) > 1e-9 {
		t.Errorf("unfenced: %+v, flakiness %v, want healthy and %v", r, r.Flakiness(day), decayed)
	}
	if g := inventory(t, v, "n1")[3]; !g.Healthy || g.Flakiness != round3(decayed) {
		t.Errorf("unfenced GPU in the inventory: %+v", g)
	}

	// Fenced again a day later: about two.
	again := xid79("n1", 3)
	again.At = day
	recs, err = v.FenceGPUs(ctx, again)
	must(t, err)
	if r := recs[0]; r.Fences != 2 || math.Abs(r.Flakiness(day)-(1+decayed)) > 1e-9 {
		t.Errorf("fenced again: %+v, want 2 fences and flakiness %v", r, 1+decayed)
	}

	events, err := v.GPUEvents(ctx, 10)
	must(t, err)
	kinds := []string{}
	for _, e := range events {
		kinds = append(kinds, e.Kind)
		if e.ID == "" {
			t.Errorf("event without a stream ID: %+v", e)
		}
	}
	if want := []string{"xid", "ecc-dbe", "xid"}; !cmp.Equal(kinds, want) {
		t.Errorf("events newest first: %v, want %v", kinds, want)
	}
}

func TestRecordGPUEvent(t *testing.T) {
	rdb := startRedis(t)
	ctx := t.Context()
	v := world(t, rdb, []gangway.Node{node("n1", 8)})

	app := gangway.GPUEvent{Node: "n1", GPUs: []int{5}, Kind: "xid", Xid: 13, Meaning: "graphics engine exception", Blame: "app",
		Jobs: []gangway.JobID{"bad-kernel"}, At: t0}
	must(t, v.RecordGPUEvent(ctx, app))
	zombie := gangway.GPUEvent{Node: "n1", GPUs: []int{2}, Kind: "zombie-killed", Meaning: "process 4242 held GPU 2 with no task", PIDs: []int{4242}, At: t0}
	must(t, v.RecordGPUEvent(ctx, zombie))

	if g := inventory(t, v, "n1")[5]; !g.Healthy || g.Flakiness != 0 {
		t.Errorf("GPU 5 after an application Xid: %+v, want healthy and not flaky", g)
	}
	health, err := v.GPUHealth(ctx, "n1")
	must(t, err)
	if diff := cmp.Diff(map[int]gangway.GPUHealth{5: {Node: "n1", GPU: 5, UUID: "GPU-n1-5", Healthy: true, LastFault: &app}}, health); diff != "" {
		t.Errorf("records: only the fault is a last fault (-want +got):\n%s", diff)
	}
	events, err := v.GPUEvents(ctx, 10)
	must(t, err)
	if diff := cmp.Diff([]gangway.GPUEvent{zombie, app}, events, cmpopts.IgnoreFields(gangway.GPUEvent{}, "ID")); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestGPUHealthErrors(t *testing.T) {
	rdb := startRedis(t)
	ctx := t.Context()
	v := world(t, rdb, []gangway.Node{node("n1", 2)})
	if _, err := v.FenceGPUs(ctx, xid79("nope", 0)); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown node: %v, want ErrNotFound", err)
	}
	if _, err := v.FenceGPUs(ctx, xid79("n1", 2)); err == nil {
		t.Error("GPU 2 of a 2-GPU node: no error")
	}
}

func TestGPUHealthReplacedGPU(t *testing.T) {
	rdb := startRedis(t)
	ctx := t.Context()
	v := world(t, rdb, []gangway.Node{node("n1", 2)})
	_, err := v.FenceGPUs(ctx, xid79("n1", 1))
	must(t, err)

	// The card is swapped: the agent registers a new UUID, healthy.
	n := node("n1", 2)
	n.GPUs[1].UUID = "GPU-new"
	must(t, v.RegisterNode(ctx, n))
	recs, err := v.FenceGPUs(ctx, xid79("n1", 1))
	must(t, err)
	if r := recs[0]; r.UUID != "GPU-new" || r.Fences != 1 {
		t.Errorf("record after replacement: %+v, want the new card's first fence", r)
	}
}

// TestFenceGPUsConcurrently fences every GPU of a node at once from
// separate callers: each compare-and-set that loses reads again, and no
// fence is lost.
func TestFenceGPUsConcurrently(t *testing.T) {
	rdb := startRedis(t)
	ctx := t.Context()
	v := world(t, rdb, []gangway.Node{node("n1", 8)})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			if _, err := v.FenceGPUs(ctx, xid79("n1", g)); err != nil {
				t.Errorf("fence GPU %d: %v", g, err)
			}
		})
	}
	wg.Wait()
	for i, g := range inventory(t, v, "n1") {
		if g.Healthy {
			t.Errorf("GPU %d still healthy", i)
		}
	}
	all, err := v.AllGPUHealth(ctx)
	must(t, err)
	if len(all["n1"]) != 8 {
		t.Errorf("%d records, want 8", len(all["n1"]))
	}
	events, err := v.GPUEvents(ctx, 100)
	must(t, err)
	if len(events) != 8 {
		t.Errorf("%d events, want 8", len(events))
	}
}
