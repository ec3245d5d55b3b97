package dispatch

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/placement"
)

// defragTimeout is how long a defragmentation may take, from its plan to
// its job starting: longer, and its reservations lapse (a moved job that
// will not stop, a job that does not fit after all). Moved jobs stop
// within their checkpoint grace periods, at most an hour by the spec's
// limit but seconds to minutes in practice.
const defragTimeout = 10 * time.Minute

// defragOptions gives placement what it needs from the loop's record
// (placement.Defrag): the defragmentations under way, which keep their
// reservations, and what the moves planned in the last hour cost, against
// the hourly budget. The record lives in the leader's memory and, with
// Config.Records, in the view (saveDefrags): a new leader goes on from
// it; without, it starts with none, and a defragmentation under way then
// ends as its moved jobs stop (the job fits, or is planned for again).
func (l *Loop) defragOptions(o *placement.Options, now time.Time) {
	if !o.Defrag.Enabled {
		return
	}
	l.defragLog = slices.DeleteFunc(l.defragLog, func(s capacity.DefragSpend) bool { return now.Sub(s.At) >= time.Hour })
	var spent placement.DefragSpent
	for _, s := range l.defragLog {
		spent.Moves += s.Moves
		spent.LostGPUSeconds += s.LostGPUSeconds
	}
	o.Defrag.Spent = spent
	o.Defrag.InFlight = nil
	for _, id := range slices.Sorted(maps.Keys(l.defrags)) {
		p := l.defrags[id]
		if now.Sub(p.At) > defragTimeout {
			l.log.Warn("defragmentation took too long; its reservations lapse", "job_id", id,
				"moving", strings.Join(p.Movers(), ","), "planned", p.At)
			delete(l.defrags, id)
			l.defragsChanged = true
			continue
		}
		o.Defrag.InFlight = append(o.Defrag.InFlight, p)
	}
}

// defragged keeps the record up to date with the plan — a defragmentation
// stays under way while its job waits for it — records the new ones, and
// returns the moves to ask for: every moved job still running the attempt
// the plan moves, as a preemption for the job it makes room for (the
// preemption path: checkpoint, stop, requeue without spending a retry,
// fenced by the lease; re-asked at most every preemptResignal).
func (l *Loop) defragged(snap capacity.Snapshot, plan placement.Plan) []placement.Preemption {
	if len(l.defrags) == 0 && len(plan.Defrags) == 0 {
		return nil
	}
	waiting := map[gangway.JobID]bool{}
	for _, u := range plan.Unplaced {
		if u.Reason == placement.ReasonDefragmenting {
			waiting[u.JobID] = true
		}
	}
	for id := range l.defrags {
		if !waiting[id] {
			delete(l.defrags, id) // started, gone, or the plan no longer holds
			l.defragsChanged = true
		}
	}
	for _, p := range plan.Defrags {
		if l.defrags == nil {
			l.defrags = map[gangway.JobID]placement.DefragPlan{}
		}
		l.defrags[p.Job] = p
		l.defragLog = append(l.defragLog, capacity.DefragSpend{At: snap.Now, Moves: len(p.Moves), LostGPUSeconds: p.LostGPUSeconds})
		l.defragsChanged = true
		if l.cfg.Metrics != nil {
			l.cfg.Metrics.Defragmented(len(p.Moves), p.LostGPUSeconds)
		}
		l.log.Info("defragmenting", "job_id", p.Job, "moving", strings.Join(p.Movers(), ","),
			"nodes", strings.Join(p.Nodes(), ","), "lost_gpu_seconds", p.LostGPUSeconds)
	}
	attempt := make(map[gangway.JobID]int, len(snap.Allocations))
	for _, a := range snap.Allocations {
		attempt[a.JobID] = a.Attempt
	}
	var out []placement.Preemption
	for _, id := range slices.Sorted(maps.Keys(l.defrags)) {
		p := l.defrags[id]
		pr := placement.Preemption{Preemptor: id}
		for _, m := range p.Moves {
			if a, ok := attempt[m.JobID]; ok && a == m.Attempt {
				pr.Victims = append(pr.Victims, placement.Victim{JobID: m.JobID, Attempt: m.Attempt,
					Reason: moveReason(&p, m), LostGPUSeconds: m.LostGPUSeconds})
			}
		}
		if len(pr.Victims) > 0 {
			out = append(out, pr)
		}
	}
	return out
}

// moveReason is what the moved job's record says about its move.
func moveReason(p *placement.DefragPlan, m placement.Move) string {
	var to []string
	for _, t := range m.To {
		to = append(to, t.NodeID)
	}
	return fmt.Sprintf("moved from %s to %s to make room for %s (defragmentation)", m.From, strings.Join(to, ","), p.Job)
}

// saveDefrags stores the record (Config.Records) when it changed since it
// was last stored, or the view is of another generation than the one it
// was stored in (flushed or lost), before the cycle asks the moved jobs
// to stop: a leader that dies after asking leaves the next one the plan.
// A failed store is logged and tried again next cycle.
func (l *Loop) saveDefrags(ctx context.Context, gen string) {
	if l.cfg.Records == nil || (!l.defragsChanged && gen == l.defragsGen) {
		return
	}
	d := capacity.Defrags{Spent: l.defragLog}
	for _, id := range slices.Sorted(maps.Keys(l.defrags)) {
		d.InFlight = append(d.InFlight, l.defrags[id])
	}
	if err := l.cfg.Records.SaveDefrags(ctx, l.cfg.Holder, d); err != nil {
		l.log.Warn("defragmentations not stored; a new leader would not know of them", "error", err)
		return
	}
	l.defragsChanged, l.defragsGen = false, gen
}

// restoreDefrags, as the loop takes over with no record of its own, goes
// on from the last leader's: the defragmentations under way keep their
// reservations (those past defragTimeout lapse at the next cycle, as
// they would have), and the hour's moves count against the budget.
func (l *Loop) restoreDefrags(ctx context.Context) {
	if l.cfg.Records == nil || len(l.defrags) > 0 || len(l.defragLog) > 0 {
		return
	}
	d, err := l.cfg.Records.Defrags(ctx)
	if err != nil {
		l.log.Warn("take over: the last leader's defragmentations are unreadable; starting without them", "error", err)
		return
	}
	if len(d.InFlight) == 0 && len(d.Spent) == 0 {
		return
	}
	l.defragLog = d.Spent
	l.defrags = make(map[gangway.JobID]placement.DefragPlan, len(d.InFlight))
	for _, p := range d.InFlight {
		l.defrags[p.Job] = p
	}
	l.log.Info("take over: restored the last leader's defragmentations", "under_way", len(d.InFlight), "planned_last_hour", len(d.Spent))
}
