package accounting

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
)

func testRecordIsIdempotent(t *testing.T, b backend) {
	ctx := context.Background()
	l := newLedger(t, b)
	first := seg("job-1").gpus(8).build()

	// A retried activity and a replayed workflow record the same segment
	// again: nothing new. A workflow task run again at a later time
	// records it with a later end: the ledger extends it and returns the
	// extension. An earlier end after that changes nothing.
	later := first
	later.End = later.End.Add(time.Hour)
	inOtherZone := first
	inOtherZone.Start = first.Start.In(time.FixedZone("CEST", 2*3600))
	extension := later
	extension.Start = first.End.UTC()
	for i, tc := range []struct {
		s       gangway.UsageSegment
		want    gangway.UsageSegment
		wantNew bool
	}{
		{first, first, true}, {first, gangway.UsageSegment{}, false}, {inOtherZone, gangway.UsageSegment{}, false},
		{later, extension, true}, {first, gangway.UsageSegment{}, false}, {later, gangway.UsageSegment{}, false},
	} {
		added, ok, err := l.Record(ctx, tc.s)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if ok != tc.wantNew || !added.Start.Equal(tc.want.Start) || !added.End.Equal(tc.want.End) {
			t.Errorf("record %d: added %v–%v (%v), want %v–%v (%v)", i, added.Start, added.End, ok, tc.want.Start, tc.want.End, tc.wantNew)
		}
	}
	// Another attempt, pool or start is another segment.
	others := []gangway.UsageSegment{
		seg("job-1").gpus(8).attempt(2).build(),
		seg("job-1").gpus(8).pool("aws-spot", gangway.CapacitySpot, 1.1).build(),
		seg("job-1").gpus(8).at(time.Hour, 2*time.Hour).build(),
	}
	for _, s := range others {
		if _, added, err := l.Record(ctx, s); err != nil || !added {
			t.Fatalf("record %s: added = %v, err = %v; want a new segment", SegmentID(s), added, err)
		}
	}

	got, err := l.JobSegments(ctx, "job-1")
	if err != nil {
		t.Fatal(err)
	}
	want := append([]gangway.UsageSegment{later}, others...)
	SortSegments(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("segments (-want +got):\n%s", diff)
	}
}

func testRecordRefusesInvalidSegments(t *testing.T, b backend) {
	ctx := context.Background()
	l := newLedger(t, b)
	tests := map[string]struct {
		seg      gangway.UsageSegment
		wantPart string
	}{
		"no job":             {seg: seg("").build(), wantPart: "jobId"},
		"job with a bar":     {seg: seg("a|b").build(), wantPart: "'|'"},
		"no pool":            {seg: seg("j").pool("", gangway.CapacityOnPrem, 1).build(), wantPart: "pool"},
		"unknown capacity":   {seg: seg("j").pool("p", "reserved", 1).build(), wantPart: `"reserved"`},
		"empty capacity":     {seg: seg("j").pool("p", "", 1).build(), wantPart: "capacityType"},
		"no GPUs":            {seg: seg("j").gpus(0).build(), wantPart: "gpus"},
		"negative attempt":   {seg: seg("j").attempt(-1).build(), wantPart: "attempt"},
		"no start":           {seg: noStart(seg("j").build()), wantPart: "start"},
		"end before start":   {seg: seg("j").at(time.Hour, 0).build(), wantPart: "before start"},
		"negative price":     {seg: seg("j").pool("p", gangway.CapacitySpot, -1).build(), wantPart: "pricePerGPUHour"},
		"price not a number": {seg: seg("j").pool("p", gangway.CapacitySpot, math.NaN()).build(), wantPart: "pricePerGPUHour"},
		"year 3000":          {seg: endAt(seg("j").build(), time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)), wantPart: "outside the years"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, added, err := l.Record(ctx, tc.seg)
			if !errors.Is(err, ErrInvalidSegment) {
				t.Fatalf("Record = %v, %v; want ErrInvalidSegment", added, err)
			}
			if !strings.Contains(err.Error(), tc.wantPart) {
				t.Errorf("error %q does not name %q", err, tc.wantPart)
			}
			if got, _ := l.Segments(ctx, time.Time{}, time.Time{}); len(got) != 0 {
				t.Errorf("an invalid segment was stored: %v", got)
			}
		})
	}
}

