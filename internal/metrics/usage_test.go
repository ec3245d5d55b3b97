package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gangwayhq/gangway"
)

func TestUsageSegment(t *testing.T) {
	reg := prometheus.NewRegistry()
	u := NewUsage(reg)
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	seg := func(team, pool string, capacity gangway.CapacityType, gpus int, d time.Duration, price float64) gangway.UsageSegment {
		return gangway.UsageSegment{JobID: "j", Team: team, Project: "llm", Pool: pool, CapacityType: capacity,
			GPUs: gpus, Start: t0, End: t0.Add(d), PricePerGPUHour: price}
	}
	u.Segment(seg("ml", "onprem", "on-prem", 8, time.Hour, 2))         // 28800 s, $16
	u.Segment(seg("ml", "onprem", "on-prem", 2, 30*time.Minute, 2))    // 3600 s, $2
	u.Segment(seg("ml", "aws-spot", "spot", 4, 15*time.Minute, 1.5))   // 3600 s, $1.5
	u.Segment(seg("vision", "aws-od", "on-demand", 1, 2*time.Hour, 4)) // 7200 s, $8
	half := seg("inference", "onprem", "on-prem", 1, time.Hour, 2)
	half.GPUMilli = 500
	u.Segment(half)                                                   // a half-GPU share: 1800 s, $1
	u.Segment(seg("vision", "aws-od", "on-demand", 1, -time.Hour, 4)) // ignored
	u.Segment(seg("vision", "aws-od", "on-demand", 1, time.Hour, -4)) // ignored

	want := `
# HELP gangway_cost_dollars_total What finished run segments cost, by team, pool and capacity type.
# TYPE gangway_cost_dollars_total counter
gangway_cost_dollars_total{capacity_type="on-demand",pool="aws-od",team="vision"} 8
gangway_cost_dollars_total{capacity_type="on-prem",pool="onprem",team="inference"} 1
gangway_cost_dollars_total{capacity_type="on-prem",pool="onprem",team="ml"} 18
gangway_cost_dollars_total{capacity_type="spot",pool="aws-spot",team="ml"} 1.5
# HELP gangway_gpu_seconds_total GPU time of finished run segments, each GPU at its share (a half-GPU share counts half), by team, pool and capacity type.
# TYPE gangway_gpu_seconds_total counter
gangway_gpu_seconds_total{capacity_type="on-demand",pool="aws-od",team="vision"} 7200
gangway_gpu_seconds_total{capacity_type="on-prem",pool="onprem",team="inference"} 1800
gangway_gpu_seconds_total{capacity_type="on-prem",pool="onprem",team="ml"} 32400
gangway_gpu_seconds_total{capacity_type="spot",pool="aws-spot",team="ml"} 3600
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "gangway_gpu_seconds_total", "gangway_cost_dollars_total"); err != nil {
		t.Error(err)
	}
}

func TestUsageAlongsideMetrics(t *testing.T) {
	// Both sets register on one registry without clashing.
	reg := prometheus.NewRegistry()
	New(reg)
	NewUsage(reg)
}
