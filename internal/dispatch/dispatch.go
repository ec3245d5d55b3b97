package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/metrics"
	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/placement/forecast"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// Capacity is the part of the Redis view the loop uses.
type Capacity interface {
	Snapshot(ctx context.Context) (capacity.Snapshot, error)
	Commit(ctx context.Context, holder string, plan []gangway.Assignment) error
	Release(ctx context.Context, jobID gangway.JobID, attempt int) (int, error)
	Allocations(ctx context.Context) ([]gangway.Assignment, error)
	AcquireLease(ctx context.Context, holder string, ttl time.Duration) (bool, error)
	ReleaseLease(ctx context.Context, holder string) error
	SetReasons(ctx context.Context, reasons map[gangway.JobID]gangway.Waiting) error
	StartBurst(ctx context.Context, holder string, jobID gangway.JobID, attempt int, request []byte) error
	Bursts(ctx context.Context) (map[gangway.JobID][]byte, error)
	ForgetBurst(ctx context.Context, jobID gangway.JobID) error
}

// Workflows reaches job workflows.
type Workflows interface {
	// SignalPlaced delivers an assignment; jobs.ErrJobGone if the workflow is
	// not running.
	SignalPlaced(ctx context.Context, a gangway.Assignment) error
	// SignalPreempt asks a running job to stop and requeue; jobs.ErrJobGone if
	// the workflow is not running.
	SignalPreempt(ctx context.Context, jobID gangway.JobID, req workflows.PreemptRequest) error
	// SignalBurst tells a job to run on rented instances; jobs.ErrJobGone if
	// the workflow is not running.
	SignalBurst(ctx context.Context, jobID gangway.JobID, req workflows.BurstRequest) error
	// Running reports whether the job's workflow is still running.
	Running(ctx context.Context, jobID gangway.JobID) (bool, error)
}

// Config tunes the loop.
type Config struct {
	// Holder identifies this server in the lease; unique per process.
	Holder   string
	Interval time.Duration // between cycles; default 500ms
	LeaseTTL time.Duration // default 5s; a dead leader is replaced after this
	// NodeTTL: a node whose last heartbeat is older is treated as lost.
	NodeTTL        time.Duration // default 10s
	ReconcileEvery time.Duration // default 30s
	// Placement tunes the engine (scorer, fairness, quotas, reservations,
	// preemption); MaxAssignments caps jobs started per cycle.
	Placement placement.Options
	Placer    placement.Placer // default placement.Engine{}
	// Cloud lists what bursts may rent; nil means no bursting. Budgets
	// caps each team's cloud spend (see Budgets).
	Cloud   Offers
	Budgets Budgets
	// OnPremPrices is the amortized price per GPU-hour of each on-prem
	// pool, for the ledger (a pool not listed costs 0).
	OnPremPrices map[string]float64
	// Wake, when set, starts a cycle soon after each value instead of at
	// the next tick: the view's change events (capacity.View.Changes).
	// Woken cycles are rate-limited: one starts no sooner than MinGap, and
	// no sooner than the last cycle took, after the last one started, so
	// the loop spends at most about half its time placing.
	Wake   <-chan struct{}
	MinGap time.Duration // default 20ms
	// SignalParallelism bounds the placed signals delivered at once, as a
	// new leader re-signals every allocation; default 16. The simulator
	// uses 1, so signals arrive in a fixed order.
	SignalParallelism int
	// Clock is the loop's time source; nil means the wall clock.
	Clock   Clock
	Log     *slog.Logger
	Metrics *metrics.Metrics // optional
	// RunMetrics, if set, gets the per-pool run series of every pool the
	// loop sees created (metrics.Lifecycle.Pools).
	RunMetrics *metrics.Lifecycle
	// ETA estimates when each waiting job starts (placement/forecast),
	// stored with its reason; nil means an estimator with a runtime model
	// learned from the runs the loop sees end, and the default options
	// (a forecast every 10 cycles, and at once for a job without one).
	// NoETA turns estimates off. ETAAlso are more estimators fed the same
	// snapshots and asked on the same cycles, whose estimates are not
	// stored: the simulator compares runtime models with them.
	//
	// On the wall clock (a server) a forecast runs in the background, off
	// the cycle: the cycles that start while it runs neither observe nor
	// forecast, and its estimates are stored from the first cycle after
	// it ends. On any other clock (the simulator, tests) it runs inside
	// the cycle, so that a replay is deterministic.
	ETA     *forecast.Estimator
	NoETA   bool
	ETAAlso []*forecast.Estimator
	// Holdings and NodeStates are what a lost view is rebuilt from
	// (rebuild.go): the job workflows, and the durable cordons. Without
	// Holdings a new view is taken as empty.
	Holdings   Holdings
	NodeStates NodeStates
	// Records, when set, keeps the leader's own records between
	// leaders. What the loop learns — the arrivals' typical workload,
	// the estimator's runtimes and calibration (learned.go) — is stored
	// at most every learnedSaveEvery while it learns, and a leader taking
	// over that has learned nothing yet goes on from it; the
	// defragmentations under way and the hour's spend (defrag.go) are
	// stored as they change, and a new leader keeps them. Without it a
	// new leader starts from nothing: placement measures against the
	// queue until jobs arrive, estimates assume the declared runtimes
	// until runs end, and defragmentations under way lose their
	// reservations.
	Records LeaderRecords
}

