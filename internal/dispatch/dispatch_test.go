package dispatch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// fakeCapacity is an in-memory stand-in for the Redis view.
type fakeCapacity struct {
	mu         sync.Mutex
	snap       capacity.Snapshot
	allocs     []gangway.Assignment
	commitErrs []error // returned by successive commits, then nil
	committed  [][]gangway.Assignment
	released   []string
	reasons    map[gangway.JobID]gangway.Waiting
	leaseOwner string
	bursting   map[gangway.JobID][]byte
}

// Snapshot is the fake's view, never lost: always rebuilt.
func (f *fakeCapacity) Snapshot(context.Context) (capacity.Snapshot, error) {
	s := f.snap
	s.Rebuilt = true
	return s, nil
}

func (f *fakeCapacity) Commit(_ context.Context, _ string, plan []gangway.Assignment) error {
	if len(f.commitErrs) > 0 {
		err := f.commitErrs[0]
		f.commitErrs = f.commitErrs[1:]
		return err
	}
	f.committed = append(f.committed, plan)
	return nil
}

func (f *fakeCapacity) Release(_ context.Context, id gangway.JobID, attempt int) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released = append(f.released, fmt.Sprintf("%s/%d", id, attempt))
	return 1, nil
}

func (f *fakeCapacity) Allocations(context.Context) ([]gangway.Assignment, error) {
	return f.allocs, nil
}

func (f *fakeCapacity) AcquireLease(_ context.Context, holder string, _ time.Duration) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.leaseOwner == "" || f.leaseOwner == holder {
		f.leaseOwner = holder
		return true, nil
	}
	return false, nil
}

func (f *fakeCapacity) ReleaseLease(_ context.Context, holder string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.leaseOwner == holder {
		f.leaseOwner = ""
	}
	return nil
}

func (f *fakeCapacity) SetReasons(_ context.Context, r map[gangway.JobID]gangway.Waiting) error {
	f.reasons = r
	return nil
}

func (f *fakeCapacity) StartBurst(_ context.Context, _ string, id gangway.JobID, attempt int, req []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := slices.IndexFunc(f.snap.Queue, func(e gangway.QueueEntry) bool { return e.JobID == id && e.Attempt == attempt })
	if i < 0 {
		return capacity.ErrStale
	}
	f.snap.Queue = slices.Delete(f.snap.Queue, i, i+1)
	if f.bursting == nil {
		f.bursting = map[gangway.JobID][]byte{}
	}
	f.bursting[id] = req
	return nil
}

func (f *fakeCapacity) Bursts(context.Context) (map[gangway.JobID][]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.bursting), nil
}

func (f *fakeCapacity) ForgetBurst(_ context.Context, id gangway.JobID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.bursting, id)
	return nil
}

// fakeWorkflows records signals; gone jobs answer jobs.ErrJobGone, flaky ones
// fail their first signal.
type fakeWorkflows struct {
	mu        sync.Mutex // signals may arrive at once
	signaled  []string
	preempted []string
	bursts    map[gangway.JobID]workflows.BurstRequest
	gone      map[string]bool
	flaky     map[string]int
	running   map[string]bool
}

func (f *fakeWorkflows) SignalPlaced(_ context.Context, a gangway.Assignment) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gone[a.JobID] {
		return jobs.ErrJobGone
	}
	if f.flaky[a.JobID] > 0 {
		f.flaky[a.JobID]--
		return errors.New("temporal unavailable")
	}
	f.signaled = append(f.signaled, fmt.Sprintf("%s/%d", a.JobID, a.Attempt))
	return nil
}

func (f *fakeWorkflows) SignalPreempt(_ context.Context, id gangway.JobID, req workflows.PreemptRequest) error {
	f.preempted = append(f.preempted, fmt.Sprintf("%s/%d: %s", id, req.Attempt, req.Reason))
	return nil
}

func (f *fakeWorkflows) SignalBurst(_ context.Context, id gangway.JobID, req workflows.BurstRequest) error {
	if f.gone[id] {
		return jobs.ErrJobGone
	}
	if f.bursts == nil {
		f.bursts = map[gangway.JobID]workflows.BurstRequest{}
	}
	f.bursts[id] = req
	return nil
}

func (f *fakeWorkflows) Running(_ context.Context, id gangway.JobID) (bool, error) {
	return f.running[id], nil
}

