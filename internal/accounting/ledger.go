package accounting

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gangwayhq/gangway"
)

// DefaultPrefix is the key prefix, and Redis Cluster hash tag, used when
// Options.Prefix is empty. It is the capacity view's default too.
const DefaultPrefix = "{gangway}"

// DefaultMaxAge is how long segments are kept when Options.MaxAge is zero.
const DefaultMaxAge = 400 * 24 * time.Hour

// trimBatch bounds how many expired segments one write drops, so a write
// after a long pause never turns into one long script; the rest go with
// the next writes.
const trimBatch = 500

// readBatch is how many segments one HMGET fetches.
const readBatch = 1000

// ErrInvalidSegment: Record was given a segment it cannot bill (no job or
// pool, end before start, no GPUs, a bad price or capacity type). Retrying
// it cannot help; check with errors.Is.
var ErrInvalidSegment = errors.New("accounting: invalid usage segment")

// Options configures a Ledger.
type Options struct {
	// Prefix starts every key. It should be a hash tag ("{...}"); tests and
	// several installs sharing one Redis use different ones.
	Prefix string
	// MaxAge is how long a segment is kept after it ended. Zero means
	// DefaultMaxAge; a negative value keeps segments forever.
	MaxAge time.Duration
	// Now is the clock retention is measured against. Nil means time.Now.
	Now func() time.Time
}

// Ledger is the Redis usage ledger. It is safe for concurrent use: it holds
// no state besides the client and the key names.
type Ledger struct {
	rdb                    redis.UniversalClient
	segments, byEnd, byJob string
	maxAge                 time.Duration
	now                    func() time.Time
}

// New returns a Ledger over rdb. Any go-redis client works (single node,
// Sentinel failover, Cluster).
func New(rdb redis.UniversalClient, opts Options) *Ledger {
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.MaxAge == 0 {
		opts.MaxAge = DefaultMaxAge
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Ledger{
		rdb:      rdb,
		segments: opts.Prefix + ":usage:segments",
		byEnd:    opts.Prefix + ":usage:by-end",
		byJob:    opts.Prefix + ":usage:by-job",
		maxAge:   opts.MaxAge,
		now:      opts.Now,
	}
}

var (
	//go:embed scripts/record.lua
	recordLua    string
	recordScript = redis.NewScript(recordLua)
)

// Record adds seg to the ledger and reports whether it was new. Recording a
// segment with the same job, attempt, pool and start again is a no-op that
// returns false, as is recording one that ended before the retention
// window. An invalid segment is refused with ErrInvalidSegment.
func (l *Ledger) Record(ctx context.Context, seg gangway.UsageSegment) (bool, error) {
	if err := Validate(seg); err != nil {
		return false, err
	}
	seg.Start, seg.End = seg.Start.UTC(), seg.End.UTC()
	data, err := json.Marshal(seg)
	if err != nil {
		return false, fmt.Errorf("record usage of %s: %w", seg.JobID, err)
	}
	cutoff := int64(math.MinInt64)
	if l.maxAge > 0 {
		cutoff = l.now().Add(-l.maxAge).UnixMilli()
	}
	n, err := recordScript.Run(ctx, l.rdb, []string{l.segments, l.byEnd, l.byJob},
		SegmentID(seg), data, seg.End.UnixMilli(), cutoff, trimBatch).Int()
	if err != nil {
		return false, fmt.Errorf("record usage of %s: %w", seg.JobID, err)
	}
	return n == 1, nil
}

// SegmentID is what identifies a segment in the ledger: recording another
// segment with the same ID is a no-op.
func SegmentID(seg gangway.UsageSegment) string {
	return jobPrefix(seg.JobID) + strconv.Itoa(seg.Attempt) + "|" + seg.Pool + "|" +
		seg.Start.UTC().Format(time.RFC3339Nano)
}

// jobPrefix starts the IDs of all of a job's segments. Job IDs never contain
// '|' (Validate refuses them), so one job's prefix never matches another's.
func jobPrefix(jobID gangway.JobID) string { return jobID + "|" }

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
	switch {
	case seg.Start.IsZero():
		bad("start is not set")
	case seg.End.Before(seg.Start):
		bad("end %s is before start %s", seg.End.Format(time.RFC3339Nano), seg.Start.Format(time.RFC3339Nano))
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
	min := "-inf"
	if !since.IsZero() {
		// A segment overlaps only if it ends after since; ending after
		// since means its score, the end in whole ms, is at least since's.
		min = strconv.FormatInt(since.UnixMilli(), 10)
	}
	ids, err := l.rdb.ZRangeByScore(ctx, l.byEnd, &redis.ZRangeBy{Min: min, Max: "+inf"}).Result()
	if err != nil {
		return nil, fmt.Errorf("usage segments: %w", err)
	}
	segs, err := l.load(ctx, ids)
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
	p := jobPrefix(jobID)
	// '}' is the byte after '|': the range is exactly the IDs starting with p.
	ids, err := l.rdb.ZRangeByLex(ctx, l.byJob, &redis.ZRangeBy{Min: "[" + p, Max: "(" + jobID + "}"}).Result()
	if err != nil {
		return nil, fmt.Errorf("usage of job %s: %w", jobID, err)
	}
	segs, err := l.load(ctx, ids)
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

// load reads the segments with the given IDs. An ID whose segment is gone
// (trimmed since the index was read) is skipped.
func (l *Ledger) load(ctx context.Context, ids []string) ([]gangway.UsageSegment, error) {
	segs := make([]gangway.UsageSegment, 0, len(ids))
	for chunk := range slices.Chunk(ids, readBatch) {
		vals, err := l.rdb.HMGet(ctx, l.segments, chunk...).Result()
		if err != nil {
			return nil, err
		}
		for i, v := range vals {
			s, ok := v.(string)
			if !ok {
				continue
			}
			var seg gangway.UsageSegment
			if err := json.Unmarshal([]byte(s), &seg); err != nil {
				return nil, fmt.Errorf("segment %q: %w", chunk[i], err)
			}
			segs = append(segs, seg)
		}
	}
	return segs, nil
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