// LeaderRecords keeps the dispatch leader's own records between leaders
// (capacity.View). The saves store only while holder holds the lease.
type LeaderRecords interface {
	SaveLearned(ctx context.Context, holder string, l capacity.Learned) error
	// Learned is what was stored last; the zero Learned if nothing is.
	Learned(ctx context.Context) (capacity.Learned, error)
	SaveDefrags(ctx context.Context, holder string, d capacity.Defrags) error
	// Defrags is the record stored last; the zero Defrags if none is.
	Defrags(ctx context.Context) (capacity.Defrags, error)
}

// Offers is the cloud capacity jobs may burst to.
type Offers interface {
	Offers(ctx context.Context) ([]gangway.Offer, error)
}

// Budgets reports what each team may still spend in the cloud and at what
// price; a team it does not list has no limits.
type Budgets interface {
	TeamPolicies(ctx context.Context, now time.Time) (map[string]placement.TeamPolicy, error)
}

// Loop is the dispatch loop.
type Loop struct {
	cfg Config
	cap Capacity
	wf  Workflows
	log *slog.Logger

	leading bool
	// holding is leading, for the lease renewer Run starts.
	holding atomic.Bool
	// sawLeader: another server held the lease at one of this loop's
	// turns; yieldSince: since when this loop has left a lost view's free
	// lease to it (yieldToLastLeader).
	sawLeader     bool
	yieldSince    time.Time
	lastReconcile time.Time
	unsignaled    map[gangway.JobID]gangway.Assignment
	// preempted remembers when each victim was last asked to stop, so a
	// victim that takes a while is not signalled every cycle.
	preempted map[gangway.JobID]time.Time
	// bursts are burst requests committed but not yet delivered.
	bursts map[gangway.JobID]workflows.BurstRequest
	// arrivals is the typical workload placement measures fragmentation
	// against (unless Config.Placement sets one): the jobs seen entering
	// the queue, recent ones weighing more; queued the jobs of the last
	// snapshot's queue, so that each arrival counts once (wasQueued the
	// one before, kept to be refilled: no map is made per cycle). A new
	// leader restores it from Config.Records (learned.go): jobs enqueued
	// by countedUntil were counted by the leader that stored it. arrived
	// counts the arrivals; saved is what was stored last, saving whether
	// a store runs beside the cycles, saveFailed whether the last failed.
	arrivals           placement.WorkloadHistory
	queued, wasQueued  map[gangway.JobID]bool
	countedUntil       time.Time
	arrived            int
	saved              savedLearned
	saving, saveFailed atomic.Bool
	// teams caches the team budgets read at teamsAt, when the runs on
	// cloud nodes were teamsRuns.
	teams     map[string]placement.TeamPolicy
	teamsAt   time.Time
	teamsRuns map[gangway.JobID]int
	// eta is cfg.ETA (nil with NoETA); no forecast starts before
	// etaNotBefore. etaMu guards both, and cfg.ETAAlso: a forecast in the
	// background holds it while it runs (forecasting, below).
	// estimates are the latest forecast's, by job, for the reasons.
	eta          *forecast.Estimator
	etaNotBefore time.Time
	etaMu        sync.Mutex
	estimates    atomic.Pointer[map[gangway.JobID]forecast.Estimate]
	// predicted are the runtimes the estimator last predicted for the
	// burst decision (placement.Options.Predicted, burst.go); only the
	// cycle uses it.
	predicted map[gangway.JobID]time.Duration
	// background: forecasts and fragmentation measures run beside the
	// cycles (the wall clock), not inside them; side counts those
	// running, measuring whether a measure is.
	background bool
	side       sync.WaitGroup
	measuring  atomic.Bool
	measuredAt time.Time
	// rebuild is the view generation being rebuilt and when that began.
	rebuild struct {
		gen   string
		began time.Time
	}
	// defrags are the defragmentations under way, by the job they make
	// room for; defragLog what those planned in the last hour cost
	// (defrag.go); defragsChanged whether they changed since they were
	// last stored, in the view of generation defragsGen.
	defrags        map[gangway.JobID]placement.DefragPlan
	defragLog      []capacity.DefragSpend
	defragsChanged bool
	defragsGen     string
}

