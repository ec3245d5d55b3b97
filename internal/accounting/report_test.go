package accounting

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/gangwayhq/gangway"
)

func ptr(v float64) *float64 { return &v }

func TestReport(t *testing.T) {
	h := time.Hour
	// Numbers exact in binary, so the rows can be written down.
	segs := []gangway.UsageSegment{
		// ml: 2 GPUs × 1.5 h on-prem at $4 = $12.
		seg("train-1").team("ml").project("llm").gpus(2).pool("onprem", gangway.CapacityOnPrem, 4).at(0, 90*time.Minute).build(),
		// ml: 4 GPUs × 2 h spot at $1.25 = $10; at on-demand $3 it would be $24.
		seg("train-1").attempt(2).team("ml").project("llm").gpus(4).pool("aws-spot", gangway.CapacitySpot, 1.25).at(2*h, 4*h).build(),
		// ml: 1 GPU × 1 h on-demand at $3.
		seg("train-2").team("ml").project("").gpus(1).pool("aws-od", gangway.CapacityOnDemand, 3).at(h, 2*h).build(),
		// vision: 8 GPUs × 0.5 h spot in a pool with no known on-demand price, $2.
		seg("seg-1").team("vision").project("det").gpus(8).pool("gcp-spot", gangway.CapacitySpot, 0.5).at(0, 30*time.Minute).build(),
		// research: 1 GPU × 4 h on-prem at $0.5 = $2, no spot.
		seg("rl-1").team("research").project("rl").gpus(1).pool("onprem", gangway.CapacityOnPrem, 0.5).at(0, 4*h).build(),
	}
	prices := map[string]float64{"aws-spot": 3, "aws-od": 3}

	tests := map[string]struct {
		q       Query
		want    gangway.CostSummary
		wantErr bool
	}{
		"by team": {
			q: Query{By: gangway.CostByTeam, OnDemandPrices: prices},
			want: gangway.CostSummary{By: gangway.CostByTeam, Rows: []gangway.CostRow{
				{Group: "ml", Segments: 3, GPUHours: gangway.CostSplit{OnPrem: 3, Spot: 8, OnDemand: 1}, Dollars: gangway.CostSplit{OnPrem: 12, Spot: 10, OnDemand: 3}, TotalDollars: 25, SpotSavedDollars: ptr(14)},
				{Group: "research", Segments: 1, GPUHours: gangway.CostSplit{OnPrem: 4}, Dollars: gangway.CostSplit{OnPrem: 2}, TotalDollars: 2, SpotSavedDollars: ptr(0)},
				{Group: "vision", Segments: 1, GPUHours: gangway.CostSplit{Spot: 4}, Dollars: gangway.CostSplit{Spot: 2}, TotalDollars: 2},
			}, Total: gangway.CostRow{Segments: 5, GPUHours: gangway.CostSplit{OnPrem: 7, Spot: 12, OnDemand: 1}, Dollars: gangway.CostSplit{OnPrem: 14, Spot: 12, OnDemand: 3}, TotalDollars: 29}},
		},
		"by project, one without": {
			q: Query{By: gangway.CostByProject, OnDemandPrices: map[string]float64{"aws-spot": 3, "gcp-spot": 0.75}},
			want: gangway.CostSummary{By: gangway.CostByProject, Rows: []gangway.CostRow{
				{Group: "llm", Segments: 2, GPUHours: gangway.CostSplit{OnPrem: 3, Spot: 8}, Dollars: gangway.CostSplit{OnPrem: 12, Spot: 10}, TotalDollars: 22, SpotSavedDollars: ptr(14)},
				{Group: "", Segments: 1, GPUHours: gangway.CostSplit{OnDemand: 1}, Dollars: gangway.CostSplit{OnDemand: 3}, TotalDollars: 3, SpotSavedDollars: ptr(0)},
				{Group: "det", Segments: 1, GPUHours: gangway.CostSplit{Spot: 4}, Dollars: gangway.CostSplit{Spot: 2}, TotalDollars: 2, SpotSavedDollars: ptr(1)},
				{Group: "rl", Segments: 1, GPUHours: gangway.CostSplit{OnPrem: 4}, Dollars: gangway.CostSplit{OnPrem: 2}, TotalDollars: 2, SpotSavedDollars: ptr(0)},
			}, Total: gangway.CostRow{Segments: 5, GPUHours: gangway.CostSplit{OnPrem: 7, Spot: 12, OnDemand: 1}, Dollars: gangway.CostSplit{OnPrem: 14, Spot: 12, OnDemand: 3}, TotalDollars: 29, SpotSavedDollars: ptr(15)}},
		},
		"by pool, no prices": {
			q: Query{By: gangway.CostByPool},
			want: gangway.CostSummary{By: gangway.CostByPool, Rows: []gangway.CostRow{
				{Group: "onprem", Segments: 2, GPUHours: gangway.CostSplit{OnPrem: 7}, Dollars: gangway.CostSplit{OnPrem: 14}, TotalDollars: 14, SpotSavedDollars: ptr(0)},
				{Group: "aws-spot", Segments: 1, GPUHours: gangway.CostSplit{Spot: 8}, Dollars: gangway.CostSplit{Spot: 10}, TotalDollars: 10},
				{Group: "aws-od", Segments: 1, GPUHours: gangway.CostSplit{OnDemand: 1}, Dollars: gangway.CostSplit{OnDemand: 3}, TotalDollars: 3, SpotSavedDollars: ptr(0)},
				{Group: "gcp-spot", Segments: 1, GPUHours: gangway.CostSplit{Spot: 4}, Dollars: gangway.CostSplit{Spot: 2}, TotalDollars: 2},
			}, Total: gangway.CostRow{Segments: 5, GPUHours: gangway.CostSplit{OnPrem: 7, Spot: 12, OnDemand: 1}, Dollars: gangway.CostSplit{OnPrem: 14, Spot: 12, OnDemand: 3}, TotalDollars: 29}},
		},
		"a window clips what straddles it": {
			// [1h, 3h): half of ml's spot run, all of its on-demand hour,
			// half an hour of its on-prem run, 2 h of research's.
			q: Query{By: gangway.CostByTeam, Since: t0.Add(h), Until: t0.Add(3 * h), OnDemandPrices: prices},
			want: gangway.CostSummary{By: gangway.CostByTeam, Since: t0.Add(h), Until: t0.Add(3 * h), Rows: []gangway.CostRow{
				{Group: "ml", Segments: 3, GPUHours: gangway.CostSplit{OnPrem: 1, Spot: 4, OnDemand: 1}, Dollars: gangway.CostSplit{OnPrem: 4, Spot: 5, OnDemand: 3}, TotalDollars: 12, SpotSavedDollars: ptr(7)},
				{Group: "research", Segments: 1, GPUHours: gangway.CostSplit{OnPrem: 2}, Dollars: gangway.CostSplit{OnPrem: 1}, TotalDollars: 1, SpotSavedDollars: ptr(0)},
			}, Total: gangway.CostRow{Segments: 4, GPUHours: gangway.CostSplit{OnPrem: 3, Spot: 4, OnDemand: 1}, Dollars: gangway.CostSplit{OnPrem: 5, Spot: 5, OnDemand: 3}, TotalDollars: 13, SpotSavedDollars: ptr(7)}},
		},
		"nothing in the window": {
			q:    Query{By: gangway.CostByTeam, Since: t0.Add(24 * h)},
			want: gangway.CostSummary{By: gangway.CostByTeam, Since: t0.Add(24 * h), Rows: []gangway.CostRow{}, Total: gangway.CostRow{SpotSavedDollars: ptr(0)}},
		},
		"unknown grouping": {q: Query{By: "region"}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Report(segs, tc.q)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("Report = %+v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Report (-want +got):\n%s", diff)
			}
		})
	}
}

