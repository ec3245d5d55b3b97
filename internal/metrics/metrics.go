package metrics

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gangwayhq/gangway"
)

const namespace = "gangway"

// cycleBuckets bound the dispatch cycle histogram: 0.5 ms doubling to
// 64 ms, then steps of 25–50 ms up to half a second, where the 200 ms
// target of a cycle at 10,000 nodes lies (gangway bench reads its p99 from
// them), then doubling again to 16 s.
var cycleBuckets = []float64{0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064,
	0.08, 0.1, 0.125, 0.15, 0.175, 0.2, 0.25, 0.3, 0.4, 0.5, 1, 2, 4, 8, 16}

// Metrics is the set of Gangway's collectors.
type Metrics struct {
	queueDepth    *prometheus.GaugeVec
	queueWait     *prometheus.HistogramVec
	cycleDuration *prometheus.HistogramVec
	commits       *prometheus.CounterVec
	gpus          *prometheus.GaugeVec
	unplaced      *prometheus.GaugeVec
	isLeader      prometheus.Gauge
	viewRebuilds  prometheus.Counter
	fragRate      prometheus.Gauge
	largestFree   *prometheus.GaugeVec
	teamGPUs      *prometheus.GaugeVec
	nodes         *prometheus.GaugeVec
	budget        *prometheus.GaugeVec
	spend         *prometheus.GaugeVec
	defragMoves   prometheus.Counter
	defragLost    prometheus.Counter
	reasons       []string
}

// PriorityClasses are the priority classes a job spec accepts; their
// series exist from the start.
var PriorityClasses = []string{gangway.PriorityHigh, gangway.PriorityNormal, gangway.PriorityLow}

// Node states of gangway_nodes. NodeStale is a node the view still calls
// ready whose heartbeat is older than the dispatch loop's node TTL: it is
// lost as far as placement is concerned.
const NodeStale = "stale"

// NodeStates are the values of gangway_nodes' state label.
var NodeStates = []string{gangway.NodeReady, gangway.NodeCordoned, gangway.NodeLost, NodeStale}

// New creates the collectors and registers them on reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		queueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "queue_depth_jobs",
			Help: "Jobs waiting in the queue, by priority class.",
		}, []string{"priority_class"}),
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "queue_wait_seconds",
			Help:    "Time from enqueue to placement commit, by team and priority class.",
			Buckets: prometheus.ExponentialBuckets(0.1, 2, 18), // 0.1 s … ~3.6 h
		}, []string{"team", "priority_class"}),
		cycleDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "dispatch_cycle_duration_seconds",
			Help:    "Duration of one dispatch cycle (snapshot, place, commit, signal), by result.",
			Buckets: cycleBuckets,
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
		viewRebuilds: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "view_rebuilds_total",
			Help: "Rebuilds of the Redis view this server led (a new, flushed or replaced view, or one that went back in time).",
		}),
	}
	m.fragRate = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "fragmentation_ratio",
		Help: "Share of free GPU capacity the typical job mix (the arrivals') cannot use (FGD's measure).",
	})
	m.largestFree = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "largest_free_block_gpus",
		Help: "Most entirely free GPUs within one group, by topology level (nvlink, node, rack, block).",
	}, []string{"level"})
	m.teamGPUs = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "gpus_allocated",
		Help: "GPUs held by running jobs, by pool and team (a shared GPU counts by its share).",
	}, []string{"pool", "team"})
	m.nodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "nodes",
		Help: "Registered nodes by pool and state (ready, cordoned, lost, stale: ready but its heartbeat is older than the node TTL).",
	}, []string{"pool", "state"})
	m.budget = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "team_budget_dollars",
		Help: "A team's monthly cloud budget (teams with a budget only).",
	}, []string{"team"})
	m.spend = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "team_cloud_spend_dollars",
		Help: "What the finished cloud run segments of a team with a budget cost this calendar month (UTC), as the ledger records them, capped at the budget.",
	}, []string{"team"})
	m.defragMoves = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "defrag_moves_total",
		Help: "Running jobs the dispatch loop planned to move (checkpoint, stop, resume elsewhere) so that a fragmented job fits.",
	})
	m.defragLost = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "defrag_lost_gpu_seconds_total",
		Help: "What the planned moves were expected to cost: GPU-seconds since each moved job's newest checkpoint plus its restart.",
	})
	reg.MustRegister(m.fragRate, m.largestFree, m.teamGPUs, m.nodes, m.budget, m.spend, m.defragMoves, m.defragLost)
	for _, c := range PriorityClasses {
		m.queueDepth.WithLabelValues(c)
	}
	reg.MustRegister(m.queueDepth, m.queueWait, m.cycleDuration, m.commits, m.gpus, m.unplaced, m.isLeader, m.viewRebuilds)
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

