package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gangwayhq/gangway"
)

// Usage is the usage and cost collector set: GPU time and dollars billed,
// by team, pool and capacity type (on-prem, spot, on-demand). The project
// is free text from the job spec, so it is no label (every value would be
// a new series); the ledger keeps usage per project.
// Counters only grow when the ledger records a segment for the first time,
// so rate() over them is spend per second.
type Usage struct {
	gpuSeconds *prometheus.CounterVec
	dollars    *prometheus.CounterVec
}

var usageLabels = []string{"team", "pool", "capacity_type"}

// NewUsage creates the usage collectors and registers them on reg.
func NewUsage(reg prometheus.Registerer) *Usage {
	u := &Usage{
		gpuSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "gpu_seconds_total",
			Help: "GPU time of finished run segments, each GPU at its share (a half-GPU share counts half), by team, pool and capacity type.",
		}, usageLabels),
		dollars: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "cost_dollars_total",
			Help: "What finished run segments cost, by team, pool and capacity type.",
		}, usageLabels),
	}
	reg.MustRegister(u.gpuSeconds, u.dollars)
	return u
}

// Segment adds one newly recorded segment. A segment with negative time or
// price (which the ledger refuses) is ignored: counters never go down.
func (u *Usage) Segment(seg gangway.UsageSegment) {
	sec, usd := seg.GPUSeconds(), seg.Dollars()
	if !(sec >= 0) || !(usd >= 0) {
		return
	}
	labels := prometheus.Labels{"team": seg.Team, "pool": seg.Pool, "capacity_type": string(seg.CapacityType)}
	u.gpuSeconds.With(labels).Add(sec)
	u.dollars.With(labels).Add(usd)
}
