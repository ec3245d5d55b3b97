package accounting

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gangwayhq/gangway"
)

func groupKey(g gangway.CostGroupBy, s gangway.UsageSegment) string {
	switch g {
	case gangway.CostByProject:
		return s.Project
	case gangway.CostByPool:
		return s.Pool
	default:
		return s.Team
	}
}

// Query says what a report covers.
type Query struct {
	By gangway.CostGroupBy
	// Since and Until bound the window, [Since, Until); a zero bound is
	// open. Segments that straddle a bound count only their part inside.
	Since, Until time.Time
	// OnDemandPrices is the on-demand price per GPU-hour of each pool that
	// has spot usage: what the spot GPU-hours would have cost without spot.
	// A pool missing here makes the savings of its group unknown.
	OnDemandPrices map[string]float64
	// Running is the cost so far of the runs still in flight: their
	// segments up to now (RunningSegments). They count like recorded
	// segments, and each run (job and attempt) counts once in the InFlight
	// of every row it has a segment in. A run must not be here once the
	// ledger holds its segments; Ledger.Report drops those.
	Running []gangway.UsageSegment
	// Team, when set, keeps only the segments of the teams it accepts:
	// what a user who is not an admin may read (the user API's cost).
	Team func(team string) bool
}

func addTo(s *gangway.CostSplit, capacityType gangway.CapacityType, v float64) {
	switch capacityType {
	case gangway.CapacitySpot:
		s.Spot += v
	case gangway.CapacityOnDemand:
		s.OnDemand += v
	default: // gangway.CapacityOnPrem; the ledger refuses any other type
		s.OnPrem += v
	}
}

// Report aggregates segments, given in any order, into a Summary. Duplicates
// must already be gone (the ledger never returns any).
func Report(segs []gangway.UsageSegment, q Query) (gangway.CostSummary, error) {
	if _, err := gangway.ParseCostGroupBy(string(q.By)); err != nil {
		return gangway.CostSummary{}, fmt.Errorf("report by: %w", err)
	}
	in := make([]gangway.UsageSegment, 0, len(segs)+len(q.Running))
	keep := func(s gangway.UsageSegment) bool { return q.Team == nil || q.Team(s.Team) }
	for _, s := range segs {
		if c, ok := clip(s, q.Since, q.Until); ok && keep(c) {
			in = append(in, c)
		}
	}
	running := map[string]bool{} // IDs of the segments of runs in flight
	for _, s := range q.Running {
		if c, ok := clip(s, q.Since, q.Until); ok && keep(c) {
			in = append(in, c)
			running[SegmentID(c)] = true
		}
	}
	SortSegments(in)

	sum := gangway.CostSummary{By: q.By, Since: q.Since, Until: q.Until, Rows: []gangway.CostRow{}}
	acc := map[string]*accumulator{}
	total := newAccumulator("")
	for _, s := range in {
		g := groupKey(q.By, s)
		a := acc[g]
		if a == nil {
			a = newAccumulator(g)
			acc[g] = a
		}
		inFlight := running[SegmentID(s)]
		a.add(s, q.OnDemandPrices, inFlight)
		total.add(s, q.OnDemandPrices, inFlight)
	}
	for _, a := range acc {
		sum.Rows = append(sum.Rows, a.row())
	}
	slices.SortFunc(sum.Rows, func(a, b gangway.CostRow) int {
		return cmp.Or(cmp.Compare(b.TotalDollars, a.TotalDollars), cmp.Compare(a.Group, b.Group))
	})
	sum.Total = total.row()
	return sum, nil
}

// clip cuts seg to [since, until); false if nothing of it is inside. A
// segment inside the window is returned unchanged, so its Dollars() is
// exactly the recorded segment's.
func clip(seg gangway.UsageSegment, since, until time.Time) (gangway.UsageSegment, bool) {
	if !overlaps(seg, since, until) {
		return seg, false
	}
	if !since.IsZero() && seg.Start.Before(since) {
		seg.Start = since
	}
	if !until.IsZero() && seg.End.After(until) {
		seg.End = until
	}
	return seg, true
}

// accumulator sums one group's segments, GPU-seconds first: hours are
// divided once at the end rather than rounded per segment.
type accumulator struct {
	group      string
	segments   int
	gpuSeconds gangway.CostSplit
	dollars    gangway.CostSplit
	total      float64
	saved      float64
	savedKnown bool
	inFlight   map[runKey]bool
}

// runKey is one run: a job's attempt.
type runKey struct {
	job     gangway.JobID
	attempt int
}

func newAccumulator(group string) *accumulator {
	return &accumulator{group: group, savedKnown: true, inFlight: map[runKey]bool{}}
}

func (a *accumulator) add(s gangway.UsageSegment, onDemand map[string]float64, inFlight bool) {
	d := s.Dollars()
	a.segments++
	if inFlight {
		a.inFlight[runKey{s.JobID, s.Attempt}] = true
	}
	addTo(&a.gpuSeconds, s.CapacityType, s.GPUSeconds())
	addTo(&a.dollars, s.CapacityType, d)
	a.total += d
	if s.CapacityType != gangway.CapacitySpot {
		return
	}
	price, ok := onDemand[s.Pool]
	if !ok {
		a.savedKnown = false
		return
	}
	atOnDemand := s
	atOnDemand.PricePerGPUHour = price
	a.saved += atOnDemand.Dollars() - d
}

func (a *accumulator) row() gangway.CostRow {
	r := gangway.CostRow{
		Group:    a.group,
		Segments: a.segments,
		InFlight: len(a.inFlight),
		GPUHours: gangway.CostSplit{
			OnPrem:   a.gpuSeconds.OnPrem / 3600,
			Spot:     a.gpuSeconds.Spot / 3600,
			OnDemand: a.gpuSeconds.OnDemand / 3600,
		},
		Dollars:      a.dollars,
		TotalDollars: a.total,
	}
	if a.savedKnown {
		saved := a.saved
		r.SpotSavedDollars = &saved
	}
	return r
}

// Report reads the segments that overlap the query's window and
// aggregates them (Report). A run in q.Running whose segments the ledger
// already holds has ended, and its allocation is only not yet released: it
// is counted once, from the ledger, not as in flight.
func (l *Ledger) Report(ctx context.Context, q Query) (gangway.CostSummary, error) {
	segs, err := l.Segments(ctx, q.Since, q.Until)
	if err != nil {
		return gangway.CostSummary{}, err
	}
	ended := map[runKey]bool{}
	for _, s := range q.Running {
		k := runKey{s.JobID, s.Attempt}
		if _, seen := ended[k]; seen {
			continue
		}
		var one int
		err := l.db.QueryRowContext(ctx, l.d.bind("SELECT 1 FROM usage_segments WHERE job_id = ? AND attempt = ? LIMIT 1"),
			s.JobID, s.Attempt).Scan(&one)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			ended[k] = false
		case err != nil:
			return gangway.CostSummary{}, fmt.Errorf("usage of job %s attempt %d: %w", s.JobID, s.Attempt, err)
		default:
			ended[k] = true
		}
	}
	q.Running = slices.DeleteFunc(slices.Clone(q.Running), func(s gangway.UsageSegment) bool {
		return ended[runKey{s.JobID, s.Attempt}]
	})
	return Report(segs, q)
}
