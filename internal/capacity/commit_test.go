package capacity

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gangwayhq/gangway"
)

func TestCommit(t *testing.T) {
	rdb := startRedis(t)
	ctx := t.Context()
	v := world(t, rdb, []gangway.Node{node("n1", 4), node("n2", 4)},
		entry("a", 1, 2, 2), entry("b", 3, 1, 1), entry("c", 1, 1, 8))
	c := gangway.Waiting{Reason: "Fragmented", Detail: "needs 8 GPUs on one node", Retry: true}
	must(t, v.SetReasons(ctx, map[gangway.JobID]gangway.Waiting{"a": {Reason: "InsufficientFreeGPUs", Retry: true}, "c": c}))

	plan := []gangway.Assignment{
		assign("a", 1, member(0, "n1", 0, 1), member(1, "n2", 0, 1)),
		assign("b", 3, member(0, "n1", 3)),
	}
	must(t, v.Commit(ctx, leader, plan))

	snap, err := v.Snapshot(ctx)
	must(t, err)
	if d := time.Since(snap.Now); d < -time.Minute || d > time.Minute {
		t.Errorf("Snapshot().Now = %v, want about now", snap.Now)
	}
	want := Snapshot{
		Now: snap.Now, Generation: snap.Generation,
		Nodes: []gangway.NodeStatus{
			{Node: node("n1", 4), State: gangway.NodeReady,
				Allocated: map[int]gangway.JobID{0: "a", 1: "a", 3: "b"}, UsedCPUMilli: 8000, UsedMemMiB: 32768},
			{Node: node("n2", 4), State: gangway.NodeReady,
				Allocated: map[int]gangway.JobID{0: "a", 1: "a"}, UsedCPUMilli: 4000, UsedMemMiB: 16384},
		},
		Queue:       []gangway.QueueEntry{entry("c", 1, 1, 8)},
		Allocations: plan,
		// A revision each: two nodes registered, three jobs queued, two placed.
		Revision: 7,
	}
	if diff := cmp.Diff(want, snap, ignoreBeats); diff != "" {
		t.Errorf("Snapshot() after commit mismatch (-want +got):\n%s", diff)
	}

	got, err := v.Allocation(ctx, "b")
	must(t, err)
	if diff := cmp.Diff(plan[1], got); diff != "" {
		t.Errorf("Allocation(b) mismatch (-want +got):\n%s", diff)
	}
	if _, err := v.Allocation(ctx, "c"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Allocation(c) error = %v, want ErrNotFound", err)
	}
	reasons := map[string]gangway.Waiting{}
	for _, job := range []string{"a", "c"} {
		reasons[job], err = v.Waiting(ctx, job)
		must(t, err)
	}
	if diff := cmp.Diff(map[string]gangway.Waiting{"a": {}, "c": c}, reasons); diff != "" {
		t.Errorf("reasons after commit mismatch (-want +got):\n%s", diff)
	}
}

func TestCommitEmptyPlan(t *testing.T) {
	rdb := startRedis(t)
	v := world(t, rdb, []gangway.Node{node("n1", 1)})
	if err := v.Commit(t.Context(), "anyone", nil); err != nil {
		t.Errorf("Commit(empty plan) = %v, want nil", err)
	}
}

