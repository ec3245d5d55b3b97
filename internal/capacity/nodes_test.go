package capacity

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gangwayhq/gangway"
)

func TestNodes(t *testing.T) {
	rdb := startRedis(t)
	n1, n2 := node("n1", 2), node("n2", 4)
	n1Bigger := node("n1", 8)

	tests := map[string]struct {
		act       func(ctx context.Context, v *View) error
		wantErr   error // nil: no error; errAny: some error
		wantNodes []gangway.NodeStatus
	}{
		"register new nodes, sorted by id": {
			act: func(ctx context.Context, v *View) error {
				if err := v.RegisterNode(ctx, n2); err != nil {
					return err
				}
				return v.RegisterNode(ctx, n1)
			},
			wantNodes: []gangway.NodeStatus{
				{Node: n1, State: gangway.NodeReady},
				{Node: n2, State: gangway.NodeReady},
			},
		},
		"re-register replaces inventory and keeps cordon": {
			act: func(ctx context.Context, v *View) error {
				if err := v.RegisterNode(ctx, n1); err != nil {
					return err
				}
				if err := v.SetNodeState(ctx, "n1", gangway.NodeCordoned); err != nil {
					return err
				}
				return v.RegisterNode(ctx, n1Bigger)
			},
			wantNodes: []gangway.NodeStatus{{Node: n1Bigger, State: gangway.NodeCordoned}},
		},
		"re-register makes a lost node ready": {
			act: func(ctx context.Context, v *View) error {
				if err := v.RegisterNode(ctx, n1); err != nil {
					return err
				}
				if err := v.SetNodeState(ctx, "n1", gangway.NodeLost); err != nil {
					return err
				}
				return v.RegisterNode(ctx, n1)
			},
			wantNodes: []gangway.NodeStatus{{Node: n1, State: gangway.NodeReady}},
		},
		"uncordon": {
			act: func(ctx context.Context, v *View) error {
				if err := v.RegisterNode(ctx, n1); err != nil {
					return err
				}
				if err := v.SetNodeState(ctx, "n1", gangway.NodeCordoned); err != nil {
					return err
				}
				return v.SetNodeState(ctx, "n1", gangway.NodeReady)
			},
			wantNodes: []gangway.NodeStatus{{Node: n1, State: gangway.NodeReady}},
		},
		"heartbeat from unregistered node": {
			act: func(ctx context.Context, v *View) error {
				return v.Heartbeat(ctx, "ghost", nil)
			},
			wantErr:   ErrNotFound,
			wantNodes: []gangway.NodeStatus{},
		},
		"cordon unregistered node": {
			act: func(ctx context.Context, v *View) error {
				return v.SetNodeState(ctx, "ghost", gangway.NodeCordoned)
			},
			wantErr:   ErrNotFound,
			wantNodes: []gangway.NodeStatus{},
		},
		"invalid state": {
			act: func(ctx context.Context, v *View) error {
				if err := v.RegisterNode(ctx, n1); err != nil {
					return err
				}
				return v.SetNodeState(ctx, "n1", "draining-ish")
			},
			wantErr:   errAny,
			wantNodes: []gangway.NodeStatus{{Node: n1, State: gangway.NodeReady}},
		},
		"remove node": {
			act: func(ctx context.Context, v *View) error {
				if err := v.RegisterNode(ctx, n1); err != nil {
					return err
				}
				if err := v.RegisterNode(ctx, n2); err != nil {
					return err
				}
				return v.RemoveNode(ctx, "n1")
			},
			wantNodes: []gangway.NodeStatus{{Node: n2, State: gangway.NodeReady}},
		},
		"remove unknown node": {
			act: func(ctx context.Context, v *View) error {
				return v.RemoveNode(ctx, "ghost")
			},
			wantErr:   ErrNotFound,
			wantNodes: []gangway.NodeStatus{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			v := newView(rdb, Options{})
			start := time.Now()
			err := tc.act(ctx, v)
			checkErr(t, err, tc.wantErr)
			got, err := v.Nodes(ctx)
			must(t, err)
			if diff := cmp.Diff(tc.wantNodes, got, cmpopts.EquateEmpty(), ignoreBeats); diff != "" {
				t.Errorf("Nodes() mismatch (-want +got):\n%s", diff)
			}
			checkBeats(t, got, start)
		})
	}
}

