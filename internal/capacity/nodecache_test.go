package capacity

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

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

// TestQueueCacheStaysTrue checks that a snapshot's queue, read through the
// cache of queue entries, is always the one a whole read gives, in queue
// order: through enqueues, overwrites by a newer attempt, dequeues,
// commits, bursts, a flush, entries written without a revision, and more
// new entries in one read than are put in place one by one.
func TestQueueCacheStaysTrue(t *testing.T) {
	rdb := startRedis(t)
	ctx := t.Context()
	jobs := []string{"j1", "j2", "j3", "j4", "j5", "j6"}
	rapid.Check(t, func(rt *rapid.T) {
		v := newView(rdb, Options{})
		prefix := strings.TrimSuffix(v.k.nodes, ":nodes")
		setup := func() {
			must(rt, v.RegisterNode(ctx, node("n", 8)))
			ok, err := v.AcquireLease(ctx, leader, time.Minute)
			must(rt, err)
			if !ok {
				rt.Fatal("lease not acquired")
			}
		}
		setup()
		attempt := map[string]int{}
		for step := range rapid.IntRange(1, 40).Draw(rt, "steps") {
			job := rapid.SampledFrom(jobs).Draw(rt, "job")
			op := rapid.SampledFrom([]string{"enqueue", "enqueue", "requeue", "dequeue", "commit", "burst", "flush", "legacy", "many"}).Draw(rt, "op")
			e := entry(job, attempt[job]+1, 1, 1)
			e.Priority = rapid.SampledFrom([]int{50, 100, 200}).Draw(rt, "priority")
			e.SubmittedAt = t0.Add(time.Duration(rapid.IntRange(0, 3).Draw(rt, "submitted")) * time.Second)
			switch op {
			case "enqueue":
				_, err := v.Enqueue(ctx, e)
				must(rt, err)
			case "requeue": // a newer attempt of a job that may be queued
				attempt[job]++
				e.Attempt++
				_, err := v.Enqueue(ctx, e)
				must(rt, err)
			case "dequeue":
				must(rt, v.Dequeue(ctx, job))
			case "commit", "burst":
				snap, err := v.Snapshot(ctx)
				must(rt, err)
				if len(snap.Queue) == 0 {
					continue
				}
				q := snap.Queue[0]
				if op == "burst" {
					must(rt, v.StartBurst(ctx, leader, q.JobID, q.Attempt, []byte(`{"attempt":`+strconv.Itoa(q.Attempt)+`}`)))
					continue
				}
				// Release first what it held, so that a GPU is free.
				_, err = v.Release(ctx, q.JobID, q.Attempt)
				must(rt, err)
				for _, a := range snap.Allocations {
					_, err := v.Release(ctx, a.JobID, a.Attempt)
					must(rt, err)
				}
				must(rt, v.Commit(ctx, leader, []gangway.Assignment{assign(q.JobID, q.Attempt, member(0, "n", 0))}))
			case "flush":
				must(rt, rdb.FlushAll(ctx).Err())
				setup()
			case "many": // more new entries than are put in place one by one
				for k := range insertAtMost + 1 {
					m := entry(fmt.Sprintf("m%d-%d", step, k), 1, 1, 1)
					m.Priority = rapid.SampledFrom([]int{50, 100, 200}).Draw(rt, "priority")
					_, err := v.Enqueue(ctx, m)
					must(rt, err)
				}
			case "legacy": // an entry of a new job, written with no revision
				e.JobID = "legacy-" + strconv.Itoa(step)
				raw, err := json.Marshal(e)
				must(rt, err)
				must(rt, rdb.HSet(ctx, v.k.queue, e.JobID, string(raw)).Err())
			}
			got, err := v.Snapshot(ctx)
			must(rt, err)
			whole, err := New(rdb, Options{Prefix: prefix}).Snapshot(ctx)
			must(rt, err)
			if diff := cmp.Diff(whole.Queue, got.Queue); diff != "" {
				rt.Fatalf("step %d (%s %s): cached queue differs from a whole read (-whole +cached):\n%s", step, op, job, diff)
			}
			// A caller changing its queue does not change the next one.
			if len(got.Queue) > 0 {
				got.Queue[0].Priority = -1
			}
		}
	})
}
