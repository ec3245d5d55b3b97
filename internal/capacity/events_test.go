package capacity

import (
	"testing"
	"time"

	"github.com/gangwayhq/gangway"
)

// TestChangesAnnounceWhatMayStartAJob: enqueueing, releasing and node
// changes each wake a Changes reader; a heartbeat does not.
func TestChangesAnnounceWhatMayStartAJob(t *testing.T) {
	ctx := t.Context()
	v := newView(startRedis(t), Options{})
	changes := v.Changes(ctx)
	// The subscription is live once a PUBLISH reaches it; announce until one
	// does.
	for deadline := time.Now().Add(5 * time.Second); ; {
		v.announce(ctx, EventNode)
		select {
		case <-changes:
		case <-time.After(20 * time.Millisecond):
			if time.Now().Before(deadline) {
				continue
			}
			t.Fatal("no change arrived on a live subscription")
		}
		break
	}
	expect := func(what string, want bool) {
		t.Helper()
		select {
		case <-changes:
			if !want {
				t.Errorf("%s announced a change", what)
			}
		case <-time.After(500 * time.Millisecond):
			if want {
				t.Errorf("%s announced no change", what)
			}
		}
	}
	must(t, v.RegisterNode(ctx, node("n", 2)))
	expect("registering a node", true)
	must(t, v.Heartbeat(ctx, "n", nil))
	expect("a heartbeat", false)
	if _, err := v.Enqueue(ctx, entry("j", 1, 1, 1)); err != nil {
		t.Fatal(err)
	}
	expect("enqueueing a job", true)
	if ok, err := v.AcquireLease(ctx, leader, time.Minute); !ok || err != nil {
		t.Fatalf("lease: %v, %v", ok, err)
	}
	must(t, v.Commit(ctx, leader, []gangway.Assignment{assign("j", 1, member(0, "n", 0))}))
	if n, err := v.Release(ctx, "j", 1); err != nil || n != 1 {
		t.Fatalf("release: %d, %v", n, err)
	}
	expect("releasing GPUs", true)
	must(t, v.SetNodeState(ctx, "n", "cordoned"))
	expect("cordoning a node", true)
}
