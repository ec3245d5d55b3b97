package dispatch

import (
	"context"
	"time"

	"github.com/gangwayhq/gangway/internal/capacity"
)

// workloadSaveEvery is how often, at most, the leader stores the typical
// workload while jobs arrive: a leader that dies loses the arrivals since.
const workloadSaveEvery = 15 * time.Second

// saveWorkload stores the arrivals' workload (Config.Workloads) when jobs
// arrived since it was last stored, or the view is of another generation
// than the one it was stored in (flushed or lost: rebuild.go), at most
// every workloadSaveEvery. A failed store is logged and tried again at
// the next turn of the period: the loop places as well without it.
func (l *Loop) saveWorkload(ctx context.Context, gen string) {
	now := l.cfg.Clock.Now()
	if l.cfg.Workloads == nil || now.Sub(l.savedAt) < workloadSaveEvery ||
		(l.arrived == l.savedArrived && gen == l.savedGen) || l.arrivals.Weight() == 0 {
		return
	}
	l.savedAt = now
	w := capacity.Workload{Classes: l.arrivals.Classes(), Arrivals: l.arrivals.Weight(), At: now}
	if err := l.cfg.Workloads.SaveWorkload(ctx, l.cfg.Holder, w); err != nil {
		l.log.Warn("typical workload not stored; a new leader would start from an older one", "error", err)
		return
	}
	l.savedArrived, l.savedGen = l.arrived, gen
}

// restoreWorkload, as the loop takes over with no arrivals of its own,
// goes on from the typical workload the last leader stored: without it
// the new leader would measure fragmentation against its queue alone
// until enough jobs had arrived again. The jobs enqueued by the time it
// was stored were counted in it and are not counted again.
func (l *Loop) restoreWorkload(ctx context.Context) {
	if l.cfg.Workloads == nil || l.arrivals.Weight() > 0 {
		return
	}
	w, err := l.cfg.Workloads.Workload(ctx)
	if err != nil {
		l.log.Warn("take over: typical workload unreadable; learning it afresh", "error", err)
		return
	}
	if len(w.Classes) == 0 {
		return
	}
	l.arrivals.Restore(w.Classes, w.Arrivals)
	l.countedUntil = w.At
	l.log.Info("take over: restored the typical workload", "classes", len(w.Classes),
		"arrivals", int(w.Arrivals), "stored_at", w.At)
}
