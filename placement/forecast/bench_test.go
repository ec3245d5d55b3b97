package forecast_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/sim"
	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/placement/baselines"
	"github.com/gangwayhq/gangway/placement/forecast"
)

// BenchmarkForecast times one forecast — what the dispatch loop runs every
// few cycles — on the synthetic fleet and queue of `gangway replay
// scale`: 1,000 nodes of 8 GPUs, 90% busy, with 500 and 2,000 queued
// jobs, the server's engine options and a learned runtime model with
// history (two simulations: P50 and P90). It reports Place calls and
// milliseconds per forecast.
//
//	go test -run '^$' -bench BenchmarkForecast -benchtime 3x -cpu 1 ./placement/forecast/
func BenchmarkForecast(b *testing.B) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	for _, size := range []struct{ nodes, queue int }{{1000, 500}, {1000, 2000}} {
		b.Run(fmt.Sprintf("%dx8/%d", size.nodes, size.queue), func(b *testing.B) {
			snap := sim.FillFleet(sim.SyntheticFleet(sim.FleetSpec{Nodes: size.nodes, GPUsPerNode: 8}, 1), 0.9, now, 1)
			queue := sim.SyntheticQueue(size.queue, 8, now, 1)
			sc, err := baselines.ScorerByName(sim.GangwayPolicy)
			if err != nil {
				b.Fatal(err)
			}
			opts := placement.Options{Scorer: sc, Reservations: 4, Preempt: true, MinRuntime: 10 * time.Minute}
			h := forecast.NewHistory()
			// Runs took 10% to 100% of their limits.
			for k := range 200 {
				h.Observe(forecast.Job{ID: fmt.Sprintf("old-%d", k), Team: "t", MaxRuntime: 10 * time.Hour},
					time.Duration(1+k%10)*time.Hour)
			}
			in := forecast.Input{Snapshot: snap, Queue: queue, Options: opts}
			calls := 0
			b.ResetTimer()
			for range b.N {
				est, c := forecast.Forecast(in, h, forecast.Options{})
				calls += c
				beyond := 0
				var last time.Duration
				for _, e := range est {
					if e.Beyond {
						beyond++
					}
					last = max(last, e.P50.Sub(now))
				}
				b.ReportMetric(float64(beyond)/float64(len(est)), "beyond")
				b.ReportMetric(last.Hours(), "horizon-h")
			}
			b.ReportMetric(float64(calls)/float64(b.N), "place-calls/op")
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/forecast")
		})
	}
}

// BenchmarkPredicted times forecast.Predicted, which the dispatch loop
// runs every cycle a queued job may burst, on 10,000 nodes of 8 GPUs, 90%
// busy, with 2,000 queued jobs and a learned model with history.
//
//	go test -run '^$' -bench BenchmarkPredicted -benchtime 20x -cpu 1 ./placement/forecast/
func BenchmarkPredicted(b *testing.B) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	snap := sim.FillFleet(sim.SyntheticFleet(sim.FleetSpec{Nodes: 10000, GPUsPerNode: 8}, 1), 0.9, now, 1)
	queue := sim.SyntheticQueue(2000, 8, now, 1)
	h := forecast.NewHistory()
	for k := range 200 {
		h.Observe(forecast.Job{ID: fmt.Sprintf("old-%d", k), Team: "t", MaxRuntime: 10 * time.Hour},
			time.Duration(1+k%10)*time.Hour)
	}
	b.ResetTimer()
	for range b.N {
		forecast.Predicted(snap, queue, h, 0.5)
	}
	b.ReportMetric(float64(len(snap.Running)), "running")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
}

// BenchmarkBurstCycle times the dispatch cycle's Place when every queued
// job may burst, against the same cycle with no cloud to rent (nocloud),
// on BenchmarkPredicted's fleet and queue with its predictions: the cost
// of the burst decision (on-prem ETA, turnover to the jobs ahead, offer
// pricing) for each job left waiting.
//
//	go test -run '^$' -bench BenchmarkBurstCycle -benchtime 5x -cpu 1 ./placement/forecast/
func BenchmarkBurstCycle(b *testing.B) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	snap := sim.FillFleet(sim.SyntheticFleet(sim.FleetSpec{Nodes: 10000, GPUsPerNode: 8}, 1), 0.9, now, 1)
	queue := sim.SyntheticQueue(2000, 8, now, 1)
	for i := range queue {
		queue[i].Burst = gangway.Burst{Enabled: true}
	}
	h := forecast.NewHistory()
	for k := range 200 {
		h.Observe(forecast.Job{ID: fmt.Sprintf("old-%d", k), Team: "t", MaxRuntime: 10 * time.Hour},
			time.Duration(1+k%10)*time.Hour)
	}
	sc, err := baselines.ScorerByName(sim.GangwayPolicy)
	if err != nil {
		b.Fatal(err)
	}
	var offers []gangway.Offer
	for _, m := range []string{"H100", "A100", "L4", "GB200"} {
		offers = append(offers, gangway.Offer{Provider: "fake", Pool: "od-" + m, Zone: "z1", InstanceType: m + "-8",
			GPUModel: m, GPUsPerInstance: 8, CapacityType: gangway.CapacityOnDemand, PricePerHour: 32})
	}
	predicted := forecast.Predicted(snap, queue, h, 0.5)
	for _, bc := range []struct {
		name   string
		offers []gangway.Offer
	}{{"nocloud", nil}, {"burst", offers}} {
		b.Run(bc.name, func(b *testing.B) {
			opts := placement.Options{Scorer: sc, Reservations: 4, Preempt: true, MinRuntime: 10 * time.Minute,
				Offers: bc.offers, BurstAfter: 10 * time.Minute, Predicted: predicted}
			bursts := 0
			for b.Loop() {
				bursts = len(placement.Place(snap, queue, opts).Bursts)
			}
			b.ReportMetric(float64(bursts), "bursts")
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/cycle")
		})
	}
}
