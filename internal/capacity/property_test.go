package capacity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"

	"github.com/gangwayhq/gangway"
)

// TestViewProperties runs random sequences of enqueue, commit (plans made
// from snapshots, some deliberately stale), release, dequeue and node state
// changes, and checks after every step that:
//
//   - no GPU held whole is owned by two jobs, and every owned GPU belongs
//     to an allocation that lists it;
//   - a shared GPU is held by shares summing to at most 1000 milli-GPU,
//     never also whole, and each share is one an allocation lists;
//   - the number of held GPUs (whole, and each share) equals the GPUs of
//     all assignments;
//   - no job is both queued and allocated, except a requeued newer attempt
//     that waits for the older attempt's release (Commit refuses it until
//     then);
//   - a rejected commit writes nothing, a fresh one writes all of its plan;
//   - Enqueue and Release do what their attempt rules say.
func TestViewProperties(t *testing.T) {
	rdb := startRedis(t)
	jobs := []string{"j0", "j1", "j2", "j3", "j4"}
	staleKinds := []string{
		"fresh", "fresh", "fresh", "attempt", "busy", "missing-gpu", "cordon",
		"twice", "replay", "not-leader", "dequeued", "allocated", "dup-job", "overfull",
	}
	ops := []string{"enqueue", "enqueue", "enqueue", "commit", "commit", "commit", "release", "dequeue", "state"}
	states := []string{gangway.NodeReady, gangway.NodeReady, gangway.NodeCordoned, gangway.NodeLost}

	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		v := newView(rdb, Options{})
		var nodes []gangway.Node
		for i := range rapid.IntRange(1, 3).Draw(rt, "nodes") {
			n := node(fmt.Sprintf("n%d", i), rapid.IntRange(2, 4).Draw(rt, "gpus"))
			must(rt, v.RegisterNode(ctx, n))
			nodes = append(nodes, n)
		}
		ok, err := v.AcquireLease(ctx, leader, time.Minute)
		must(rt, err)
		if !ok {
			rt.Fatal("lease not acquired")
		}

		steps := rapid.IntRange(10, 60).Draw(rt, "steps")
		for range steps {
			switch op := rapid.SampledFrom(ops).Draw(rt, "op"); op {
			case "enqueue":
				e := entry(rapid.SampledFrom(jobs).Draw(rt, "job"), rapid.IntRange(0, 3).Draw(rt, "attempt"),
					rapid.IntRange(1, 2).Draw(rt, "replicas"), rapid.IntRange(1, 2).Draw(rt, "gpusPerReplica"))
				if e.GPUsPerReplica == 1 {
					e.GPUMilli = rapid.SampledFrom([]int{0, 0, 250, 500, 750}).Draw(rt, "gpuMilli")
				}
				r := readRaw(rt, ctx, v)
				want := true
				if a, held := r.allocs[e.JobID]; held && a.Assignment.Attempt >= e.Attempt {
					want = false
				}
				if q, queued := r.queue[e.JobID]; queued && q.Attempt > e.Attempt {
					want = false
				}
				got, err := v.Enqueue(ctx, e)
				must(rt, err)
				if got != want {
					rt.Fatalf("Enqueue(%s attempt %d) = %v, want %v", e.JobID, e.Attempt, got, want)
				}
			case "commit":
				commitStep(rt, ctx, v, rapid.SampledFrom(staleKinds).Draw(rt, "kind"))
			case "release":
				job, attempt := rapid.SampledFrom(jobs).Draw(rt, "job"), rapid.IntRange(0, 3).Draw(rt, "attempt")
				r := readRaw(rt, ctx, v)
				want := 0
				if a, held := r.allocs[job]; held && a.Assignment.Attempt <= attempt {
					want = a.Assignment.GPUCount()
				}
				got, err := v.Release(ctx, job, attempt)
				must(rt, err)
				if got != want {
					rt.Fatalf("Release(%s, %d) = %d, want %d", job, attempt, got, want)
				}
			case "dequeue":
				must(rt, v.Dequeue(ctx, rapid.SampledFrom(jobs).Draw(rt, "job")))
			case "state":
				n := rapid.SampledFrom(nodes).Draw(rt, "node")
				state := rapid.SampledFrom(states).Draw(rt, "state")
				must(rt, v.SetNodeState(ctx, n.ID, state))
			}
			checkInvariants(rt, ctx, v, nodes)
		}
	})
}