// ignoreBeats leaves heartbeat times out of a comparison: they come from
// the Redis server's clock (checkBeats checks them).
var ignoreBeats = cmpopts.IgnoreFields(gangway.NodeStatus{}, "LastHeartbeat", "HeartbeatAge")

// checkBeats checks that every node heartbeat (on the Redis server's
// clock, which here is the test's) no earlier than start.
func checkBeats(t *testing.T, nodes []gangway.NodeStatus, start time.Time) {
	t.Helper()
	for _, n := range nodes {
		if n.LastHeartbeat.Before(start.Truncate(time.Millisecond)) || n.HeartbeatAge.Duration < 0 {
			t.Errorf("node %s: last heartbeat %v (%v ago), want no earlier than %v", n.Node.ID, n.LastHeartbeat, n.HeartbeatAge, start)
		}
	}
}

// setBeat writes a node's heartbeat time directly, as if it had last
// heartbeat at.
func setBeat(t *testing.T, v *View, id string, at time.Time) {
	t.Helper()
	must(t, v.rdb.HSet(t.Context(), v.k.heartbeat, id, at.UnixMilli()).Err())
	// The scripts only move a heartbeat forward (or to 0), and a read
	// sends only those that moved since the last: one set back by hand
	// needs a whole read.
	v.cache.epoch, v.fleet.epoch = "", ""
}

// TestLivenessOnServerClock: heartbeats are stamped with the Redis
// server's time, only ever forward; a node silent longer than the node TTL
// is lost in Nodes, whatever its state, and ready again once it heartbeats.
func TestLivenessOnServerClock(t *testing.T) {
	rdb := startRedis(t)
	ctx := t.Context()
	v := newView(rdb, Options{NodeTTL: time.Minute})
	must(t, v.RegisterNode(ctx, node("n1", 1)))
	must(t, v.RegisterNode(ctx, node("n2", 1)))
	must(t, v.SetNodeState(ctx, "n2", gangway.NodeCordoned))
	state := func() map[string]gangway.NodeStatus {
		nodes, err := v.Nodes(ctx)
		must(t, err)
		out := map[string]gangway.NodeStatus{}
		for _, n := range nodes {
			out[n.Node.ID] = n
		}
		return out
	}
	if s := state(); s["n1"].State != gangway.NodeReady || s["n2"].State != gangway.NodeCordoned {
		t.Fatalf("fresh nodes: n1 %s, n2 %s", s["n1"].State, s["n2"].State)
	}

	// Both silent for an hour by the server's clock.
	srvNow, err := rdb.Time(ctx).Result()
	must(t, err)
	for _, id := range []string{"n1", "n2"} {
		setBeat(t, v, id, srvNow.Add(-time.Hour))
	}
	for id, n := range state() {
		if n.State != gangway.NodeLost || n.HeartbeatAge.Duration < time.Hour {
			t.Errorf("%s silent an hour: %s, heartbeat %v ago; want lost, at least 1h", id, n.State, n.HeartbeatAge)
		}
	}
	// The dispatch loop's snapshot keeps the state the node was left in;
	// it judges age on the same clock.
	snap, err := v.Snapshot(ctx)
	must(t, err)
	if st := snap.Nodes[1].State; st != gangway.NodeCordoned || snap.Now.Sub(snap.Nodes[1].LastHeartbeat) < time.Hour {
		t.Errorf("snapshot of n2: %s, heartbeat at %v, now %v", st, snap.Nodes[1].LastHeartbeat, snap.Now)
	}

	// A heartbeat brings each back as it was.
	must(t, v.Heartbeat(ctx, "n1", nil))
	_, err = v.HeartbeatNodes(ctx, []NodeBeat{{ID: "n2"}})
	must(t, err)
	if s := state(); s["n1"].State != gangway.NodeReady || s["n2"].State != gangway.NodeCordoned {
		t.Errorf("after heartbeats: n1 %s, n2 %s; want ready, cordoned", s["n1"].State, s["n2"].State)
	}

	// Time only moves forward: a heartbeat never moves it back from a
	// later stamp.
	later := srvNow.Add(time.Hour).Truncate(time.Millisecond)
	setBeat(t, v, "n1", later)
	must(t, v.Heartbeat(ctx, "n1", nil))
	if got := state()["n1"].LastHeartbeat; !got.Equal(later) {
		t.Errorf("heartbeat after a later stamp: %v, want %v", got, later)
	}
}

