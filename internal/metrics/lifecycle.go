package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gangwayhq/gangway"
)

// Lifecycle is the collector set for how runs end and how jobs come back:
// preemptions and notices by cause and pool, work lost, and the time from
// a stop request to the checkpoint being saved and to running again.
type Lifecycle struct {
	causes   []string
	ended    *prometheus.CounterVec
	lost     *prometheus.CounterVec
	stop     *prometheus.HistogramVec
	recovery *prometheus.HistogramVec
}

// NewLifecycle creates the run collectors and registers them on reg.
// causes are every cause a run may end with (workflows.Causes): their
// series exist from the start, so rates of preemptions and failures read
// 0 rather than nothing before the first one.
func NewLifecycle(reg prometheus.Registerer, causes ...string) *Lifecycle {
	l := &Lifecycle{causes: causes,
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "runs_ended_total",
			Help: "Runs (attempts) ended, by cause (completed, failed, cancelled, preempted, notice, drain, fault, node-lost, idle, infra, timeout, no-capacity), pool and capacity type.",
		}, []string{"cause", "pool", "capacity_type"}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "lost_gpu_seconds_total",
			Help: "GPU time whose work was redone: since the last checkpoint of runs that ended without saving, by cause, team and pool.",
		}, []string{"cause", "team", "pool"}),
		stop: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "stop_duration_seconds",
			Help:    "From a stop request (preemption, notice, drain, fault) to the run's end: signal, final checkpoint saved, processes gone; by cause.",
			Buckets: prometheus.ExponentialBuckets(0.1, 2, 14), // 0.1 s … ~14 min
		}, []string{"cause"}),
		recovery: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "recovery_duration_seconds",
			Help:    "From a stop request, or a run found lost, to the job running again, by cause.",
			Buckets: prometheus.ExponentialBuckets(0.5, 2, 16), // 0.5 s … ~9 h
		}, []string{"cause"}),
	}
	reg.MustRegister(l.ended, l.lost, l.stop, l.recovery)
	for _, c := range causes {
		l.stop.WithLabelValues(c)
		l.recovery.WithLabelValues(c)
	}
	return l
}

// Pools creates the runs-ended series of every cause for each pool (with
// its capacity type), so a pool's preemption and failure rates exist
// before its first run ends. Safe on a nil *Lifecycle.
func (l *Lifecycle) Pools(pools map[string]gangway.CapacityType) {
	if l == nil {
		return
	}
	for p, ct := range pools {
		for _, c := range l.causes {
			l.ended.WithLabelValues(c, p, string(ct))
		}
	}
}

// RunEnded records one run's end.
func (l *Lifecycle) RunEnded(cause, team, pool string, capacityType gangway.CapacityType, lostGPUSeconds float64, stop time.Duration) {
	l.ended.WithLabelValues(cause, pool, string(capacityType)).Inc()
	if lostGPUSeconds > 0 {
		l.lost.WithLabelValues(cause, team, pool).Add(lostGPUSeconds)
	}
	if stop > 0 {
		l.stop.WithLabelValues(cause).Observe(stop.Seconds())
	}
}

// Recovered records a job running again d after its previous run was asked
// to stop (or found lost) for cause.
func (l *Lifecycle) Recovered(cause string, d time.Duration) {
	l.recovery.WithLabelValues(cause).Observe(d.Seconds())
}

// Checkpoints is the agent's checkpoint transfer collector set.
type Checkpoints struct {
	duration *prometheus.HistogramVec
	size     *prometheus.HistogramVec
	failures *prometheus.CounterVec
}

// NewCheckpoints creates the checkpoint collectors and registers them on reg.
func NewCheckpoints(reg prometheus.Registerer) *Checkpoints {
	c := &Checkpoints{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "checkpoint_duration_seconds",
			Help:    "Checkpoint transfers to or from the store, by op (save, restore) and kind (periodic, final: the save after a stop signal).",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 16), // 10 ms … ~5 min
		}, []string{"op", "kind"}),
		size: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "checkpoint_size_bytes",
			Help:    "Size of checkpoints transferred, by op and kind.",
			Buckets: prometheus.ExponentialBuckets(1024, 4, 14), // 1 KiB … 64 TiB
		}, []string{"op", "kind"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "checkpoint_failures_total",
			Help: "Checkpoint transfers that failed, by op and kind.",
		}, []string{"op", "kind"}),
	}
	reg.MustRegister(c.duration, c.size, c.failures)
	return c
}

// Transfer records one save or restore.
func (c *Checkpoints) Transfer(op string, final bool, bytes int64, d time.Duration, failed bool) {
	kind := "periodic"
	if final {
		kind = "final"
	}
	if failed {
		c.failures.WithLabelValues(op, kind).Inc()
		return
	}
	c.duration.WithLabelValues(op, kind).Observe(d.Seconds())
	c.size.WithLabelValues(op, kind).Observe(float64(bytes))
}

// TaskLogs counts the task output lines the agent could not ship to the
// view's log stream (their log file on the node still has them).
type TaskLogs struct{ dropped prometheus.Counter }

// NewTaskLogs registers the agent's task-log metric on reg.
func NewTaskLogs(reg prometheus.Registerer) *TaskLogs {
	l := &TaskLogs{dropped: prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "task_log_lines_dropped_total",
		Help: "Task output lines not sent to the Redis log stream because its buffer was full or Redis too slow; the node's log file has them.",
	})}
	reg.MustRegister(l.dropped)
	return l
}

// Dropped counts lines that were not shipped.
func (l *TaskLogs) Dropped(lines int) { l.dropped.Add(float64(lines)) }
