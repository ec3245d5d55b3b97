package spotpolicy_test

import (
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/spotpolicy"
)

func TestExpectedCost(t *testing.T) {
	// 8-GPU instances at $3 (on-demand) and $1 (spot) per GPU-hour; the
	// job is one replica that uses all eight.
	onDemand := gangway.Offer{CapacityType: gangway.CapacityOnDemand, GPUsPerInstance: 8, PricePerHour: 24}
	spot := func(rate float64) gangway.Offer {
		return gangway.Offer{CapacityType: gangway.CapacitySpot, GPUsPerInstance: 8, PricePerHour: 8, InterruptionRate: rate}
	}
	tenHours := spotpolicy.Work{Replicas: 1, GPUsPerReplica: 8, Remaining: 10 * time.Hour, RestartOverhead: 6 * time.Minute}
	with := func(f func(*spotpolicy.Work)) spotpolicy.Work {
		w := tenHours
		f(&w)
		return w
	}
	tests := map[string]struct {
		offer     gangway.Offer
		work      spotpolicy.Work
		wantHours float64
		wantCost  float64
	}{
		"on-demand: price x GPUs x hours": {
			offer: onDemand, work: tenHours, wantHours: 10, wantCost: 3 * 8 * 10,
		},
		"spot that is never interrupted costs the same hours": {
			offer: spot(0), work: tenHours, wantHours: 10, wantCost: 80,
		},
		"not checkpointable: restart from scratch, (e^{λT}-1)(1/λ+O)": {
			offer: spot(0.1), work: tenHours,
			wantHours: math.Expm1(1) * (10 + 0.1), wantCost: 8 * math.Expm1(1) * 10.1,
		},
		"checkpoint on notice only: each interruption costs the overhead": {
			offer: spot(0.1), work: with(func(w *spotpolicy.Work) { w.Checkpointable = true }),
			wantHours: 10 * (1 + 0.1*0.1), wantCost: 8 * 10.1,
		},
		"checkpoint every hour: ten one-hour stretches that restart": {
			offer: spot(0.1), work: with(func(w *spotpolicy.Work) { w.Checkpointable, w.CheckpointInterval = true, time.Hour }),
			wantHours: 10 * math.Expm1(0.1) / 0.1 * 1.01, wantCost: 8 * 10 * math.Expm1(0.1) / 0.1 * 1.01,
		},
		"an interval longer than the work saves nothing": {
			offer: spot(0.1), work: with(func(w *spotpolicy.Work) { w.Checkpointable, w.CheckpointInterval = true, 20*time.Hour }),
			wantHours: math.Expm1(1) * 10.1, wantCost: 8 * math.Expm1(1) * 10.1,
		},
		"no overhead given: the default five minutes": {
			offer: spot(0.1), work: with(func(w *spotpolicy.Work) { w.Checkpointable, w.RestartOverhead = true, 0 }),
			wantHours: 10 * (1 + 0.1/12), wantCost: 80 * (1 + 0.1/12),
		},
		"no GPUs cost nothing": {
			offer: spot(0.1), work: with(func(w *spotpolicy.Work) { w.Replicas = 0 }),
			wantHours: math.Expm1(1) * 10.1, wantCost: 0,
		},
		"a replica pays for the GPUs of its instance it leaves idle": {
			offer: onDemand, work: with(func(w *spotpolicy.Work) { w.Replicas, w.GPUsPerReplica = 2, 2 }),
			wantHours: 10, wantCost: 2 * 24 * 10,
		},
		"no work left": {
			offer: spot(0.1), work: with(func(w *spotpolicy.Work) { w.Remaining = 0 }),
		},
		"a job that cannot expect to finish": {
			offer: spot(100), work: tenHours,
			wantHours: math.Inf(1), wantCost: math.Inf(1),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			gotDur := spotpolicy.ExpectedDuration(tc.offer, tc.work)
			if math.IsInf(tc.wantHours, 1) {
				if gotDur != time.Duration(math.MaxInt64) {
					t.Errorf("ExpectedDuration = %v, want it saturated at the largest duration", gotDur)
				}
			} else if !near(gotDur.Hours(), tc.wantHours) {
				t.Errorf("ExpectedDuration = %.6fh, want %.6fh", gotDur.Hours(), tc.wantHours)
			}
			if got := spotpolicy.ExpectedCost(tc.offer, tc.work); !near(got, tc.wantCost) {
				t.Errorf("ExpectedCost = %.6f, want %.6f", got, tc.wantCost)
			}
		})
	}
}

