package capacity

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
)

// TestRecordCheckpoint: the newest checkpoint the running attempt saved
// becomes its allocation's LastCheckpoint in the snapshot; an older save,
// or a save of another attempt, changes nothing; the record goes with the
// allocation's release. Real redis-server.
func TestRecordCheckpoint(t *testing.T) {
	rdb := startRedis(t)
	ctx := t.Context()
	v := world(t, rdb, []gangway.Node{node("n1", 4)}, entry("a", 2, 1, 2), entry("b", 1, 1, 2))
	must(t, v.Commit(ctx, leader, []gangway.Assignment{assign("a", 2, member(0, "n1", 0, 1)), assign("b", 1, member(0, "n1", 2, 3))}))
	last := func() map[gangway.JobID]time.Time {
		t.Helper()
		s, err := v.Snapshot(ctx)
		must(t, err)
		out := map[gangway.JobID]time.Time{}
		for _, a := range s.Allocations {
			out[a.JobID] = a.LastCheckpoint
		}
		return out
	}
	at := t0.Add(10 * time.Minute)
	steps := []struct {
		name    string
		job     gangway.JobID
		attempt int
		at      time.Time
		want    map[gangway.JobID]time.Time
	}{
		{"a saves", "a", 2, at, map[gangway.JobID]time.Time{"a": at, "b": {}}},
		{"an older save of a", "a", 2, at.Add(-time.Minute), map[gangway.JobID]time.Time{"a": at, "b": {}}},
		{"a save of a's previous attempt", "a", 1, at.Add(time.Minute), map[gangway.JobID]time.Time{"a": at, "b": {}}},
		{"a saves again", "a", 2, at.Add(2 * time.Minute), map[gangway.JobID]time.Time{"a": at.Add(2 * time.Minute), "b": {}}},
		{"a save of b's next attempt", "b", 2, at, map[gangway.JobID]time.Time{"a": at.Add(2 * time.Minute), "b": {}}},
	}
	for _, s := range steps {
		must(t, v.RecordCheckpoint(ctx, s.job, s.attempt, s.at))
		if d := cmp.Diff(s.want, last()); d != "" {
			t.Errorf("%s: LastCheckpoint (-want +got):\n%s", s.name, d)
		}
	}
	if _, err := v.Release(ctx, "a", 2); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.HLen(ctx, v.k.checkpoints).Result(); err != nil || n != 1 {
		t.Errorf("checkpoint records after a's release: %d (%v), want b's only", n, err)
	}
}