func testSegmentsWindow(t *testing.T, b backend) {
	ctx := context.Background()
	l := newLedger(t, b)
	h := time.Hour
	for _, s := range []gangway.UsageSegment{
		seg("a").at(0, 2*h).build(),                      // [0h, 2h)
		seg("b").at(2*h, 4*h).build(),                    // [2h, 4h)
		seg("c").at(3*h, 10*h).build(),                   // [3h, 10h)
		seg("d").at(5*h, 5*h).build(),                    // empty, at 5h
		seg("e").at(-24*h, -23*h).build(),                // the day before
		seg("f").at(2*h+time.Millisecond/2, 3*h).build(), // starts within a millisecond of 2h
	} {
		if _, _, err := l.Record(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	tests := map[string]struct {
		since, until time.Duration
		open         [2]bool // since, until left open
		want         []string
	}{
		"everything":        {open: [2]bool{true, true}, want: []string{"e", "a", "b", "f", "c", "d"}},
		"since 0h":          {since: 0, open: [2]bool{false, true}, want: []string{"a", "b", "f", "c", "d"}},
		"since 2h":          {since: 2 * h, open: [2]bool{false, true}, want: []string{"b", "f", "c", "d"}},
		"until 2h":          {until: 2 * h, open: [2]bool{true, false}, want: []string{"e", "a"}},
		"2h to 3h":          {since: 2 * h, until: 3 * h, want: []string{"b", "f"}},
		"inside one":        {since: 6 * h, until: 7 * h, want: []string{"c"}},
		"the empty one":     {since: 5 * h, until: 5*h + time.Second, want: []string{"c", "d"}},
		"after everything":  {since: 10 * h, open: [2]bool{false, true}, want: nil},
		"before everything": {until: -24 * h, open: [2]bool{true, false}, want: nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var since, until time.Time
			if !tc.open[0] {
				since = t0.Add(tc.since)
			}
			if !tc.open[1] {
				until = t0.Add(tc.until)
			}
			segs, err := l.Segments(ctx, since, until)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range segs {
				got = append(got, s.JobID)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Segments(%v, %v) jobs (-want +got):\n%s", since, until, diff)
			}
		})
	}
}

func testPerJob(t *testing.T, b backend) {
	ctx := context.Background()
	l := newLedger(t, b)
	// Prices and lengths whose products are not exact in binary, recorded
	// out of order and twice, next to jobs whose IDs start alike.
	job := []gangway.UsageSegment{
		seg("job-1").gpus(3).pool("aws-spot", gangway.CapacitySpot, 1.37).at(20*time.Minute, 97*time.Minute+333*time.Millisecond).attempt(2).build(),
		seg("job-1").gpus(8).pool("onprem", gangway.CapacityOnPrem, 0.91).at(0, 7*time.Minute+time.Second/3).build(),
		seg("job-1").gpus(3).pool("gcp-od", gangway.CapacityOnDemand, 3.1).at(2*time.Hour, 5*time.Hour+11*time.Second).attempt(3).build(),
	}
	noise := []gangway.UsageSegment{
		seg("job-10").gpus(2).build(),
		seg("job-").build(),
		seg("job").build(),
	}
	for _, s := range append(append(append([]gangway.UsageSegment{}, job...), noise...), job[1], job[0]) {
		if _, _, err := l.Record(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	got, err := l.PerJob(ctx, "job-1")
	if err != nil {
		t.Fatal(err)
	}
	// What JobWorkflow does: add each segment as it ends.
	want := JobTotal{JobID: "job-1", Segments: 3}
	for _, i := range []int{1, 0, 2} {
		want.GPUSeconds += job[i].GPUSeconds()
		want.Dollars += job[i].Dollars()
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PerJob (-want +got):\n%s", diff)
	}
	if got, err := l.PerJob(ctx, "job-2"); err != nil || got != (JobTotal{JobID: "job-2"}) {
		t.Errorf("PerJob of a job with no usage = %+v, %v; want zero totals", got, err)
	}
}

func jobs(t *testing.T, l *Ledger) []string {
	t.Helper()
	segs, err := l.Segments(context.Background(), time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range segs {
		out = append(out, s.JobID)
	}
	return out
}

func noStart(s gangway.UsageSegment) gangway.UsageSegment {
	s.Start = time.Time{}
	return s
}

func endAt(s gangway.UsageSegment, end time.Time) gangway.UsageSegment {
	s.End = end
	return s
}
