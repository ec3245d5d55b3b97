package capacity

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/devstack/devstacktest"
)

// TestFleetCacheStaysTrue: FleetNodes, which decodes only the records that
// changed since its last call, returns what a View with no cache reads
// whole, through changes, a removal, a fence, a flush and a record written
// without a revision, and no caller can change what it returns next.
func TestFleetCacheStaysTrue(t *testing.T) {
	ctx := t.Context()
	rdb := startRedis(t)
	v := newView(rdb, Options{})
	fleet := func(v *View) []gangway.Node {
		t.Helper()
		nodes, err := v.FleetNodes(ctx)
		must(t, err)
		return nodes
	}
	check := func(step string, wantIDs ...string) {
		t.Helper()
		whole := fleet(New(rdb, Options{Prefix: strings.TrimSuffix(v.k.nodes, ":nodes")}))
		got := fleet(v)
		if diff := cmp.Diff(whole, got); diff != "" {
			t.Errorf("%s: cached fleet differs from a whole read (-whole +cached):\n%s", step, diff)
		}
		var ids []string
		for _, n := range got {
			ids = append(ids, n.ID)
		}
		if diff := cmp.Diff(wantIDs, ids); diff != "" {
			t.Errorf("%s: fleet nodes (-want +got):\n%s", step, diff)
		}
	}
	must(t, v.RegisterNode(ctx, node("b", 2)))
	must(t, v.RegisterNode(ctx, node("a", 2)))
	check("first read", "a", "b")

	grown := append(fleet(v)[0].GPUs, gangway.GPU{Index: 99})
	grown[0].Healthy = false
	check("after a caller appended to its GPUs", "a", "b")

	must(t, v.RegisterNode(ctx, node("a", 4)))
	must(t, v.RemoveNode(ctx, "b"))
	must(t, v.RegisterNode(ctx, node("c", 1)))
	check("changed, removed and added", "a", "c")
	if got := fleet(v)[0]; len(got.GPUs) != 4 {
		t.Errorf("node a has %d GPUs after re-registering with 4", len(got.GPUs))
	}

	_, err := v.FenceGPUs(ctx, gangway.GPUEvent{Node: "c", GPUs: []int{0}, Kind: "xid", Xid: 79, At: t0})
	must(t, err)
	check("after a fence", "a", "c")

	must(t, devstacktest.FlushAll(ctx, rdb))
	must(t, v.RegisterNode(ctx, node("x", 8)))
	check("after FLUSHALL", "x")

	legacy := node("old", 2)
	raw, err := json.Marshal(legacy)
	must(t, err)
	must(t, rdb.HSet(ctx, v.k.nodes, "old", string(raw)).Err())
	check("record without a revision", "old", "x")
}