// TestCommitRejects checks that every check rejects the whole plan: each
// plan starts with an assignment that would be fine on its own, and nothing
// at all may be written.
func TestCommitRejects(t *testing.T) {
	rdb := startRedis(t)
	nodes := []gangway.Node{node("n1", 4), node("n2", 4), node("cordoned", 4), node("lost", 4)}
	good := assign("a", 1, member(0, "n1", 0, 1))

	tests := map[string]struct {
		holder    string
		bad       gangway.Assignment
		wantErr   error
		wantCheck string
		wantJob   gangway.JobID
		wantNode  string
		wantGPU   int
	}{
		"lease held by another": {
			holder: "dispatch-b", bad: assign("b", 1, member(0, "n2", 1)),
			wantErr: ErrNotLeader, wantCheck: CheckLease, wantGPU: -1,
		},
		"no holder": {
			holder: "", bad: assign("b", 1, member(0, "n2", 1)),
			wantErr: ErrNotLeader, wantCheck: CheckLease, wantGPU: -1,
		},
		"job twice in plan": {
			bad:     assign("a", 1, member(0, "n2", 1)),
			wantErr: ErrStale, wantCheck: CheckDuplicateJob, wantJob: "a", wantGPU: -1,
		},
		"job not queued": {
			bad:     assign("ghost", 1, member(0, "n2", 1)),
			wantErr: ErrStale, wantCheck: CheckNotQueued, wantJob: "ghost", wantGPU: -1,
		},
		"attempt changed": {
			bad:     assign("b", 2, member(0, "n2", 1)),
			wantErr: ErrStale, wantCheck: CheckAttempt, wantJob: "b", wantGPU: -1,
		},
		"job already allocated": {
			bad:     assign("held", 2, member(0, "n2", 1)),
			wantErr: ErrStale, wantCheck: CheckAllocated, wantJob: "held", wantGPU: -1,
		},
		"node not registered": {
			bad:     assign("b", 1, member(0, "ghost", 1)),
			wantErr: ErrStale, wantCheck: CheckNodeMissing, wantJob: "b", wantNode: "ghost", wantGPU: -1,
		},
		"node cordoned": {
			bad:     assign("b", 1, member(0, "cordoned", 1)),
			wantErr: ErrStale, wantCheck: CheckNodeNotReady, wantJob: "b", wantNode: "cordoned", wantGPU: -1,
		},
		"node lost": {
			bad:     assign("b", 1, member(0, "n2", 2), member(1, "lost", 1)),
			wantErr: ErrStale, wantCheck: CheckNodeNotReady, wantJob: "b", wantNode: "lost", wantGPU: -1,
		},
		"gpu index not on node": {
			bad:     assign("b", 1, member(0, "n2", 4)),
			wantErr: ErrStale, wantCheck: CheckGPUMissing, wantJob: "b", wantNode: "n2", wantGPU: 4,
		},
		"gpu held by another job": {
			bad:     assign("b", 1, member(0, "n2", 1, 0)),
			wantErr: ErrStale, wantCheck: CheckGPUBusy, wantJob: "b", wantNode: "n2", wantGPU: 0,
		},
		"two gangs claim the same gpu": {
			bad:     assign("b", 1, member(0, "n2", 1), member(1, "n1", 1)),
			wantErr: ErrStale, wantCheck: CheckGPUTwice, wantJob: "b", wantNode: "n1", wantGPU: 1,
		},
		"one member lists a gpu twice": {
			bad:     assign("b", 1, member(0, "n2", 1, 1)),
			wantErr: ErrStale, wantCheck: CheckGPUTwice, wantJob: "b", wantNode: "n2", wantGPU: 1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			v := world(t, rdb, nodes, entry("a", 1, 1, 2), entry("b", 1, 1, 1), entry("held", 1, 1, 1))
			must(t, v.SetNodeState(ctx, "cordoned", gangway.NodeCordoned))
			must(t, v.SetNodeState(ctx, "lost", gangway.NodeLost))
			must(t, v.Commit(ctx, leader, []gangway.Assignment{assign("held", 1, member(0, "n2", 0))}))
			if _, err := v.Enqueue(ctx, entry("held", 2, 1, 1)); err != nil {
				t.Fatal(err)
			}
			holder := leader
			if tc.wantCheck == CheckLease {
				holder = tc.holder
			}
			before := dumpView(t, ctx, v)

			err := v.Commit(ctx, holder, []gangway.Assignment{good, tc.bad})

			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Commit() = %v, want %v", err, tc.wantErr)
			}
			var ce *CommitError
			if !errors.As(err, &ce) {
				t.Fatalf("Commit() = %v, not a *CommitError", err)
			}
			type where struct {
				Check, Job, Node string
				GPU              int
			}
			if diff := cmp.Diff(where{tc.wantCheck, tc.wantJob, tc.wantNode, tc.wantGPU},
				where{ce.Check, ce.JobID, ce.NodeID, ce.GPU}); diff != "" {
				t.Errorf("CommitError mismatch (-want +got):\n%s\nerror: %v", diff, err)
			}
			if diff := cmp.Diff(before, dumpView(t, ctx, v)); diff != "" {
				t.Errorf("rejected commit wrote (-before +after):\n%s", diff)
			}
		})
	}
}

