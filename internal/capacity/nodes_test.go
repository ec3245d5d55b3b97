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
				if err := v.RegisterNode(ctx, n2, t0); err != nil {
					return err
				}
				return v.RegisterNode(ctx, n1, t0.Add(time.Second))
			},
			wantNodes: []gangway.NodeStatus{
				{Node: n1, State: gangway.NodeReady, LastHeartbeat: t0.Add(time.Second)},
				{Node: n2, State: gangway.NodeReady, LastHeartbeat: t0},
			},
		},
		"re-register replaces inventory and keeps cordon": {
			act: func(ctx context.Context, v *View) error {
				if err := v.RegisterNode(ctx, n1, t0); err != nil {
					return err
				}
				if err := v.SetNodeState(ctx, "n1", gangway.NodeCordoned); err != nil {
					return err
				}
				return v.RegisterNode(ctx, n1Bigger, t0.Add(time.Minute))
			},
			wantNodes: []gangway.NodeStatus{{Node: n1Bigger, State: gangway.NodeCordoned, LastHeartbeat: t0.Add(time.Minute)}},
		},
		"re-register makes a lost node ready": {
			act: func(ctx context.Context, v *View) error {
				if err := v.RegisterNode(ctx, n1, t0); err != nil {
					return err
				}
				if err := v.SetNodeState(ctx, "n1", gangway.NodeLost); err != nil {
					return err
				}
				return v.RegisterNode(ctx, n1, t0.Add(time.Minute))
			},
			wantNodes: []gangway.NodeStatus{{Node: n1, State: gangway.NodeReady, LastHeartbeat: t0.Add(time.Minute)}},
		},
		"uncordon": {
			act: func(ctx context.Context, v *View) error {
				if err := v.RegisterNode(ctx, n1, t0); err != nil {
					return err
				}
				if err := v.SetNodeState(ctx, "n1", gangway.NodeCordoned); err != nil {
					return err
				}
				return v.SetNodeState(ctx, "n1", gangway.NodeReady)
			},
			wantNodes: []gangway.NodeStatus{{Node: n1, State: gangway.NodeReady, LastHeartbeat: t0}},
		},
		"heartbeat moves forward only": {
			act: func(ctx context.Context, v *View) error {
				if err := v.RegisterNode(ctx, n1, t0); err != nil {
					return err
				}
				if err := v.Heartbeat(ctx, "n1", t0.Add(10*time.Second)); err != nil {
					return err
				}
				return v.Heartbeat(ctx, "n1", t0.Add(5*time.Second)) // late retry
			},
			wantNodes: []gangway.NodeStatus{{Node: n1, State: gangway.NodeReady, LastHeartbeat: t0.Add(10 * time.Second)}},
		},
		"heartbeat from unregistered node": {
			act: func(ctx context.Context, v *View) error {
				return v.Heartbeat(ctx, "ghost", t0)
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
				if err := v.RegisterNode(ctx, n1, t0); err != nil {
					return err
				}
				return v.SetNodeState(ctx, "n1", "draining-ish")
			},
			wantErr:   errAny,
			wantNodes: []gangway.NodeStatus{{Node: n1, State: gangway.NodeReady, LastHeartbeat: t0}},
		},
		"remove node": {
			act: func(ctx context.Context, v *View) error {
				if err := v.RegisterNode(ctx, n1, t0); err != nil {
					return err
				}
				if err := v.RegisterNode(ctx, n2, t0); err != nil {
					return err
				}
				return v.RemoveNode(ctx, "n1")
			},
			wantNodes: []gangway.NodeStatus{{Node: n2, State: gangway.NodeReady, LastHeartbeat: t0}},
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
			err := tc.act(ctx, v)
			checkErr(t, err, tc.wantErr)
			got, err := v.Nodes(ctx)
			must(t, err)
			if diff := cmp.Diff(tc.wantNodes, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Nodes() mismatch (-want +got):\n%s", diff)
			}
		})
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
	if diff := cmp.Diff(want, got); diff != "" {
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
	must(t, v.Heartbeat(ctx, "n1", t0.Add(time.Minute)))
	beat := func() time.Time {
		nodes, err := v.Nodes(ctx)
		must(t, err)
		return nodes[0].LastHeartbeat
	}
	must(t, v.ForgetHeartbeat(ctx, "n1"))
	if got := beat(); got.After(time.UnixMilli(0)) {
		t.Fatalf("heartbeat after forgetting = %v, want the epoch", got)
	}
	must(t, v.Heartbeat(ctx, "n1", t0.Add(2*time.Minute)))
	if got := beat(); !got.Equal(t0.Add(2 * time.Minute)) {
		t.Errorf("heartbeat after the next beat = %v, want %v", got, t0.Add(2*time.Minute))
	}
	must(t, v.ForgetHeartbeat(ctx, "nobody"))
}
