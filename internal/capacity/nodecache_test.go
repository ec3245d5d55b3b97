package capacity

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/devstack/devstacktest"
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
// and records written without a revision, and a caller appending to a
// snapshot's GPUs.
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

	// A snapshot's GPU slices are shared with the cache (read-only), but a
	// caller appending to one gets a copy: the next snapshot is unchanged.
	s, err := v.Snapshot(ctx)
	must(t, err)
	grown := append(s.Nodes[0].Node.GPUs, gangway.GPU{Index: 99})
	grown[0].Healthy = false
	check("after a caller appended to its snapshot's GPUs")

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
	must(t, devstacktest.FlushAll(ctx, rdb))
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
				must(rt, devstacktest.FlushAll(ctx, rdb))
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

// TestNodeStatusCacheStaysTrue checks that a snapshot's nodes, read
// through the cache — records, states, heartbeats and the GPUs the agents'
// tasks hold — are always what a whole read gives, and the fleet's records
// too: through registrations, cordons, heartbeats with and without tasks
// (one node at a time and many at once), made-silent nodes, removals,
// fences, a flush and records written without a log.
func TestNodeStatusCacheStaysTrue(t *testing.T) {
	rdb := startRedis(t)
	ctx := t.Context()
	ids := []string{"a", "b", "c", "d"}
	ignoreAge := cmpopts.IgnoreFields(gangway.NodeStatus{}, "HeartbeatAge")
	rapid.Check(t, func(rt *rapid.T) {
		v := newView(rdb, Options{})
		prefix := strings.TrimSuffix(v.k.nodes, ":nodes")
		must(rt, devstacktest.FlushAll(ctx, rdb))
		for step := range rapid.IntRange(1, 40).Draw(rt, "steps") {
			id := rapid.SampledFrom(ids).Draw(rt, "node")
			op := rapid.SampledFrom([]string{"register", "register", "resize", "state", "beat", "beat", "beat-many",
				"forget", "remove", "fence", "flush", "legacy"}).Draw(rt, "op")
			tasks := func() []Task {
				if !rapid.Bool().Draw(rt, "has tasks") {
					return nil
				}
				return []Task{{JobID: "job-" + id, Attempt: 1, GPUs: []int{rapid.IntRange(0, 1).Draw(rt, "gpu")}}}
			}
			var err error
			switch op {
			case "register":
				err = v.RegisterNode(ctx, node(id, 2))
			case "resize":
				err = v.RegisterNode(ctx, node(id, rapid.IntRange(2, 4).Draw(rt, "gpus")))
			case "state":
				err = v.SetNodeState(ctx, id, rapid.SampledFrom([]string{gangway.NodeReady, gangway.NodeCordoned, gangway.NodeLost}).Draw(rt, "state"))
			case "beat":
				err = v.Heartbeat(ctx, id, tasks())
			case "beat-many":
				_, err = v.HeartbeatNodes(ctx, []NodeBeat{{ID: id, Tasks: tasks()}, {ID: rapid.SampledFrom(ids).Draw(rt, "other"), Tasks: tasks()}})
			case "forget":
				err = v.ForgetHeartbeat(ctx, id)
			case "remove":
				err = v.RemoveNode(ctx, id)
			case "fence":
				_, err = v.FenceGPUs(ctx, gangway.GPUEvent{Node: id, GPUs: []int{0}, Kind: "xid", Xid: 79, At: t0})
			case "flush":
				err = devstacktest.FlushAll(ctx, rdb)
			case "legacy": // a record and state written with no log entry
				raw, _ := json.Marshal(node("legacy-"+strconv.Itoa(step), 1))
				must(rt, rdb.HSet(ctx, v.k.nodes, "legacy-"+strconv.Itoa(step), string(raw)).Err())
				err = rdb.HSet(ctx, v.k.nodeState, "legacy-"+strconv.Itoa(step), gangway.NodeReady).Err()
			}
			if err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrNodeBusy) {
				rt.Fatalf("step %d (%s %s): %v", step, op, id, err)
			}
			got, err := v.Snapshot(ctx)
			must(rt, err)
			fresh := New(rdb, Options{Prefix: prefix})
			whole, err := fresh.Snapshot(ctx)
			must(rt, err)
			if diff := cmp.Diff(whole.Nodes, got.Nodes, ignoreAge); diff != "" {
				rt.Fatalf("step %d (%s %s): cached nodes differ from a whole read (-whole +cached):\n%s", step, op, id, diff)
			}
			gotFleet, err := v.FleetNodes(ctx)
			must(rt, err)
			wholeFleet, err := fresh.FleetNodes(ctx)
			must(rt, err)
			if diff := cmp.Diff(wholeFleet, gotFleet); diff != "" {
				rt.Fatalf("step %d (%s %s): cached fleet differs from a whole read (-whole +cached):\n%s", step, op, id, diff)
			}
		}
	})
}

