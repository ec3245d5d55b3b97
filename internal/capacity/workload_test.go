package capacity

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway/placement"
)

// TestSaveWorkload: the typical workload reads back as stored; only the
// lease's holder stores one, and a leader that lost the lease leaves the
// next one's in place; a view with none reads as the zero Workload.
func TestSaveWorkload(t *testing.T) {
	rdb := startRedis(t)
	v := newView(rdb, Options{})
	ctx := t.Context()
	if w, err := v.Workload(ctx); err != nil || len(w.Classes) != 0 {
		t.Fatalf("Workload of a new view = %+v, %v; want none", w, err)
	}
	w := Workload{Classes: []placement.WorkloadClass{
		{GPUs: 8, Milli: placement.Whole, CPUMilli: 32000, MemMiB: 1 << 18, Weight: 0.25},
		{GPUs: 1, Milli: 500, CPUMilli: 4000, MemMiB: 1 << 14, Models: []string{"A100", "H100"}, Weight: 0.75},
	}, Arrivals: 700.5, At: t0}
	if err := v.SaveWorkload(ctx, leader, w); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("SaveWorkload without the lease = %v, want ErrNotLeader", err)
	}
	if ok, err := v.AcquireLease(ctx, leader, time.Minute); !ok || err != nil {
		t.Fatalf("AcquireLease = %v, %v", ok, err)
	}
	if err := v.SaveWorkload(ctx, leader, w); err != nil {
		t.Fatal(err)
	}
	got, err := v.Workload(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(w, got); diff != "" {
		t.Errorf("Workload (-stored +read):\n%s", diff)
	}
	stale := w
	stale.Arrivals = 1
	if err := v.SaveWorkload(ctx, "dispatch-b", stale); !errors.Is(err, ErrNotLeader) {
		t.Errorf("SaveWorkload by a server that does not hold the lease = %v, want ErrNotLeader", err)
	}
	if got, err := v.Workload(ctx); err != nil || got.Arrivals != w.Arrivals {
		t.Errorf("after a save by a non-leader the workload is %+v, %v; want the leader's", got, err)
	}
	if err := rdb.Set(ctx, v.k.workload, "{", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Workload(ctx); err == nil {
		t.Error("Workload of an undecodable record: no error")
	}
}
