package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/metrics"
	"github.com/gangwayhq/gangway/placement"
)

// Capacity is the part of the Redis view the loop uses.
type Capacity interface {
	Snapshot(ctx context.Context) (capacity.Snapshot, error)
	Commit(ctx context.Context, holder string, plan []gangway.Assignment) error
	Release(ctx context.Context, jobID gangway.JobID, attempt int) (int, error)
	Allocations(ctx context.Context) ([]gangway.Assignment, error)
	AcquireLease(ctx context.Context, holder string, ttl time.Duration) (bool, error)
	ReleaseLease(ctx context.Context, holder string) error
	SetReasons(ctx context.Context, reasons map[gangway.JobID]string) error
}

// Workflows reaches job workflows.
type Workflows interface {
	// SignalPlaced delivers an assignment; ErrJobGone if the workflow is
	// not running.
	SignalPlaced(ctx context.Context, a gangway.Assignment) error
	// Running reports whether the job's workflow is still running.
	Running(ctx context.Context, jobID gangway.JobID) (bool, error)
}

// ErrJobGone: the job's workflow is not running.
var ErrJobGone = errors.New("dispatch: job workflow is not running")

// Config tunes the loop.
type Config struct {
	// Holder identifies this server in the lease; unique per process.
	Holder   string
	Interval time.Duration // between cycles; default 500ms
	LeaseTTL time.Duration // default 5s; a dead leader is replaced after this
	// NodeTTL: a node whose last heartbeat is older is treated as lost.
	NodeTTL        time.Duration // default 10s
	ReconcileEvery time.Duration // default 30s
	MaxAssignments int           // per cycle; 0 = no cap
	Placer         placement.Placer
	Log            *slog.Logger
	Metrics        *metrics.Metrics // optional
}

// Loop is the dispatch loop.
type Loop struct {
	cfg Config
	cap Capacity
	wf  Workflows
	log *slog.Logger

	leading       bool
	lastReconcile time.Time
	unsignaled    map[gangway.JobID]gangway.Assignment
}

