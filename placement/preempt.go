package placement

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// maxVictims bounds how many running jobs one preemptor may stop.
const maxVictims = 16

// preempt finds running jobs to stop so j fits: preemptible jobs of lower
// priority, or jobs of other teams borrowing quota that j's team lends and
// now needs back (borrowers go first). Among those it prefers the least
// work lost since each victim's last checkpoint, and keeps the set minimal.
// It only proposes victims after simulating that j really fits once they
// are gone; the view is left as it was (the victims still hold their GPUs
// until they stop), and the victims are not offered to later preemptors.
func (se *Session) preempt(j *Job) (Preemption, bool) {
	v := se.view
	type cand struct {
		idx     int
		reclaim bool
		lost    float64
	}
	var cands []cand
	for k := range se.running {
		r := &se.running[k]
		if se.victims[r.JobID] || !r.Preemptible || v.now.Sub(r.Start) < se.opts.MinRuntime {
			continue
		}
		reclaim := se.reclaims(j, r)
		if r.Priority >= j.Priority && !reclaim {
			continue
		}
		cands = append(cands, cand{idx: k, reclaim: reclaim, lost: se.lostWork(r)})
	}
	slices.SortStableFunc(cands, func(a, b cand) int {
		if a.reclaim != b.reclaim {
			if a.reclaim {
				return -1
			}
			return 1
		}
		ra, rb := &se.running[a.idx], &se.running[b.idx]
		return cmp.Or(cmp.Compare(ra.Priority, rb.Priority), cmp.Compare(a.lost, b.lost))
	})
	var set []int
	fits := false
	for _, c := range cands {
		set = append(set, c.idx)
		if se.fitsWithout(j, set) {
			fits = true
			break
		}
		if len(set) == maxVictims {
			break
		}
	}
	if !fits {
		return Preemption{}, false
	}
	// Keep the set minimal: a victim added early may be unneeded once a
	// later, larger one is in.
	for k := len(set) - 2; k >= 0; k-- {
		trial := slices.Delete(slices.Clone(set), k, k+1)
		if se.fitsWithout(j, trial) {
			set = trial
		}
	}
	p := Preemption{Preemptor: j.ID}
	for _, idx := range set {
		r := &se.running[idx]
		se.victims[r.JobID] = true
		why := fmt.Sprintf("preempted for %s (priority %d > %d)", j.ID, j.Priority, r.Priority)
		if se.reclaims(j, r) {
			why = fmt.Sprintf("team %s reclaims the quota team %s borrowed, for %s", j.Team, r.Team, j.ID)
		}
		p.Victims = append(p.Victims, Victim{JobID: r.JobID, Attempt: r.Attempt, Reason: why, LostGPUSeconds: se.lostWork(r)})
	}
	return p, true
}

// reclaims reports whether j may preempt r to take back lent quota: r's
// team borrows in a cohort j's team belongs to, for a model j may use, and
// j stays within its team's nominal quota.
func (se *Session) reclaims(j *Job, r *Running) bool {
	if r.Team == j.Team || !se.quota.hasQuotas() || len(r.Members) == 0 {
		return false
	}
	model := se.modelOf(r.Members[0].NodeID)
	cohort := se.quota.cohortOf(j.Team, model)
	return cohort != "" && allowed(j.Models, model) && se.quota.cohortOf(r.Team, model) == cohort &&
		se.quota.isBorrowing(r.Team, model) && se.quota.withinNominal(j.Team, model, j.GPUMilliTotal())
}

// lostWork is the GPU-seconds r has run since its last checkpoint.
func (se *Session) lostWork(r *Running) float64 {
	since := r.Start
	if r.LastCheckpoint.After(since) {
		since = r.LastCheckpoint
	}
	return se.view.now.Sub(since).Seconds() * float64(r.GPUs()) * float64(orWhole(r.GPUMilli)) / Whole
}

// fitsWithout simulates the running jobs at idx gone and reports whether j
// then fits; the view and quotas are restored before it returns.
func (se *Session) fitsWithout(j *Job, idx []int) bool {
	v := se.view
	mark := v.begin()
	for _, k := range idx {
		se.vacate(&se.running[k], -1)
	}
	_, ok := se.placeJob(j)
	v.rollback(mark)
	for _, k := range idx {
		se.vacate(&se.running[k], +1)
	}
	return ok
}

// vacate gives r's capacity back to the view (sign -1) — or, with sign +1,
// only re-charges its quota after a rollback restored the view.
func (se *Session) vacate(r *Running, sign int64) {
	for _, m := range r.Members {
		i := se.nodeIndex(m.NodeID)
		if i < 0 {
			continue
		}
		se.quota.charge(r.Team, se.view.nodes[i].Model, sign*int64(len(m.GPUs))*int64(orWhole(r.GPUMilli)))
		if sign < 0 {
			se.view.give(Candidate{Node: i, GPUs: m.GPUs, Milli: orWhole(r.GPUMilli)}, r.CPUMilli, r.MemMiB)
		}
	}
}

func preemptDetail(p Preemption) string {
	ids := make([]string, len(p.Victims))
	lost := 0.0
	for i, v := range p.Victims {
		ids[i] = v.JobID
		lost += v.LostGPUSeconds
	}
	return fmt.Sprintf("preempting %s (%.0f GPU-seconds since their last checkpoints)", strings.Join(ids, ", "), lost)
}
