package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/placement/forecast"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// budgetsTTL is how long the loop reuses the teams' budgets: they come
// from the month's ledger, which changes only as runs end. It reads them
// again at once when a cloud run has ended (cloudEnded).
const budgetsTTL = 15 * time.Second

// placementOptions are the configured options plus what changes between
// cycles: the defragmentations under way and the hour's moves (defrag.go),
// and, only when a queued job may burst, the cloud's offers, the teams'
// budgets and the runtimes the start-time estimator predicts (predict). A
// cloud or budget error only turns bursting off for the cycle.
func (l *Loop) placementOptions(ctx context.Context, ps placement.Snapshot, queue []gangway.QueueEntry) placement.Options {
	now := ps.Now
	o := l.cfg.Placement
	if o.Workload == nil && o.Demand == nil {
		// As the FGD protocol cuts its typical workload: fragmentation
		// against the popular classes, the whole mix as the demand. Nil
		// before any arrival: the queue's.
		all := l.arrivals.Classes()
		o.Workload, o.Demand = placement.Typical(all, placement.TypicalPopularity), all
	}
	l.defragOptions(&o, now)
	if l.cfg.Cloud == nil || !slices.ContainsFunc(queue, func(e gangway.QueueEntry) bool { return e.Burst.Enabled && len(e.Nodes) == 0 }) {
		return o
	}
	offers, err := l.cfg.Cloud.Offers(ctx)
	if err != nil {
		l.log.Warn("cloud offers unavailable; no bursts this cycle", "error", err)
		return o
	}
	if l.cfg.Budgets != nil {
		runs := cloudRuns(ps)
		if l.teams == nil || now.Sub(l.teamsAt) >= budgetsTTL || cloudEnded(l.teamsRuns, runs) {
			teams, err := l.cfg.Budgets.TeamPolicies(ctx, now)
			if err != nil {
				l.log.Warn("team budgets unavailable; no bursts this cycle", "error", err)
				return o
			}
			l.teams, l.teamsAt, l.teamsRuns = teams, now, runs
		}
		teams, err := l.launching(ctx, l.teams)
		if err != nil {
			l.log.Warn("team budgets unavailable; no bursts this cycle", "error", err)
			return o
		}
		o.Teams = teams
	}
	o.Offers = offers
	o.Predicted = l.predict(ps, queue)
	o.ExpectedStarts = l.expectedStarts(queue)
	return o
}

// expectedStarts is the latest forecast's P50 start of every queued job
// that may burst, for the burst decision (placement.Options.ExpectedStarts),
// so that a job bursts on the wait it is shown; not for a job the forecast
// itself sends to the cloud (forecast.Estimate.Burst), whose on-prem start
// it does not know, nor for one it did not see start within its horizon
// (Beyond: the P50 is only a lower bound). nil without estimates.
func (l *Loop) expectedStarts(queue []gangway.QueueEntry) map[gangway.JobID]time.Time {
	ests := l.estimates.Load()
	if ests == nil {
		return nil
	}
	out := map[gangway.JobID]time.Time{}
	for _, e := range queue {
		if !e.Burst.Enabled || len(e.Nodes) > 0 {
			continue
		}
		if est, ok := (*ests)[e.JobID]; ok && !est.Burst && !est.Beyond {
			out[e.JobID] = est.P50
		}
	}
	return out
}

// predict is the median runtime the estimator's model gives every running
// job and every queued job that may burst (forecast.Predicted), so that
// the burst decision expects what the estimates shown do: it waits for a
// running job that history says ends soon, whatever limit the job
// declared, and prices a job over the runtime its like have had. While a
// forecast holds the model, the last cycle's predictions stand (jobs new
// since then keep their declared runtimes). nil without an estimator.
func (l *Loop) predict(ps placement.Snapshot, queue []gangway.QueueEntry) map[gangway.JobID]time.Duration {
	if l.eta == nil || !l.etaMu.TryLock() {
		return l.predicted
	}
	defer l.etaMu.Unlock()
	var bursting []gangway.QueueEntry
	for _, e := range queue {
		if e.Burst.Enabled && len(e.Nodes) == 0 {
			bursting = append(bursting, e)
		}
	}
	l.predicted = forecast.Predicted(ps, bursting, l.eta.Runtimes(), 0.5)
	return l.predicted
}