// New returns a loop; Run starts it.
func New(cfg Config, c Capacity, wf Workflows) *Loop {
	if cfg.Interval <= 0 {
		cfg.Interval = 500 * time.Millisecond
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 5 * time.Second
	}
	if cfg.NodeTTL <= 0 {
		cfg.NodeTTL = 10 * time.Second
	}
	if cfg.ReconcileEvery <= 0 {
		cfg.ReconcileEvery = 30 * time.Second
	}
	if cfg.Placer == nil {
		cfg.Placer = placement.FirstFit{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Loop{cfg: cfg, cap: c, wf: wf, log: cfg.Log.With("holder", cfg.Holder),
		unsignaled: map[gangway.JobID]gangway.Assignment{}}
}

// Run competes for the lease and, while leading, runs a cycle every
// interval, until ctx is done; then it gives the lease up.
func (l *Loop) Run(ctx context.Context) error {
	defer func() {
		if l.leading {
			_ = l.cap.ReleaseLease(context.WithoutCancel(ctx), l.cfg.Holder)
			l.setLeading(false)
		}
	}()
	t := time.NewTicker(l.cfg.Interval)
	defer t.Stop()
	for {
		if err := l.tick(ctx); err != nil && ctx.Err() == nil {
			l.log.Warn("dispatch cycle failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (l *Loop) tick(ctx context.Context) error {
	ok, err := l.cap.AcquireLease(ctx, l.cfg.Holder, l.cfg.LeaseTTL)
	if err != nil {
		l.setLeading(false)
		return fmt.Errorf("lease: %w", err)
	}
	if !ok {
		l.setLeading(false)
		return nil
	}
	if !l.leading {
		l.setLeading(true)
		l.takeOver(ctx)
	}
	if time.Since(l.lastReconcile) >= l.cfg.ReconcileEvery {
		l.reconcile(ctx)
	}
	_, err = l.Cycle(ctx)
	return err
}

func (l *Loop) setLeading(v bool) {
	if v != l.leading {
		l.log.Info("dispatch leadership changed", "leading", v)
	}
	l.leading = v
	if l.cfg.Metrics != nil {
		l.cfg.Metrics.Leader(v)
	}
}

// takeOver re-signals every allocation: the previous leader may have died
// between a commit and its signal.
func (l *Loop) takeOver(ctx context.Context) {
	allocs, err := l.cap.Allocations(ctx)
	if err != nil {
		l.log.Warn("take over: list allocations", "error", err)
		return
	}
	for _, a := range allocs {
		l.unsignaled[a.JobID] = a
	}
	l.log.Info("took over dispatch", "allocations", len(allocs))
}

// reconcile releases allocations whose workflow is no longer running (a
// workflow terminated by an operator never runs its own release).
func (l *Loop) reconcile(ctx context.Context) {
	l.lastReconcile = time.Now()
	allocs, err := l.cap.Allocations(ctx)
	if err != nil {
		l.log.Warn("reconcile: list allocations", "error", err)
		return
	}
	for _, a := range allocs {
		running, err := l.wf.Running(ctx, a.JobID)
		if err != nil || running {
			continue
		}
		n, err := l.cap.Release(ctx, a.JobID, a.Attempt)
		l.log.Info("released allocation of a finished job", "job_id", a.JobID, "gpus", n, "error", err)
	}
}

// CycleResult summarises one cycle.
type CycleResult struct {
	Placed   int
	Unplaced int
	Stale    int // commits rejected as stale and retried
}

// maxStaleRetries bounds how often one cycle re-plans after a stale commit.
const maxStaleRetries = 3

// Cycle runs snapshot → place → commit → signal once (retrying the plan if
// the commit finds it stale). The caller must hold the lease.
func (l *Loop) Cycle(ctx context.Context) (CycleResult, error) {
	start := time.Now()
	var res CycleResult
	result, err := l.cycle(ctx, &res)
	if l.cfg.Metrics != nil {
		l.cfg.Metrics.CycleDone(result, time.Since(start))
	}
	l.resignal(ctx)
	return res, err
}

func (l *Loop) cycle(ctx context.Context, res *CycleResult) (string, error) {
	for {
		snap, err := l.cap.Snapshot(ctx)
		if err != nil {
			return metrics.ResultError, fmt.Errorf("snapshot: %w", err)
		}
		ps := l.placementSnapshot(snap)
		plan := l.cfg.Placer.Place(ps, snap.Queue, placement.Options{MaxAssignments: l.cfg.MaxAssignments})
		l.observe(snap, ps, plan)
		if len(plan.Assignments) == 0 {
			res.Unplaced = len(plan.Unplaced)
			return metrics.ResultIdle, l.setReasons(ctx, plan)
		}
		err = l.cap.Commit(ctx, l.cfg.Holder, plan.Assignments)
		switch {
		case errors.Is(err, capacity.ErrStale) && res.Stale < maxStaleRetries:
			res.Stale++
			l.log.Debug("plan was stale; planning again", "error", err)
			continue
		case errors.Is(err, capacity.ErrStale):
			return metrics.ResultStale, fmt.Errorf("commit: %w", err)
		case errors.Is(err, capacity.ErrNotLeader):
			l.setLeading(false)
			return metrics.ResultNotLeader, fmt.Errorf("commit: %w", err)
		case err != nil:
			return metrics.ResultError, fmt.Errorf("commit: %w", err)
		}
		res.Placed, res.Unplaced = len(plan.Assignments), len(plan.Unplaced)
		l.placed(snap, plan.Assignments)
		if err := l.setReasons(ctx, plan); err != nil {
			return metrics.ResultCommitted, err
		}
		return metrics.ResultCommitted, nil
	}
}

// placed records queue waits and queues the signals of a committed plan.
func (l *Loop) placed(snap capacity.Snapshot, asgs []gangway.Assignment) {
	enqueued := map[gangway.JobID]time.Time{}
	for _, e := range snap.Queue {
		enqueued[e.JobID] = e.EnqueuedAt
	}
	for _, a := range asgs {
		l.unsignaled[a.JobID] = a
		if l.cfg.Metrics != nil {
			l.cfg.Metrics.JobPlaced(snap.Now.Sub(enqueued[a.JobID]))
		}
		l.log.Info("placed", "job_id", a.JobID, "attempt", a.Attempt, "gpus", a.GPUCount())
	}
}

// resignal delivers pending signals; a job whose workflow is gone has its
// allocation released. Failures stay pending for the next cycle.
func (l *Loop) resignal(ctx context.Context) {
	for id, a := range l.unsignaled {
		err := l.wf.SignalPlaced(ctx, a)
		switch {
		case errors.Is(err, ErrJobGone):
			n, rerr := l.cap.Release(ctx, a.JobID, a.Attempt)
			if rerr != nil {
				l.log.Warn("release for a gone job failed; will retry", "job_id", id, "error", rerr)
				continue
			}
			l.log.Info("job gone before its signal; released", "job_id", id, "gpus", n)
		case err != nil:
			l.log.Warn("signal failed; will retry", "job_id", id, "error", err)
			continue
		}
		delete(l.unsignaled, id)
	}
}

func (l *Loop) setReasons(ctx context.Context, plan placement.Plan) error {
	reasons := make(map[gangway.JobID]string, len(plan.Unplaced))
	for _, u := range plan.Unplaced {
		reasons[u.JobID] = fmt.Sprintf("%s: %s", u.Reason, u.Detail)
	}
	if err := l.cap.SetReasons(ctx, reasons); err != nil {
		return fmt.Errorf("set reasons: %w", err)
	}
	return nil
}

// placementSnapshot turns the Redis view into placement's input: nodes that
// are cordoned or have not heartbeated within NodeTTL are not schedulable.
func (l *Loop) placementSnapshot(s capacity.Snapshot) placement.Snapshot {
	ps := placement.Snapshot{Now: s.Now, Nodes: make([]placement.Node, 0, len(s.Nodes))}
	for _, n := range s.Nodes {
		ps.Nodes = append(ps.Nodes, placement.Node{
			ID: n.Node.ID, Addr: n.Node.Addr, Pool: n.Node.Pool, Model: n.Node.Model(),
			GPUs:         len(n.Node.GPUs),
			Free:         n.FreeGPUs(),
			FreeCPUMilli: n.Node.CPUMilli - n.UsedCPUMilli,
			FreeMemMiB:   n.Node.MemMiB - n.UsedMemMiB,
			Schedulable:  n.State == gangway.NodeReady && s.Now.Sub(n.LastHeartbeat) <= l.cfg.NodeTTL,
		})
	}
	return ps
}

// observe updates the fleet, queue and waiting-reason gauges.
func (l *Loop) observe(s capacity.Snapshot, ps placement.Snapshot, plan placement.Plan) {
	m := l.cfg.Metrics
	if m == nil {
		return
	}
	pools := map[string]metrics.GPUState{}
	for i, n := range ps.Nodes {
		st := pools[n.Pool]
		alloc := len(s.Nodes[i].Allocated)
		st.Allocated += alloc
		if n.Schedulable {
			st.Free += len(n.Free)
			st.Unavailable += n.GPUs - alloc - len(n.Free)
		} else {
			st.Unavailable += n.GPUs - alloc
		}
		pools[n.Pool] = st
	}
	byClass := map[string]int{}
	for _, e := range s.Queue {
		byClass[e.PriorityClass]++
	}
	m.Fleet(pools, byClass)
	byReason := map[string]int{}
	for _, u := range plan.Unplaced {
		byReason[string(u.Reason)]++
	}
	m.Unplaced(byReason)
}