// etaGap bounds the loop's time spent forecasting: after a forecast
// that took d, the next starts no sooner than etaGap × d later, so
// forecasts take at most about 1/etaGap of the leader's time.
const etaGap = 5

// preemptResignal is how long a victim may take to stop before it is asked
// again.
const preemptResignal = 30 * time.Second

// DefaultNodeTTL is Config.NodeTTL's default.
const DefaultNodeTTL = 10 * time.Second

// New returns a loop; Run starts it.
func New(cfg Config, c Capacity, wf Workflows) *Loop {
	if cfg.Interval <= 0 {
		cfg.Interval = 500 * time.Millisecond
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 5 * time.Second
	}
	if cfg.NodeTTL <= 0 {
		cfg.NodeTTL = DefaultNodeTTL
	}
	if cfg.ReconcileEvery <= 0 {
		cfg.ReconcileEvery = 30 * time.Second
	}
	if cfg.Placer == nil {
		cfg.Placer = placement.Engine{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = wallClock{}
	}
	_, background := cfg.Clock.(wallClock)
	if cfg.MinGap <= 0 {
		cfg.MinGap = 20 * time.Millisecond
	}
	if cfg.SignalParallelism <= 0 {
		cfg.SignalParallelism = 16
	}
	l := &Loop{cfg: cfg, cap: c, wf: wf, log: cfg.Log.With("holder", cfg.Holder),
		unsignaled: map[gangway.JobID]gangway.Assignment{}, preempted: map[gangway.JobID]time.Time{},
		bursts: map[gangway.JobID]workflows.BurstRequest{}, eta: cfg.ETA, background: background}
	if l.eta == nil && !cfg.NoETA {
		l.eta = forecast.NewEstimator(nil, forecast.Options{})
	}
	if cfg.NoETA {
		l.eta = nil
	}
	return l
}

// Run calls Tick every interval (on the configured clock), and soon after
// each Wake, until ctx is done; then, leading, it stores what it learned
// since the last store and gives the lease up. While leading it
// also renews the lease every LeaseTTL/3 on its own, so a cycle that takes
// long (a new leader re-signalling thousands of allocations) does not lose
// it.
func (l *Loop) Run(ctx context.Context) error {
	renewCtx, stopRenew := context.WithCancel(ctx)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		l.renewLease(renewCtx)
	}()
	defer func() {
		stopRenew()
		<-renewed
		l.side.Wait()
		if l.leading {
			l.saveLearnedOnExit(ctx)
			_ = l.cap.ReleaseLease(context.WithoutCancel(ctx), l.cfg.Holder)
			l.setLeading(false)
		}
	}()
	for {
		start := l.cfg.Clock.Now()
		if err := l.Tick(ctx); err != nil && ctx.Err() == nil {
			l.log.Warn("dispatch cycle failed", "error", err)
		}
		took := l.cfg.Clock.Now().Sub(start)
		select {
		case <-ctx.Done():
			return nil
		case <-l.cfg.Clock.After(l.cfg.Interval - took):
		case <-l.cfg.Wake:
			// Rate limit: no sooner than MinGap, nor than the cycle took.
			if wait := max(l.cfg.MinGap, took) - took; wait > 0 {
				select {
				case <-ctx.Done():
					return nil
				case <-l.cfg.Clock.After(wait):
				}
			}
		}
	}
}

