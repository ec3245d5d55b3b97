package dispatch_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/internal/dispatch"
	"github.com/gangwayhq/gangway/internal/dispatch/dispatchtest"
	"github.com/gangwayhq/gangway/workflows"
)

// TestETAStoredWithTheReason: a job that waits for a running one gets,
// beside its reason, an estimate of when it starts — when the running job
// is expected to end, from its estimated runtime, with a P90 twice as far
// off before there are starts to calibrate on — and that job as the one it
// waits for; a job that never fits gets no estimate.
func TestETAStoredWithTheReason(t *testing.T) {
	t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	clock := dispatchtest.NewClock(t0)
	c, w := dispatchtest.NewCapacity(clock), dispatchtest.NewWorkflows()
	c.RegisterNode(agent.FakeNode("n1", "onprem", "127.0.0.1", 8, "H100"))
	loop := dispatch.New(dispatch.Config{Holder: "h", Clock: clock, SignalParallelism: 1}, c, w)
	entry := func(id string, gpus int, runtime time.Duration) gangway.QueueEntry {
		return gangway.QueueEntry{JobID: id, Team: "nlp", Replicas: 1, GPUsPerReplica: gpus, Attempt: 1,
			MaxRuntime: 4 * time.Hour, Runtime: runtime, SubmittedAt: clock.Now(), EnqueuedAt: clock.Now()}
	}
	for _, id := range []string{"first", "second", "huge"} {
		w.Start(id)
	}
	c.Enqueue(entry("first", 8, 30*time.Minute))
	if err := loop.Tick(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, s := range w.TakeSignals() {
		if s.Name != workflows.SignalPlaced || s.JobID != "first" {
			t.Fatalf("signal %+v, want first placed", s)
		}
	}
	clock.Set(t0.Add(10 * time.Minute))
	c.Heartbeat()
	c.Enqueue(entry("second", 8, time.Hour))
	c.Enqueue(entry("huge", 16, time.Hour))
	if err := loop.Tick(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := c.Reasons()
	got := r["second"]
	if got.ETA == nil {
		t.Fatalf("second waits %+v with no estimate", got)
	}
	// 20 minutes to wait, plus the minute of slack, twice, less the slack.
	want := &gangway.ETA{P50: t0.Add(30 * time.Minute), P90: t0.Add(51 * time.Minute), At: t0.Add(10 * time.Minute)}
	if diff := cmp.Diff(want, got.ETA); diff != "" {
		t.Errorf("second's estimate (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]gangway.JobID{"first"}, got.WaitsFor); diff != "" {
		t.Errorf("second waits for (-want +got):\n%s", diff)
	}
	if h := r["huge"]; h.Retry || h.ETA != nil {
		t.Errorf("huge: %+v, want a reason that never fits, with no estimate", h)
	}
}

// wall is the real time, for a loop that runs as a server's does.
type wall struct{}

func (wall) Now() time.Time { return time.Now() }

// TestETAInTheBackground: on the wall clock the forecast runs beside the
// cycles, and a later cycle stores its estimate with the reason.
func TestETAInTheBackground(t *testing.T) {
	c, w := dispatchtest.NewCapacity(wall{}), dispatchtest.NewWorkflows()
	c.RegisterNode(agent.FakeNode("n1", "onprem", "127.0.0.1", 8, "H100"))
	loop := dispatch.New(dispatch.Config{Holder: "h", SignalParallelism: 1}, c, w)
	now := time.Now()
	entry := func(id string) gangway.QueueEntry {
		return gangway.QueueEntry{JobID: id, Team: "nlp", Replicas: 1, GPUsPerReplica: 8, Attempt: 1,
			MaxRuntime: 4 * time.Hour, Runtime: time.Hour, SubmittedAt: now, EnqueuedAt: now}
	}
	for _, id := range []string{"first", "second"} {
		w.Start(id)
		c.Enqueue(entry(id))
	}
	cycles := 0
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); cycles++ {
		if err := loop.Tick(t.Context()); err != nil {
			t.Fatal(err)
		}
		if eta := c.Reasons()["second"].ETA; eta != nil {
			if eta.P50.Before(now) {
				t.Errorf("second's estimate %+v is before it was queued (%v)", eta, now)
			}
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no estimate stored for second after %d cycles: %+v", cycles, c.Reasons()["second"])
}
