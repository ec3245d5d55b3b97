package placement

import (
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
	var ends []*gangway.Assignment
	for k := range se.running {
		r := &se.running[k]
		if r.MaxRuntime > 0 && !se.victims[r.JobID] {
			ends = append(ends, r)
		}
	}
	slices.SortStableFunc(ends, func(a, b *gangway.Assignment) int { return endOf(a).Compare(endOf(b)) })

	mark := v.begin()
	var released []*gangway.Assignment
	for k, r := range ends {
		se.vacate(r, -1)
		released = append(released, r)
		if k+1 < len(ends) && endOf(ends[k+1]).Equal(endOf(r)) {
			continue // release everything ending at the same moment first
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
		held := 0
		for _, m := range a.Members {
			i := se.nodeIndex(m.NodeID)
			nodes = append(nodes, m.NodeID)
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
		why := fmt.Sprintf("%s: reserved %d free GPUs on %s from %s (in %s, when %s reach their max runtime); smaller jobs may use them only if they end first",
			describeShape(j), held, strings.Join(nodes, ", "), start.Format(time.RFC3339), start.Sub(v.now).Round(time.Second),
			strings.Join(waitFor, ", "))
		return Reservation{JobID: j.JobID, Start: start, Nodes: nodes}, why, true
	}
	v.rollback(mark)
	for _, rr := range released {
		se.vacate(rr, +1)
	}
	return Reservation{}, "", false
}