// renewLease renews the lease every LeaseTTL/3 while the loop holds it.
// Tick still competes for and renews the lease at every turn; this only
// keeps a long turn from outliving it. Commits are fenced by the lease
// either way (capacity's commit script checks the holder).
func (l *Loop) renewLease(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.cfg.Clock.After(l.cfg.LeaseTTL / 3):
		}
		if !l.holding.Load() {
			continue
		}
		if ok, err := l.cap.AcquireLease(ctx, l.cfg.Holder, l.cfg.LeaseTTL); !ok || err != nil {
			l.log.Warn("lease renewal failed; the next turn finds out who leads", "error", err)
		}
	}
}

// Tick is one turn of Run: compete for the lease and, while leading, take
// over after a change of leader, reconcile when due and run a Cycle. The
// simulator calls it at each virtual instant instead of Run.
func (l *Loop) Tick(ctx context.Context) error {
	if l.yieldToLastLeader(ctx) {
		return nil
	}
	ok, err := l.cap.AcquireLease(ctx, l.cfg.Holder, l.cfg.LeaseTTL)
	if err != nil {
		l.setLeading(false)
		return fmt.Errorf("lease: %w", err)
	}
	if !ok {
		l.sawLeader = true
		l.setLeading(false)
		return nil
	}
	if !l.leading {
		l.setLeading(true)
		l.takeOver(ctx)
	}
	if l.cfg.Clock.Now().Sub(l.lastReconcile) >= l.cfg.ReconcileEvery {
		l.reconcile(ctx)
	}
	_, err = l.Cycle(ctx)
	return err
}

// rebuiltReader says whether the view is rebuilt for its generation
// (capacity.View.Rebuilt).
type rebuiltReader interface {
	Rebuilt(ctx context.Context) (bool, error)
}

// yieldToLastLeader reports whether this turn should leave the lease
// alone. A view Redis lost (restarted empty, FLUSHALL) loses the lease
// with it, and any server's next turn would take it; but what the leader
// learned — the typical workload, the estimator, the defragmentations
// under way — is in its memory alone until it stores it again in the new
// view (learned.go, defrag.go), and a standby that took the lease would
// start from nothing. So a standby that has seen another server lead, and
// finds the view not rebuilt for its generation, leaves the lease for
// half a LeaseTTL: the leader, renewing every third of one, takes it
// back. A leader that died with the view is replaced that much later.
func (l *Loop) yieldToLastLeader(ctx context.Context) bool {
	rr, ok := l.cap.(rebuiltReader)
	if l.leading || !l.sawLeader || !ok {
		return false
	}
	if done, err := rr.Rebuilt(ctx); err != nil || done {
		l.yieldSince = time.Time{}
		return false
	}
	now := l.cfg.Clock.Now()
	if l.yieldSince.IsZero() {
		l.yieldSince = now
		l.log.Info("the view is not rebuilt: leaving the lease to the last leader a moment", "for", l.cfg.LeaseTTL/2)
	}
	return now.Sub(l.yieldSince) < l.cfg.LeaseTTL/2
}

func (l *Loop) setLeading(v bool) {
	if v != l.leading {
		l.log.Info("dispatch leadership changed", "leading", v)
	}
	l.leading = v
	l.holding.Store(v)
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
	bursts, err := l.cap.Bursts(ctx)
	if err != nil {
		l.log.Warn("take over: list bursts", "error", err)
	}
	for id, raw := range bursts {
		var req workflows.BurstRequest
		if err := json.Unmarshal(raw, &req); err != nil {
			l.log.Warn("take over: undecodable burst record; dropping it", "job_id", id, "error", err)
			_ = l.cap.ForgetBurst(ctx, id)
			continue
		}
		l.bursts[id] = req
	}
	l.restoreLearned(ctx)
	l.restoreDefrags(ctx)
	l.log.Info("took over dispatch", "allocations", len(allocs), "bursts", len(bursts))
}

