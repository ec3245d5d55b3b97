package capacity

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gangwayhq/gangway"
)

func TestEnqueue(t *testing.T) {
	rdb := startRedis(t)
	nodes := []gangway.Node{node("n1", 4)}
	withTeam := func(e gangway.QueueEntry, team string) gangway.QueueEntry {
		e.Team = team
		return e
	}

	tests := map[string]struct {
		// before runs first; it may commit and release (lease held by leader).
		before     func(ctx context.Context, v *View) error
		enqueue    gangway.QueueEntry
		wantQueued bool
		wantQueue  []gangway.QueueEntry
		wantAlloc  []gangway.Assignment
	}{
		"new job": {
			enqueue:    entry("a", 1, 1, 1),
			wantQueued: true,
			wantQueue:  []gangway.QueueEntry{entry("a", 1, 1, 1)},
		},
		"retry of the same attempt overwrites": {
			before:     enqueueAll(entry("a", 1, 1, 1)),
			enqueue:    withTeam(entry("a", 1, 1, 1), "vision"),
			wantQueued: true,
			wantQueue:  []gangway.QueueEntry{withTeam(entry("a", 1, 1, 1), "vision")},
		},
		"newer attempt replaces older": {
			before:     enqueueAll(entry("a", 1, 1, 1)),
			enqueue:    entry("a", 2, 1, 1),
			wantQueued: true,
			wantQueue:  []gangway.QueueEntry{entry("a", 2, 1, 1)},
		},
		"late older attempt is ignored": {
			before:    enqueueAll(entry("a", 2, 1, 1)),
			enqueue:   entry("a", 1, 1, 1),
			wantQueue: []gangway.QueueEntry{entry("a", 2, 1, 1)},
		},
		"retry after commit is ignored": {
			before:    enqueueAndCommit(entry("a", 1, 1, 2), assign("a", 1, member(0, "n1", 0, 1))),
			enqueue:   entry("a", 1, 1, 2),
			wantAlloc: []gangway.Assignment{assign("a", 1, member(0, "n1", 0, 1))},
		},
		"older attempt after commit is ignored": {
			before:    enqueueAndCommit(entry("a", 2, 1, 2), assign("a", 2, member(0, "n1", 0, 1))),
			enqueue:   entry("a", 1, 1, 2),
			wantAlloc: []gangway.Assignment{assign("a", 2, member(0, "n1", 0, 1))},
		},
		"newer attempt while older still allocated is queued": {
			before:     enqueueAndCommit(entry("a", 1, 1, 2), assign("a", 1, member(0, "n1", 0, 1))),
			enqueue:    entry("a", 2, 1, 2),
			wantQueued: true,
			wantQueue:  []gangway.QueueEntry{entry("a", 2, 1, 2)},
			wantAlloc:  []gangway.Assignment{assign("a", 1, member(0, "n1", 0, 1))},
		},
		"requeue after release": {
			before: func(ctx context.Context, v *View) error {
				if err := enqueueAndCommit(entry("a", 1, 1, 2), assign("a", 1, member(0, "n1", 0, 1)))(ctx, v); err != nil {
					return err
				}
				_, err := v.Release(ctx, "a", 1)
				return err
			},
			enqueue:    entry("a", 2, 1, 2),
			wantQueued: true,
			wantQueue:  []gangway.QueueEntry{entry("a", 2, 1, 2)},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			v := world(t, rdb, nodes)
			if tc.before != nil {
				must(t, tc.before(ctx, v))
			}
			queued, err := v.Enqueue(ctx, tc.enqueue)
			must(t, err)
			if queued != tc.wantQueued {
				t.Errorf("Enqueue() = %v, want %v", queued, tc.wantQueued)
			}
			q, err := v.Queue(ctx)
			must(t, err)
			if diff := cmp.Diff(tc.wantQueue, q, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Queue() mismatch (-want +got):\n%s", diff)
			}
			allocs, err := v.Allocations(ctx)
			must(t, err)
			if diff := cmp.Diff(tc.wantAlloc, allocs, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Allocations() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func enqueueAll(es ...gangway.QueueEntry) func(context.Context, *View) error {
	return func(ctx context.Context, v *View) error {
		for _, e := range es {
			if _, err := v.Enqueue(ctx, e); err != nil {
				return err
			}
		}
		return nil
	}
}

func enqueueAndCommit(e gangway.QueueEntry, a gangway.Assignment) func(context.Context, *View) error {
	return func(ctx context.Context, v *View) error {
		if _, err := v.Enqueue(ctx, e); err != nil {
			return err
		}
		return v.Commit(ctx, leader, []gangway.Assignment{a})
	}
}

func TestQueueOrder(t *testing.T) {
	rdb := startRedis(t)
	ctx := t.Context()
	at := func(e gangway.QueueEntry, prio int, submitted time.Duration) gangway.QueueEntry {
		e.Priority = prio
		e.SubmittedAt = t0.Add(submitted)
		return e
	}
	in := []gangway.QueueEntry{
		at(entry("low-early", 1, 1, 1), 0, 0),
		at(entry("normal-late", 1, 1, 1), 100, 2*time.Minute),
		at(entry("high", 1, 1, 1), 200, 3*time.Minute),
		at(entry("normal-early-b", 1, 1, 1), 100, time.Minute),
		at(entry("normal-early-a", 1, 1, 1), 100, time.Minute),
	}
	v := world(t, rdb, nil, in...)
	want := []string{"high", "normal-early-a", "normal-early-b", "normal-late", "low-early"}

	q, err := v.Queue(ctx)
	must(t, err)
	if diff := cmp.Diff(want, jobIDs(q)); diff != "" {
		t.Errorf("Queue() order mismatch (-want +got):\n%s", diff)
	}
	snap, err := v.Snapshot(ctx)
	must(t, err)
	if diff := cmp.Diff(want, jobIDs(snap.Queue)); diff != "" {
		t.Errorf("Snapshot().Queue order mismatch (-want +got):\n%s", diff)
	}

	must(t, v.Dequeue(ctx, "high"))
	must(t, v.Dequeue(ctx, "never-queued"))
	q, err = v.Queue(ctx)
	must(t, err)
	if diff := cmp.Diff(want[1:], jobIDs(q)); diff != "" {
		t.Errorf("Queue() after Dequeue mismatch (-want +got):\n%s", diff)
	}
}

func jobIDs(q []gangway.QueueEntry) []string {
	ids := make([]string, len(q))
	for i, e := range q {
		ids[i] = e.JobID
	}
	return ids
}

func TestReasons(t *testing.T) {
	rdb := startRedis(t)
	short := gangway.Waiting{Reason: "InsufficientFreeGPUs", Detail: "needs 16 GPUs, 8 free", Retry: true}
	quota := gangway.Waiting{Reason: "QuotaExceeded", Detail: "team ml uses 32 of 32 GPUs", Retry: true}
	reserved := gangway.Waiting{Reason: "WaitingForReservation", Detail: "GPUs free up at 12:00", Retry: true,
		ReservationStart: t0.Add(time.Hour), ReservedNodes: []string{"n1", "n2"}}
	never := gangway.Waiting{Reason: "ModelUnavailable", Detail: "no H200 in the fleet"}
	tests := map[string]struct {
		sets []map[gangway.JobID]gangway.Waiting
		want map[gangway.JobID]gangway.Waiting // job → Reason()
	}{
		"set": {
			sets: []map[gangway.JobID]gangway.Waiting{{"a": short, "b": quota, "r": reserved}},
			want: map[gangway.JobID]gangway.Waiting{"a": short, "b": quota, "r": reserved, "c": {}},
		},
		"replace drops jobs no longer listed": {
			sets: []map[gangway.JobID]gangway.Waiting{{"a": short, "b": quota}, {"b": reserved, "c": never}},
			want: map[gangway.JobID]gangway.Waiting{"a": {}, "b": reserved, "c": never},
		},
		"empty set clears": {
			sets: []map[gangway.JobID]gangway.Waiting{{"a": short}, {}},
			want: map[gangway.JobID]gangway.Waiting{"a": {}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			v := newView(rdb, Options{})
			for _, s := range tc.sets {
				must(t, v.SetReasons(ctx, s))
			}
			got := map[gangway.JobID]gangway.Waiting{}
			for job := range tc.want {
				r, err := v.Waiting(ctx, job)
				must(t, err)
				got[job] = r
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Reason() mismatch (-want +got):\n%s", diff)
			}
			// Reasons reads the same records at once; jobs without one
			// are absent.
			all, err := v.Reasons(ctx)
			must(t, err)
			for job, w := range got {
				if w.Reason == "" && w.Detail == "" {
					delete(got, job)
				}
			}
			if diff := cmp.Diff(got, all); diff != "" {
				t.Errorf("Reasons() mismatch (-Waiting +Reasons):\n%s", diff)
			}
		})
	}
}

// TestReasonsWrittenAsText: a view written by a version that stored
// reasons as "<code>: <detail>" text still reads, typed.
func TestReasonsWrittenAsText(t *testing.T) {
	rdb := startRedis(t)
	ctx := t.Context()
	v := newView(rdb, Options{})
	old := map[string]string{
		"a": "Fragmented: 8 GPUs free in total but at most 4 on one node",
		"b": "NeverFits: needs 16 GPUs per replica, the largest node has 8",
		"c": "waiting",
		"d": "",
	}
	must(t, rdb.HSet(ctx, v.k.reasons, old).Err())
	want := map[gangway.JobID]gangway.Waiting{
		"a": {Reason: "Fragmented", Detail: "8 GPUs free in total but at most 4 on one node", Retry: true},
		"b": {Reason: "NeverFits", Detail: "needs 16 GPUs per replica, the largest node has 8"},
		"c": {Detail: "waiting", Retry: true},
		"d": {},
	}
	got := map[gangway.JobID]gangway.Waiting{}
	for job := range want {
		r, err := v.Waiting(ctx, job)
		must(t, err)
		got[job] = r
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Reason() of text values mismatch (-want +got):\n%s", diff)
	}
}
