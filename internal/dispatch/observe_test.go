package dispatch

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/metrics"
	"github.com/gangwayhq/gangway/placement"
)

// TestAllocatedByTeam: whole GPUs count one each, a share counts its
// fraction, a MIG device its share of its parent GPU, and a member without
// a pool is placed by its node's.
func TestAllocatedByTeam(t *testing.T) {
	ps := placement.Snapshot{
		Nodes: []placement.Node{{ID: "n1", Pool: "onprem"}, {ID: "c1", Pool: "aws-spot"}},
		Running: []gangway.Assignment{
			{JobID: "a", Team: "nlp", Members: []gangway.Member{{NodeID: "n1", Pool: "onprem", GPUs: []int{0, 1}}, {NodeID: "n1", GPUs: []int{2}}}},
			{JobID: "b", Team: "vision", Members: []gangway.Member{{NodeID: "n1", GPUs: []int{3}, Milli: 250}}},
			{JobID: "c", Team: "nlp", Members: []gangway.Member{{NodeID: "c1", Pool: "aws-spot", GPUs: []int{0, 1, 2, 3}}}},
			{JobID: "d", Team: "vision", Members: []gangway.Member{{NodeID: "n1", GPUs: []int{4}, MIG: "3g.40gb", MIGMilli: 428}}},
		},
	}
	want := map[metrics.PoolTeam]float64{{Pool: "onprem", Team: "nlp"}: 3, {Pool: "onprem", Team: "vision"}: 0.25 + 0.428, {Pool: "aws-spot", Team: "nlp"}: 4}
	if diff := cmp.Diff(want, allocatedByTeam(ps), cmpopts.EquateApprox(0, 1e-12)); diff != "" {
		t.Errorf("allocated (-want +got):\n%s", diff)
	}
}

// TestNodeStates: a ready node whose heartbeat is older than the TTL is
// stale; the view's own states pass through.
func TestNodeStates(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	node := func(id, state string, age time.Duration) gangway.NodeStatus {
		return gangway.NodeStatus{Node: gangway.Node{ID: id, Pool: "onprem"}, State: state, LastHeartbeat: now.Add(-age)}
	}
	snap := capacity.Snapshot{Now: now, Nodes: []gangway.NodeStatus{
		node("n1", gangway.NodeReady, time.Second), node("n2", gangway.NodeReady, time.Minute),
		node("n3", gangway.NodeCordoned, time.Second), node("n4", gangway.NodeLost, time.Hour),
	}}
	want := map[metrics.PoolState]int{{Pool: "onprem", State: "ready"}: 1, {Pool: "onprem", State: metrics.NodeStale}: 1,
		{Pool: "onprem", State: "cordoned"}: 1, {Pool: "onprem", State: "lost"}: 1}
	if diff := cmp.Diff(want, nodeStates(snap, 10*time.Second)); diff != "" {
		t.Errorf("node states (-want +got):\n%s", diff)
	}
}
