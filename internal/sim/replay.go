package sim

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/dispatch"
	"github.com/gangwayhq/gangway/internal/dispatch/dispatchtest"
	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/placement/forecast"
	"github.com/gangwayhq/gangway/workflows"
)

// TracePolicies are the policies `gangway replay trace` compares by
// default: two classic baselines, the FGD paper's policy and Gangway's.
var TracePolicies = []string{"first-fit", "best-fit", "fgd", "gangway"}

// DefaultCheckpointEvery is how often a job is assumed to checkpoint: a
// preempted job loses the work since its last checkpoint.
const DefaultCheckpointEvery = 30 * time.Minute

// TraceEpoch is the wall-clock time the virtual clock starts at (trace
// time 0); only differences matter.
var TraceEpoch = time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)

// maxRounds bounds the dispatch cycles at one instant: after a cycle
// preempts, the victims stop at once (the replay plays their workflows) and
// the loop runs again so the preemptor can start, as the server's loop would
// on its next cycle.
const maxRounds = 8

// TraceConfig is one dynamic replay: every policy on the same fleet and
// jobs.
type TraceConfig struct {
	Nodes []placement.Node
	Jobs  []TraceJob // in submit order
	// Policies by name; NewScorer makes a fresh scorer for each run.
	Policies  []string
	NewScorer func(policy string) (placement.Scorer, error)
	// Options are the engine's options for every run: reservations,
	// preemption, minimum runtime, fairness, quotas, node sampling, the
	// workload fragmentation is measured against (nil: every job's class,
	// placement.WorkloadFromJobs). Scorer and Seed are set per run.
	Options placement.Options
	Seed    uint64
	// CheckpointEvery is the checkpoint interval: a preempted job keeps
	// the work up to its last checkpoint and is requeued with the rest.
	// 0 means no checkpoints: a preempted job starts over.
	CheckpointEvery time.Duration
	// ExactRuntimes declares each job's exact remaining run time as its
	// max runtime, instead of that rounded up to a power of two of minutes.
	// Only reservations (backfill) read it.
	ExactRuntimes bool
	// Speedup divides every submit time (durations stay): > 1 compresses
	// the arrivals and raises the load. 0 means 1.
	Speedup float64
	// Parallel bounds the runs in flight; 0 means GOMAXPROCS.
	Parallel int
	// LearnWorkload: placement measures fragmentation against the jobs
	// that have arrived so far (the dispatch loop's own history, as the
	// server does), not Options.Workload, which the replay's fragmentation
	// figures are still measured against.
	LearnWorkload bool
	// ETA, when set, measures start-time estimates (see ETAConfig); jobs
	// then declare limits, not ExactRuntimes or rounded ones.
	ETA *ETAConfig
	// Progress, when set, is called with the arrivals and completions
	// done and to do over all runs. Calls are serialized.
	Progress func(done, total int)
	// Burst, with ETA, lets every job rent cloud capacity and replays
	// every policy once per BurstRuntimes entry (TraceBurst); not with
	// Defrag.
	Burst *TraceBurst
	// Defrag, when Enabled, replays every policy twice on the same jobs
	// and seed: as Options say, then with planned defragmentation
	// (Options.Defrag = Defrag). In the defragmenting run the jobs
	// checkpoint every CheckpointEvery, the view reports each one's newest
	// checkpoint, and a moved job is requeued with the work since it plus
	// Defrag.RestartOverhead to redo.
	Defrag placement.Defrag
}

// LargeJobGPUs is the size from which a job counts as large in a replay's
// report: the waits of jobs of this many GPUs or more are reported apart.
const LargeJobGPUs = 8

// Sample is the fleet after the events of one instant were processed.
type Sample struct {
	At         time.Duration // virtual time from the start of the trace
	AllocMilli int64         // allocated GPU milli
	FragMilli  float64       // fragmented GPU milli (part of the free capacity)
	Queue      int32         // jobs waiting
	Running    int32         // jobs running
}

