package fullstack

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	tclient "go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/devstack/devstacktest"
	"github.com/gangwayhq/gangway/providers"
	"github.com/gangwayhq/gangway/providers/fake"
)

// TestFakeAgents follows a fake cloud instance through its life on real
// Redis and Temporal: it boots into an agent whose node belongs to the
// instance's job, pool and capacity type; a notice reaches it; terminated,
// its agent stops and its node leaves the view.
func TestFakeAgents(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and a Temporal dev server")
	}
	rs, ts := devstacktest.Redis(t), devstacktest.Temporal(t)
	opts, err := redis.ParseURL(rs.URL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	view := capacity.New(rdb, capacity.Options{Prefix: "{fakecloud-test}"})
	log := slog.New(slog.DiscardHandler)
	tc, err := tclient.Dial(tclient.Options{HostPort: ts.Addr, Namespace: ts.Namespace, Logger: tlog.NewStructuredLogger(log)})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()

	events := make(chan string, 16)
	agents := NewFakeAgents(view, tc, agent.Config{DataDir: t.TempDir(), HeartbeatInterval: 100 * time.Millisecond, Log: log}, log, events)
	defer agents.Close()
	cloud, err := fake.New(fake.Options{Pools: []fake.Pool{{Name: "a100-spot", Zone: "z", InstanceType: "a100x8",
		GPUModel: "A100", GPUs: 8, CapacityType: gangway.CapacitySpot, PricePerHour: 12}},
		NoticeLead: time.Hour, OnRunning: agents.running, OnNotice: agents.notice, OnTerminated: agents.terminated})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	insts, err := cloud.Launch(ctx, providers.LaunchRequest{Offer: gangway.Offer{Pool: "a100-spot", InstanceType: "a100x8", CapacityType: gangway.CapacitySpot}, Count: 1,
		Token: providers.Token("train", 1), JobID: "train", Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	id := insts[0].ID

	node := waitNode(t, view, id, func(n *gangway.NodeStatus) bool { return n != nil })
	want := gangway.Node{ID: id, Pool: "a100-spot", Owner: "train", CapacityType: "spot"}
	if got := node.Node; got.Owner != want.Owner || got.Pool != want.Pool || got.CapacityType != want.CapacityType || len(got.GPUs) != 8 || got.Model() != "A100" {
		t.Errorf("node %+v, want owner train, pool a100-spot, spot, 8 × A100", got)
	}
	if err := cloud.Preempt(id); err != nil {
		t.Fatal(err)
	}
	if err := cloud.Terminate(ctx, []string{id}); err != nil {
		t.Fatal(err)
	}
	waitNode(t, view, id, func(n *gangway.NodeStatus) bool { return n == nil })

	var got []string
	for len(events) > 0 {
		got = append(got, <-events)
	}
	wantEvents := []string{"up in a100-spot (8×A100, spot) for train", "gets a preemption notice", "terminated (terminated by request)"}
	if len(got) != len(wantEvents) {
		t.Fatalf("events %q, want %d", got, len(wantEvents))
	}
	for i, w := range wantEvents {
		if !strings.Contains(got[i], w) {
			t.Errorf("event %d = %q, want it to say %q", i, got[i], w)
		}
	}
}

// waitNode polls the view until ok holds for the node (nil: absent).
func waitNode(t *testing.T, view *capacity.View, id string, ok func(*gangway.NodeStatus) bool) *gangway.NodeStatus {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		nodes, err := view.Nodes(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var found *gangway.NodeStatus
		for i := range nodes {
			if nodes[i].Node.ID == id {
				found = &nodes[i]
			}
		}
		if ok(found) {
			return found
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s: condition not met within 20s (node %+v)", id, found)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
