package capacity

import (
	"context"
	"errors"
	"testing"

	"github.com/gangwayhq/gangway"
)

// TestBurst: a burst takes the job out of the queue under the lease; a
// retried plain enqueue cannot bring it back, the pinned enqueue replaces
// the record, and a dequeue forgets it.
func TestBurst(t *testing.T) {
	rdb := startRedis(t)
	ctx := context.Background()
	v := world(t, rdb, []gangway.Node{node("n1", 4)}, entry("a", 1, 1, 1), entry("b", 1, 1, 1))
	req := []byte(`{"attempt":1,"offers":[]}`)

	if err := v.StartBurst(ctx, "someone-else", "a", 1, req); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("burst without the lease: %v, want ErrNotLeader", err)
	}
	if err := v.StartBurst(ctx, leader, "a", 2, req); !errors.Is(err, ErrStale) {
		t.Fatalf("burst of another attempt: %v, want ErrStale", err)
	}
	must(t, v.StartBurst(ctx, leader, "a", 1, req))
	queue := func() []gangway.JobID {
		q, err := v.Queue(ctx)
		must(t, err)
		var ids []gangway.JobID
		for _, e := range q {
			ids = append(ids, e.JobID)
		}
		return ids
	}
	if got := queue(); len(got) != 1 || got[0] != "b" {
		t.Fatalf("queue after burst = %v, want [b]", got)
	}
	bursts, err := v.Bursts(ctx)
	must(t, err)
	if string(bursts["a"]) != string(req) {
		t.Fatalf("burst record = %q, want %q", bursts["a"], req)
	}
	// A retried plain enqueue of attempt 1 is ignored.
	if ok, err := v.Enqueue(ctx, entry("a", 1, 1, 1)); err != nil || ok {
		t.Fatalf("retried enqueue: %v %v, want ignored", ok, err)
	}
	// The pinned enqueue goes in and replaces the record.
	pinned := entry("a", 1, 1, 1)
	pinned.Nodes = []string{"i-1"}
	if ok, err := v.Enqueue(ctx, pinned); err != nil || !ok {
		t.Fatalf("pinned enqueue: %v %v, want queued", ok, err)
	}
	bursts, err = v.Bursts(ctx)
	must(t, err)
	if len(bursts) != 0 {
		t.Fatalf("burst records after the pinned enqueue: %v, want none", bursts)
	}
	// A dequeue forgets a burst too.
	must(t, v.StartBurst(ctx, leader, "b", 1, req))
	must(t, v.Dequeue(ctx, "b"))
	bursts, err = v.Bursts(ctx)
	must(t, err)
	if len(bursts) != 0 {
		t.Fatalf("burst records after dequeue: %v, want none", bursts)
	}
}
