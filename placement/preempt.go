package placement

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/gangwayhq/gangway"
)

// maxVictims bounds how many running jobs one preemptor may stop.
const maxVictims = 16

// preempt finds running jobs to stop so j fits: preemptible jobs of lower
// priority, or jobs of other teams borrowing quota that j's team lends and
// now needs back (borrowers go first). Among those it prefers the least
// work lost since each victim's last checkpoint, and keeps the set minimal.
// It only proposes victims after simulating that j really fits once they
// are gone. The victims still hold their GPUs in the view until they stop,
// what else j needs is held for it until this Place call returns (hold),
// and the victims are not offered to later preemptors. Jobs this Place
// call started are never victims.
func (se *Session) preempt(j *gangway.QueueEntry) (Preemption, bool) {
	v := se.view
	type cand struct {
		idx     int
		reclaim bool
		lost    float64
	}
	var cands []cand
	for k := range se.running[:se.placedFrom] {
		r := &se.running[k]
		if se.victims[r.JobID] || !r.Preemptible || v.now.Sub(r.At) < se.opts.MinRuntime {
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
	p := Preemption{Preemptor: j.JobID}
	for _, idx := range set {
		r := &se.running[idx]
		se.victims[r.JobID] = true
		why := fmt.Sprintf("preempted for %s (priority %d > %d)", j.JobID, j.Priority, r.Priority)
		if se.reclaims(j, r) {
			why = fmt.Sprintf("team %s reclaims the quota team %s borrowed, for %s", j.Team, r.Team, j.JobID)
		}
		p.Victims = append(p.Victims, Victim{JobID: r.JobID, Attempt: r.Attempt, Reason: why, LostGPUSeconds: se.lostWork(r)})
	}
	se.hold(j, set)
	return p, true
}

// heldCap is capacity of one node held for a preemptor: milli per GPU,
// CPU, memory, and the quota charged for it.
type heldCap struct {
	node     int
	gpus     []int
	milli    []int
	cpu, mem int64
	team     string
	quota    int64
}

// hold sets aside for j what it will take besides its victims' capacity
// (free GPUs, shares of GPUs, CPU, memory and its team's quota), so that
// jobs placed later in this Place call cannot take it before the victims
// stop; otherwise the victims could be stopped for nothing. The victims'
// own capacity stays theirs in the view until then. releaseHeld gives it
// all back when the call returns.
func (se *Session) hold(j *gangway.QueueEntry, set []int) {
	v := se.view
	mark := v.begin()
	for _, k := range set {
		se.vacate(&se.running[k], -1)
	}
	a, ok := se.placeJob(j)
	v.rollback(mark)
	for _, k := range set {
		se.vacate(&se.running[k], +1)
	}
	if !ok {
		return
	}
	for _, m := range a.Members {
		i := se.nodeIndex(m.NodeID)
		h := heldCap{node: i, cpu: min(j.CPUMilli, max(v.cpu[i], 0)), mem: min(j.MemMiB, max(v.mem[i], 0)),
			team: j.Team, quota: meteredMilli(m)}
		v.take(Candidate{Node: i}, h.cpu, h.mem)
		for _, g := range m.GPUs {
			if v.isMIG(i, g) {
				if v.mig[i][g] == migFree {
					v.take(Candidate{Node: i, GPUs: []int{g}, Milli: Whole}, 0, 0)
					h.gpus, h.milli = append(h.gpus, g), append(h.milli, Whole)
				}
				continue
			}
			if t := min(j.MilliEachGPU(), v.free[i][g]); t > 0 {
				v.take(Candidate{Node: i, GPUs: []int{g}, Milli: t}, 0, 0)
				h.gpus, h.milli = append(h.gpus, g), append(h.milli, t)
			}
		}
		se.quota.charge(j.Team, v.nodes[i].Model, h.quota)
		se.held = append(se.held, h)
		se.changed(i)
	}
}

// releaseHeld returns what hold set aside.
func (se *Session) releaseHeld() {
	v := se.view
	for _, h := range se.held {
		v.give(Candidate{Node: h.node}, h.cpu, h.mem)
		for k, g := range h.gpus {
			v.give(Candidate{Node: h.node, GPUs: []int{g}, Milli: h.milli[k]}, 0, 0)
		}
		se.quota.charge(h.team, v.nodes[h.node].Model, -h.quota)
		se.changed(h.node)
	}
	se.held = se.held[:0]
}

// reclaims reports whether j may preempt r to take back lent quota: r's
// team borrows in a cohort j's team belongs to, for a model j may use, and
// j stays within its team's nominal quota.
func (se *Session) reclaims(j *gangway.QueueEntry, r *gangway.Assignment) bool {
	if r.Team == j.Team || !se.quota.hasQuotas() || len(r.Members) == 0 {
		return false
	}
	model := se.modelOf(r.Members[0].NodeID)
	cohort := se.quota.cohortOf(j.Team, model)
	return cohort != "" && allowed(j.GPUModels, model) && se.quota.cohortOf(r.Team, model) == cohort &&
		se.quota.isBorrowing(r.Team, model) && se.quota.withinNominal(j.Team, model, j.MeteredMilli(model))
}

// lostWork is the GPU-seconds r has run since its last checkpoint.
func (se *Session) lostWork(r *gangway.Assignment) float64 {
	since := r.At
	if r.LastCheckpoint.After(since) {
		since = r.LastCheckpoint
	}
	return se.view.now.Sub(since).Seconds() * float64(r.GPUCount()) * float64(meteredOf(r)) / Whole
}

// fitsWithout simulates the running jobs at idx gone and reports whether j
// then fits; the view and quotas are restored before it returns.
func (se *Session) fitsWithout(j *gangway.QueueEntry, idx []int) bool {
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
func (se *Session) vacate(r *gangway.Assignment, sign int64) {
	for _, m := range r.Members {
		i := se.nodeIndex(m.NodeID)
		if i < 0 {
			continue
		}
		se.quota.charge(r.Team, se.view.nodes[i].Model, sign*int64(len(m.GPUs))*int64(meteredOf(r)))
		if sign < 0 {
			se.view.give(Candidate{Node: i, GPUs: m.GPUs, Milli: milliOf(r)}, r.CPUMilli, r.MemMiB)
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