// burst takes each job the plan sends to the cloud out of the queue (under
// the lease) and queues its signal.
func (l *Loop) burst(ctx context.Context, bursts []placement.Burst) {
	for _, b := range bursts {
		req := burstRequest(b)
		raw, err := json.Marshal(req)
		if err != nil {
			l.log.Error("encode burst", "job_id", b.JobID, "error", err)
			continue
		}
		err = l.cap.StartBurst(ctx, l.cfg.Holder, b.JobID, b.Attempt, raw)
		switch {
		case errors.Is(err, capacity.ErrStale):
			continue // placed, cancelled or requeued meanwhile
		case errors.Is(err, capacity.ErrNotLeader):
			l.setLeading(false)
			return
		case err != nil:
			l.log.Warn("burst failed; will plan again", "job_id", b.JobID, "error", err)
			continue
		}
		l.bursts[b.JobID] = req
		l.log.Info("bursting", "job_id", b.JobID, "attempt", b.Attempt, "offers", len(req.Offers), "reason", b.Reason)
	}
}

// deliverBursts signals the committed bursts; a job whose workflow is gone
// has its record dropped. Failures stay pending for the next cycle.
func (l *Loop) deliverBursts(ctx context.Context) {
	for id, req := range l.bursts {
		err := l.wf.SignalBurst(ctx, id, req)
		switch {
		case errors.Is(err, jobs.ErrJobGone):
			if ferr := l.cap.ForgetBurst(ctx, id); ferr != nil {
				l.log.Warn("forget burst of a gone job failed; will retry", "job_id", id, "error", ferr)
				continue
			}
		case err != nil:
			l.log.Warn("burst signal failed; will retry", "job_id", id, "error", err)
			continue
		}
		delete(l.bursts, id)
	}
}

func burstRequest(b placement.Burst) workflows.BurstRequest {
	return workflows.BurstRequest{Attempt: b.Attempt, Team: b.Team, Reason: b.Reason, Offers: b.Offers}
}

// cloudRuns are the runs (job and attempt) on cloud nodes in ps: what the
// engine charges to their teams as running (placement's committed) until
// they end and the ledger holds them.
func cloudRuns(ps placement.Snapshot) map[gangway.JobID]int {
	cloud := map[string]bool{}
	for i := range ps.Nodes {
		if ps.Nodes[i].CapacityType.Cloud() {
			cloud[ps.Nodes[i].ID] = true
		}
	}
	out := map[gangway.JobID]int{}
	if len(cloud) == 0 {
		return out
	}
	for i := range ps.Running {
		r := &ps.Running[i]
		if slices.ContainsFunc(r.Members, func(m gangway.Member) bool { return cloud[m.NodeID] }) {
			out[r.JobID] = r.Attempt
		}
	}
	return out
}

// cloudEnded reports whether a run in was, the cloud runs when the budgets
// were read, is not in now: its cost has moved to the ledger, which the
// budgets read then do not hold, and it is no longer counted as running.
func cloudEnded(was, now map[gangway.JobID]int) bool {
	for id, attempt := range was {
		if a, ok := now[id]; !ok || a != attempt {
			return true
		}
	}
	return false
}

// launching charges to each team's budget the bursts whose instances are
// still launching (placement.TeamPolicy.Launching): decided in earlier
// cycles, recorded in the view until the job is queued pinned to its
// instances, and neither in the ledger nor running yet (where the engine
// counts them). teams is not changed.
func (l *Loop) launching(ctx context.Context, teams map[string]placement.TeamPolicy) (map[string]placement.TeamPolicy, error) {
	budgeted := false
	for _, p := range teams {
		budgeted = budgeted || p.BudgetLeft != placement.NoBudget
	}
	if !budgeted {
		return teams, nil
	}
	recs, err := l.cap.Bursts(ctx)
	if err != nil {
		return nil, fmt.Errorf("bursts launching: %w", err)
	}
	out := maps.Clone(teams)
	for id, raw := range recs {
		var req workflows.BurstRequest
		if err := json.Unmarshal(raw, &req); err != nil {
			l.log.Warn("undecodable burst record; not charged to a budget", "job_id", id, "error", err)
			continue
		}
		p, ok := out[req.Team]
		if !ok || p.BudgetLeft == placement.NoBudget || len(req.Offers) == 0 {
			continue
		}
		p.Launching += req.Offers[0].ExpectedCost
		out[req.Team] = p
	}
	return out, nil
}
