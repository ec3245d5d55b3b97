package accounting

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gangwayhq/gangway"
)

// ErrInvalidSegment: Record was given a segment it cannot bill (no job or
// pool, end before start, no GPUs, a bad price or capacity type). Retrying
// it cannot help; check with errors.Is.
var ErrInvalidSegment = errors.New("accounting: invalid usage segment")

// Ledger is the SQL usage ledger (see Open). It is safe for concurrent use,
// and so are several Ledgers, in several processes, on one database.
type Ledger struct {
	db *sql.DB
	d  dialect
}

// segmentColumns are the columns a segment is read from, in scanSegment's
// order.
const segmentColumns = "job_id, attempt, pool, start_ns, end_ns, team, project, capacity_type, gpus, gpu_milli, price_per_gpu_hour"

// Record adds seg to the ledger and returns what of it is new there: all
// of it for a segment not yet recorded; for one recorded before (same job,
// attempt, pool and start) with an earlier end, the ledger's segment is
// extended to seg's end and the part after the old end is returned; a
// segment recorded before with this end or a later one changes nothing and
// returns ok false. The later end wins because the workflow that records
// a segment may record it again with a later end — a workflow task that
// ran its local activities and then failed to complete (the Temporal
// server died) runs again at a later workflow time, and the job's status
// keeps that run's end — and never with an earlier one. An invalid
// segment is refused with ErrInvalidSegment.
func (l *Ledger) Record(ctx context.Context, seg gangway.UsageSegment) (added gangway.UsageSegment, ok bool, err error) {
	if err := Validate(seg); err != nil {
		return gangway.UsageSegment{}, false, err
	}
	fail := func(err error) (gangway.UsageSegment, bool, error) {
		return gangway.UsageSegment{}, false, fmt.Errorf("record usage of %s: %w", seg.JobID, err)
	}
	key := []any{seg.JobID, seg.Attempt, seg.Pool, seg.Start.UnixNano()}
	// A few tries: each is an insert, or an extension from the end read
	// just before it, which another server's write in between undoes.
	for range 5 {
		res, err := l.db.ExecContext(ctx, l.d.bind(`INSERT INTO usage_segments (`+segmentColumns+`, recorded_at_ns)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (job_id, attempt, pool, start_ns) DO NOTHING`),
			seg.JobID, seg.Attempt, seg.Pool, seg.Start.UnixNano(), seg.End.UnixNano(), seg.Team, seg.Project,
			string(seg.CapacityType), seg.GPUs, seg.GPUMilli, seg.PricePerGPUHour, time.Now().UnixNano())
		if err != nil {
			return fail(err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fail(err)
		} else if n == 1 {
			return seg, true, nil
		}
		var endNs int64
		err = l.db.QueryRowContext(ctx, l.d.bind(`SELECT end_ns FROM usage_segments
		WHERE job_id = ? AND attempt = ? AND pool = ? AND start_ns = ?`), key...).Scan(&endNs)
		if errors.Is(err, sql.ErrNoRows) {
			continue // removed in between: insert again
		}
		if err != nil {
			return fail(err)
		}
		if endNs >= seg.End.UnixNano() {
			return gangway.UsageSegment{}, false, nil
		}
		res, err = l.db.ExecContext(ctx, l.d.bind(`UPDATE usage_segments SET end_ns = ?
		WHERE job_id = ? AND attempt = ? AND pool = ? AND start_ns = ? AND end_ns = ?`),
			append(append([]any{seg.End.UnixNano()}, key...), endNs)...)
		if err != nil {
			return fail(err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fail(err)
		} else if n == 1 {
			added = seg
			added.Start = time.Unix(0, endNs).UTC()
			return added, true, nil
		}
	}
	return fail(errors.New("the segment kept changing under five tries"))
}

// SegmentID is what identifies a segment in the ledger: recording another
// segment with the same ID changes at most its end (Record). Job IDs never contain '|' (Validate
// refuses them), so no two segments' IDs are alike by accident.
func SegmentID(seg gangway.UsageSegment) string {
	return seg.JobID + "|" + strconv.Itoa(seg.Attempt) + "|" + seg.Pool + "|" +
		seg.Start.UTC().Format(time.RFC3339Nano)
}

// Validate reports why the ledger would refuse seg, wrapping
// ErrInvalidSegment, or nil.
func Validate(seg gangway.UsageSegment) error {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	switch {
	case seg.JobID == "":
		bad("jobId is empty")
	case strings.Contains(seg.JobID, "|"):
		bad("jobId %q contains '|'", seg.JobID)
	}
	if seg.Pool == "" {
		bad("pool is empty")
	}
	if seg.Attempt < 0 {
		bad("attempt is negative (%d)", seg.Attempt)
	}
	switch seg.CapacityType {
	case gangway.CapacityOnPrem, gangway.CapacitySpot, gangway.CapacityOnDemand:
	default:
		bad("capacityType must be %s, %s or %s, got %q", gangway.CapacityOnPrem, gangway.CapacitySpot, gangway.CapacityOnDemand, seg.CapacityType)
	}
	if seg.GPUs <= 0 {
		bad("gpus must be positive, got %d", seg.GPUs)
	}
	if seg.GPUMilli < 0 || seg.GPUMilli > int64(max(seg.GPUs, 0))*gangway.MilliPerGPU {
		bad("gpuMilli must be 0 (whole GPUs) or up to gpus × %d = %d, got %d", gangway.MilliPerGPU, int64(max(seg.GPUs, 0))*gangway.MilliPerGPU, seg.GPUMilli)
	}
	switch {
	case seg.Start.IsZero():
		bad("start is not set")
	case seg.End.Before(seg.Start):
		bad("end %s is before start %s", seg.End.Format(time.RFC3339Nano), seg.Start.Format(time.RFC3339Nano))
	case !inNanoRange(seg.Start) || !inNanoRange(seg.End):
		// The ledger stores Unix nanoseconds.
		bad("start %s or end %s is outside the years 1678 to 2262", seg.Start.Format(time.RFC3339), seg.End.Format(time.RFC3339))
	}
	if p := seg.PricePerGPUHour; p < 0 || math.IsNaN(p) || math.IsInf(p, 0) {
		bad("pricePerGPUHour must be a non-negative number, got %v", p)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: job %q attempt %d: %s", ErrInvalidSegment, seg.JobID, seg.Attempt, strings.Join(problems, "; "))
	}
	return nil
}

// Segments returns the segments that overlap [since, until), whole (not
// clipped to the window), in the order they ran. A zero since or until
// leaves that side open.
func (l *Ledger) Segments(ctx context.Context, since, until time.Time) ([]gangway.UsageSegment, error) {
	// A segment overlaps only if it ends at or after since and starts
	// before until; overlaps then drops the zero-length ones at since's
	// edge that it does not count.
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	if !since.IsZero() {
		lo = since.UnixNano()
	}
	if !until.IsZero() {
		hi = until.UnixNano()
	}
	segs, err := l.query(ctx, "SELECT "+segmentColumns+" FROM usage_segments WHERE end_ns >= ? AND start_ns < ?", lo, hi)
	if err != nil {
		return nil, fmt.Errorf("usage segments: %w", err)
	}
	segs = slices.DeleteFunc(segs, func(s gangway.UsageSegment) bool {
		return !overlaps(s, since, until)
	})
	SortSegments(segs)
	return segs, nil
}

// overlaps reports whether seg has any time in [since, until); zero bounds
// are open. A zero-length segment counts where it starts.
func overlaps(seg gangway.UsageSegment, since, until time.Time) bool {
	if !until.IsZero() && !seg.Start.Before(until) {
		return false
	}
	if since.IsZero() {
		return true
	}
	return seg.End.After(since) || (seg.End.Equal(seg.Start) && !seg.Start.Before(since))
}

// JobSegments returns every segment of one job, in the order they ran.
func (l *Ledger) JobSegments(ctx context.Context, jobID gangway.JobID) ([]gangway.UsageSegment, error) {
	segs, err := l.query(ctx, "SELECT "+segmentColumns+" FROM usage_segments WHERE job_id = ?", jobID)
	if err != nil {
		return nil, fmt.Errorf("usage of job %s: %w", jobID, err)
	}
	SortSegments(segs)
	return segs, nil
}

// JobTotal is one job's usage over all its segments.
type JobTotal struct {
	JobID      gangway.JobID `json:"jobId"`
	Segments   int           `json:"segments"`
	GPUSeconds float64       `json:"gpuSeconds"`
	Dollars    float64       `json:"dollars"`
}

// PerJob totals one job's segments. The sums add each segment's
// GPUSeconds() and Dollars() in the order the segments ran, the order in
// which JobWorkflow adds them to its result, so the two are equal to the
// last bit.
func (l *Ledger) PerJob(ctx context.Context, jobID gangway.JobID) (JobTotal, error) {
	segs, err := l.JobSegments(ctx, jobID)
	if err != nil {
		return JobTotal{}, err
	}
	t := JobTotal{JobID: jobID, Segments: len(segs)}
	for _, s := range segs {
		t.GPUSeconds += s.GPUSeconds()
		t.Dollars += s.Dollars()
	}
	return t, nil
}

// query reads the segments a SELECT of segmentColumns returns.
func (l *Ledger) query(ctx context.Context, query string, args ...any) ([]gangway.UsageSegment, error) {
	rows, err := l.db.QueryContext(ctx, l.d.bind(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var segs []gangway.UsageSegment
	for rows.Next() {
		var s gangway.UsageSegment
		var start, end int64
		var capacityType string
		if err := rows.Scan(&s.JobID, &s.Attempt, &s.Pool, &start, &end, &s.Team, &s.Project,
			&capacityType, &s.GPUs, &s.GPUMilli, &s.PricePerGPUHour); err != nil {
			return nil, err
		}
		s.Start, s.End, s.CapacityType = time.Unix(0, start).UTC(), time.Unix(0, end).UTC(), gangway.CapacityType(capacityType)
		segs = append(segs, s)
	}
	return segs, rows.Err()
}

// inNanoRange reports whether t can be stored as Unix nanoseconds.
func inNanoRange(t time.Time) bool {
	return !t.Before(time.Unix(0, math.MinInt64)) && !t.After(time.Unix(0, math.MaxInt64))
}

// SortSegments puts segments in the order they ran: by start, then job,
// attempt, pool and end. Every sum in this package runs in this order, so
// the same set of segments always gives the same floating-point totals,
// whatever order it was recorded or listed in.
func SortSegments(segs []gangway.UsageSegment) {
	slices.SortStableFunc(segs, func(a, b gangway.UsageSegment) int {
		return cmp.Or(
			a.Start.Compare(b.Start),
			cmp.Compare(a.JobID, b.JobID),
			cmp.Compare(a.Attempt, b.Attempt),
			cmp.Compare(a.Pool, b.Pool),
			a.End.Compare(b.End),
		)
	})
}