// TestChangesLogForgetsOldRemovals: removals beyond the log's allowance
// are forgotten, the log stays bounded, a cache that kept up stays
// incremental and one that fell behind the floor reads whole, right.
func TestChangesLogForgetsOldRemovals(t *testing.T) {
	rdb := startRedis(t)
	ctx := t.Context()
	v := newView(rdb, Options{})
	prefix := strings.TrimSuffix(v.k.nodes, ":nodes")
	behind := New(rdb, Options{Prefix: prefix})
	for i := range 3 {
		_, err := v.Enqueue(ctx, entry(fmt.Sprintf("kept-%d", i), 1, 1, 1))
		must(t, err)
	}
	_, err := behind.Snapshot(ctx)
	must(t, err)
	const removals = 10000
	for i := range removals {
		id := fmt.Sprintf("gone-%05d", i)
		_, err := v.Enqueue(ctx, entry(id, 1, 1, 1))
		must(t, err)
		must(t, v.Dequeue(ctx, id))
		if i%1000 == 0 {
			_, err := v.Snapshot(ctx) // keeps up
			must(t, err)
		}
	}
	s, err := v.Snapshot(ctx)
	must(t, err)
	logged, err := rdb.ZCard(ctx, v.k.queueChanges).Result()
	must(t, err)
	floor, err := rdb.Get(ctx, v.k.changesFloor).Int64()
	must(t, err)
	if logged > 3+8192+1 || floor == 0 {
		t.Errorf("after %d removals the queue log holds %d IDs, floor %d; want at most %d and a floor", removals, logged, floor, 3+8192+1)
	}
	if v.cache.queueRev < floor {
		t.Errorf("the cache that kept up is at revision %d, below the floor %d", v.cache.queueRev, floor)
	}
	if behind.cache.queueSince() >= floor {
		t.Fatalf("the cache behind is at %d, not below the floor %d", behind.cache.queueSince(), floor)
	}
	late, err := behind.Snapshot(ctx)
	must(t, err)
	if diff := cmp.Diff(s.Queue, late.Queue); diff != "" || len(late.Queue) != 3 {
		t.Errorf("the cache behind the floor: %d queued, differs from the one that kept up:\n%s", len(late.Queue), diff)
	}
}

// TestWritesAreLogged: after the first read, nothing the scripts do to
// nodes, the queue or allocations makes a read whole — every write and
// removal is in its changes log (a script that forgot would still read
// right, through the count check, but whole every time).
func TestWritesAreLogged(t *testing.T) {
	rdb := startRedis(t)
	ctx := t.Context()
	v := newView(rdb, Options{})
	must(t, v.RegisterNode(ctx, node("a", 2)))
	must(t, v.RegisterNode(ctx, node("b", 2)))
	ok, err := v.AcquireLease(ctx, leader, time.Minute)
	if err != nil || !ok {
		t.Fatalf("lease: %v %v", ok, err)
	}
	read := func(step string) {
		t.Helper()
		if _, err := v.Snapshot(ctx); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if _, err := v.FleetNodes(ctx); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	read("first read")
	before, fleetBefore := v.cache.wholeReads, v.fleet.wholeReads
	steps := []struct {
		name string
		do   func() error
	}{
		{"enqueue", func() error { _, err := v.Enqueue(ctx, entry("j1", 1, 1, 1)); return err }},
		{"enqueue a newer attempt", func() error { _, err := v.Enqueue(ctx, entry("j1", 2, 1, 1)); return err }},
		{"commit", func() error { return v.Commit(ctx, leader, []gangway.Assignment{assign("j1", 2, member(0, "a", 0))}) }},
		{"release", func() error { _, err := v.Release(ctx, "j1", 2); return err }},
		{"enqueue and burst", func() error {
			if _, err := v.Enqueue(ctx, entry("j2", 1, 1, 1)); err != nil {
				return err
			}
			return v.StartBurst(ctx, leader, "j2", 1, []byte(`{"attempt":1}`))
		}},
		{"enqueue and dequeue", func() error {
			if _, err := v.Enqueue(ctx, entry("j3", 1, 1, 1)); err != nil {
				return err
			}
			return v.Dequeue(ctx, "j3")
		}},
		{"heartbeat", func() error { return v.Heartbeat(ctx, "a", []Task{{JobID: "x", Attempt: 1, GPUs: []int{1}}}) }},
		{"heartbeat many", func() error { _, err := v.HeartbeatNodes(ctx, []NodeBeat{{ID: "a"}, {ID: "b"}}); return err }},
		{"cordon", func() error { return v.SetNodeState(ctx, "b", gangway.NodeCordoned) }},
		{"fence", func() error {
			_, err := v.FenceGPUs(ctx, gangway.GPUEvent{Node: "b", GPUs: []int{1}, Kind: "xid", Xid: 79, At: t0})
			return err
		}},
		{"re-register bigger", func() error { return v.RegisterNode(ctx, node("b", 4)) }},
		{"forget a heartbeat", func() error { return v.ForgetHeartbeat(ctx, "a") }},
		{"register", func() error { return v.RegisterNode(ctx, node("c", 1)) }},
		{"remove", func() error { return v.RemoveNode(ctx, "c") }},
	}
	for _, s := range steps {
		must(t, s.do())
		read(s.name)
		if v.cache.wholeReads != before || v.fleet.wholeReads != fleetBefore {
			t.Fatalf("after %s: %d parts of snapshots and %d fleets read whole since the first read",
				s.name, v.cache.wholeReads-before, v.fleet.wholeReads-fleetBefore)
		}
	}
}
