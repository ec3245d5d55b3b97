package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const namespace = "gangway"

// Metrics is the set of Gangway's collectors.
type Metrics struct {
	queueDepth    *prometheus.GaugeVec
	queueWait     prometheus.Histogram
	cycleDuration *prometheus.HistogramVec
	commits       *prometheus.CounterVec
	gpus          *prometheus.GaugeVec
	unplaced      *prometheus.GaugeVec
	isLeader      prometheus.Gauge
	fragRate      prometheus.Gauge
	largestFree   *prometheus.GaugeVec
}

// New creates the collectors and registers them on reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		queueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "queue_depth_jobs",
			Help: "Jobs waiting in the queue, by priority class.",
		}, []string{"priority_class"}),
		queueWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "queue_wait_seconds",
			Help:    "Time from enqueue to placement commit.",
			Buckets: prometheus.ExponentialBuckets(0.1, 2, 18), // 0.1 s … ~3.6 h
		}),
		cycleDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "dispatch_cycle_duration_seconds",
			Help:    "Duration of one dispatch cycle (snapshot, place, commit, signal), by result.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"result"}),
		commits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "dispatch_commits_total",
			Help: "Plan commits by result (committed, stale, not_leader, error).",
		}, []string{"result"}),
		gpus: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "gpus",
			Help: "GPUs by pool and state (allocated, free, unavailable).",
		}, []string{"pool", "state"}),
		unplaced: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "unplaced_jobs",
			Help: "Jobs the last dispatch cycle left waiting, by reason.",
		}, []string{"reason"}),
		isLeader: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "dispatch_leader",
			Help: "1 while this server holds the dispatch lease.",
		}),
	}
	m.fragRate = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "fragmentation_ratio",
		Help: "Share of free GPU capacity the pending job mix cannot use (FGD's measure).",
	})
	m.largestFree = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "largest_free_block_gpus",
		Help: "Most entirely free GPUs within one group, by topology level (nvlink, node, rack, block).",
	}, []string{"level"})
	reg.MustRegister(m.fragRate, m.largestFree)
	reg.MustRegister(m.queueDepth, m.queueWait, m.cycleDuration, m.commits, m.gpus, m.unplaced, m.isLeader)
	return m
}

// Cycle results.
const (
	ResultCommitted = "committed"
	ResultIdle      = "idle"
	ResultStale     = "stale"
	ResultNotLeader = "not_leader"
	ResultError     = "error"
)

// CycleDone records one dispatch cycle.
func (m *Metrics) CycleDone(result string, d time.Duration) {
	m.cycleDuration.WithLabelValues(result).Observe(d.Seconds())
	if result != ResultIdle {
		m.commits.WithLabelValues(result).Inc()
	}
}

// JobPlaced records how long a job waited in the queue.
func (m *Metrics) JobPlaced(wait time.Duration) { m.queueWait.Observe(wait.Seconds()) }

// Leader records whether this server leads dispatch.
func (m *Metrics) Leader(leading bool) {
	if leading {
		m.isLeader.Set(1)
	} else {
		m.isLeader.Set(0)
	}
}

// GPUState counts for one pool.
type GPUState struct{ Allocated, Free, Unavailable int }

// Fleet replaces the GPU gauges and the queue depth with the current view.
func (m *Metrics) Fleet(pools map[string]GPUState, queueByClass map[string]int) {
	m.gpus.Reset()
	for pool, s := range pools {
		m.gpus.WithLabelValues(pool, "allocated").Set(float64(s.Allocated))
		m.gpus.WithLabelValues(pool, "free").Set(float64(s.Free))
		m.gpus.WithLabelValues(pool, "unavailable").Set(float64(s.Unavailable))
	}
	m.queueDepth.Reset()
	for class, n := range queueByClass {
		m.queueDepth.WithLabelValues(class).Set(float64(n))
	}
}

// Fragmentation records the fragmentation rate and the largest free block
// per topology level.
func (m *Metrics) Fragmentation(rate float64, largest map[string]int) {
	m.fragRate.Set(rate)
	for level, n := range largest {
		m.largestFree.WithLabelValues(level).Set(float64(n))
	}
}

// Unplaced replaces the per-reason counts of waiting jobs.
func (m *Metrics) Unplaced(byReason map[string]int) {
	m.unplaced.Reset()
	for r, n := range byReason {
		m.unplaced.WithLabelValues(r).Set(float64(n))
	}
}
