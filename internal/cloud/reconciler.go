package cloud

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/metrics"
	"github.com/gangwayhq/gangway/providers"
)

// ErrUnknownJob is what Jobs returns for a job no workflow exists for.
var ErrUnknownJob = errors.New("unknown job")

// Jobs tells the reconciler where each job stands.
type Jobs interface {
	// Attempt returns the job's current attempt and whether its workflow
	// is still running. It returns ErrUnknownJob (wrapped) when there is
	// no such job; any other error means "cannot tell now", and the
	// reconciler then leaves the job's instances alone.
	Attempt(ctx context.Context, jobID gangway.JobID) (attempt int, running bool, err error)
}

// Nodes is the part of the capacity view the reconciler cleans up: nodes
// of cloud instances that are gone.
type Nodes interface {
	Nodes(ctx context.Context) ([]gangway.NodeStatus, error)
	RemoveNode(ctx context.Context, nodeID string) error
}

// Reconciler defaults.
const (
	DefaultReconcileInterval = time.Minute
	// DefaultOrphanGrace spares instances younger than this: a launch in
	// flight whose workflow the reconciler cannot see yet, or sees a step
	// behind, must not be killed.
	DefaultOrphanGrace = 10 * time.Minute
)

// Why an instance is an orphan, in reports, logs and metric labels.
const (
	// OrphanJobClosed: the job's workflow has finished.
	OrphanJobClosed = "job-closed"
	// OrphanJobUnknown: no workflow exists for the instance's job.
	OrphanJobUnknown = "job-unknown"
	// OrphanStaleAttempt: the job has moved on to a later attempt.
	OrphanStaleAttempt = "stale-attempt"
)

// ReconcilerConfig tunes a Reconciler.
type ReconcilerConfig struct {
	// Interval between passes; 0 means DefaultReconcileInterval.
	Interval time.Duration
	// Grace spares orphans launched less than this long ago; 0 means
	// DefaultOrphanGrace. It also applies to the nodes of gone instances,
	// measured from their last heartbeat.
	Grace time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Nodes, when set, has the nodes of instances that are gone removed
	// from the capacity view.
	Nodes   Nodes
	Metrics *metrics.Cloud // optional
	Log     *slog.Logger
	// OnReport, when set, is called with every pass's report.
	OnReport func(Report)
}

// Reconciler terminates tagged instances no live job owns.
type Reconciler struct {
	reg  *Registry
	jobs Jobs
	cfg  ReconcilerConfig
}

// NewReconciler returns a reconciler over every provider in reg.
func NewReconciler(reg *Registry, jobs Jobs, cfg ReconcilerConfig) *Reconciler {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultReconcileInterval
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultOrphanGrace
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Reconciler{reg: reg, jobs: jobs, cfg: cfg}
}

// Report is what one pass saw and did.
type Report struct {
	At time.Time
	// Instances counts the tagged instances listed, over every provider
	// that answered; Kept those a live job owns.
	Instances int
	Kept      int
	// Terminated are the orphans ended in this pass; Spared the orphans
	// still within the grace period.
	Terminated []Orphan
	Spared     []Orphan
	// RemovedNodes are nodes of gone instances taken out of the view.
	RemovedNodes []string
	// Errors are the steps that failed (a provider's listing, a job's
	// status, a terminate); the pass goes on past each.
	Errors []error
}

// Orphan is an instance no live job owns.
type Orphan struct {
	Provider   string
	InstanceID string
	NodeID     string
	Pool       string
	JobID      gangway.JobID
	// Attempt is the instance's attempt tag; Current the job's attempt
	// (0 when the job is closed or unknown).
	Attempt string
	Current int
	Reason  string // OrphanJobClosed, OrphanJobUnknown or OrphanStaleAttempt
	Age     time.Duration
	// CapacityType and State are the instance's when it was listed.
	CapacityType string
	State        providers.State
}