// TraceRun is one policy's replay.
type TraceRun struct {
	Policy string
	// Defrag: the run defragmented (TraceConfig.Defrag).
	Defrag bool
	// Burst is whose runtimes the run's burst decision expected
	// (BurstRuntimes; "": no cloud). Bursts counts the jobs it sent to the
	// cloud; CloudGPUSeconds the GPU-seconds they rented (boot included),
	// CloudCost what those cost, CloudWorkGPUSeconds the jobs' work there.
	Burst                                string
	Bursts                               int
	CloudGPUSeconds, CloudWorkGPUSeconds float64
	CloudCost                            float64
	CapacityMilli                        int64
	Jobs                                 int
	// Placed jobs started at least once; Finished ran to the end.
	Placed, Finished int
	// NeverPlaced never started: Unplaceable ones the engine said never
	// fit this fleet (dropped from the queue at once), the others still
	// waiting when nothing was left to run. Unfinished were preempted and
	// still waiting to restart then.
	NeverPlaced, Unplaceable, Unfinished int
	// Preemptions counts victims stopped; LostGPUSeconds the work they
	// lost since their last checkpoints.
	Preemptions    int
	LostGPUSeconds float64
	// Moves counts jobs moved by defragmentation (not in Preemptions);
	// MoveLostGPUSeconds the work they lost since their last checkpoints,
	// MoveRestartGPUSeconds their restarts (Defrag.RestartOverhead each).
	Moves                                     int
	MoveLostGPUSeconds, MoveRestartGPUSeconds float64
	// LargeJobs is how many placed jobs had LargeJobGPUs or more;
	// LargeWaitMean and LargeWaitP99 their queue waits, in seconds.
	LargeJobs                   int
	LargeWaitMean, LargeWaitP99 float64
	// Waits is each placed job's time in the queue (every attempt's wait
	// added up), in seconds, sorted.
	Waits                               []float64
	WaitMean, WaitP50, WaitP95, WaitP99 float64
	// AllocMean is the time-weighted mean allocated share of GPU capacity
	// over the arrival window (first to last submission; the whole run
	// when they coincide); AllocMeanAll over the whole run, to the last
	// departure; AllocQueued over the instants when jobs were waiting
	// (NaN if none did): how full the policy keeps the fleet when there is
	// work it could not place. FragMean is the time-weighted mean
	// fragmented share of free GPU capacity over the arrival window.
	AllocMean, AllocMeanAll, AllocQueued, FragMean float64
	// AllocPeak is the highest allocated share of GPU capacity reached.
	AllocPeak float64
	// QueuedTime is how long jobs were waiting, in all.
	QueuedTime time.Duration
	// FirstSubmit, LastSubmit and End bound the run: End is the last
	// departure (or the last event), Makespan End − FirstSubmit.
	FirstSubmit, LastSubmit, End time.Duration
	Makespan                     time.Duration
	// PlaceCalls is the number of placement.Place calls the loop made;
	// MaxQueue the longest queue one was given, MeanQueue the mean.
	PlaceCalls int
	MaxQueue   int
	MeanQueue  float64
	// SkippedIdle counts instants with jobs waiting where nothing changed
	// (a wake-up with no higher-priority job waiting): no loop tick.
	SkippedIdle        int
	MaxRunning         int
	PlaceTime, Elapsed time.Duration
	Series             []Sample
	// ETA is the estimate measurement, with TraceConfig.ETA.
	ETA *ETARun
}