// commitStep plans from a snapshot, makes the plan stale in the way kind
// says, commits, and checks the outcome.
func commitStep(rt *rapid.T, ctx context.Context, v *View, kind string) {
	snap, err := v.Snapshot(ctx)
	must(rt, err)
	plan := greedyPlan(snap, false)
	if len(plan) == 0 {
		return
	}
	holder := leader
	wantErr := ErrStale
	switch kind {
	case "fresh", "replay":
		wantErr = nil
	case "attempt": // requeued for a newer attempt since the snapshot
		e := queued(snap, plan[0].JobID)
		e.Attempt++
		_, err := v.Enqueue(ctx, e)
		must(rt, err)
	case "busy": // claims a GPU another job holds, or a rival commit took
		var claim *gangway.Member
		for _, n := range snap.Nodes {
			for idx := range n.Allocated {
				claim = &gangway.Member{Rank: 99, NodeID: n.Node.ID, GPUs: []int{idx}}
			}
			for idx := range n.Shared { // whole, on a shared GPU
				claim = &gangway.Member{Rank: 99, NodeID: n.Node.ID, GPUs: []int{idx}}
			}
		}
		if claim == nil && len(plan) >= 2 {
			rival := plan[len(plan)-1]
			plan = plan[:len(plan)-1]
			must(rt, v.Commit(ctx, holder, []gangway.Assignment{rival}))
			claim = &gangway.Member{Rank: 99, NodeID: rival.Members[0].NodeID, GPUs: rival.Members[0].GPUs[:1]}
		}
		if claim == nil {
			wantErr = nil
			break
		}
		plan[0].Members = append(plan[0].Members, *claim)
	case "missing-gpu":
		m := &plan[0].Members[0]
		m.GPUs = append(m.GPUs, 99)
	case "cordon": // cordoned since the snapshot
		must(rt, v.SetNodeState(ctx, plan[len(plan)-1].Members[0].NodeID, gangway.NodeCordoned))
	case "twice": // two gangs, or two members, claim one GPU (whole)
		last := &plan[len(plan)-1]
		m := plan[0].Members[0]
		m.Milli = 0
		last.Members = append(last.Members, m)
	case "not-leader":
		holder = "intruder"
		wantErr = ErrNotLeader
	case "dequeued": // cancelled since the snapshot
		must(rt, v.Dequeue(ctx, plan[len(plan)-1].JobID))
	case "allocated": // a requeued job whose older attempt still holds GPUs
		var requeued []gangway.Assignment
		for _, a := range greedyPlan(snap, true) {
			for _, b := range snap.Allocations {
				if a.JobID == b.JobID {
					requeued = append(requeued, a)
				}
			}
		}
		if len(requeued) == 0 {
			wantErr = nil
			break
		}
		plan = requeued
	case "overfull": // a share more than what is left of a shared GPU
		var claim *gangway.Member
		for _, n := range snap.Nodes {
			for idx := range n.Shared {
				claim = &gangway.Member{Rank: 99, NodeID: n.Node.ID, GPUs: []int{idx}, Milli: 1001 - n.SharedMilli(idx)}
			}
		}
		if claim == nil || claim.Milli >= gangway.MilliPerGPU {
			wantErr = nil
			break
		}
		plan[0].Members = append(plan[0].Members, *claim)
	case "dup-job": // one job twice, the second time with no GPUs
		plan = append(plan, gangway.Assignment{JobID: plan[0].JobID, Attempt: plan[0].Attempt, At: plan[0].At,
			Members: []gangway.Member{{NodeID: plan[0].Members[0].NodeID, GPUs: []int{}}}})
	}

	before := dumpView(rt, ctx, v)
	err = v.Commit(ctx, holder, plan)
	if wantErr == nil {
		if err != nil {
			rt.Fatalf("%s commit: %v", kind, err)
		}
		checkCommitted(rt, ctx, v, plan)
		if kind != "replay" {
			return
		}
		before = dumpView(rt, ctx, v)
		err = v.Commit(ctx, holder, plan)
		wantErr = ErrStale
	}
	if !errors.Is(err, wantErr) {
		rt.Fatalf("%s commit: error %v, want %v", kind, err, wantErr)
	}
	if diff := cmp.Diff(before, dumpView(rt, ctx, v)); diff != "" {
		rt.Fatalf("%s commit rejected with %v but wrote (-before +after):\n%s", kind, err, diff)
	}
}

func checkCommitted(rt *rapid.T, ctx context.Context, v *View, plan []gangway.Assignment) {
	r := readRaw(rt, ctx, v)
	for _, a := range plan {
		if diff := cmp.Diff(a, r.allocs[a.JobID].Assignment); diff != "" {
			rt.Fatalf("allocation of %s after commit mismatch (-want +got):\n%s", a.JobID, diff)
		}
		if _, ok := r.queue[a.JobID]; ok {
			rt.Fatalf("%s still queued after commit", a.JobID)
		}
	}
}