func near(got, want float64) bool {
	if math.IsInf(want, 0) || want == 0 {
		return got == want
	}
	return math.Abs(got-want) <= 1e-9*math.Abs(want)
}

// genCostCase draws an offer and a job's work.
func genCostCase(t *rapid.T) (gangway.Offer, spotpolicy.Work) {
	gpus := rapid.IntRange(1, 8).Draw(t, "gpus per instance")
	o := gangway.Offer{
		CapacityType:     rapid.SampledFrom([]gangway.CapacityType{gangway.CapacitySpot, gangway.CapacityOnDemand}).Draw(t, "type"),
		GPUsPerInstance:  gpus,
		PricePerHour:     rapid.Float64Range(0.01, 40*float64(gpus)).Draw(t, "price"),
		InterruptionRate: rapid.Float64Range(0, 2).Draw(t, "rate"),
	}
	w := spotpolicy.Work{
		Replicas:           rapid.IntRange(1, 8).Draw(t, "replicas"),
		GPUsPerReplica:     rapid.IntRange(1, gpus).Draw(t, "gpus per replica"),
		Remaining:          time.Duration(rapid.Int64Range(int64(time.Minute), int64(72*time.Hour)).Draw(t, "remaining")),
		Checkpointable:     rapid.Bool().Draw(t, "checkpointable"),
		CheckpointInterval: time.Duration(rapid.Int64Range(0, int64(4*time.Hour)).Draw(t, "interval")),
		RestartOverhead:    time.Duration(rapid.Int64Range(int64(time.Minute), int64(time.Hour)).Draw(t, "overhead")),
	}
	return o, w
}

func TestExpectedCostProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		o, w := genCostCase(t)
		cost := spotpolicy.ExpectedCost(o, w)
		dur := spotpolicy.ExpectedDuration(o, w)
		if dur < w.Remaining {
			t.Fatalf("expected duration %v is less than the work left %v", dur, w.Remaining)
		}
		more := func(name string, other float64) {
			if other < cost*(1-1e-12) { // rounding aside
				t.Fatalf("%s: cost fell from %g to %g", name, cost, other)
			}
		}

		o2 := o
		o2.PricePerHour *= 1 + rapid.Float64Range(0, 1).Draw(t, "dearer")
		more("a higher price", spotpolicy.ExpectedCost(o2, w))
		o2 = o
		o2.InterruptionRate += rapid.Float64Range(0, 1).Draw(t, "more interruptions")
		more("a higher interruption rate", spotpolicy.ExpectedCost(o2, w))
		w2 := w
		w2.Remaining += time.Duration(rapid.Int64Range(0, int64(24*time.Hour)).Draw(t, "more work"))
		more("more work", spotpolicy.ExpectedCost(o, w2))
		w2 = w
		w2.RestartOverhead += time.Duration(rapid.Int64Range(0, int64(time.Hour)).Draw(t, "slower restarts"))
		more("a longer restart", spotpolicy.ExpectedCost(o, w2))
		w2 = w
		w2.CheckpointInterval += time.Duration(rapid.Int64Range(0, int64(time.Hour)).Draw(t, "rarer checkpoints"))
		more("rarer checkpoints", spotpolicy.ExpectedCost(o, w2))
		w2 = w
		w2.Checkpointable = false
		more("no checkpoints", spotpolicy.ExpectedCost(o, w2))

		o2 = o
		o2.InterruptionRate = 0
		if got, want := spotpolicy.ExpectedCost(o2, w), o.PricePerHour*float64(w.Replicas)*w.Remaining.Hours(); !near(got, want) {
			t.Fatalf("without interruptions: cost %g, want the instances' price x hours = %g", got, want)
		}
		if got := spotpolicy.ExpectedDuration(o2, w); got != w.Remaining {
			t.Fatalf("without interruptions: duration %v, want the work left %v", got, w.Remaining)
		}
	})
}