func node(id string, gpus int, hbAge time.Duration, state string, used ...int) gangway.NodeStatus {
	n := gangway.NodeStatus{State: state, LastHeartbeat: t0.Add(-hbAge), Allocated: map[int]gangway.JobID{}}
	n.Node = gangway.Node{ID: id, Pool: "onprem", CPUMilli: 1 << 20, MemMiB: 1 << 20}
	for i := range gpus {
		n.Node.GPUs = append(n.Node.GPUs, gangway.GPU{Index: i, Model: "H100", Healthy: true})
	}
	for _, u := range used {
		n.Allocated[u] = "other"
	}
	return n
}

func entry(id string, replicas, gpus int) gangway.QueueEntry {
	return gangway.QueueEntry{JobID: id, Team: "t", Attempt: 1, Replicas: replicas, GPUsPerReplica: gpus, EnqueuedAt: t0}
}

func TestCycle(t *testing.T) {
	type want struct {
		result    CycleResult
		committed []string // job IDs per commit, flattened
		signaled  []string
		released  []string
		reasons   []string // job IDs with a reason
		leading   bool
		err       bool
	}
	cases := map[string]struct {
		nodes      []gangway.NodeStatus
		queue      []gangway.QueueEntry
		commitErrs []error
		gone       []string
		want       want
	}{
		"places what fits and explains the rest": {
			nodes: []gangway.NodeStatus{node("n0", 8, 0, gangway.NodeReady, 0, 1, 2, 3)},
			queue: []gangway.QueueEntry{entry("big", 2, 8), entry("small", 1, 4)},
			want: want{result: CycleResult{Placed: 1, Unplaced: 1}, committed: []string{"small"},
				signaled: []string{"small/1"}, reasons: []string{"big"}, leading: true},
		},
		"lost and cordoned nodes get no work": {
			nodes: []gangway.NodeStatus{node("lost", 8, time.Minute, gangway.NodeReady), node("cordoned", 8, 0, gangway.NodeCordoned)},
			queue: []gangway.QueueEntry{entry("j", 1, 1)},
			want:  want{result: CycleResult{Unplaced: 1}, reasons: []string{"j"}, leading: true},
		},
		"stale plan is made again": {
			nodes:      []gangway.NodeStatus{node("n0", 8, 0, gangway.NodeReady)},
			queue:      []gangway.QueueEntry{entry("j", 1, 8)},
			commitErrs: []error{fmt.Errorf("gpu taken: %w", capacity.ErrStale)},
			want: want{result: CycleResult{Placed: 1, Stale: 1}, committed: []string{"j"},
				signaled: []string{"j/1"}, leading: true},
		},
		"always stale gives up for this cycle": {
			nodes:      []gangway.NodeStatus{node("n0", 8, 0, gangway.NodeReady)},
			queue:      []gangway.QueueEntry{entry("j", 1, 8)},
			commitErrs: []error{capacity.ErrStale, capacity.ErrStale, capacity.ErrStale, capacity.ErrStale},
			want:       want{result: CycleResult{Stale: 3}, leading: true, err: true},
		},
		"deposed leader stops": {
			nodes:      []gangway.NodeStatus{node("n0", 8, 0, gangway.NodeReady)},
			queue:      []gangway.QueueEntry{entry("j", 1, 8)},
			commitErrs: []error{capacity.ErrNotLeader},
			want:       want{leading: false, err: true},
		},
		"workflow gone before its signal: released": {
			nodes: []gangway.NodeStatus{node("n0", 8, 0, gangway.NodeReady)},
			queue: []gangway.QueueEntry{entry("gone", 1, 8)},
			gone:  []string{"gone"},
			want: want{result: CycleResult{Placed: 1}, committed: []string{"gone"},
				released: []string{"gone/1"}, leading: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fc := &fakeCapacity{snap: capacity.Snapshot{Now: t0, Nodes: tc.nodes, Queue: tc.queue}, commitErrs: tc.commitErrs}
			fw := &fakeWorkflows{gone: map[string]bool{}}
			for _, g := range tc.gone {
				fw.gone[g] = true
			}
			l := New(Config{Holder: "me"}, fc, fw)
			l.leading = true
			res, err := l.Cycle(t.Context())
			got := want{result: res, signaled: fw.signaled, released: fc.released, leading: l.leading, err: err != nil}
			for _, plan := range fc.committed {
				for _, a := range plan {
					got.committed = append(got.committed, a.JobID)
				}
			}
			for id := range fc.reasons {
				got.reasons = append(got.reasons, id)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("cycle (-want +got):\n%s (err %v)", diff, err)
			}
		})
	}
}

