package accounting

import (
	"slices"
	"time"

	"github.com/gangwayhq/gangway"
)

// RunningSegments is what the runs that hold GPUs now have cost so far:
// for each committed assignment, one segment per pool, capacity type and
// price its members hold GPUs in (as JobWorkflow splits a run when it
// ends), from the assignment's commit until now. An assignment committed
// after now is skipped. Each GPU counts at its share, as in the recorded
// segments (gangway.Member.MeteredMilli).
//
// The ledger holds only runs that ended: JobWorkflow records a run's
// segments when it ends. The running ones are the capacity view's
// allocations, which `gangway cost` passes here. A run's own segments start
// when the job starts running, a little after the commit, so the cost so
// far slightly over-counts the start-up; the recorded segments replace it
// once the run ends.
func RunningSegments(running []gangway.Assignment, now time.Time) []gangway.UsageSegment {
	var out []gangway.UsageSegment
	for _, a := range running {
		if a.At.IsZero() || a.At.After(now) {
			continue
		}
		first := len(out)
		for _, m := range a.Members {
			if len(m.GPUs) == 0 {
				continue
			}
			ct := m.CapacityType
			if ct == "" {
				ct = gangway.CapacityOnPrem
			}
			i := slices.IndexFunc(out[first:], func(s gangway.UsageSegment) bool {
				return s.Pool == m.Pool && s.CapacityType == ct && s.PricePerGPUHour == m.PricePerGPUHour
			})
			if i < 0 {
				out = append(out, gangway.UsageSegment{JobID: a.JobID, Attempt: a.Attempt, Team: a.Team,
					Project: a.Project, Pool: m.Pool, CapacityType: ct, Start: a.At.UTC(), End: now.UTC(),
					PricePerGPUHour: m.PricePerGPUHour})
				i = len(out) - first - 1
			}
			out[first+i].GPUs += len(m.GPUs)
			out[first+i].GPUMilli += int64(len(m.GPUs)) * int64(m.MeteredMilli())
		}
	}
	return out
}

// PriceCloud returns the allocations with a price on every cloud member. The
// view's allocations carry the price of on-prem GPUs only: a cloud run's
// price is the one its workflow rented at, which the view does not hold.
// Such a member is priced at its pool's offer now (the price it was
// launched at unless the spot price moved since); a pool without an offer
// stays at 0. RunningSegments of the view's allocations wants them
// priced so (`gangway cost`, the web view's team pages).
func PriceCloud(allocs []gangway.Assignment, offers []gangway.Offer) []gangway.Assignment {
	out := make([]gangway.Assignment, len(allocs))
	for i, a := range allocs {
		out[i] = a
		out[i].Members = slices.Clone(a.Members)
		for j := range out[i].Members {
			m := &out[i].Members[j]
			if !m.CapacityType.Cloud() || m.PricePerGPUHour > 0 {
				continue
			}
			k := slices.IndexFunc(offers, func(o gangway.Offer) bool { return o.Pool == m.Pool && o.CapacityType == m.CapacityType })
			if k >= 0 {
				m.PricePerGPUHour = offers[k].PricePerGPUHourFor(len(m.GPUs))
			}
		}
	}
	return out
}
