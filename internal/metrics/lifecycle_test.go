package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gangwayhq/gangway"
)

func TestLifecycle(t *testing.T) {
	reg := prometheus.NewRegistry()
	l := NewLifecycle(reg, "completed", "notice", "failed")
	l.Pools(map[string]gangway.CapacityType{"onprem": gangway.CapacityOnPrem})
	l.RunEnded("notice", "nlp", "aws-spot", "spot", 16, 2*time.Second)
	l.RunEnded("completed", "nlp", "onprem", "on-prem", 0, 0)
	l.Recovered("notice", 30*time.Second)
	want := `
# HELP gangway_lost_gpu_seconds_total GPU time whose work was redone: since the last checkpoint of runs that ended without saving, by cause, team and pool.
# TYPE gangway_lost_gpu_seconds_total counter
gangway_lost_gpu_seconds_total{cause="notice",pool="aws-spot",team="nlp"} 16
# HELP gangway_runs_ended_total Runs (attempts) ended, by cause (completed, failed, cancelled, preempted, notice, drain, fault, node-lost, idle, infra, timeout, no-capacity), pool and capacity type.
# TYPE gangway_runs_ended_total counter
gangway_runs_ended_total{capacity_type="on-prem",cause="completed",pool="onprem"} 1
gangway_runs_ended_total{capacity_type="on-prem",cause="failed",pool="onprem"} 0
gangway_runs_ended_total{capacity_type="on-prem",cause="notice",pool="onprem"} 0
gangway_runs_ended_total{capacity_type="spot",cause="notice",pool="aws-spot"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "gangway_lost_gpu_seconds_total", "gangway_runs_ended_total"); err != nil {
		t.Error(err)
	}
	// Every cause has its stop and recovery histograms from the start.
	if n := testutil.CollectAndCount(l.stop); n != 3 {
		t.Errorf("%d stop histograms, want 3", n)
	}
	if n := testutil.CollectAndCount(l.recovery); n != 3 {
		t.Errorf("%d recovery histograms, want 3", n)
	}
	var nilL *Lifecycle
	nilL.Pools(map[string]gangway.CapacityType{"x": gangway.CapacitySpot}) // no panic
}

func TestCheckpoints(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := NewCheckpoints(reg)
	c.Transfer("save", true, 1<<30, 4*time.Second, false)
	c.Transfer("save", false, 1<<10, 10*time.Millisecond, false)
	c.Transfer("restore", false, 0, 0, true)
	if n := testutil.CollectAndCount(c.duration); n != 2 {
		t.Errorf("%d duration series, want 2 (final and periodic saves)", n)
	}
	if v := testutil.ToFloat64(c.failures.WithLabelValues("restore", "periodic")); v != 1 {
		t.Errorf("restore failures %v, want 1", v)
	}
}