// testReportFromLedgerAddsUp reads awkward numbers back from the database
// and checks that every group's totals are exactly the in-order sums of its
// segments' own GPUSeconds() and Dollars().
func testReportFromLedgerAddsUp(t *testing.T, b backend) {
	ctx := context.Background()
	l := newLedger(t, b)
	var segs []gangway.UsageSegment
	teams := []string{"ml", "vision", "research"}
	pools := []struct {
		name     string
		capacity gangway.CapacityType
	}{{"onprem", gangway.CapacityOnPrem}, {"aws-spot", gangway.CapacitySpot}, {"gcp-od", gangway.CapacityOnDemand}}
	for i := range 60 {
		p := pools[i%3]
		start := time.Duration(i)*17*time.Minute + time.Duration(i*i)*time.Millisecond + time.Duration(i)*333*time.Microsecond
		s := seg(fmt.Sprintf("job-%d", i%11)).attempt(i%4).team(teams[i%len(teams)]).project(fmt.Sprintf("p%d", i%5)).
			gpus(1+i%8).pool(p.name, p.capacity, 0.1*float64(1+i%13)+0.013).
			at(start, start+time.Duration(i+1)*7*time.Minute+time.Second/3).build()
		segs = append(segs, s)
		if _, _, err := l.Record(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	stored, err := l.Segments(ctx, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(segs, stored); diff != "" {
		t.Fatalf("segments read back (-recorded +read):\n%s", diff)
	}
	for _, by := range []gangway.CostGroupBy{gangway.CostByTeam, gangway.CostByProject, gangway.CostByPool} {
		sum, err := Report(stored, Query{By: by, OnDemandPrices: map[string]float64{"aws-spot": 4.5}})
		if err != nil {
			t.Fatal(err)
		}
		checkAddsUp(t, by, segs, map[string]float64{"aws-spot": 4.5}, sum)
		fromLedger, err := l.Report(ctx, Query{By: by, OnDemandPrices: map[string]float64{"aws-spot": 4.5}})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(sum, fromLedger); diff != "" {
			t.Errorf("by %s: Ledger.Report (-Report +Ledger.Report):\n%s", by, diff)
		}
	}
}

// checkAddsUp checks a report made from segs (all inside its window)
// against in-order sums of the segments themselves.
// errorer is what checkAddsUp needs of *testing.T and *rapid.T.
type errorer interface {
	Helper()
	Errorf(format string, args ...any)
}

func checkAddsUp(t errorer, by gangway.CostGroupBy, segs []gangway.UsageSegment, prices map[string]float64, sum gangway.CostSummary) {
	t.Helper()
	groups := map[string][]gangway.UsageSegment{}
	for _, s := range segs {
		groups[groupKey(by, s)] = append(groups[groupKey(by, s)], s)
	}
	want := func(group string, segs []gangway.UsageSegment) gangway.CostRow {
		r := gangway.CostRow{Group: group, Segments: len(segs)}
		var sec gangway.CostSplit
		SortSegments(segs)
		for _, s := range segs {
			addTo(&sec, s.CapacityType, s.GPUSeconds())
			addTo(&r.Dollars, s.CapacityType, s.Dollars())
		}
		r.GPUHours = gangway.CostSplit{OnPrem: sec.OnPrem / 3600, Spot: sec.Spot / 3600, OnDemand: sec.OnDemand / 3600}
		_, r.TotalDollars = sumInOrder(segs)
		saved, known := 0.0, true
		for _, s := range segs {
			if s.CapacityType != gangway.CapacitySpot {
				continue
			}
			price, ok := prices[s.Pool]
			if !ok {
				known = false
				continue
			}
			atOnDemand := s
			atOnDemand.PricePerGPUHour = price
			saved += atOnDemand.Dollars() - s.Dollars()
		}
		if known {
			r.SpotSavedDollars = &saved
		}
		return r
	}
	if len(sum.Rows) != len(groups) {
		t.Errorf("by %s: %d rows, want %d", by, len(sum.Rows), len(groups))
	}
	for _, r := range sum.Rows {
		if diff := cmp.Diff(want(r.Group, groups[r.Group]), r); diff != "" {
			t.Errorf("by %s, group %q (-want +got):\n%s", by, r.Group, diff)
		}
	}
	if diff := cmp.Diff(want("", append([]gangway.UsageSegment(nil), segs...)), sum.Total); diff != "" {
		t.Errorf("by %s, total (-want +got):\n%s", by, diff)
	}
}

// testLedgerProperties records any set of segments in any order, with
// exact and conflicting duplicates (other end and price), and checks that
// the ledger keeps the first recording of each segment ID with the latest
// end recorded, that Record adds exactly what was new (the whole segment
// once, then each later end's extension), and that reports and per-job
// totals equal the in-order sums over the distinct segments, whatever
// order the report is given them in.
func testLedgerProperties(t *testing.T, b backend) {
	ctx := context.Background()
	l := newLedger(t, b)
	// Job IDs where one is a prefix of another.
	jobs := []string{"a", "a-1", "b", "b-1"}
	pools := []struct {
		name     string
		capacity gangway.CapacityType
	}{
		{"onprem", gangway.CapacityOnPrem}, {"aws-spot", gangway.CapacitySpot}, {"aws-od", gangway.CapacityOnDemand}, {"gcp-spot", gangway.CapacitySpot},
	}
	rapid.Check(t, func(rt *rapid.T) {
		reset(rt, l)
		genSeg := func(label string) gangway.UsageSegment {
			p := rapid.SampledFrom(pools).Draw(rt, label+"-pool")
			start := t0.Add(time.Duration(rapid.Int64Range(0, int64(14*24*time.Hour)).Draw(rt, label+"-start")))
			return gangway.UsageSegment{
				JobID:           rapid.SampledFrom(jobs).Draw(rt, label+"-job"),
				Attempt:         rapid.IntRange(0, 2).Draw(rt, label+"-attempt"),
				Team:            rapid.SampledFrom([]string{"ml", "vision"}).Draw(rt, label+"-team"),
				Project:         rapid.SampledFrom([]string{"", "llm", "det"}).Draw(rt, label+"-project"),
				Pool:            p.name,
				CapacityType:    p.capacity,
				GPUs:            rapid.IntRange(1, 64).Draw(rt, label+"-gpus"),
				Start:           start,
				End:             start.Add(time.Duration(rapid.Int64Range(0, int64(72*time.Hour)).Draw(rt, label+"-length"))),
				PricePerGPUHour: rapid.Float64Range(0, 12).Draw(rt, label+"-price"),
			}
		}
		distinct := rapid.SliceOfN(rapid.Custom(func(rt *rapid.T) gangway.UsageSegment { return genSeg("seg") }), 1, 25).Draw(rt, "segments")
		// Record each at least once, in random order, some of them again,
		// and some conflicting copies (same ID, other end and price).
		var order []gangway.UsageSegment
		order = append(order, distinct...)
		for _, i := range rapid.SliceOfN(rapid.IntRange(0, len(distinct)-1), 0, 20).Draw(rt, "again") {
			order = append(order, distinct[i])
		}
		for _, i := range rapid.SliceOfN(rapid.IntRange(0, len(distinct)-1), 0, 5).Draw(rt, "conflicts") {
			c := distinct[i]
			c.End = c.End.Add(time.Hour)
			c.PricePerGPUHour++
			order = append(order, c)
		}
		order = rapid.Permutation(order).Draw(rt, "order")

		// The ledger keeps each ID's first recording with the latest end
		// recorded, and returns what each recording added.
		kept := map[string]gangway.UsageSegment{}
		for _, s := range order {
			added, ok, err := l.Record(ctx, s)
			if err != nil {
				rt.Fatal(err)
			}
			id := SegmentID(s)
			k, seen := kept[id]
			if want := !seen || s.End.After(k.End); ok != want {
				rt.Fatalf("Record(%s) ending %v: added = %v, want %v (seen before: %v, ending %v)", id, s.End, ok, want, seen, k.End)
			}
			switch {
			case !seen:
				kept[id] = s
				if !added.Start.Equal(s.Start) || !added.End.Equal(s.End) {
					rt.Fatalf("Record(%s) new: added %v–%v, want all of it", id, added.Start, added.End)
				}
			case ok:
				if !added.Start.Equal(k.End) || !added.End.Equal(s.End) {
					rt.Fatalf("Record(%s) later end: added %v–%v, want %v–%v", id, added.Start, added.End, k.End, s.End)
				}
				k.End = s.End
				kept[id] = k
			}
		}
		var want []gangway.UsageSegment
		for _, s := range kept {
			want = append(want, s)
		}
		SortSegments(want)

		stored, err := l.Segments(ctx, time.Time{}, time.Time{})
		if err != nil {
			rt.Fatal(err)
		}
		if diff := cmp.Diff(want, stored); diff != "" {
			rt.Fatalf("ledger holds (-first recordings, latest ends +stored):\n%s", diff)
		}
		by := rapid.SampledFrom([]gangway.CostGroupBy{gangway.CostByTeam, gangway.CostByProject, gangway.CostByPool}).Draw(rt, "by")
		q := Query{By: by, OnDemandPrices: map[string]float64{"aws-spot": 4, "gcp-spot": 3.5}}
		sum, err := Report(stored, q)
		if err != nil {
			rt.Fatal(err)
		}
		checkAddsUp(rt, by, want, q.OnDemandPrices, sum)
		shuffled, err := Report(rapid.Permutation(stored).Draw(rt, "shuffled"), q)
		if err != nil {
			rt.Fatal(err)
		}
		if diff := cmp.Diff(sum, shuffled); diff != "" {
			rt.Fatalf("report depends on input order (-sorted +shuffled):\n%s", diff)
		}

		perJob := map[string][]gangway.UsageSegment{}
		for _, s := range want {
			perJob[s.JobID] = append(perJob[s.JobID], s)
		}
		for _, job := range jobs {
			got, err := l.PerJob(ctx, job)
			if err != nil {
				rt.Fatal(err)
			}
			w := JobTotal{JobID: job, Segments: len(perJob[job])}
			w.GPUSeconds, w.Dollars = sumInOrder(perJob[job])
			if diff := cmp.Diff(w, got); diff != "" {
				rt.Fatalf("PerJob(%s) (-want +got):\n%s", job, diff)
			}
		}
	})
}

// TestReportTeamFilter: a query with a team filter counts only those
// teams' segments, recorded or in flight, whatever the grouping.
func TestReportTeamFilter(t *testing.T) {
	t0 := time.Date(2025, 6, 2, 12, 0, 0, 0, time.UTC)
	seg := func(job, team, pool string) gangway.UsageSegment {
		return gangway.UsageSegment{JobID: job, Attempt: 1, Team: team, Pool: pool, CapacityType: gangway.CapacityOnPrem,
			GPUs: 1, Start: t0, End: t0.Add(time.Hour), PricePerGPUHour: 1}
	}
	segs := []gangway.UsageSegment{seg("a", "ml", "p1"), seg("b", "vision", "p1"), seg("c", "vision", "p2")}
	running := []gangway.UsageSegment{seg("d", "ml", "p2"), seg("e", "vision", "p2")}
	sum, err := Report(segs, Query{By: gangway.CostByPool, Running: running, Team: func(team string) bool { return team == "ml" }})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range sum.Rows {
		got = append(got, fmt.Sprintf("%s %d %d", r.Group, r.Segments, r.InFlight))
	}
	if want := []string{"p1 1 0", "p2 1 1"}; !slices.Equal(got, want) {
		t.Errorf("rows %v, want %v", got, want)
	}
	if sum.Total.Segments != 2 || sum.Total.TotalDollars != 2 {
		t.Errorf("total %+v, want 2 segments, $2", sum.Total)
	}
}
