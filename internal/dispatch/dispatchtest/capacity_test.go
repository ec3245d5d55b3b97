package dispatchtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/capacity"
)

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func asg(job string, attempt int, members ...gangway.Member) gangway.Assignment {
	return gangway.Assignment{JobID: job, Attempt: attempt, Members: members}
}

func on(node string, milli int, gpus ...int) gangway.Member {
	return gangway.Member{NodeID: node, GPUs: gpus, Milli: milli}
}

// view has nodes n0 and n1 of two GPUs, n0 ready and n1 cordoned; "held"
// holds n0's GPU 0; a, b and c are queued at attempt 1; "me" leads.
func view(t *testing.T) *Capacity {
	t.Helper()
	c := NewCapacity(NewClock(t0))
	for _, id := range []string{"n0", "n1"} {
		c.RegisterNode(gangway.Node{ID: id, CPUMilli: 1000, MemMiB: 1000,
			GPUs: []gangway.GPU{{Index: 0, Healthy: true}, {Index: 1, Healthy: true}}})
	}
	if err := c.SetNodeState("n1", gangway.NodeCordoned); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"held", "a", "b", "c"} {
		c.Enqueue(gangway.QueueEntry{JobID: id, Attempt: 1, CPUMilli: 100})
	}
	if ok, _ := c.AcquireLease(t.Context(), "me", time.Minute); !ok {
		t.Fatal("no lease")
	}
	if err := c.Commit(t.Context(), "me", []gangway.Assignment{asg("held", 1, on("n0", 0, 0))}); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCommit: the commit script's checks, all or nothing.
func TestCommit(t *testing.T) {
	type want struct {
		stale, notLeader bool
		milli            []int // n0's GPUs after the commit
		queued           int
	}
	cases := map[string]struct {
		holder string
		plan   []gangway.Assignment
		want   want
	}{
		"a free GPU":           {plan: []gangway.Assignment{asg("a", 1, on("n0", 0, 1))}, want: want{milli: []int{1000, 1000}, queued: 2}},
		"shares side by side":  {plan: []gangway.Assignment{asg("a", 1, on("n0", 600, 1)), asg("b", 1, on("n0", 400, 1))}, want: want{milli: []int{1000, 1000}, queued: 1}},
		"shares over a GPU":    {plan: []gangway.Assignment{asg("a", 1, on("n0", 600, 1)), asg("b", 1, on("n0", 500, 1))}, want: want{stale: true, milli: []int{1000, 0}, queued: 3}},
		"a held GPU: nothing":  {plan: []gangway.Assignment{asg("a", 1, on("n0", 0, 1)), asg("b", 1, on("n0", 0, 0))}, want: want{stale: true, milli: []int{1000, 0}, queued: 3}},
		"a GPU twice":          {plan: []gangway.Assignment{asg("a", 1, on("n0", 0, 1)), asg("b", 1, on("n0", 0, 1))}, want: want{stale: true, milli: []int{1000, 0}, queued: 3}},
		"a gang member stale":  {plan: []gangway.Assignment{asg("a", 1, on("n0", 0, 1), on("n1", 0, 0))}, want: want{stale: true, milli: []int{1000, 0}, queued: 3}},
		"no such GPU":          {plan: []gangway.Assignment{asg("a", 1, on("n0", 0, 7))}, want: want{stale: true, milli: []int{1000, 0}, queued: 3}},
		"no such node":         {plan: []gangway.Assignment{asg("a", 1, on("n9", 0, 0))}, want: want{stale: true, milli: []int{1000, 0}, queued: 3}},
		"not queued":           {plan: []gangway.Assignment{asg("zz", 1, on("n0", 0, 1))}, want: want{stale: true, milli: []int{1000, 0}, queued: 3}},
		"another attempt":      {plan: []gangway.Assignment{asg("a", 2, on("n0", 0, 1))}, want: want{stale: true, milli: []int{1000, 0}, queued: 3}},
		"a job twice":          {plan: []gangway.Assignment{asg("a", 1, on("n0", 300, 1)), asg("a", 1, on("n0", 300, 1))}, want: want{stale: true, milli: []int{1000, 0}, queued: 3}},
		"not the lease holder": {holder: "other", plan: []gangway.Assignment{asg("a", 1, on("n0", 0, 1))}, want: want{notLeader: true, milli: []int{1000, 0}, queued: 3}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := view(t)
			holder := tc.holder
			if holder == "" {
				holder = "me"
			}
			err := c.Commit(t.Context(), holder, tc.plan)
			snap, _ := c.Snapshot(t.Context())
			milli, _, _ := c.NodeUse("n0")
			got := want{stale: errors.Is(err, capacity.ErrStale), notLeader: errors.Is(err, capacity.ErrNotLeader),
				milli: milli, queued: len(snap.Queue)}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("commit (-want +got):\n%s (err %v)", diff, err)
			}
		})
	}
}

// TestReleaseAndEnqueueByAttempt: a late release from an old attempt frees
// nothing of a newer one, and an enqueue older than what the job holds is
// ignored.
func TestReleaseAndEnqueueByAttempt(t *testing.T) {
	ctx := context.Background()
	c := view(t)
	if c.Enqueue(gangway.QueueEntry{JobID: "held", Attempt: 1}) {
		t.Error("a retried enqueue of the attempt that holds GPUs was accepted")
	}
	if n, _ := c.Release(ctx, "held", 0); n != 0 {
		t.Errorf("an older attempt's release freed %d GPUs", n)
	}
	if n, _ := c.Release(ctx, "held", 1); n != 1 {
		t.Errorf("release freed %d GPUs, want 1", n)
	}
	if n, _ := c.Release(ctx, "held", 1); n != 0 {
		t.Errorf("a second release freed %d GPUs, want 0 (idempotent)", n)
	}
	if _, cpu, _ := c.NodeUse("n0"); cpu != 0 {
		t.Errorf("CPU held after release: %d", cpu)
	}
}