func queued(s Snapshot, job string) gangway.QueueEntry {
	for _, e := range s.Queue {
		if e.JobID == job {
			return e
		}
	}
	return gangway.QueueEntry{}
}

// greedyPlan places queued jobs first fit on ready nodes: a stand-in for
// placement that produces valid plans from a snapshot. With
// placeAllocated it also places requeued jobs that still hold GPUs, which
// no valid plan does.
func greedyPlan(s Snapshot, placeAllocated bool) []gangway.Assignment {
	allocated := map[string]bool{}
	for _, a := range s.Allocations {
		allocated[a.JobID] = true
	}
	used := map[string]bool{} // held whole
	milli := map[string]int{} // held in shares
	for _, n := range s.Nodes {
		for idx := range n.Allocated {
			used[gpuField(n.Node.ID, idx)] = true
		}
		for idx := range n.Shared {
			milli[gpuField(n.Node.ID, idx)] = n.SharedMilli(idx)
		}
	}
	var plan []gangway.Assignment
	for _, e := range s.Queue {
		if allocated[e.JobID] && !placeAllocated {
			continue // a newer attempt waiting for the old one's release
		}
		var members []gangway.Member
		var taken []string
		for r := range e.Replicas {
			for _, n := range s.Nodes {
				if n.State != gangway.NodeReady {
					continue
				}
				var free []int
				for _, g := range n.Node.GPUs {
					f := gpuField(n.Node.ID, g.Index)
					if !used[f] && (e.Share() && milli[f]+e.GPUMilli <= gangway.MilliPerGPU || milli[f] == 0) {
						free = append(free, g.Index)
					}
				}
				if len(free) < e.GPUsPerReplica {
					continue
				}
				m := gangway.Member{Rank: r, NodeID: n.Node.ID, Pool: n.Node.Pool, GPUs: free[:e.GPUsPerReplica]}
				if e.Share() {
					m.Milli = e.GPUMilli
				}
				for _, idx := range m.GPUs {
					f := gpuField(n.Node.ID, idx)
					if e.Share() {
						milli[f] += e.GPUMilli
					} else {
						used[f] = true
					}
					taken = append(taken, f)
				}
				members = append(members, m)
				break
			}
		}
		if len(members) < e.Replicas {
			for _, f := range taken { // all or nothing
				if e.Share() {
					milli[f] -= e.GPUMilli
				} else {
					delete(used, f)
				}
			}
			continue
		}
		plan = append(plan, gangway.Assignment{JobID: e.JobID, Attempt: e.Attempt, Members: members, At: s.Now})
	}
	return plan
}

// raw is the view's queue, allocations, GPU owners and shares, decoded.
type raw struct {
	queue  map[string]gangway.QueueEntry
	allocs map[string]allocRecord
	gpus   map[string]string
	shares map[string]map[string]int
}

func readRaw(t tb, ctx context.Context, v *View) raw {
	t.Helper()
	r := raw{queue: map[string]gangway.QueueEntry{}, allocs: map[string]allocRecord{}}
	q, err := v.rdb.HGetAll(ctx, v.k.queue).Result()
	must(t, err)
	for job, s := range q {
		var e gangway.QueueEntry
		must(t, json.Unmarshal([]byte(s), &e))
		r.queue[job] = e
	}
	a, err := v.rdb.HGetAll(ctx, v.k.allocs).Result()
	must(t, err)
	for job, s := range a {
		var rec allocRecord
		must(t, json.Unmarshal([]byte(s), &rec))
		r.allocs[job] = rec
	}
	r.gpus, err = v.rdb.HGetAll(ctx, v.k.gpus).Result()
	must(t, err)
	sh, err := v.rdb.HGetAll(ctx, v.k.shares).Result()
	must(t, err)
	r.shares = map[string]map[string]int{}
	for f, s := range sh {
		held := map[string]int{}
		must(t, json.Unmarshal([]byte(s), &held))
		r.shares[f] = held
	}
	return r
}

