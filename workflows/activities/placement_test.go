package activities_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/devstack/devstacktest"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/activities"
)

// TestCheckPlacement compares placed signals with an allocation committed
// in a real Redis.
func TestCheckPlacement(t *testing.T) {
	ctx := t.Context()
	r := devstacktest.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { rdb.Close() })
	v := capacity.New(rdb, capacity.Options{Prefix: "{check}"})
	now := time.Now()
	for _, id := range []string{"n1", "n2"} {
		n := gangway.Node{ID: id, Addr: "10.0.0." + id[1:], Pool: "onprem", CPUMilli: 64000, MemMiB: 1 << 20}
		for i := range 4 {
			n.GPUs = append(n.GPUs, gangway.GPU{Index: i, Model: "H100", MemMiB: 80 << 10, Healthy: true})
		}
		if err := v.RegisterNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := v.Enqueue(ctx, gangway.QueueEntry{JobID: "job-1", Attempt: 2, Team: "ml", Replicas: 1, GPUsPerReplica: 2,
		EnqueuedAt: now, SubmittedAt: now}); err != nil {
		t.Fatal(err)
	}
	if ok, err := v.AcquireLease(ctx, "leader", time.Minute); err != nil || !ok {
		t.Fatalf("lease: %v %v", ok, err)
	}
	committed := gangway.Assignment{JobID: "job-1", Attempt: 2, At: now, Members: []gangway.Member{
		{Rank: 0, NodeID: "n1", Pool: "onprem", GPUs: []int{0, 1}, Addr: "10.0.0.1"}}}
	if err := v.Commit(ctx, "leader", []gangway.Assignment{committed}); err != nil {
		t.Fatal(err)
	}
	a := &activities.Activities{Capacity: v, Log: slog.New(slog.DiscardHandler)}
	change := func(f func(*gangway.Assignment)) gangway.Assignment {
		c := committed
		c.Members = append([]gangway.Member(nil), committed.Members...)
		f(&c)
		return c
	}
	tests := map[string]struct {
		signal     gangway.Assignment
		wantReason string // "" = committed
	}{
		"the committed allocation": {signal: committed},
		"another node":             {signal: change(func(a *gangway.Assignment) { a.Members[0].NodeID = "n2" }), wantReason: "the committed allocation is rank 0 → n1 GPUs [0 1]"},
		"other GPUs":               {signal: change(func(a *gangway.Assignment) { a.Members[0].GPUs = []int{2, 3} }), wantReason: "the committed allocation is"},
		"another master address":   {signal: change(func(a *gangway.Assignment) { a.Members[0].Addr = "203.0.113.9" }), wantReason: "the committed allocation is"},
		"another task queue":       {signal: change(func(a *gangway.Assignment) { a.Members[0].TaskQueue = "node/evil" }), wantReason: "the committed allocation is"},
		"another attempt":          {signal: change(func(a *gangway.Assignment) { a.Attempt = 3 }), wantReason: "the committed allocation is for attempt 2"},
		"a job with no allocation": {signal: change(func(a *gangway.Assignment) { a.JobID = "job-2" }), wantReason: "no allocation is committed for the job"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res, err := a.CheckPlacement(ctx, workflows.CheckPlacementInput{Assignment: tc.signal})
			if err != nil {
				t.Fatal(err)
			}
			if res.Committed != (tc.wantReason == "") || !strings.Contains(res.Reason, tc.wantReason) {
				t.Errorf("CheckPlacement = %+v, want reason %q", res, tc.wantReason)
			}
		})
	}
}