// Run reconciles every Interval until ctx ends; the first pass runs at
// once. Failures are reported and logged, never fatal.
func (r *Reconciler) Run(ctx context.Context) error {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		r.Reconcile(ctx)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// jobState is one job's answer, asked once per pass.
type jobState struct {
	attempt int
	running bool
	unknown bool
	err     error
}

// Reconcile runs one pass: list every provider's Gangway instances, ask
// after each instance's job, terminate the orphans past the grace period.
func (r *Reconciler) Reconcile(ctx context.Context) Report {
	now := r.cfg.Now()
	rep := Report{At: now}
	jobs := map[gangway.JobID]jobState{}
	live := map[metrics.LiveKey]int{}
	liveNodes := map[string]bool{}
	var listed []string
	complete := true // every provider answered
	for _, p := range r.reg.Providers() {
		name := p.Name()
		insts, err := p.ListByTag(ctx, providers.TagJob, "")
		if err != nil {
			complete = false
			r.fail(&rep, name, fmt.Errorf("list %s instances: %w", name, err))
			continue
		}
		listed = append(listed, name)
		var orphans []Orphan
		for _, in := range insts {
			rep.Instances++
			if in.State.Live() {
				live[metrics.LiveKey{Provider: name, Pool: in.Pool, CapacityType: string(in.CapacityType)}]++
				if in.NodeID != "" {
					liveNodes[in.NodeID] = true
				}
			}
			o, orphan, err := r.classify(ctx, p, in, jobs, now)
			switch {
			case err != nil:
				r.fail(&rep, name, err)
				rep.Kept++
			case !orphan:
				rep.Kept++
			case o.Age < r.cfg.Grace:
				rep.Spared = append(rep.Spared, o)
				r.cfg.Log.Info("orphan spared within grace", orphanAttrs(o)...)
			default:
				orphans = append(orphans, o)
			}
		}
		if len(orphans) == 0 {
			continue
		}
		ids := make([]string, len(orphans))
		for i, o := range orphans {
			ids[i] = o.InstanceID
		}
		if err := p.Terminate(ctx, ids); err != nil {
			r.fail(&rep, name, fmt.Errorf("terminate %d orphans in %s: %w", len(ids), name, err))
			continue
		}
		for _, o := range orphans {
			rep.Terminated = append(rep.Terminated, o)
			r.cfg.Metrics.OrphanTerminated(name, o.Reason)
			r.cfg.Metrics.Terminated(name, o.Pool, metrics.TerminateOrphan, 1)
			if o.State.Live() {
				live[metrics.LiveKey{Provider: name, Pool: o.Pool, CapacityType: o.CapacityType}]--
			}
			r.cfg.Log.Warn("terminated orphan instance", orphanAttrs(o)...)
		}
	}
	r.cfg.Metrics.Live(live, listed)
	if r.cfg.Nodes != nil && complete {
		rep.RemovedNodes = r.sweepNodes(ctx, &rep, liveNodes, now)
	}
	if len(rep.Terminated)+len(rep.Spared)+len(rep.Errors)+len(rep.RemovedNodes) > 0 {
		r.cfg.Log.Info("cloud reconcile", "instances", rep.Instances, "kept", rep.Kept,
			"terminated", len(rep.Terminated), "spared", len(rep.Spared),
			"removed_nodes", len(rep.RemovedNodes), "errors", len(rep.Errors))
	}
	if r.cfg.OnReport != nil {
		r.cfg.OnReport(rep)
	}
	return rep
}

// classify decides whether in is an orphan. An error means it cannot tell,
// and the instance is kept.
func (r *Reconciler) classify(ctx context.Context, p providers.Provider, in providers.Instance, jobs map[gangway.JobID]jobState, now time.Time) (Orphan, bool, error) {
	jobID := in.Tags[providers.TagJob]
	o := Orphan{Provider: p.Name(), InstanceID: in.ID, NodeID: in.NodeID, Pool: in.Pool, JobID: jobID,
		Attempt: in.Tags[providers.TagAttempt], CapacityType: string(in.CapacityType), State: in.State}
	if !in.LaunchedAt.IsZero() {
		o.Age = now.Sub(in.LaunchedAt)
	}
	if jobID == "" {
		// Tagged with an empty job: nothing can own it.
		o.Reason = OrphanJobUnknown
		return o, true, nil
	}
	st, ok := jobs[jobID]
	if !ok {
		attempt, running, err := r.jobs.Attempt(ctx, jobID)
		switch {
		case errors.Is(err, ErrUnknownJob):
			st = jobState{unknown: true}
		case err != nil:
			st = jobState{err: fmt.Errorf("job %s of instance %s/%s: %w", jobID, p.Name(), in.ID, err)}
		default:
			st = jobState{attempt: attempt, running: running}
		}
		jobs[jobID] = st
	}
	switch {
	case st.err != nil && ok:
		return o, false, nil // reported with the job's first instance
	case st.err != nil:
		return o, false, st.err
	case st.unknown:
		o.Reason = OrphanJobUnknown
		return o, true, nil
	case !st.running:
		o.Reason = OrphanJobClosed
		return o, true, nil
	}
	o.Current = st.attempt
	tagged, err := strconv.Atoi(o.Attempt)
	if err != nil {
		// Gangway always writes the tag; a live job's instance with a
		// mangled one is kept until the job ends rather than guessed at.
		r.cfg.Log.Warn("instance of a live job has no readable attempt tag; kept",
			"provider", p.Name(), "instance", in.ID, "job_id", jobID, "attempt_tag", o.Attempt)
		return o, false, nil
	}
	// A tag ahead of the job is a launch the job's status has not caught
	// up with: in flight, not an orphan.
	if tagged < st.attempt {
		o.Reason = OrphanStaleAttempt
		return o, true, nil
	}
	return o, false, nil
}

// sweepNodes removes from the view the nodes of cloud instances that are
// gone: nodes launched for a job (Owner set) whose instance no provider
// lists as live and whose agent has been silent for the grace period.
// Nodes a job still holds GPUs on are left for the next pass.
func (r *Reconciler) sweepNodes(ctx context.Context, rep *Report, liveNodes map[string]bool, now time.Time) []string {
	nodes, err := r.cfg.Nodes.Nodes(ctx)
	if err != nil {
		r.fail(rep, "", fmt.Errorf("list nodes: %w", err))
		return nil
	}
	var removed []string
	for _, n := range nodes {
		if n.Node.Owner == "" || liveNodes[n.Node.ID] || now.Sub(n.LastHeartbeat) < r.cfg.Grace {
			continue
		}
		err := r.cfg.Nodes.RemoveNode(ctx, n.Node.ID)
		switch {
		case errors.Is(err, capacity.ErrNodeBusy):
			r.cfg.Log.Info("node of a gone instance still holds GPUs; removing it later", "node", n.Node.ID, "job_id", n.Node.Owner)
		case errors.Is(err, capacity.ErrNotFound):
		case err != nil:
			r.fail(rep, "", fmt.Errorf("remove node %s: %w", n.Node.ID, err))
		default:
			removed = append(removed, n.Node.ID)
			r.cfg.Log.Info("removed node of a gone cloud instance", "node", n.Node.ID, "job_id", n.Node.Owner, "pool", n.Node.Pool)
		}
	}
	return removed
}

func (r *Reconciler) fail(rep *Report, provider string, err error) {
	rep.Errors = append(rep.Errors, err)
	r.cfg.Metrics.ReconcileError(provider)
	r.cfg.Log.Warn("cloud reconcile step failed", "provider", provider, "error", err)
}

func orphanAttrs(o Orphan) []any {
	return []any{"provider", o.Provider, "instance", o.InstanceID, "node", o.NodeID, "pool", o.Pool,
		"job_id", o.JobID, "attempt", o.Attempt, "current_attempt", o.Current, "reason", o.Reason,
		"age", o.Age.Round(time.Second)}
}