func TestCommitErrorMessage(t *testing.T) {
	rdb := startRedis(t)
	ctx := t.Context()
	v := world(t, rdb, []gangway.Node{node("n1", 2)}, entry("a", 1, 1, 1), entry("b", 1, 1, 1))
	must(t, v.Commit(ctx, leader, []gangway.Assignment{assign("a", 1, member(0, "n1", 0))}))
	err := v.Commit(ctx, leader, []gangway.Assignment{assign("b", 1, member(0, "n1", 0))})
	want := "commit: capacity: plan is stale: job b: node n1: gpu 0: gpu is held by job a"
	if err == nil || err.Error() != want {
		t.Errorf("Commit() error = %v, want %q", err, want)
	}
}

func TestCommitInvalidPlan(t *testing.T) {
	rdb := startRedis(t)
	ctx := t.Context()
	v := world(t, rdb, []gangway.Node{node("n1", 2)}, entry("a", 1, 1, 1))
	tests := map[string]gangway.Assignment{
		"no members":    assign("a", 1),
		"empty job id":  assign("", 1, member(0, "n1", 0)),
		"empty node id": assign("a", 1, member(0, "", 0)),
	}
	for name, a := range tests {
		t.Run(name, func(t *testing.T) {
			before := dumpView(t, ctx, v)
			err := v.Commit(ctx, leader, []gangway.Assignment{a})
			if err == nil || errors.Is(err, ErrStale) || errors.Is(err, ErrNotLeader) {
				t.Errorf("Commit() = %v, want a plain error", err)
			}
			if diff := cmp.Diff(before, dumpView(t, ctx, v)); diff != "" {
				t.Errorf("invalid commit wrote (-before +after):\n%s", diff)
			}
		})
	}
}

func TestRelease(t *testing.T) {
	rdb := startRedis(t)
	tests := map[string]struct {
		releases   []int // attempts released, in order
		wantFreed  []int
		wantAlloc  bool
		wantHeld   map[int]gangway.JobID // on n1
		otherAfter bool                  // commit another job on the freed GPUs afterwards
	}{
		"same attempt frees all": {
			releases: []int{2}, wantFreed: []int{3}, wantHeld: map[int]gangway.JobID{},
		},
		"newer attempt frees all": {
			releases: []int{3}, wantFreed: []int{3}, wantHeld: map[int]gangway.JobID{},
		},
		"old attempt does nothing": {
			releases: []int{1}, wantFreed: []int{0}, wantAlloc: true,
			wantHeld: map[int]gangway.JobID{0: "a", 1: "a", 2: "a"},
		},
		"idempotent": {
			releases: []int{2, 2}, wantFreed: []int{3, 0}, wantHeld: map[int]gangway.JobID{},
		},
		"late release after GPUs went to another job": {
			releases: []int{2}, wantFreed: []int{3}, otherAfter: true,
			wantHeld: map[int]gangway.JobID{0: "b", 1: "b"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			v := world(t, rdb, []gangway.Node{node("n1", 4)}, entry("a", 2, 1, 3))
			must(t, v.Commit(ctx, leader, []gangway.Assignment{assign("a", 2, member(0, "n1", 0, 1, 2))}))

			var freed []int
			for _, attempt := range tc.releases {
				n, err := v.Release(ctx, "a", attempt)
				must(t, err)
				freed = append(freed, n)
			}
			if tc.otherAfter {
				_, err := v.Enqueue(ctx, entry("b", 1, 1, 2))
				must(t, err)
				must(t, v.Commit(ctx, leader, []gangway.Assignment{assign("b", 1, member(0, "n1", 0, 1))}))
				// A retried release of a's old attempt must not touch b.
				n, err := v.Release(ctx, "a", 2)
				must(t, err)
				freed[len(freed)-1] += n
			}
			if diff := cmp.Diff(tc.wantFreed, freed); diff != "" {
				t.Errorf("Release() freed mismatch (-want +got):\n%s", diff)
			}
			_, err := v.Allocation(ctx, "a")
			if gotAlloc := err == nil; gotAlloc != tc.wantAlloc {
				t.Errorf("Allocation(a) error = %v, want allocated %v", err, tc.wantAlloc)
			}
			nodes, err := v.Nodes(ctx)
			must(t, err)
			if diff := cmp.Diff(tc.wantHeld, nodes[0].Allocated, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("n1 Allocated mismatch (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("unknown job", func(t *testing.T) {
		v := newView(rdb, Options{})
		n, err := v.Release(t.Context(), "ghost", 1)
		if n != 0 || err != nil {
			t.Errorf("Release(ghost) = %d, %v; want 0, nil", n, err)
		}
	})
}
