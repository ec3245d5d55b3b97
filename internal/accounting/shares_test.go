package accounting

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
)

// milli sets what the fixture segment's GPUs count for.
func (s segment) milli(m int64) segment { s.GPUMilli = m; return s }

// testSharesBilledAtTheirShare: a segment of GPU shares or MIG devices is
// kept with what its GPUs count for, and everything computed from the
// ledger bills it at that share: a half-GPU job is billed half the
// GPU-seconds and dollars of a whole-GPU job over the same hour.
func testSharesBilledAtTheirShare(t *testing.T, b backend) {
	ctx := context.Background()
	l := newLedger(t, b)
	segs := []gangway.UsageSegment{
		seg("whole").build(),                      // 1 GPU, 1 h at $2
		seg("half").milli(500).build(),            // half of it
		seg("mig").gpus(2).milli(2 * 142).build(), // two 1g.10gb MIG devices of an H100
		seg("legacy").gpus(2).build(),             // recorded before gpu_milli: whole
		seg("three-halves").gpus(3).milli(1500).build(),
	}
	for _, s := range segs {
		if _, _, err := l.Record(ctx, s); err != nil {
			t.Fatalf("record %s: %v", s.JobID, err)
		}
	}
	want := map[string]float64{"whole": 3600, "half": 1800, "mig": 3600 * 0.284, "legacy": 7200, "three-halves": 5400}
	for job, gpuSeconds := range want {
		got, err := l.PerJob(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		if diff := got.GPUSeconds - gpuSeconds; diff > 1e-9 || diff < -1e-9 {
			t.Errorf("%s: billed %v GPU-seconds, want %v", job, got.GPUSeconds, gpuSeconds)
		}
		if wantUSD := gpuSeconds / 3600 * 2; got.Dollars-wantUSD > 1e-9 || wantUSD-got.Dollars > 1e-9 {
			t.Errorf("%s: billed $%v, want $%v", job, got.Dollars, wantUSD)
		}
	}
	stored, err := l.Segments(ctx, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	SortSegments(segs)
	if diff := cmp.Diff(segs, stored); diff != "" {
		t.Errorf("segments read back (-recorded +stored):\n%s", diff)
	}
	sum, err := l.Report(ctx, Query{By: gangway.CostByTeam})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := sum.Total.GPUHours.OnPrem*3600, 3600+1800+3600*0.284+7200+5400; got-want > 1e-6 || want-got > 1e-6 {
		t.Errorf("report total %v on-prem GPU-seconds, want %v", got, want)
	}
	// More milli-GPU than the GPUs hold is refused.
	if _, _, err := l.Record(ctx, seg("over").gpus(1).milli(1001).build()); err == nil {
		t.Error("a segment of 1 GPU counting 1001 milli-GPU was recorded")
	}
}

// testUpgradeFromVersion1: a ledger written at schema version 1 (before
// gpu_milli) migrates to the newest version with its segments intact, and
// they still bill their GPUs whole.
func testUpgradeFromVersion1(t *testing.T, b backend) {
	ctx := context.Background()
	dsn := b.fresh(t)
	db, d, err := openDB(dsn)
	if err != nil {
		t.Fatal(err)
	}
	old := &Ledger{db: db, d: d}
	all := migrations
	migrations = all[:1]
	err = old.Migrate(ctx)
	migrations = all
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(d.bind(`INSERT INTO usage_segments (job_id, attempt, pool, start_ns, end_ns, team, project, capacity_type, gpus, price_per_gpu_hour, recorded_at_ns)
		VALUES (?, 1, 'onprem', ?, ?, 'ml', 'llm', 'on-prem', 4, 2, 0)`), "v1-job", t0.UnixNano(), t0.Add(time.Hour).UnixNano()); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()

	l := open(t, dsn)
	checkSchema(t, l)
	got, err := l.JobSegments(ctx, "v1-job")
	if err != nil {
		t.Fatal(err)
	}
	want := []gangway.UsageSegment{seg("v1-job").gpus(4).build()}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("version 1 segment after the upgrade (-want +got):\n%s", diff)
	}
	if len(got) == 1 && got[0].GPUSeconds() != 4*3600 {
		t.Errorf("version 1 segment bills %v GPU-seconds, want %d", got[0].GPUSeconds(), 4*3600)
	}
}

// TestRunningSegmentsBillShares: a run in flight is counted as the ledger
// will bill it: each GPU at its share.
func TestRunningSegmentsBillShares(t *testing.T) {
	a := gangway.Assignment{JobID: "s", Attempt: 1, Team: "ml", At: t0, Members: []gangway.Member{
		{Rank: 0, NodeID: "n1", Pool: "onprem", GPUs: []int{0}, Milli: 500},
		{Rank: 1, NodeID: "n1", Pool: "onprem", GPUs: []int{1}, MIG: "3g.40gb", MIGMilli: 428},
	}}
	got := RunningSegments([]gangway.Assignment{a}, t0.Add(time.Hour))
	if len(got) != 1 || got[0].GPUs != 2 || got[0].GPUMilli != 928 {
		t.Fatalf("running segments %s, want one of 2 GPUs counting 928 milli-GPU", fmt.Sprint(got))
	}
	if got[0].GPUSeconds() != 0.928*3600 {
		t.Errorf("an hour bills %v GPU-seconds, want %v", got[0].GPUSeconds(), 0.928*3600)
	}
}