// Teams makes the per-team series of the teams Gangway knows from its
// config (quotas, budgets) exist before their first job: queue wait for
// every priority class. A team first seen on a job gets them then.
func (m *Metrics) Teams(teams []string) {
	for _, t := range teams {
		for _, c := range PriorityClasses {
			m.queueWait.WithLabelValues(t, c)
		}
	}
}

// JobPlaced records how long a job of team and priority class waited in
// the queue.
func (m *Metrics) JobPlaced(team, priorityClass string, wait time.Duration) {
	m.queueWait.WithLabelValues(team, priorityClass).Observe(wait.Seconds())
}

// ViewRebuilt counts a rebuild of the Redis view (gangway_view_rebuilds_total).
func (m *Metrics) ViewRebuilt() { m.viewRebuilds.Inc() }

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
	for _, c := range PriorityClasses {
		m.queueDepth.WithLabelValues(c).Set(0)
	}
	for class, n := range queueByClass {
		m.queueDepth.WithLabelValues(class).Set(float64(n))
	}
}

// PoolTeam keys GPUs allocated to one team in one pool.
type PoolTeam struct{ Pool, Team string }

// PoolState keys nodes of one pool in one state.
type PoolState struct{ Pool, State string }

// Allocated replaces the GPUs allocated per pool and team, and the nodes
// per pool and state (every state of a pool that has nodes is exported,
// zero included, so an alert on lost nodes has a series to read).
func (m *Metrics) Allocated(byPoolTeam map[PoolTeam]float64, nodes map[PoolState]int) {
	m.teamGPUs.Reset()
	for k, n := range byPoolTeam {
		m.teamGPUs.WithLabelValues(k.Pool, k.Team).Set(n)
	}
	m.nodes.Reset()
	for k := range nodes {
		for _, st := range NodeStates {
			m.nodes.WithLabelValues(k.Pool, st)
		}
	}
	for k, n := range nodes {
		m.nodes.WithLabelValues(k.Pool, k.State).Set(float64(n))
	}
}

// TeamBudget records a team's monthly cloud budget and its spend so far.
func (m *Metrics) TeamBudget(team string, budget, spent float64) {
	m.budget.WithLabelValues(team).Set(budget)
	m.spend.WithLabelValues(team).Set(spent)
}

// Fragmentation records the fragmentation rate and the largest free block
// per topology level.
func (m *Metrics) Fragmentation(rate float64, largest map[string]int) {
	m.fragRate.Set(rate)
	for level, n := range largest {
		m.largestFree.WithLabelValues(level).Set(float64(n))
	}
}

// Defragmented records one planned defragmentation: its moves and their
// expected cost in GPU-seconds.
func (m *Metrics) Defragmented(moves int, lostGPUSeconds float64) {
	m.defragMoves.Add(float64(moves))
	m.defragLost.Add(lostGPUSeconds)
}

// Reasons are every reason placement may give for a waiting job: the
// per-reason counts of waiting jobs export them all, 0 included.
func (m *Metrics) Reasons(reasons []string) {
	m.reasons = slices.Clone(reasons)
	for _, r := range reasons {
		m.unplaced.WithLabelValues(r)
	}
}

// Unplaced replaces the per-reason counts of waiting jobs.
func (m *Metrics) Unplaced(byReason map[string]int) {
	m.unplaced.Reset()
	for _, r := range m.reasons {
		m.unplaced.WithLabelValues(r)
	}
	for r, n := range byReason {
		m.unplaced.WithLabelValues(r).Set(float64(n))
	}
}