// errAny in a wantErr field means "some error, whichever".
var errAny = errors.New("any error")

func checkErr(t *testing.T, err, want error) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want == errAny && err == nil:
		t.Fatal("no error, want one")
	case want != nil && want != errAny && !errors.Is(err, want):
		t.Fatalf("error %v, want %v", err, want)
	}
}

func TestNodesReportAllocations(t *testing.T) {
	rdb := startRedis(t)
	ctx := t.Context()
	v := world(t, rdb, []gangway.Node{node("n1", 4), node("n2", 4)},
		entry("a", 1, 2, 2), entry("b", 1, 1, 1))
	must(t, v.Commit(ctx, leader, []gangway.Assignment{
		assign("a", 1, member(0, "n1", 0, 1), member(1, "n2", 2, 3)),
		assign("b", 1, member(0, "n1", 3)),
	}))

	got, err := v.Nodes(ctx)
	must(t, err)
	want := []gangway.NodeStatus{
		{Node: node("n1", 4), State: gangway.NodeReady, LastHeartbeat: t0,
			Allocated: map[int]gangway.JobID{0: "a", 1: "a", 3: "b"}, UsedCPUMilli: 8000, UsedMemMiB: 32768},
		{Node: node("n2", 4), State: gangway.NodeReady, LastHeartbeat: t0,
			Allocated: map[int]gangway.JobID{2: "a", 3: "a"}, UsedCPUMilli: 4000, UsedMemMiB: 16384},
	}
	if diff := cmp.Diff(want, got, ignoreBeats); diff != "" {
		t.Errorf("Nodes() mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{2}, got[0].FreeGPUs()); diff != "" {
		t.Errorf("n1 FreeGPUs() mismatch (-want +got):\n%s", diff)
	}

	// A node whose GPUs are held cannot be removed.
	if err := v.RemoveNode(ctx, "n1"); !errors.Is(err, ErrNodeBusy) {
		t.Errorf("RemoveNode(n1) = %v, want ErrNodeBusy", err)
	}
	_, err = v.Release(ctx, "b", 1)
	must(t, err)
	_, err = v.Release(ctx, "a", 1)
	must(t, err)
	must(t, v.RemoveNode(ctx, "n1"))

	fleet, err := v.FleetNodes(ctx)
	must(t, err)
	if diff := cmp.Diff([]gangway.Node{node("n2", 4)}, fleet); diff != "" {
		t.Errorf("FleetNodes() mismatch (-want +got):\n%s", diff)
	}
}

func TestFleetNodesIncludesCordoned(t *testing.T) {
	rdb := startRedis(t)
	ctx := t.Context()
	v := world(t, rdb, []gangway.Node{node("b", 2), node("a", 1)})
	must(t, v.SetNodeState(ctx, "b", gangway.NodeCordoned))
	got, err := v.FleetNodes(ctx)
	must(t, err)
	if diff := cmp.Diff([]gangway.Node{node("a", 1), node("b", 2)}, got); diff != "" {
		t.Errorf("FleetNodes() mismatch (-want +got):\n%s", diff)
	}
}

// TestForgetHeartbeat: a node a job found lost looks silent until it
// heartbeats again; an unknown node is no error.
func TestForgetHeartbeat(t *testing.T) {
	rdb := startRedis(t)
	ctx := t.Context()
	v := world(t, rdb, []gangway.Node{node("n1", 4)})
	must(t, v.Heartbeat(ctx, "n1", nil))
	start := time.Now().Truncate(time.Millisecond)
	beat := func() time.Time {
		nodes, err := v.Nodes(ctx)
		must(t, err)
		return nodes[0].LastHeartbeat
	}
	must(t, v.ForgetHeartbeat(ctx, "n1"))
	if got := beat(); got.After(time.UnixMilli(0)) {
		t.Fatalf("heartbeat after forgetting = %v, want the epoch", got)
	}
	must(t, v.Heartbeat(ctx, "n1", nil))
	if got := beat(); got.Before(start) {
		t.Errorf("heartbeat after the next beat = %v, want no earlier than %v", got, start)
	}
	must(t, v.ForgetHeartbeat(ctx, "nobody"))
}
