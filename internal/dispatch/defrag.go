package dispatch

import (
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

// defragSpend is what one planned defragmentation cost, when.
type defragSpend struct {
	at    time.Time
	moves int
	lost  float64
}

// defragOptions gives placement what it needs from the loop's record
// (placement.Defrag): the defragmentations under way, which keep their
// reservations, and what the moves planned in the last hour cost, against
// the hourly budget. The record lives in the leader's memory: a new
// leader starts with none, and a defragmentation under way then ends as
// its moved jobs stop (the job fits, or is planned for again).
func (l *Loop) defragOptions(o *placement.Options, now time.Time) {
	if !o.Defrag.Enabled {
		return
	}
	l.defragLog = slices.DeleteFunc(l.defragLog, func(s defragSpend) bool { return now.Sub(s.at) >= time.Hour })
	var spent placement.DefragSpent
	for _, s := range l.defragLog {
		spent.Moves += s.moves
		spent.LostGPUSeconds += s.lost
	}
	o.Defrag.Spent = spent
	o.Defrag.InFlight = nil
	for _, id := range slices.Sorted(maps.Keys(l.defrags)) {
		p := l.defrags[id]
		if now.Sub(p.At) > defragTimeout {
			l.log.Warn("defragmentation took too long; its reservations lapse", "job_id", id,
				"moving", strings.Join(p.Movers(), ","), "planned", p.At)
			delete(l.defrags, id)
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
		}
	}
	for _, p := range plan.Defrags {
		if l.defrags == nil {
			l.defrags = map[gangway.JobID]placement.DefragPlan{}
		}
		l.defrags[p.Job] = p
		l.defragLog = append(l.defragLog, defragSpend{at: snap.Now, moves: len(p.Moves), lost: p.LostGPUSeconds})
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
