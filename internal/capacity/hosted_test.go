package capacity

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
)

// TestHostedNodes registers more nodes than one batch holds, heartbeats
// them in batches (time only moving forward), reports the ones the view
// lost, and reads back the task queue hosted nodes name.
func TestHostedNodes(t *testing.T) {
	ctx := context.Background()
	v := newView(startRedis(t), Options{})
	const count = hostedBatch*2 + 7
	var nodes []gangway.Node
	var ids []string
	for i := range count {
		n := node(fmt.Sprintf("sim-%04d", i), 8)
		n.TaskQueue = "host/h1"
		nodes = append(nodes, n)
		ids = append(ids, n.ID)
	}
	start := time.Now()
	if err := v.RegisterNodes(ctx, nodes); err != nil {
		t.Fatal(err)
	}
	got, err := v.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != count || got[0].State != gangway.NodeReady {
		t.Fatalf("registered %d nodes, first %+v", len(got), got[0])
	}
	checkBeats(t, got, start)

	if err := v.RemoveNode(ctx, "sim-0003"); err != nil {
		t.Fatal(err)
	}
	beats := func(ids []string) []NodeBeat {
		out := make([]NodeBeat, len(ids))
		for i, id := range ids {
			out[i] = NodeBeat{ID: id}
		}
		return out
	}
	missing, err := v.HeartbeatNodes(ctx, beats(append(ids, "never-registered")))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"sim-0003", "never-registered"}, missing); diff != "" {
		t.Errorf("missing (-want +got):\n%s", diff)
	}
	// A heartbeat stamps the server's time, and never moves a later
	// stamp back.
	later := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	setBeat(t, v, ids[0], later)
	beatAt := time.Now()
	if _, err := v.HeartbeatNodes(ctx, beats(ids)); err != nil {
		t.Fatal(err)
	}
	got, err = v.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !got[0].LastHeartbeat.Equal(later) {
		t.Errorf("node %s heartbeat %v, want the later stamp %v kept", got[0].Node.ID, got[0].LastHeartbeat, later)
	}
	checkBeats(t, got[1:], beatAt)

	if err := v.RegisterNode(ctx, node("own", 2)); err != nil {
		t.Fatal(err)
	}
	snap, err := v.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	queues := map[string]string{}
	for _, n := range snap.Nodes {
		if n.Node.ID == "own" || n.Node.ID == "sim-0001" || n.Node.ID == "sim-1000" {
			queues[n.Node.ID] = n.Node.TaskQueue
		}
	}
	// Placement copies them to the members it places (placement.Node.TaskQueue).
	if diff := cmp.Diff(map[string]string{"sim-0001": "host/h1", "sim-1000": "host/h1", "own": ""}, queues); diff != "" {
		t.Errorf("task queues (-want +got):\n%s", diff)
	}
}