// reconcile releases allocations whose workflow is no longer running (a
// workflow terminated by an operator never runs its own release).
func (l *Loop) reconcile(ctx context.Context) {
	l.lastReconcile = l.cfg.Clock.Now()
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
	bursts, err := l.cap.Bursts(ctx)
	if err != nil {
		l.log.Warn("reconcile: list bursts", "error", err)
		return
	}
	for id := range bursts {
		if running, err := l.wf.Running(ctx, id); err == nil && !running {
			err = l.cap.ForgetBurst(ctx, id)
			l.log.Info("forgot the burst of a finished job", "job_id", id, "error", err)
		}
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
	start := l.cfg.Clock.Now()
	var res CycleResult
	result, err := l.cycle(ctx, &res)
	if l.cfg.Metrics != nil {
		l.cfg.Metrics.CycleDone(result, l.cfg.Clock.Now().Sub(start))
	}
	l.resignal(ctx)
	l.deliverBursts(ctx)
	return res, err
}

// noteArrivals adds the jobs that entered the queue since the last
// snapshot to the arrivals: a job's first attempt, once, in queue order.
func (l *Loop) noteArrivals(queue []gangway.QueueEntry) {
	now := l.wasQueued
	if now == nil {
		now = make(map[gangway.JobID]bool, len(queue))
	}
	clear(now)
	for i := range queue {
		e := &queue[i]
		now[e.JobID] = true
		if e.Attempt <= 1 && !l.queued[e.JobID] && (l.countedUntil.IsZero() || e.EnqueuedAt.After(l.countedUntil)) {
			l.arrivals.Add(e)
			l.arrived++
		}
	}
	l.queued, l.wasQueued = now, l.queued
}

func (l *Loop) cycle(ctx context.Context, res *CycleResult) (string, error) {
	for {
		snap, err := l.cap.Snapshot(ctx)
		if err != nil {
			return metrics.ResultError, fmt.Errorf("snapshot: %w", err)
		}
		if !snap.Rebuilt {
			if !l.rebuildView(ctx, snap) {
				return metrics.ResultIdle, nil // nothing is placed until it is
			}
			continue // plan from the rebuilt view
		}
		ps := placementSnapshot(snap, l.cfg.NodeTTL, l.cfg.OnPremPrices)
		l.noteArrivals(snap.Queue)
		l.saveLearned(ctx, snap.Generation)
		opts := l.placementOptions(ctx, ps, snap.Queue)
		priceCloudNodes(ps.Nodes, opts.Offers)
		plan := l.cfg.Placer.Place(ps, snap.Queue, opts)
		l.observe(snap, ps, opts.Workload, plan)
		moves := l.defragged(snap, plan)
		l.saveDefrags(ctx, snap.Generation) // before the moved jobs are asked to stop
		l.preempt(ctx, append(slices.Clip(plan.Preemptions), moves...))
		l.burst(ctx, plan.Bursts)
		if len(plan.Assignments) == 0 {
			res.Unplaced = len(plan.Unplaced)
			l.estimate(ctx, ps, snap.Queue, opts, plan)
			return metrics.ResultIdle, l.setReasons(ctx, snap.Queue, plan)
		}
		err = l.commit(ctx, snap, plan.Assignments)
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
		l.estimate(ctx, ps, snap.Queue, opts, plan)
		if err := l.setReasons(ctx, snap.Queue, plan); err != nil {
			return metrics.ResultCommitted, err
		}
		return metrics.ResultCommitted, nil
	}
}

// placed records queue waits and queues the signals of a committed plan.
func (l *Loop) placed(snap capacity.Snapshot, asgs []gangway.Assignment) {
	queued := make(map[gangway.JobID]gangway.QueueEntry, len(asgs))
	if l.cfg.Metrics != nil {
		for _, a := range asgs {
			queued[a.JobID] = gangway.QueueEntry{}
		}
		for _, e := range snap.Queue {
			if _, ok := queued[e.JobID]; ok {
				queued[e.JobID] = e
			}
		}
	}
	for _, a := range asgs {
		l.unsignaled[a.JobID] = a
		if l.cfg.Metrics != nil {
			e := queued[a.JobID]
			l.cfg.Metrics.JobPlaced(e.Team, e.PriorityClass, snap.Now.Sub(e.EnqueuedAt))
		}
		l.log.Info("placed", "job_id", a.JobID, "attempt", a.Attempt, "gpus", a.GPUCount())
	}
}

// resignal delivers pending signals, up to SignalParallelism at once; a
// job whose workflow is gone has its allocation released. Failures stay
// pending for the next cycle.
func (l *Loop) resignal(ctx context.Context) {
	if len(l.unsignaled) == 0 {
		return
	}
	ids := slices.Sorted(maps.Keys(l.unsignaled))
	delivered := make([]bool, len(ids))
	var g errgroup.Group
	g.SetLimit(l.cfg.SignalParallelism)
	for i, id := range ids {
		a := l.unsignaled[id]
		g.Go(func() error {
			delivered[i] = l.signalPlaced(ctx, a)
			return nil
		})
	}
	_ = g.Wait()
	for i, id := range ids {
		if delivered[i] {
			delete(l.unsignaled, id)
		}
	}
}

// signalPlaced delivers one placed signal and reports whether it is done
// with: delivered, or the job is gone and its allocation released.
func (l *Loop) signalPlaced(ctx context.Context, a gangway.Assignment) bool {
	err := l.wf.SignalPlaced(ctx, a)
	switch {
	case errors.Is(err, jobs.ErrJobGone):
		n, rerr := l.cap.Release(ctx, a.JobID, a.Attempt)
		if rerr != nil {
			l.log.Warn("release for a gone job failed; will retry", "job_id", a.JobID, "error", rerr)
			return false
		}
		l.log.Info("job gone before its signal; released", "job_id", a.JobID, "gpus", n)
	case err != nil:
		l.log.Warn("signal failed; will retry", "job_id", a.JobID, "error", err)
		return false
	}
	return true
}

func (l *Loop) setReasons(ctx context.Context, queue []gangway.QueueEntry, plan placement.Plan) error {
	entries := make(map[gangway.JobID]*gangway.QueueEntry, len(queue))
	for i := range queue {
		entries[queue[i].JobID] = &queue[i]
	}
	bursting := make(map[gangway.JobID]gangway.BurstOffer, len(plan.Bursts))
	for _, b := range plan.Bursts {
		if len(b.Offers) > 0 {
			bursting[b.JobID] = b.Offers[0]
		}
	}
	reasons := make(map[gangway.JobID]gangway.Waiting, len(plan.Unplaced))
	for _, u := range plan.Unplaced {
		w := waiting(u, plan.Reservations, l.defrags)
		if e := entries[u.JobID]; e != nil && u.Reason.Retry() {
			l.withEstimate(&w, e, bursting)
		}
		reasons[u.JobID] = w
	}
	if err := l.cap.SetReasons(ctx, reasons); err != nil {
		return fmt.Errorf("set reasons: %w", err)
	}
	return nil
}

// withEstimate adds the job's latest start-time estimate, the jobs it
// waits for and its cloud option to w; a burst this cycle's plan makes
// is the cloud option.
func (l *Loop) withEstimate(w *gangway.Waiting, e *gangway.QueueEntry, bursting map[gangway.JobID]gangway.BurstOffer) {
	var cloud *gangway.BurstOffer
	if ests := l.estimates.Load(); ests != nil {
		if est, ok := (*ests)[e.JobID]; ok {
			w.ETA = &gangway.ETA{P50: est.P50, P90: est.P90, At: est.At, Beyond: est.Beyond, Cloud: est.Burst}
			w.WaitsFor, cloud = est.WaitsFor, est.Cloud
		}
	}
	b, now := bursting[e.JobID]
	if now {
		cloud = &b
	}
	if cloud != nil {
		c := gangway.CloudOptionOf(*cloud, e.GPUsPerReplica)
		c.Bursting, c.BurstEnabled = now, e.Burst.Enabled
		w.Cloud = &c
	}
}

// waiting is u as the view stores it: typed, with the start and nodes of
// the job's own reservation when it holds one, and the moves a
// defragmentation for it makes.
func waiting(u placement.Unplaced, rs []placement.Reservation, defrags map[gangway.JobID]placement.DefragPlan) gangway.Waiting {
	w := gangway.Waiting{Reason: string(u.Reason), Detail: u.Detail, Retry: u.Reason.Retry()}
	if i := slices.IndexFunc(rs, func(r placement.Reservation) bool { return r.JobID == u.JobID }); i >= 0 {
		w.ReservationStart, w.ReservedNodes = rs[i].Start, rs[i].Nodes
	}
	if p, ok := defrags[u.JobID]; ok && u.Reason == placement.ReasonDefragmenting {
		w.Moving, w.MoveLostGPUSeconds, w.ReservedNodes = p.Movers(), p.LostGPUSeconds, p.Nodes()
	}
	return w
}

// estimate feeds the cycle's snapshot to the estimators and, when one is
// due, forecasts every waiting job's start from it, in the background on
// the wall clock (Config.ETA). Cloud options are priced for every waiting
// job, so offers are read for the forecast even when no job may burst.
func (l *Loop) estimate(ctx context.Context, ps placement.Snapshot, queue []gangway.QueueEntry, o placement.Options, plan placement.Plan) {
	if l.eta == nil {
		return
	}
	if !l.etaMu.TryLock() {
		return // a forecast is running; the next cycle observes what changed
	}
	locked := true
	defer func() {
		if locked {
			l.etaMu.Unlock()
		}
	}()
	stopped := func(id gangway.JobID) bool { _, ok := l.preempted[id]; return ok }
	l.eta.Observe(ps, queue, stopped)
	for _, e := range l.cfg.ETAAlso {
		e.Observe(ps, queue, stopped)
	}
	var waiting []gangway.JobID
	for _, u := range plan.Unplaced {
		if u.Reason.Retry() {
			waiting = append(waiting, u.JobID)
		}
	}
	if !l.eta.Due(waiting) || len(waiting) == 0 || l.cfg.Clock.Now().Before(l.etaNotBefore) {
		return
	}
	if len(o.Offers) == 0 && l.cfg.Cloud != nil {
		if offers, err := l.cfg.Cloud.Offers(ctx); err == nil {
			o.Offers = offers
		}
	}
	in := forecast.Input{Snapshot: ps, Queue: queue, Options: o}
	if !l.background {
		l.forecast(in, len(waiting))
		return
	}
	// The forecast takes the lock over: nothing the cycle goes on with
	// (ps, queue, o) changes them. It places beside the cycles, so with a
	// scorer of its own (a scorer keeps what it prepared for one Place).
	in.Options.Scorer = placement.Independent(o.Scorer)
	locked = false
	l.side.Go(func() {
		defer l.etaMu.Unlock()
		l.forecast(in, len(waiting))
	})
}

// forecast runs the estimators' forecasts and publishes the estimates;
// the caller holds etaMu.
func (l *Loop) forecast(in forecast.Input, waiting int) {
	start := l.cfg.Clock.Now()
	l.eta.Forecast(in)
	for _, e := range l.cfg.ETAAlso {
		e.Forecast(in)
	}
	ests := make(map[gangway.JobID]forecast.Estimate, waiting)
	for i := range in.Queue {
		if est, ok := l.eta.Estimate(in.Queue[i].JobID); ok {
			ests[in.Queue[i].JobID] = est
		}
	}
	l.estimates.Store(&ests)
	took := l.cfg.Clock.Now().Sub(start)
	l.etaNotBefore = start.Add(etaGap * took)
	l.log.Debug("estimated start times", "waiting", waiting, "took", took)
}

// ResignalAt is when the loop will ask the victim jobID to stop again, if it
// has asked it already: a simulator wakes the loop then.
func (l *Loop) ResignalAt(jobID gangway.JobID) (time.Time, bool) {
	last, ok := l.preempted[jobID]
	return last.Add(preemptResignal), ok
}

// preempt asks each victim to stop (once per preemptResignal); the
// preemptor is placed in a later cycle, when the victims' GPUs are free.
// Defragmentation moves come this way too, as preemptions for the job
// they make room for.
//
// Preemption signals go to Temporal, which knows nothing of the lease, so
// they are fenced here: the loop renews its lease first and sends nothing
// if another server holds it. A leader paused past its lease (SIGSTOP) and
// resumed therefore stops nobody on the strength of its stale plan; its
// commits and bursts are fenced by the view's scripts.
func (l *Loop) preempt(ctx context.Context, ps []placement.Preemption) {
	if len(ps) == 0 {
		return
	}
	if ok, err := l.cap.AcquireLease(ctx, l.cfg.Holder, l.cfg.LeaseTTL); !ok || err != nil {
		l.log.Warn("lease lost before preempting; the plan is stale, nobody is stopped", "error", err)
		if err == nil {
			l.setLeading(false)
		}
		return
	}
	now := l.cfg.Clock.Now()
	for _, p := range ps {
		for _, v := range p.Victims {
			if last, ok := l.preempted[v.JobID]; ok && now.Sub(last) < preemptResignal {
				continue
			}
			err := l.wf.SignalPreempt(ctx, v.JobID, workflows.PreemptRequest{Attempt: v.Attempt, Reason: v.Reason,
				Cause: workflows.CausePreempted, By: p.Preemptor})
			if err != nil && !errors.Is(err, jobs.ErrJobGone) {
				l.log.Warn("preempt signal failed; will retry", "job_id", v.JobID, "error", err)
				continue
			}
			l.preempted[v.JobID] = now
			l.log.Info("preempting", "job_id", v.JobID, "for", p.Preemptor, "reason", v.Reason, "lost_gpu_seconds", v.LostGPUSeconds)
		}
	}
	for id, at := range l.preempted {
		if now.Sub(at) > 10*preemptResignal {
			delete(l.preempted, id)
		}
	}
}

// observe updates the fleet, node, allocation, queue and waiting-reason
// gauges, and now and then the fragmentation ones, against the workload
// placement measured fragmentation against (the queue's when it had none).
func (l *Loop) observe(snap capacity.Snapshot, ps placement.Snapshot, workload []placement.WorkloadClass, plan placement.Plan) {
	m := l.cfg.Metrics
	if m == nil {
		return
	}
	queue := snap.Queue
	pools := map[string]metrics.GPUState{}
	kinds := map[string]gangway.CapacityType{}
	for _, n := range ps.Nodes {
		kinds[n.Pool] = n.CapacityType
		st := pools[n.Pool]
		for _, g := range n.GPUs {
			switch {
			case g.UsedMilli > 0:
				st.Allocated++
			case n.Schedulable && g.Healthy:
				st.Free++
			default:
				st.Unavailable++
			}
		}
		pools[n.Pool] = st
	}
	byClass := map[string]int{}
	for _, e := range queue {
		byClass[e.PriorityClass]++
	}
	m.Fleet(pools, byClass)
	l.cfg.RunMetrics.Pools(kinds)
	m.Allocated(allocatedByTeam(ps), nodeStates(snap, l.cfg.NodeTTL))
	byReason := map[string]int{}
	for _, u := range plan.Unplaced {
		byReason[string(u.Reason)]++
	}
	m.Unplaced(byReason)
	// Fragmentation reads the whole fleet against the typical workload:
	// at most every measureEvery, beside the cycle on the wall clock.
	now := l.cfg.Clock.Now()
	if now.Sub(l.measuredAt) < measureEvery || l.measuring.Load() {
		return
	}
	l.measuredAt = now
	measure := func() {
		r := placement.Measure(ps, placement.WorkloadOr(workload, queue))
		m.Fragmentation(r.Rate, r.Largest)
	}
	l.aside(&l.measuring, measure)
}

// aside runs f beside the cycles on the wall clock, busy set while it
// runs, and inside the cycle on any other, so that a replay is
// deterministic.
func (l *Loop) aside(busy *atomic.Bool, f func()) {
	if !l.background {
		f()
		return
	}
	busy.Store(true)
	l.side.Go(func() {
		defer busy.Store(false)
		f()
	})
}

// measureEvery is how often the fragmentation gauges are refreshed.
const measureEvery = 5 * time.Second

// allocatedByTeam sums the GPUs the running jobs hold per pool and team; a
// member holding GPU shares counts its share of each GPU, one on MIG
// devices each device's share of its parent GPU.
func allocatedByTeam(ps placement.Snapshot) map[metrics.PoolTeam]float64 {
	pool := make(map[string]string, len(ps.Nodes))
	for _, n := range ps.Nodes {
		pool[n.ID] = n.Pool
	}
	out := map[metrics.PoolTeam]float64{}
	for _, a := range ps.Running {
		for _, mem := range a.Members {
			share := 1.0
			if milli := mem.MeteredMilli(); milli < placement.Whole {
				share = float64(milli) / placement.Whole
			}
			p := mem.Pool
			if p == "" {
				p = pool[mem.NodeID]
			}
			out[metrics.PoolTeam{Pool: p, Team: a.Team}] += share * float64(len(mem.GPUs))
		}
	}
	return out
}

// nodeStates counts nodes per pool and state; a ready node whose heartbeat
// is older than nodeTTL is metrics.NodeStale.
func nodeStates(snap capacity.Snapshot, nodeTTL time.Duration) map[metrics.PoolState]int {
	out := map[metrics.PoolState]int{}
	for _, n := range snap.Nodes {
		st := n.State
		if st == gangway.NodeReady && snap.Now.Sub(n.LastHeartbeat) > nodeTTL {
			st = metrics.NodeStale
		}
		out[metrics.PoolState{Pool: n.Node.Pool, State: st}]++
	}
	return out
}