func checkInvariants(rt *rapid.T, ctx context.Context, v *View, nodes []gangway.Node) {
	r := readRaw(rt, ctx, v)
	exists := map[string]bool{}
	for _, n := range nodes {
		for _, g := range n.GPUs {
			exists[gpuField(n.ID, g.Index)] = true
		}
	}

	listed := map[string]string{} // GPU held whole → the allocation listing it
	total, shareCount := 0, 0
	wantShares := map[string]map[string]int{} // GPU → job → milli its members list
	for job, rec := range r.allocs {
		a := rec.Assignment
		if a.JobID != job {
			rt.Fatalf("allocation under %s is for %s", job, a.JobID)
		}
		total += a.GPUCount()
		for _, m := range a.Members {
			for _, idx := range m.GPUs {
				f := gpuField(m.NodeID, idx)
				if other, dup := listed[f]; dup {
					rt.Fatalf("GPU %s in the allocations of both %s and %s", f, other, job)
				}
				listed[f] = job
				if !exists[f] {
					rt.Fatalf("%s holds GPU %s, which does not exist", job, f)
				}
				if m.Milli > 0 && m.Milli < gangway.MilliPerGPU {
					if wantShares[f] == nil {
						wantShares[f] = map[string]int{}
					}
					wantShares[f][job] += m.Milli
					shareCount++
					delete(listed, f) // shared GPUs may be listed by several jobs
					continue
				}
				if owner := r.gpus[f]; owner != job {
					rt.Fatalf("%s's allocation lists GPU %s, owned by %q", job, f, owner)
				}
			}
		}
		if e, ok := r.queue[job]; ok && e.Attempt <= a.Attempt {
			rt.Fatalf("%s queued for attempt %d while allocated for attempt %d", job, e.Attempt, a.Attempt)
		}
	}
	for f, owner := range r.gpus {
		if listed[f] != owner {
			rt.Fatalf("GPU %s owned by %s, but no allocation of %s lists it", f, owner, owner)
		}
	}
	if diff := cmp.Diff(wantShares, r.shares); diff != "" {
		rt.Fatalf("shares recorded differ from the allocations' (-allocations +view):\n%s", diff)
	}
	for f, held := range r.shares {
		sum := 0
		for _, m := range held {
			sum += m
		}
		if sum > gangway.MilliPerGPU {
			rt.Fatalf("GPU %s is held by shares summing to %d milli-GPU (%v)", f, sum, held)
		}
		if owner, whole := r.gpus[f]; whole {
			rt.Fatalf("GPU %s is held whole by %s and in shares by %v", f, owner, held)
		}
	}
	if len(r.gpus)+shareCount != total {
		rt.Fatalf("%d GPUs owned whole and %d shares, assignments hold %d", len(r.gpus), shareCount, total)
	}

	// The same through the public read path.
	snap, err := v.Snapshot(ctx)
	must(rt, err)
	held := 0
	shared := map[string]map[string]int{}
	for _, n := range snap.Nodes {
		held += len(n.Allocated)
		for idx, shares := range n.Shared {
			shared[gpuField(n.Node.ID, idx)] = shares
		}
	}
	want := 0
	for _, a := range snap.Allocations {
		want += a.GPUCount()
	}
	if held+shareCount != want || held != len(r.gpus) {
		rt.Fatalf("snapshot: %d GPUs held whole on nodes and %d shares, assignments hold %d, raw %d whole", held, shareCount, want, len(r.gpus))
	}
	if diff := cmp.Diff(r.shares, shared); diff != "" {
		rt.Fatalf("snapshot shares differ from the view's (-view +snapshot):\n%s", diff)
	}
	owners := map[string]string{}
	for _, n := range snap.Nodes {
		for idx, job := range n.Allocated {
			owners[gpuField(n.Node.ID, idx)] = job
		}
	}
	if diff := cmp.Diff(r.gpus, owners, cmpopts.EquateEmpty()); diff != "" {
		rt.Fatalf("snapshot GPU owners differ from the view's (-view +snapshot):\n%s", diff)
	}
	// The snapshot, read through v's cache, is what a whole read gives.
	whole, err := New(v.rdb, Options{Prefix: strings.TrimSuffix(v.k.nodes, ":nodes")}).Snapshot(ctx)
	must(rt, err)
	ignoreAge := cmpopts.IgnoreFields(gangway.NodeStatus{}, "HeartbeatAge")
	if diff := cmp.Diff(whole.Nodes, snap.Nodes, ignoreAge); diff != "" {
		rt.Fatalf("cached snapshot's nodes differ from a whole read (-whole +cached):\n%s", diff)
	}
	if diff := cmp.Diff(whole.Allocations, snap.Allocations, cmpopts.EquateEmpty()); diff != "" {
		rt.Fatalf("cached snapshot's allocations differ from a whole read (-whole +cached):\n%s", diff)
	}
}
