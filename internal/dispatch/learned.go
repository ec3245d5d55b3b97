package dispatch

import (
	"context"
	"time"

	"github.com/gangwayhq/gangway/internal/capacity"
)

// learnedSaveEvery is how often, at most, the leader stores what it
// learned (Config.Records) while it learns: a leader that dies loses
// what it learned since (one that stops stores it first:
// saveLearnedOnExit). The record grows with the estimator's groups
// (teams, projects, name prefixes): about 14 KB for 70 groups, 1.4 MB
// for 8,000.
const learnedSaveEvery = time.Minute

// savedLearned is what saveLearned stored last: when, the arrivals and
// the estimator's learning (forecast.Estimator.Learned) counted then,
// and the generation of the view it was stored in.
type savedLearned struct {
	at      time.Time
	arrived int
	eta     int64
	gen     string
}

// saveLearned stores the arrivals' workload and the estimator's state
// when either has learned something since they were last stored, at
// most every learnedSaveEvery, and at once in a view of another
// generation than the one they were stored in (flushed or lost:
// rebuild.go). On the wall clock the record is encoded and stored beside
// the cycles. A failed store is logged and tried again at the next turn
// of the period: the loop places and estimates as well without it.
func (l *Loop) saveLearned(ctx context.Context, gen string) {
	now := l.cfg.Clock.Now()
	if l.cfg.Records == nil || (now.Sub(l.saved.at) < learnedSaveEvery && gen == l.saved.gen) || l.saving.Load() {
		return
	}
	if !l.etaMu.TryLock() {
		return // a forecast holds the estimator: a later cycle stores
	}
	defer l.etaMu.Unlock()
	rec, ok := l.learnedSince(now, gen)
	if !ok {
		return
	}
	l.aside(&l.saving, func() { l.storeLearned(ctx, rec) })
}

// saveLearnedOnExit stores, as the leader gives up the lease (Run's end:
// a deploy, a shutdown), what it learned since the last store, so that
// the server taking over loses none of it. Run has waited for the work
// beside the cycles, a forecast or a store among them.
func (l *Loop) saveLearnedOnExit(ctx context.Context) {
	if l.cfg.Records == nil {
		return
	}
	l.etaMu.Lock()
	defer l.etaMu.Unlock()
	if rec, ok := l.learnedSince(l.cfg.Clock.Now(), l.saved.gen); ok {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), exitStoreTimeout)
		defer cancel()
		l.storeLearned(ctx, rec)
	}
}

// exitStoreTimeout bounds the last store of a leader that stops.
const exitStoreTimeout = 5 * time.Second

// learnedSince is the record to store at now in a view of generation gen,
// and marks it stored; false when nothing was learned since the last one
// (in the same generation) or there is nothing to store. The caller holds
// etaMu.
func (l *Loop) learnedSince(now time.Time, gen string) (capacity.Learned, bool) {
	next := savedLearned{at: now, arrived: l.arrived, gen: gen}
	if l.eta != nil {
		next.eta = l.eta.Learned()
	}
	failed := l.saveFailed.Swap(false)
	if next.arrived == l.saved.arrived && next.eta == l.saved.eta && gen == l.saved.gen && !failed {
		return capacity.Learned{}, false
	}
	rec := capacity.Learned{Arrivals: l.arrivals.Weight(), At: now}
	if rec.Arrivals > 0 {
		rec.Workload = l.arrivals.Classes()
	}
	if next.eta > 0 {
		st := l.eta.State() // a copy: the estimator goes on meanwhile
		rec.ETA = &st
	}
	if rec.Workload == nil && rec.ETA == nil {
		return capacity.Learned{}, false
	}
	// Tried once a period: a failed store is tried again at the next
	// turn (saveFailed), whatever was learned meanwhile.
	l.saved = next
	return rec, true
}

// storeLearned stores rec, fenced by the lease.
func (l *Loop) storeLearned(ctx context.Context, rec capacity.Learned) {
	if err := l.cfg.Records.SaveLearned(ctx, l.cfg.Holder, rec); err != nil {
		l.log.Warn("what the dispatch loop learned was not stored; a new leader would start from an older record", "error", err)
		l.saveFailed.Store(true)
	}
}

// restoreLearned, as the loop takes over, goes on from what the last
// leader stored, for whichever of the typical workload and the estimator
// this loop has learned nothing of itself: without it the new leader
// would measure fragmentation against its queue alone until enough jobs
// had arrived, and estimate from the declared runtimes, uncalibrated,
// until enough runs had ended and jobs started. The jobs enqueued by the
// time the record was stored were counted in it and are not counted
// again.
func (l *Loop) restoreLearned(ctx context.Context) {
	if l.cfg.Records == nil {
		return
	}
	l.etaMu.Lock()
	defer l.etaMu.Unlock()
	workload, eta := l.arrivals.Weight() == 0, l.eta != nil && l.eta.Learned() == 0
	if !workload && !eta {
		return
	}
	rec, err := l.cfg.Records.Learned(ctx)
	if err != nil {
		l.log.Warn("take over: what the last leader learned is unreadable; learning afresh", "error", err)
		return
	}
	var restored []any
	if workload && len(rec.Workload) > 0 {
		l.arrivals.Restore(rec.Workload, rec.Arrivals)
		l.countedUntil = rec.At
		restored = append(restored, "workload_classes", len(rec.Workload), "arrivals", int(rec.Arrivals))
	}
	if eta && rec.ETA != nil {
		if err := l.eta.Restore(*rec.ETA); err != nil {
			l.log.Warn("take over: the stored estimator state is not usable; estimates learn afresh", "error", err)
		} else {
			restored = append(restored, "runtime_groups", len(rec.ETA.Runtimes), "score_groups", len(rec.ETA.Scores),
				"first_estimates", len(rec.ETA.First))
		}
	}
	if len(restored) > 0 {
		l.log.Info("take over: restored what the last leader learned", append(restored, "stored_at", rec.At)...)
	}
}