// RunTrace replays cfg.Jobs for every policy, runs in parallel, and
// returns the runs in cfg.Policies order.
func RunTrace(ctx context.Context, cfg TraceConfig) (*TraceResult, error) {
	if len(cfg.Nodes) == 0 || len(cfg.Jobs) == 0 {
		return nil, errors.New("trace: no nodes or no jobs")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	if GPUCapacityMilli(cfg.Nodes) == 0 {
		return nil, errors.New("trace: the fleet has no GPUs")
	}
	jobs := prepareJobs(cfg.Jobs, cmp.Or(cfg.Speedup, 1))
	if cfg.Options.Workload == nil {
		shapes := make([]gangway.QueueEntry, len(jobs))
		for i := range jobs {
			shapes[i] = jobs[i].Job
		}
		cfg.Options.Workload = placement.WorkloadFromJobs(shapes)
	}
	variants := 1
	switch {
	case cfg.Defrag.Enabled:
		variants = 2
	case cfg.Burst != nil:
		variants = len(BurstRuntimes)
	}
	prog := newProgress(cfg.Progress, 2*len(jobs)*len(cfg.Policies)*variants)
	runs := make([]TraceRun, len(cfg.Policies)*variants)
	errs := make([]error, len(runs))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, cmp.Or(cfg.Parallel, runtime.GOMAXPROCS(0)))
	var wg sync.WaitGroup
	for k := range runs {
		policy, defrag := cfg.Policies[k/variants], cfg.Defrag.Enabled && k%variants == 1
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[k] = ctx.Err()
				return
			}
			defer func() { <-sem }()
			sc, err := cfg.NewScorer(policy)
			if err == nil {
				o := cfg.Options
				o.Scorer, o.Seed = sc, cfg.Seed
				if defrag {
					o.Defrag = cfg.Defrag
				}
				rp := newReplay(cfg.Nodes, jobs, o, cfg.CheckpointEvery, prog)
				rp.exactRuntime, rp.learnWorkload = cfg.ExactRuntimes, cfg.LearnWorkload
				if cfg.ETA != nil {
					rp.withETA(cfg.ETA, cfg.Seed)
				}
				if cfg.Burst != nil {
					rp.burst, rp.out.Burst = cfg.Burst, BurstRuntimes[k%variants]
				}
				runs[k], err = rp.run(ctx, policy)
			}
			if err != nil {
				errs[k] = err
				cancel()
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	prog.finish()
	return newTraceResult(cfg, jobs, runs), nil
}

// prepareJobs compresses submit times by speedup and sorts by submit time.
func prepareJobs(in []TraceJob, speedup float64) []TraceJob {
	out := slices.Clone(in)
	if speedup != 1 {
		for i := range out {
			out[i].Submit = time.Duration(float64(out[i].Submit) / speedup)
		}
	}
	slices.SortStableFunc(out, func(a, b TraceJob) int { return compareDur(a.Submit, b.Submit) })
	return out
}

// jobState is one trace job during a replay.
type jobState struct {
	attempt   int
	remaining time.Duration      // work left
	queuedAt  time.Duration      // when it last entered the queue
	wait      time.Duration      // queued so far, every attempt
	start     time.Duration      // this attempt's start, while running
	asg       gangway.Assignment // this attempt's, while running
	state     uint8
	// retryAt is the retry event pushed for the job, if any.
	retryAt time.Duration
}

const (
	stFuture uint8 = iota
	stQueued
	stRunning
	stDone
	stNever
	stCloud // running on rented capacity
)

// event is a departure; a wake-up when a running preemptible job comes of
// age (MinRuntime) and may become a victim; or a retry when the loop chose
// a victim it had asked to stop less than the loop's re-signal interval ago, so
// it signals again only when that has passed — a time the loop would reach
// on its own, with no event to wake the replay.
type event struct {
	at      time.Duration
	seq     int
	job     int
	attempt int
	wake    bool
	retry   bool
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(a, b int) bool {
	if h[a].at != h[b].at {
		return h[a].at < h[b].at
	}
	return h[a].seq < h[b].seq
}
func (h eventHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// replay is the discrete-event simulation of one policy: arrivals in
// submit order, a heap of departures, and the server's dispatch loop on a
// virtual clock against an in-memory view and workflows. The replay plays
// the parts outside the loop: JobWorkflow (enqueue on arrival; start on
// the placed signal; on the preempt signal release and requeue the next
// attempt) and the agents (a job runs its duration, then releases).
type replay struct {
	nodes      []placement.Node
	jobs       []TraceJob
	st         []jobState
	opts       placement.Options
	checkpoint time.Duration
	// exactRuntime gives the engine each job's exact remaining run time
	// as its max runtime (see estimate).
	exactRuntime bool
	// learnWorkload is TraceConfig.LearnWorkload.
	learnWorkload bool
	// burst is TraceConfig.Burst (nil: no cloud); out.Burst says whose
	// runtimes the decision expects.
	burst *TraceBurst
	prog  *progress

	clock   *dispatchtest.Clock
	view    *dispatchtest.Capacity
	wf      *dispatchtest.Workflows
	loop    *dispatch.Loop
	placer  *timedPlacer
	meter   *fleetMeter
	events  eventHeap
	seq     int
	pending []int // job indexes queued, in arrival order
	byID    map[gangway.JobID]int
	running int
	out     TraceRun
	// eta measures estimates (nil: off); firstStart is each job's first
	// start, -1 before it.
	eta        *etaState
	firstStart []time.Duration
}

func newReplay(nodes []placement.Node, jobs []TraceJob, o placement.Options, checkpoint time.Duration, prog *progress) *replay {
	return &replay{nodes: nodes, jobs: jobs, st: make([]jobState, len(jobs)), opts: o, checkpoint: checkpoint,
		prog: prog, byID: make(map[gangway.JobID]int, len(jobs))}
}

// withETA turns the estimate measurement on.
func (r *replay) withETA(cfg *ETAConfig, seed uint64) {
	r.eta = newETAState(cfg, r.jobs, seed, r.oracle())
	r.firstStart = make([]time.Duration, len(r.jobs))
	for k := range r.firstStart {
		r.firstStart[k] = -1
	}
}

// start sets up the view, the workflows and the loop on a fresh clock.
func (r *replay) start() {
	r.clock = dispatchtest.NewClock(TraceEpoch)
	r.view, r.wf = dispatchtest.NewCapacity(r.clock), dispatchtest.NewWorkflows()
	for i := range r.nodes {
		r.view.RegisterNode(viewNode(r.nodes[i]))
	}
	r.placer = &timedPlacer{}
	if r.opts.Defrag.Enabled {
		r.view.CheckpointEvery(r.checkpoint) // the agents' reports of each save
	}
	po := r.opts
	if r.learnWorkload {
		po.Workload = nil // the loop learns it from the arrivals
	}
	cfg := dispatch.Config{Holder: "sim", Clock: r.clock, Placement: po, Placer: r.placer, SignalParallelism: 1, NoETA: true}
	if r.eta.measuring() {
		cfg.NoETA, cfg.ETA, cfg.ETAAlso = false, r.eta.est[etaLearned], []*forecast.Estimator{r.eta.est[etaExact], r.eta.est[etaLimits]}
	}
	if r.burst != nil && r.eta.measuring() {
		cfg.Cloud, cfg.Placement.BurstAfter = replayCloud(cloudOffers(r.burst, r.nodes)), r.burst.After
		cfg.ETA, cfg.ETAAlso = r.eta.burstEstimator(r.out.Burst)
	}
	r.loop = dispatch.New(cfg, r.view, r.wf)
	r.meter = newFleetMeter(r.view, r.nodes, r.opts.Workload)
}

func (r *replay) run(ctx context.Context, policy string) (TraceRun, error) {
	start := time.Now()
	r.start()
	capacity := GPUCapacityMilli(r.nodes)
	r.out = TraceRun{Policy: policy, Defrag: r.opts.Defrag.Enabled, Burst: r.out.Burst, CapacityMilli: capacity, Jobs: len(r.jobs),
		FirstSubmit: r.jobs[0].Submit, LastSubmit: r.jobs[len(r.jobs)-1].Submit}
	for i := range r.jobs {
		r.st[i].remaining = r.jobs[i].Duration
	}
	var integ integrator
	next, steps, progressed := 0, 0, 0
	for {
		if steps++; steps%512 == 0 {
			if err := ctx.Err(); err != nil {
				return TraceRun{}, err
			}
		}
		t, ok := r.nextTime(next)
		if !ok {
			break
		}
		r.clock.Set(TraceEpoch.Add(t))
		changed := false
		// Departures (and wake-ups) first, then arrivals, then the
		// dispatch loop's cycles for the instant.
		for len(r.events) > 0 && r.events[0].at == t {
			e := heap.Pop(&r.events).(event)
			s := &r.st[e.job]
			switch {
			case s.state == stCloud && s.attempt == e.attempt && !e.wake && !e.retry:
				r.finishCloud(e.job, t)
				progressed++
				changed = changed || len(r.pending) > 0 || r.eta.measuring()
			case s.state != stRunning || s.attempt != e.attempt:
				// A preempted attempt's departure, wake-up or retry.
			case e.retry:
				changed = changed || len(r.pending) > 0
			case e.wake:
				changed = changed || r.higherPending(r.jobs[e.job].Job.Priority)
			default:
				if err := r.finish(ctx, e.job, t); err != nil {
					return TraceRun{}, err
				}
				progressed++
				// The loop learns runtimes from the ends it sees: with
				// estimates on it sees each one when it happens.
				changed = changed || len(r.pending) > 0 || r.eta.measuring()
			}
		}
		for next < len(r.jobs) && r.jobs[next].Submit == t {
			s := &r.st[next]
			s.state, s.queuedAt = stQueued, t
			r.byID[r.jobs[next].Job.JobID] = next
			r.wf.Start(r.jobs[next].Job.JobID)
			r.enqueue(next)
			next++
			progressed++
			changed = true
		}
		if changed {
			if err := r.schedule(ctx, t); err != nil {
				return TraceRun{}, err
			}
		} else if len(r.pending) > 0 {
			r.out.SkippedIdle++
		}
		if progressed >= 256 {
			r.prog.add(progressed)
			progressed = 0
		}
		integ.add(r, t)
	}
	r.prog.add(progressed)
	for _, k := range r.pending {
		r.st[k].state = stNever
		r.prog.add(1)
	}
	r.pending = nil
	r.out.PlaceCalls, r.out.MaxQueue, r.out.MeanQueue = r.placer.calls, r.placer.maxQueue, r.placer.sumQueue
	r.out.PlaceTime = r.placer.elapsed
	if r.eta.measuring() {
		e := r.eta.score(r)
		r.out.ETA = &e
	}
	r.finishStats(&integ, time.Since(start))
	return r.out, nil
}

// nextTime is the earliest pending event: an arrival or a departure.
func (r *replay) nextTime(next int) (time.Duration, bool) {
	switch {
	case next < len(r.jobs) && len(r.events) > 0:
		return min(r.jobs[next].Submit, r.events[0].at), true
	case next < len(r.jobs):
		return r.jobs[next].Submit, true
	case len(r.events) > 0:
		return r.events[0].at, true
	}
	return 0, false
}

func (r *replay) higherPending(prio int) bool {
	for _, k := range r.pending {
		if r.jobs[k].Job.Priority > prio {
			return true
		}
	}
	return false
}

// enqueue puts job k's current attempt in the view's queue, as JobWorkflow's
// enqueue activity does: the original submit time keeps its place in line.
func (r *replay) enqueue(k int) {
	s := &r.st[k]
	e := r.jobs[k].Job
	e.Attempt, e.SubmittedAt, e.EnqueuedAt = s.attempt+1, TraceEpoch.Add(r.jobs[k].Submit), r.clock.Now()
	switch {
	case r.eta != nil:
		// A user's limit: the work times the job's factor, whole seconds.
		e.MaxRuntime = time.Duration(math.Ceil(s.remaining.Seconds()*r.eta.factor[k])) * time.Second
	case r.opts.Reservations > 0:
		e.MaxRuntime = r.estimate(s.remaining)
	}
	if r.opts.Defrag.Enabled && r.checkpoint > 0 {
		e.Checkpointable, e.CheckpointInterval = true, r.checkpoint
	}
	e.Burst.Enabled = r.burst != nil
	r.view.Enqueue(e)
	r.pending = append(r.pending, k)
}

// schedule runs the dispatch loop's Tick at instant t — again at the same
// instant when its cycle preempted, once the victims have stopped — and
// plays the workflows' part in each signal it sent.
func (r *replay) schedule(ctx context.Context, t time.Duration) error {
	for round := 0; round < maxRounds && (len(r.pending) > 0 || (round == 0 && r.eta.measuring())); round++ {
		r.view.Heartbeat() // the agents are alive
		r.placer.last = placement.Plan{}
		if err := r.loop.Tick(ctx); err != nil {
			return fmt.Errorf("dispatch at %s: %w", t, err)
		}
		drop := map[int]bool{}
		stopped := 0
		for _, sig := range r.wf.TakeSignals() {
			k, ok := r.byID[sig.JobID]
			if !ok {
				continue
			}
			s := &r.st[k]
			switch sig.Name {
			case workflows.SignalPlaced:
				if s.state == stQueued && sig.Placed.Attempt == s.attempt+1 {
					r.begin(k, sig.Placed, t)
					drop[k] = true
				}
			case workflows.SignalBurst:
				if s.state == stQueued && sig.Burst.Attempt == s.attempt+1 && len(sig.Burst.Offers) > 0 {
					r.rent(k, sig.Burst, t)
					drop[k] = true
				}
			case workflows.SignalPreempt:
				if s.state == stRunning && sig.Preempt.Attempt == s.attempt+1 {
					mv, moved := r.placer.moves[sig.JobID]
					moved = moved && mv.Attempt == sig.Preempt.Attempt
					if err := r.preempt(ctx, k, t, moved); err != nil {
						return err
					}
					stopped++
				}
			}
		}
		r.retryVictims(t)
		// A job the engine says never fits this fleet is dropped, as if
		// its user cancelled it.
		for _, u := range r.placer.last.Unplaced {
			if k, ok := r.byID[u.JobID]; ok && !u.Reason.Retry() && r.st[k].state == stQueued {
				r.view.Dequeue(u.JobID)
				r.wf.End(u.JobID)
				r.st[k].state = stNever
				r.out.Unplaceable++
				r.prog.add(1)
				drop[k] = true
			}
		}
		if len(drop) > 0 {
			r.pending = slices.DeleteFunc(r.pending, func(k int) bool { return drop[k] })
		}
		if r.eta.measuring() {
			for _, k := range r.pending {
				if r.st[k].attempt == 0 {
					r.eta.note(k, r.jobs[k].Job.JobID)
				}
			}
		}
		if stopped == 0 {
			return nil
		}
	}
	return nil
}

// retryVictims schedules a retry for each victim of the cycle's plan that
// is still running: the loop did not signal it, having asked it to stop
// too recently, and says when it will ask again.
func (r *replay) retryVictims(t time.Duration) {
	for _, p := range r.placer.last.Preemptions {
		for _, v := range p.Victims {
			k, ok := r.byID[v.JobID]
			if !ok {
				continue
			}
			s := &r.st[k]
			again, asked := r.loop.ResignalAt(v.JobID)
			at := again.Sub(TraceEpoch)
			if s.state != stRunning || s.attempt+1 != v.Attempt || !asked || at <= t || s.retryAt == at {
				continue
			}
			s.retryAt = at
			r.push(event{at: at, job: k, attempt: s.attempt, retry: true})
		}
	}
}

// estimate is the max runtime a job declares for work left: the engine's
// backfill needs to know when jobs end. Without reservations nothing reads
// it and the replay leaves it out, so the engine recognises alike jobs that
// failed in a cycle (its cache is keyed by shape, max runtime included).
// Exact runtimes are what no user declares; the default is the work left
// rounded up to a power of two of minutes (1m, 2m, 4m, ... — at most twice
// the truth, never less, so a reservation never starts before the GPUs it
// counts on are free), which also keeps alike jobs alike.
func (r *replay) estimate(left time.Duration) time.Duration {
	if r.exactRuntime {
		return left
	}
	return RoundRuntime(left)
}

// RoundRuntime rounds d up to a power of two of minutes (at least 1m).
func RoundRuntime(d time.Duration) time.Duration {
	e := time.Minute
	for e < d && e < 1<<20*time.Minute { // up to about two years
		e *= 2
	}
	return e
}

// dequeue moves job k from the queue to state (on-prem or cloud) at t: its
// wait ends, and its first start counts it placed.
func (r *replay) dequeue(k int, state uint8, t time.Duration) {
	s := &r.st[k]
	if s.attempt == 0 {
		r.out.Placed++
		if r.firstStart != nil {
			r.firstStart[k] = t
		}
	}
	s.state, s.start = state, t
	s.wait += t - s.queuedAt
}

// begin starts job k's attempt on the assignment its placed signal carried.
func (r *replay) begin(k int, a gangway.Assignment, t time.Duration) {
	s := &r.st[k]
	r.dequeue(k, stRunning, t)
	r.running++
	r.out.MaxRunning = max(r.out.MaxRunning, r.running)
	s.asg = a
	for _, m := range a.Members {
		r.meter.update(m.NodeID)
	}
	r.push(event{at: t + s.remaining, job: k, attempt: s.attempt})
	if j := &r.jobs[k].Job; j.Preemptible && r.opts.Preempt && r.opts.MinRuntime > 0 && s.remaining > r.opts.MinRuntime {
		r.push(event{at: t + r.opts.MinRuntime, job: k, attempt: s.attempt, wake: true})
	}
}

func (r *replay) push(e event) {
	e.seq = r.seq
	r.seq++
	heap.Push(&r.events, e)
}

// release gives job k's GPUs back through the view, as the workflow's
// release activity does.
func (r *replay) release(ctx context.Context, k int) error {
	s := &r.st[k]
	if _, err := r.view.Release(ctx, s.asg.JobID, s.asg.Attempt); err != nil {
		return fmt.Errorf("release %s: %w", s.asg.JobID, err)
	}
	for _, m := range s.asg.Members {
		r.meter.update(m.NodeID)
	}
	r.running--
	return nil
}

// finish ends job k: it ran all its work and its workflow completes.
func (r *replay) finish(ctx context.Context, k int, t time.Duration) error {
	if err := r.release(ctx, k); err != nil {
		return err
	}
	r.wf.End(r.jobs[k].Job.JobID)
	r.st[k].state = stDone
	r.st[k].remaining = 0
	r.out.Finished++
	r.out.End = max(r.out.End, t)
	return nil
}

// preempt stops job k at once, as JobWorkflow does on the preempt signal:
// it releases, and requeues the next attempt with the work left plus the
// work lost since its last checkpoint — and, for a job moved by
// defragmentation, the restart overhead (restore and start-up).
func (r *replay) preempt(ctx context.Context, k int, t time.Duration, moved bool) error {
	s := &r.st[k]
	if err := r.release(ctx, k); err != nil {
		return err
	}
	elapsed := t - s.start
	var saved time.Duration
	if r.checkpoint > 0 {
		saved = elapsed / r.checkpoint * r.checkpoint
	}
	lost := elapsed - saved
	s.remaining -= saved
	share := gpuShare(&r.jobs[k].Job)
	if moved {
		r.out.Moves++
		r.out.MoveLostGPUSeconds += lost.Seconds() * share
		r.out.MoveRestartGPUSeconds += r.opts.Defrag.RestartOverhead.Seconds() * share
		s.remaining += r.opts.Defrag.RestartOverhead
	} else {
		r.out.Preemptions++
		r.out.LostGPUSeconds += lost.Seconds() * share
	}
	s.attempt++
	s.state, s.queuedAt = stQueued, t
	r.enqueue(k)
	return nil
}

// gpuShare is the GPUs a job holds, shares counted as fractions.
func gpuShare(j *gangway.QueueEntry) float64 {
	return float64(j.GPUMilliTotal()) / placement.Whole
}

// integrator accumulates time-weighted allocation and fragmentation: the
// state recorded at one instant holds until the next.
type integrator struct {
	last                        time.Duration
	have                        bool
	alloc, frag                 float64 // state since last
	queued                      bool    // jobs waiting since last
	allocWin, fragWin, allocAll float64 // integrals
	allocQueued                 float64
	win, all, queuedSecs        float64 // seconds integrated
}

func (g *integrator) add(r *replay, t time.Duration) {
	if g.have {
		dt := (t - g.last).Seconds()
		g.allocAll += g.alloc * dt
		g.all += dt
		if g.queued {
			g.allocQueued += g.alloc * dt
			g.queuedSecs += dt
		}
		lo, hi := max(g.last, r.out.FirstSubmit), min(t, r.out.LastSubmit)
		if w := (hi - lo).Seconds(); w > 0 {
			g.allocWin += g.alloc * w
			g.fragWin += g.frag * w
			g.win += w
		}
	}
	capacity := float64(r.out.CapacityMilli)
	free := float64(r.meter.free)
	g.alloc = (capacity - free) / capacity
	r.out.AllocPeak = max(r.out.AllocPeak, g.alloc)
	g.frag = 0
	if free > 0 {
		g.frag = r.meter.frag / free
	}
	g.last, g.have, g.queued = t, true, len(r.pending) > 0
	r.out.Series = append(r.out.Series, Sample{At: t, AllocMilli: r.out.CapacityMilli - r.meter.free,
		FragMilli: r.meter.frag, Queue: int32(len(r.pending)), Running: int32(r.running)})
}

func (r *replay) finishStats(g *integrator, elapsed time.Duration) {
	run := &r.out
	var large []float64
	for k := range r.st {
		s := &r.st[k]
		if s.attempt > 0 || s.state == stDone || s.state == stRunning {
			run.Waits = append(run.Waits, s.wait.Seconds())
			if j := &r.jobs[k]; !j.Job.Share() && j.GPUs() >= LargeJobGPUs {
				large = append(large, s.wait.Seconds())
			}
		}
		switch {
		case s.state == stNever && s.attempt == 0:
			run.NeverPlaced++
		case s.state == stNever:
			run.Unfinished++
		}
	}
	slices.Sort(run.Waits)
	run.WaitMean, run.WaitP50, run.WaitP95, run.WaitP99 = mean(run.Waits),
		quantile(run.Waits, 0.50), quantile(run.Waits, 0.95), quantile(run.Waits, 0.99)
	slices.Sort(large)
	run.LargeJobs, run.LargeWaitMean, run.LargeWaitP99 = len(large), mean(large), quantile(large, 0.99)
	if run.End < run.LastSubmit {
		run.End = run.LastSubmit
	}
	run.Makespan = run.End - run.FirstSubmit
	switch {
	case g.win > 0:
		run.AllocMean, run.FragMean = g.allocWin/g.win, g.fragWin/g.win
	case g.all > 0:
		run.AllocMean, run.FragMean = g.allocAll/g.all, math.NaN()
	default:
		run.AllocMean, run.FragMean = math.NaN(), math.NaN()
	}
	run.AllocMeanAll, run.AllocQueued = math.NaN(), math.NaN()
	if g.all > 0 {
		run.AllocMeanAll = g.allocAll / g.all
	}
	if g.queuedSecs > 0 {
		run.AllocQueued = g.allocQueued / g.queuedSecs
	}
	run.QueuedTime = time.Duration(g.queuedSecs * float64(time.Second))
	if run.PlaceCalls > 0 {
		run.MeanQueue /= float64(run.PlaceCalls)
	}
	run.Elapsed = elapsed
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// quantile is the nearest-rank q-quantile of sorted xs.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// replayCloud is the replay's cloud as the dispatch loop reads it.
type replayCloud []gangway.Offer

// Offers implements dispatch.Offers.
func (c replayCloud) Offers(context.Context) ([]gangway.Offer, error) { return c, nil }
