package placement

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gangwayhq/gangway"
)

// reserve finds when blocked job j will fit — releasing running jobs in the
// order their max runtimes end — and reserves the GPUs it would take that
// are free now, so later (smaller) jobs use them only if they end before
// the reservation starts: backfill that cannot delay j. The view is left as
// it was apart from the reservation.
func (se *Session) reserve(j *gangway.QueueEntry) (Reservation, string, bool) {
	v := se.view
	order := se.endOrder()
	ends := make([]*gangway.Assignment, 0, len(order))
	at := make([]int64, 0, len(order))
	for _, e := range order {
		if r := &se.running[e.k]; r.MaxRuntime > 0 && !se.victims[r.JobID] {
			ends = append(ends, r)
			at = append(at, e.at)
		}
	}

	mark := v.begin()
	var released []*gangway.Assignment
	slots := newReplicaSlots(se, j)
	for k, r := range ends {
		se.vacate(r, -1)
		slots.update(se, j, r)
		released = append(released, r)
		if k+1 < len(ends) && at[k+1] == at[k] {
			continue // release everything ending at the same moment first
		}
		if !slots.enough(j) {
			continue // not enough free GPUs yet: the trial could not fit
		}
		trial := v.begin()
		a, ok := se.placeJob(j)
		v.rollback(trial)
		if !ok {
			continue
		}
		v.rollback(mark)
		for _, rr := range released {
			se.vacate(rr, +1)
		}
		start := endOf(r)
		if start.Before(v.now) {
			start = v.now // overdue jobs: expect them any moment
		}
		var nodes []string
		held, reserved := 0, 0
		for _, m := range a.Members {
			i := se.nodeIndex(m.NodeID)
			nodes = append(nodes, m.NodeID)
			reserved += len(m.GPUs)
			for _, g := range m.GPUs {
				// Busy GPUs too: they free up by start, and a later
				// reservation must not count on them.
				v.reserve(i, g, start, j.JobID)
				if v.free[i][g] > 0 || (v.isMIG(i, g) && v.mig[i][g] == migFree) {
					held++
				}
			}
		}
		slices.Sort(nodes)
		nodes = slices.Compact(nodes)
		var waitFor []string
		for _, rr := range released {
			waitFor = append(waitFor, rr.JobID)
		}
		if len(waitFor) > 3 {
			waitFor = append(waitFor[:3], fmt.Sprintf("%d more", len(released)-3))
		}
		reach := "reach their max runtimes"
		if len(released) == 1 {
			reach = "reaches its max runtime"
		}
		why := fmt.Sprintf("%s: reserved %d GPUs on %s from %s (in %s, when %s %s), %d of them free now; smaller jobs may use them only if they end first",
			describeShape(j), reserved, strings.Join(nodes, ", "), gangway.FormatTime(start), start.Sub(v.now).Round(time.Second),
			strings.Join(waitFor, ", "), reach, held)
		return Reservation{JobID: j.JobID, Start: start, Nodes: nodes}, why, true
	}
	v.rollback(mark)
	for _, rr := range released {
		se.vacate(rr, +1)
	}
	return Reservation{}, "", false
}

// replicaSlots counts how many replicas of a whole-GPU job the nodes it
// may use could hold by their entirely free GPUs it may take (not held for
// another job's reservation, not flaky for it), CPU and memory alone: a
// bound that the reservation search keeps up to date as it releases
// running jobs, so that it skips the trial placements that cannot
// succeed. Nil (always enough) for GPU shares, MIG and CPU-only jobs.
type replicaSlots struct {
	per   map[int]int
	total int
	end   time.Time
}

func newReplicaSlots(se *Session, j *gangway.QueueEntry) *replicaSlots {
	if j.GPUsPerReplica == 0 || j.Share() || j.MIGProfile != "" {
		return nil
	}
	rs := &replicaSlots{per: map[int]int{}, end: se.view.jobEnd(j)}
	v := se.view
	v.avoidFlaky = avoidsFlaky(j)
	for i := range v.nodes {
		rs.set(se, j, i)
	}
	return rs
}

func (rs *replicaSlots) set(se *Session, j *gangway.QueueEntry, i int) {
	v := se.view
	n := 0
	if v.nodes[i].Schedulable && v.whole[i] >= j.GPUsPerReplica && se.mayUse(j, i) {
		free := 0
		for g, f := range v.free[i] {
			if f == Whole && v.usable(i, g, rs.end) {
				free++
			}
		}
		n = free / j.GPUsPerReplica
		if j.CPUMilli > 0 {
			n = min(n, int(v.cpu[i]/j.CPUMilli))
		}
		if j.MemMiB > 0 {
			n = min(n, int(v.mem[i]/j.MemMiB))
		}
	}
	rs.total += n - rs.per[i]
	rs.per[i] = n
}

// update recounts the nodes r ran on.
func (rs *replicaSlots) update(se *Session, j *gangway.QueueEntry, r *gangway.Assignment) {
	if rs == nil {
		return
	}
	se.view.avoidFlaky = avoidsFlaky(j)
	for _, m := range r.Members {
		if i := se.nodeIndex(m.NodeID); i >= 0 {
			rs.set(se, j, i)
		}
	}
}

func (rs *replicaSlots) enough(j *gangway.QueueEntry) bool {
	return rs == nil || rs.total >= j.Replicas
}

// ending is a running allocation's max-runtime end (UnixNano; no pointers,
// so sorting moves no references) and its index in Session.running.
type ending struct {
	at int64
	k  int32
}

func compareEndings(a, b ending) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.k, b.k)) }

// endOrder is every running allocation by end, ties in running order, for
// the reservation search, which reads it once per blocked job. Within a
// Place call running only grows, so the order is sorted once and each
// job started since is inserted; Place resets it.
func (se *Session) endOrder() []ending {
	if se.endsFor == 0 {
		se.ends = se.ends[:0]
	}
	for k := se.endsFor; k < len(se.running); k++ {
		e := ending{endOf(&se.running[k]).UnixNano(), int32(k)}
		if se.endsFor == 0 {
			se.ends = append(se.ends, e)
			continue
		}
		i, _ := slices.BinarySearchFunc(se.ends, e, compareEndings)
		se.ends = slices.Insert(se.ends, i, e)
	}
	if se.endsFor == 0 {
		slices.SortFunc(se.ends, compareEndings)
	}
	se.endsFor = len(se.running)
	return se.ends
}