// TestSignalRetried: a signal that fails is delivered on a later cycle, not
// dropped (the job's GPUs are committed; it must hear of them).
func TestSignalRetried(t *testing.T) {
	fc := &fakeCapacity{snap: capacity.Snapshot{Now: t0, Nodes: []gangway.NodeStatus{node("n0", 8, 0, gangway.NodeReady)},
		Queue: []gangway.QueueEntry{entry("j", 1, 1)}}}
	fw := &fakeWorkflows{flaky: map[string]int{"j": 1}}
	l := New(Config{Holder: "me"}, fc, fw)
	if _, err := l.Cycle(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(fw.signaled) != 0 {
		t.Fatalf("signaled %v on a failing signal", fw.signaled)
	}
	fc.snap.Queue = nil // committed: no longer queued
	if _, err := l.Cycle(t.Context()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"j/1"}, fw.signaled); diff != "" {
		t.Errorf("signals (-want +got):\n%s", diff)
	}
}

// TestTakeOverAndReconcile: a new leader re-signals every allocation (the
// old one may have died between commit and signal) and releases those whose
// workflow is gone.
func TestTakeOverAndReconcile(t *testing.T) {
	fc := &fakeCapacity{snap: capacity.Snapshot{Now: t0},
		allocs: []gangway.Assignment{{JobID: "alive", Attempt: 2}, {JobID: "dead", Attempt: 1}}}
	fw := &fakeWorkflows{running: map[string]bool{"alive": true}, gone: map[string]bool{"dead": true}}
	l := New(Config{Holder: "new"}, fc, fw)
	if err := l.Tick(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !l.leading {
		t.Fatal("did not take the free lease")
	}
	if diff := cmp.Diff([]string{"alive/2"}, fw.signaled); diff != "" {
		t.Errorf("re-signals (-want +got):\n%s", diff)
	}
	// "dead" is released by reconcile (not running) and again when its
	// re-signal finds it gone; Release is idempotent.
	for _, r := range fc.released {
		if r != "dead/1" {
			t.Errorf("released %s, want only dead/1", r)
		}
	}
	if len(fc.released) == 0 {
		t.Error("allocation of a gone workflow was not released")
	}
}

// TestOneLeader: two loops on one lease; only one leads, and the other takes
// over when the leader stops.
func TestOneLeader(t *testing.T) {
	fc := &fakeCapacity{snap: capacity.Snapshot{Now: t0}}
	a := New(Config{Holder: "a"}, fc, &fakeWorkflows{})
	b := New(Config{Holder: "b"}, fc, &fakeWorkflows{})
	ctxA, stopA := context.WithCancel(t.Context())
	if err := a.Tick(ctxA); err != nil {
		t.Fatal(err)
	}
	if err := b.Tick(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !a.leading || b.leading {
		t.Fatalf("leading a=%v b=%v, want only a", a.leading, b.leading)
	}
	stopA()
	_ = a.Run(ctxA) // returns at once and gives the lease up
	if err := b.Tick(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !b.leading {
		t.Error("b did not take over after a stopped")
	}
}

// preemptionScene is one node held whole by a preemptible low-priority job
// and a high-priority job queued that fits only if it stops, with a loop
// that may preempt.
func preemptionScene() (*fakeCapacity, *fakeWorkflows, *Loop) {
	n := node("n0", 8, 0, gangway.NodeReady, 0, 1, 2, 3, 4, 5, 6, 7)
	low := gangway.Assignment{JobID: "low", Attempt: 3, Team: "a", Priority: 0, Preemptible: true, MaxRuntime: time.Hour,
		At: t0.Add(-time.Hour), Members: []gangway.Member{{NodeID: "n0", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}}
	high := entry("high", 1, 8)
	high.Priority = 200
	fc := &fakeCapacity{snap: capacity.Snapshot{Now: t0, Nodes: []gangway.NodeStatus{n},
		Queue: []gangway.QueueEntry{high}, Allocations: []gangway.Assignment{low}}}
	fw := &fakeWorkflows{}
	return fc, fw, New(Config{Holder: "me", Placement: placement.Options{Preempt: true}}, fc, fw)
}

// TestPreemptionSignalsVictims: a high-priority job that fits only if a
// low-priority preemptible job stops gets it stopped (once), and waits.
func TestPreemptionSignalsVictims(t *testing.T) {
	fc, fw, l := preemptionScene()
	for range 2 {
		if _, err := l.Cycle(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"low/3: preempted for high (priority 200 > 0)"}
	if diff := cmp.Diff(want, fw.preempted); diff != "" {
		t.Errorf("preempt signals (-want +got):\n%s", diff)
	}
	if got := fc.reasons["high"]; got.Reason != string(placement.ReasonPreempting) || !got.Retry || got.Detail == "" {
		t.Errorf("the preemptor's waiting reason is %+v, want WaitingForPreemption with a detail, retrying", got)
	}
}

// TestStaleLeaderPreemptsNobody: a leader whose lease another server took
// while it planned (paused past its TTL, then resumed) sends no preemption
// signal from that plan, and steps down.
func TestStaleLeaderPreemptsNobody(t *testing.T) {
	fc, fw, l := preemptionScene()
	if err := l.Tick(t.Context()); err != nil || !l.leading {
		t.Fatalf("first turn: leading %v, %v", l.leading, err)
	}
	fw.preempted = nil
	l.preempted = map[gangway.JobID]time.Time{} // as if it had not asked yet
	fc.leaseOwner = "successor"                 // the lease expired while it was paused
	if _, err := l.Cycle(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(fw.preempted) != 0 {
		t.Errorf("a stale leader sent preemption signals %v", fw.preempted)
	}
	if l.leading {
		t.Error("the stale leader still thinks it leads")
	}
}

// TestCommittedAssignmentsAreComplete: what later cycles need about a
// running job travels with the assignment placement made and dispatch
// committed.
func TestCommittedAssignmentsAreComplete(t *testing.T) {
	e := entry("j", 1, 2)
	e.Team, e.Priority, e.MaxRuntime, e.Preemptible, e.CPUMilli, e.MemMiB = "nlp", 200, time.Hour, true, 4000, 8192
	fc := &fakeCapacity{snap: capacity.Snapshot{Now: t0, Nodes: []gangway.NodeStatus{node("n0", 8, 0, gangway.NodeReady)},
		Queue: []gangway.QueueEntry{e}}}
	l := New(Config{Holder: "me"}, fc, &fakeWorkflows{})
	if _, err := l.Cycle(t.Context()); err != nil {
		t.Fatal(err)
	}
	a := fc.committed[0][0]
	got := []any{a.Team, a.Priority, a.MaxRuntime, a.Preemptible, a.CPUMilli, a.MemMiB}
	if diff := cmp.Diff([]any{"nlp", 200, time.Hour, true, int64(4000), int64(8192)}, got); diff != "" {
		t.Errorf("committed assignment (-want +got):\n%s", diff)
	}
}

// TestWaiting: the view gets placement's reason typed, with whether it
// retries and the job's own reservation, not text.
func TestWaiting(t *testing.T) {
	rs := []placement.Reservation{{JobID: "other", Start: t0}, {JobID: "big", Start: t0.Add(time.Hour), Nodes: []string{"n0", "n1"}}}
	defrags := map[gangway.JobID]placement.DefragPlan{"wide": {Job: "wide", Dest: []gangway.Member{{NodeID: "n2"}},
		Moves: []placement.Move{{JobID: "a"}, {JobID: "b"}}, LostGPUSeconds: 30}}
	tests := map[string]struct {
		u    placement.Unplaced
		want gangway.Waiting
	}{
		"retries": {
			u:    placement.Unplaced{JobID: "j", Reason: placement.ReasonQuota, Detail: "team a uses 8 of 8 GPUs"},
			want: gangway.Waiting{Reason: "QuotaExceeded", Detail: "team a uses 8 of 8 GPUs", Retry: true},
		},
		"never fits": {
			u:    placement.Unplaced{JobID: "j", Reason: placement.ReasonNeverFits, Detail: "needs 16 GPUs on one node"},
			want: gangway.Waiting{Reason: "NeverFits", Detail: "needs 16 GPUs on one node"},
		},
		"own reservation": {
			u: placement.Unplaced{JobID: "big", Reason: placement.ReasonReservation, Detail: "GPUs reserved"},
			want: gangway.Waiting{Reason: "WaitingForReservation", Detail: "GPUs reserved", Retry: true,
				ReservationStart: t0.Add(time.Hour), ReservedNodes: []string{"n0", "n1"}},
		},
		"defragmentation": {
			u: placement.Unplaced{JobID: "wide", Reason: placement.ReasonDefragmenting, Detail: "moving 2 jobs"},
			want: gangway.Waiting{Reason: "WaitingForDefragmentation", Detail: "moving 2 jobs", Retry: true,
				ReservedNodes: []string{"n2"}, Moving: []gangway.JobID{"a", "b"}, MoveLostGPUSeconds: 30},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, waiting(tc.u, rs, defrags)); diff != "" {
				t.Errorf("waiting (-want +got):\n%s", diff)
			}
		})
	}
}
