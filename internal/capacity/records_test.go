package capacity

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/placement/forecast"
)

// TestSaveLearned: what the leader learned, and its defragmentations,
// read back as stored; only the lease's holder stores them, and a leader that lost the lease leaves the
// next one's in place; a view with nothing stored reads as the zero
// Learned, an undecodable record as an error.
func TestSaveLearned(t *testing.T) {
	rdb := startRedis(t)
	v := newView(rdb, Options{})
	ctx := t.Context()
	if l, err := v.Learned(ctx); err != nil || len(l.Workload) != 0 || l.ETA != nil {
		t.Fatalf("Learned of a new view = %+v, %v; want nothing", l, err)
	}
	l := Learned{Workload: []placement.WorkloadClass{
		{GPUs: 8, Milli: placement.Whole, CPUMilli: 32000, MemMiB: 1 << 18, Weight: 0.25},
		{GPUs: 1, Milli: 500, CPUMilli: 4000, MemMiB: 1 << 14, Models: []string{"A100", "H100"}, Weight: 0.75},
	}, Arrivals: 700.5, ETA: &forecast.State{
		Runtimes: []forecast.GroupState{{Level: 1, Key: "nlp", N: 3, Bins: map[int]float64{70: 2, 90: 1}}},
		Scores:   []forecast.ScoreState{{Priority: 100, Band: -1, Ratios: []float64{1.5, 0.9}}},
		Boost90:  map[int]float64{100: 0.3},
	}, At: t0}
	if err := v.SaveLearned(ctx, leader, l); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("SaveLearned without the lease = %v, want ErrNotLeader", err)
	}
	if ok, err := v.AcquireLease(ctx, leader, time.Minute); !ok || err != nil {
		t.Fatalf("AcquireLease = %v, %v", ok, err)
	}
	if err := v.SaveLearned(ctx, leader, l); err != nil {
		t.Fatal(err)
	}
	got, err := v.Learned(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(l, got); diff != "" {
		t.Errorf("Learned (-stored +read):\n%s", diff)
	}
	// The typical workload is read without the estimator's state.
	if w, err := v.TypicalWorkload(ctx); err != nil {
		t.Fatal(err)
	} else if diff := cmp.Diff(l.Workload, w); diff != "" {
		t.Errorf("TypicalWorkload (-stored +read):\n%s", diff)
	}
	if raw, err := rdb.Get(ctx, v.k.learned).Result(); err != nil || strings.Contains(raw, "runtimes") {
		t.Errorf("the workload's key holds %q, %v; want it without the estimator's state", raw, err)
	}
	stale := l
	stale.Arrivals = 1
	if err := v.SaveLearned(ctx, "dispatch-b", stale); !errors.Is(err, ErrNotLeader) {
		t.Errorf("SaveLearned by a server that does not hold the lease = %v, want ErrNotLeader", err)
	}
	if got, err := v.Learned(ctx); err != nil || got.Arrivals != l.Arrivals {
		t.Errorf("after a save by a non-leader Learned is %+v, %v; want the leader's", got, err)
	}
	d := Defrags{InFlight: []placement.DefragPlan{{Job: "wide", At: t0, Dest: []gangway.Member{{NodeID: "n1", GPUs: []int{0, 1}}},
		Moves: []placement.Move{{JobID: "small", Attempt: 2, GPUs: 0.5, From: "n1", To: []gangway.Member{{NodeID: "n2", GPUs: []int{3}, Milli: 500}},
			LostGPUSeconds: 40}}, LostGPUSeconds: 40}},
		Spent: []DefragSpend{{At: t0, Moves: 1, LostGPUSeconds: 40}}}
	if got, err := v.Defrags(ctx); err != nil || len(got.InFlight) != 0 {
		t.Fatalf("Defrags before any = %+v, %v; want none", got, err)
	}
	if err := v.SaveDefrags(ctx, "dispatch-b", d); !errors.Is(err, ErrNotLeader) {
		t.Errorf("SaveDefrags by a server that does not hold the lease = %v, want ErrNotLeader", err)
	}
	if err := v.SaveDefrags(ctx, leader, d); err != nil {
		t.Fatal(err)
	}
	if got, err := v.Defrags(ctx); err != nil {
		t.Fatal(err)
	} else if diff := cmp.Diff(d, got); diff != "" {
		t.Errorf("Defrags (-stored +read):\n%s", diff)
	}
	if err := rdb.Set(ctx, v.k.learned, "{", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Learned(ctx); err == nil {
		t.Error("Learned of an undecodable record: no error")
	}
}
