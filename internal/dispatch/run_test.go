package dispatch

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/capacity"
)

// countingCapacity counts snapshots and lease calls over fakeCapacity.
type countingCapacity struct {
	*fakeCapacity
	snapshots, leases atomic.Int64
}

func (c *countingCapacity) Snapshot(ctx context.Context) (capacity.Snapshot, error) {
	c.snapshots.Add(1)
	return c.fakeCapacity.Snapshot(ctx)
}

func (c *countingCapacity) AcquireLease(ctx context.Context, holder string, ttl time.Duration) (bool, error) {
	c.leases.Add(1)
	return c.fakeCapacity.AcquireLease(ctx, holder, ttl)
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// TestWakeStartsACycle: with an hour between ticks, a wake runs a cycle at
// once, and a burst of wakes runs a few cycles, not one each.
func TestWakeStartsACycle(t *testing.T) {
	c := &countingCapacity{fakeCapacity: &fakeCapacity{snap: capacity.Snapshot{Now: t0}}}
	wake := make(chan struct{}, 1)
	l := New(Config{Holder: "me", Interval: time.Hour, LeaseTTL: 3 * time.Hour, Wake: wake, MinGap: 50 * time.Millisecond}, c, &fakeWorkflows{})
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Run(ctx) }()
	defer func() { stop(); <-done }()

	waitFor(t, "the first cycle", func() bool { return c.snapshots.Load() == 1 })
	wake <- struct{}{}
	waitFor(t, "a woken cycle", func() bool { return c.snapshots.Load() == 2 })

	// 200 wakes over about 200 ms: rate-limited to one cycle per 50 ms.
	start := time.Now()
	for range 200 {
		select {
		case wake <- struct{}{}:
		default:
		}
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	time.Sleep(60 * time.Millisecond)
	cycles := c.snapshots.Load() - 2
	if max := int64(elapsed/(50*time.Millisecond)) + 2; cycles < 1 || cycles > max {
		t.Errorf("%d cycles for 200 wakes in %v; want 1 to %d (MinGap 50ms)", cycles, elapsed, max)
	}
}

// blockingWorkflows holds every placed signal until release is closed.
type blockingWorkflows struct {
	fakeWorkflows
	release  chan struct{}
	inFlight atomic.Int64
	peak     atomic.Int64
}

func (b *blockingWorkflows) SignalPlaced(ctx context.Context, a gangway.Assignment) error {
	n := b.inFlight.Add(1)
	for p := b.peak.Load(); n > p && !b.peak.CompareAndSwap(p, n); p = b.peak.Load() {
	}
	<-b.release
	b.inFlight.Add(-1)
	return b.fakeWorkflows.SignalPlaced(ctx, a)
}

// TestTakeOverSignalsInParallelAndKeepsTheLease: a new leader with many
// allocations to re-signal sends SignalParallelism signals at once, and
// renews its lease while the signals are slow, between its own turns.
func TestTakeOverSignalsInParallelAndKeepsTheLease(t *testing.T) {
	var allocs []gangway.Assignment
	for i := range 100 {
		allocs = append(allocs, gangway.Assignment{JobID: fmt.Sprintf("j%03d", i), Attempt: 1})
	}
	c := &countingCapacity{fakeCapacity: &fakeCapacity{snap: capacity.Snapshot{Now: t0}, allocs: allocs}}
	wf := &blockingWorkflows{release: make(chan struct{})}
	l := New(Config{Holder: "me", Interval: time.Hour, LeaseTTL: 30 * time.Millisecond, SignalParallelism: 8}, c, wf)
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Run(ctx) }()

	waitFor(t, "8 signals in flight", func() bool { return wf.inFlight.Load() == 8 })
	leasesBefore := c.leases.Load()
	time.Sleep(100 * time.Millisecond) // three lease TTLs with the turn blocked
	if renewals := c.leases.Load() - leasesBefore; renewals < 2 {
		t.Errorf("%d lease renewals while a turn was blocked for 3 TTLs; want at least 2", renewals)
	}
	close(wf.release)
	waitFor(t, "every allocation re-signalled", func() bool {
		wf.mu.Lock()
		defer wf.mu.Unlock()
		return len(wf.signaled) == len(allocs)
	})
	stop()
	<-done
	if p := wf.peak.Load(); p != 8 {
		t.Errorf("at most %d signals in flight, want 8 (SignalParallelism)", p)
	}
}
