package capacity

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
)

// snapshotNodes is the nodes of a fresh snapshot, by ID.
func snapshotNodes(t *testing.T, v *View) map[string]gangway.Node {
	t.Helper()
	s, err := v.Snapshot(t.Context())
	must(t, err)
	out := map[string]gangway.Node{}
	for _, n := range s.Nodes {
		out[n.Node.ID] = n.Node
	}
	return out
}

// TestSnapshotCacheStaysTrue checks that the read cache never shows a node
// record other than the one in Redis: through changes, removals, a flush
// and records written without a revision, and whatever a caller does to a
// snapshot it was given.
func TestSnapshotCacheStaysTrue(t *testing.T) {
	ctx := t.Context()
	rdb := startRedis(t)
	v := newView(rdb, Options{})
	must(t, v.RegisterNode(ctx, node("a", 2)))
	must(t, v.RegisterNode(ctx, node("b", 2)))
	want := map[string]gangway.Node{"a": node("a", 2), "b": node("b", 2)}
	check := func(step string) {
		t.Helper()
		// A second View has no cache: it reads everything whole.
		fresh := snapshotNodes(t, New(rdb, Options{Prefix: strings.TrimSuffix(v.k.nodes, ":nodes")}))
		got := snapshotNodes(t, v)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: cached snapshot differs from Redis (-want +got):\n%s", step, diff)
		}
		if diff := cmp.Diff(fresh, got); diff != "" {
			t.Errorf("%s: cached snapshot differs from a whole read (-whole +cached):\n%s", step, diff)
		}
	}
	check("first read")
	revBefore := v.cache.rev

	// A caller changing its snapshot does not change the next one.
	s, err := v.Snapshot(ctx)
	must(t, err)
	s.Nodes[0].Node.GPUs[0].Healthy = false
	check("after a caller changed its snapshot")

	// An unchanged re-registration sends nothing new; a changed one does.
	must(t, v.RegisterNode(ctx, node("a", 2)))
	check("unchanged re-registration")
	if v.cache.rev != revBefore {
		t.Errorf("an unchanged re-registration took revision %d (was %d)", v.cache.rev, revBefore)
	}
	bigger := node("a", 4)
	must(t, v.RegisterNode(ctx, bigger))
	want["a"] = bigger
	check("changed registration")

	// A removed node is gone; a new one appears.
	must(t, v.RemoveNode(ctx, "b"))
	delete(want, "b")
	must(t, v.RegisterNode(ctx, node("c", 1)))
	want["c"] = node("c", 1)
	check("remove and add")

	// A flushed view re-registered with other records at the same
	// revisions is read whole: its epoch is new.
	must(t, rdb.FlushAll(ctx).Err())
	must(t, v.RegisterNode(ctx, node("a", 1)))
	must(t, v.RegisterNode(ctx, node("x", 8)))
	must(t, v.RegisterNode(ctx, node("y", 8)))
	want = map[string]gangway.Node{"a": node("a", 1), "x": node("x", 8), "y": node("y", 8)}
	check("after FLUSHALL")

	// A record written with no revision (by an older gangway) is read.
	legacy := node("old", 2)
	raw, err := json.Marshal(legacy)
	must(t, err)
	must(t, rdb.HSet(ctx, v.k.nodes, "old", string(raw)).Err())
	must(t, rdb.HSet(ctx, v.k.nodeState, "old", gangway.NodeReady).Err())
	want["old"] = legacy
	check("record without a revision")

	// A fenced GPU is unhealthy in the next cached snapshot.
	_, err = v.FenceGPUs(ctx, gangway.GPUEvent{Node: "x", GPUs: []int{0}, Kind: "xid", Xid: 79, At: t0})
	must(t, err)
	if got := snapshotNodes(t, v)["x"].GPUs[0]; got.Healthy {
		t.Errorf("fenced GPU x/0 is healthy in the cached snapshot: %+v", got)
	}
	if diff := cmp.Diff(snapshotNodes(t, New(rdb, Options{Prefix: strings.TrimSuffix(v.k.nodes, ":nodes")})), snapshotNodes(t, v)); diff != "" {
		t.Errorf("after a fence: cached snapshot differs from a whole read:\n%s", diff)
	}
}
