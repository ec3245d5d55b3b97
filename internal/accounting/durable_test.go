package accounting

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
)

// testConcurrentDuplicates records the same segments from many goroutines
// on separate ledgers (as several servers, or a retried activity racing the
// first try, would): each is stored once and reported new exactly once.
func testConcurrentDuplicates(t *testing.T, b backend) {
	ctx := context.Background()
	dsn := b.fresh(t)
	const writers, segments = 8, 20
	var segs []gangway.UsageSegment
	for i := range segments {
		segs = append(segs, seg("job-1").attempt(i).gpus(1+i).build())
	}
	ledgers := make([]*Ledger, writers)
	for i := range ledgers {
		ledgers[i] = open(t, dsn)
	}
	news := make([]int, segments)
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, writers*segments)
	for _, l := range ledgers {
		wg.Go(func() {
			for i, s := range segs {
				_, added, err := l.Record(ctx, s)
				if err != nil {
					errs <- err
					return
				}
				if added {
					mu.Lock()
					news[i]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, n := range news {
		if n != 1 {
			t.Errorf("segment %d: reported new %d times by %d writers, want once", i, n, writers)
		}
	}
	got, err := ledgers[0].JobSegments(ctx, "job-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(segs, got); diff != "" {
		t.Errorf("stored (-recorded +stored):\n%s", diff)
	}
}

// testReportCountsRunsInFlight reports a run still going next to one that
// ended but still holds its allocation: the first counts as in flight, up
// to now; the second only once, from the ledger.
func testReportCountsRunsInFlight(t *testing.T, b backend) {
	ctx := context.Background()
	l := newLedger(t, b)
	h := time.Hour
	ended := seg("done").gpus(2).at(0, h).build() // $4
	if _, _, err := l.Record(ctx, ended); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(3 * h)
	running := RunningSegments([]gangway.Assignment{
		// Ended at 1h; its release has not happened yet.
		{JobID: "done", Attempt: 1, Team: "ml", Project: "llm", At: t0,
			Members: []gangway.Member{{Pool: "onprem", GPUs: []int{0, 1}, PricePerGPUHour: 2}}},
		// Two hours so far on 4 spot GPUs at $1 and 1 on-prem GPU at $2: $12.
		{JobID: "train", Attempt: 2, Team: "ml", Project: "llm", At: t0.Add(h), Members: []gangway.Member{
			{Pool: "aws-spot", CapacityType: gangway.CapacitySpot, GPUs: []int{0, 1}, PricePerGPUHour: 1},
			{Pool: "aws-spot", CapacityType: gangway.CapacitySpot, GPUs: []int{0, 1}, PricePerGPUHour: 1},
			{Pool: "onprem", GPUs: []int{3}, PricePerGPUHour: 2},
		}},
	}, now)
	got, err := l.Report(ctx, Query{By: gangway.CostByTeam, Until: now, Running: running, OnDemandPrices: map[string]float64{"aws-spot": 3}})
	if err != nil {
		t.Fatal(err)
	}
	row := gangway.CostRow{Group: "ml", Segments: 3, InFlight: 1, GPUHours: gangway.CostSplit{OnPrem: 4, Spot: 8},
		Dollars: gangway.CostSplit{OnPrem: 8, Spot: 8}, TotalDollars: 16, SpotSavedDollars: ptr(16)}
	want := gangway.CostSummary{By: gangway.CostByTeam, Until: now, Rows: []gangway.CostRow{row}, Total: row}
	want.Total.Group = ""
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Report (-want +got):\n%s", diff)
	}
}

// testBudgetsFromLedger checks a team's month-to-date cloud spend read from
// the database itself.
func testBudgetsFromLedger(t *testing.T, b backend) {
	ctx := context.Background()
	l := newLedger(t, b)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	month := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	mk := func(job, team string, ct gangway.CapacityType, start time.Time, hours, price float64) gangway.UsageSegment {
		return gangway.UsageSegment{JobID: job, Team: team, Pool: "p", CapacityType: ct, GPUs: 1,
			Start: start, End: start.Add(time.Duration(hours * float64(time.Hour))), PricePerGPUHour: price}
	}
	for _, s := range []gangway.UsageSegment{
		mk("a", "nlp", gangway.CapacitySpot, month.Add(time.Hour), 10, 2),        // $20
		mk("b", "nlp", gangway.CapacityOnPrem, month.Add(time.Hour), 100, 1),     // on-prem: not cloud spend
		mk("c", "nlp", gangway.CapacityOnDemand, month.Add(-5*time.Hour), 10, 3), // half in last month: $15
		mk("d", "nlp", gangway.CapacitySpot, month.Add(-48*time.Hour), 10, 3),    // last month
		mk("e", "vision", gangway.CapacityOnDemand, month.Add(24*time.Hour), 1000, 10),
	} {
		if _, _, err := l.Record(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Budgets{Ledger: l, Teams: map[string]TeamLimit{"nlp": {MonthlyBudget: 100}, "vision": {MonthlyBudget: 50}}}.TeamPolicies(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]placement.TeamPolicy{"nlp": {BudgetLeft: 65, Since: month}, "vision": {BudgetLeft: 0, Since: month}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("policies (-want +got):\n%s", diff)
	}
}

// testMigrateTwice opens a database twice and migrates it again: the
// schema is applied once and is at the newest version.
func testMigrateTwice(t *testing.T, b backend) {
	ctx := context.Background()
	dsn := b.fresh(t)
	first := open(t, dsn)
	if _, _, err := first.Record(ctx, seg("j").build()); err != nil {
		t.Fatal(err)
	}
	second := open(t, dsn)
	if err := second.Migrate(ctx); err != nil {
		t.Fatalf("migrating again: %v", err)
	}
	checkSchema(t, second)
	if got, err := second.JobSegments(ctx, "j"); err != nil || len(got) != 1 {
		t.Errorf("after migrating again: %d segments, %v; want the one recorded", len(got), err)
	}
}

// testConcurrentOpen opens one new database from many goroutines at once,
// as servers starting together do: each migrates or waits for the one that
// does, and the schema is applied once.
func testConcurrentOpen(t *testing.T, b backend) {
	dsn := b.fresh(t)
	const servers = 6
	ledgers := make([]*Ledger, servers)
	errs := make([]error, servers)
	var wg sync.WaitGroup
	for i := range servers {
		wg.Go(func() { ledgers[i], errs[i] = Open(context.Background(), dsn) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("server %d: %v", i, err)
		}
		t.Cleanup(func() { _ = ledgers[i].Close() })
	}
	checkSchema(t, ledgers[0])
}

// checkSchema checks that every migration was recorded exactly once.
func checkSchema(t *testing.T, l *Ledger) {
	t.Helper()
	var rows, top int
	if err := l.db.QueryRow("SELECT COUNT(*), MAX(version) FROM schema_migrations").Scan(&rows, &top); err != nil {
		t.Fatal(err)
	}
	if rows != SchemaVersion() || top != SchemaVersion() {
		t.Errorf("schema_migrations: %d rows up to version %d, want %d rows up to %d", rows, top, SchemaVersion(), SchemaVersion())
	}
	if v, err := l.SchemaVersion(context.Background()); err != nil || v != SchemaVersion() {
		t.Errorf("SchemaVersion = %d, %v; want %d", v, err, SchemaVersion())
	}
}

// testSchemaTooNew opens a database that a newer Gangway migrated: it is
// refused, and left as it was.
func testSchemaTooNew(t *testing.T, b backend) {
	ctx := context.Background()
	dsn := b.fresh(t)
	l := open(t, dsn)
	future := SchemaVersion() + 1
	if _, err := l.db.Exec(l.d.bind("INSERT INTO schema_migrations (version, name, applied_at_ns) VALUES (?, 'future', 0)"), future); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, dsn); !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("Open of a database at version %d = %v, want ErrSchemaTooNew", future, err)
	}
	if v, err := l.SchemaVersion(ctx); err != nil || v != future {
		t.Errorf("after the refused open: version %d, %v; want %d", v, err, future)
	}
}

// testRestartKeepsData closes the ledger, restarts the database server
// (PostgreSQL) and opens the ledger again: everything recorded is there,
// and recording it again is still not new.
func testRestartKeepsData(t *testing.T, b backend) {
	ctx := context.Background()
	dsn := b.fresh(t)
	l := open(t, dsn)
	segs := []gangway.UsageSegment{
		seg("a").gpus(3).pool("aws-spot", gangway.CapacitySpot, 1.37).at(time.Minute/3, 97*time.Minute).build(),
		seg("b").project("").at(time.Hour+time.Nanosecond, 2*time.Hour).build(),
	}
	for _, s := range segs {
		if _, _, err := l.Record(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	again := open(t, b.restart(t, dsn))
	got, err := again.Segments(ctx, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(segs, got); diff != "" {
		t.Errorf("after a restart (-recorded +stored):\n%s", diff)
	}
	if _, added, err := again.Record(ctx, segs[0]); err != nil || added {
		t.Errorf("recording a segment again after a restart: added = %v, %v; want not new", added, err)
	}
	checkSchema(t, again)
}

func TestOpenRefusesBadDSNs(t *testing.T) {
	tests := map[string]struct {
		dsn      string
		wantPart string
	}{
		"empty":             {dsn: "", wantPart: "want sqlite:PATH"},
		"no scheme":         {dsn: "/var/lib/gangway/ledger.db", wantPart: `"/var/lib/gangway/ledger.db"`},
		"sqlite, no path":   {dsn: "sqlite:", wantPart: "file path"},
		"sqlite in memory":  {dsn: "sqlite::memory:", wantPart: "in-memory"},
		"sqlite with query": {dsn: "sqlite:/tmp/x.db?mode=ro", wantPart: "without ?"},
		"mysql":             {dsn: "mysql://u:secret@h/db", wantPart: `"mysql://..."`},
		"postgres, bad url": {dsn: "postgres://u@h:notaport/db", wantPart: "port"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l, err := Open(context.Background(), tc.dsn)
			if err == nil {
				l.Close()
				t.Fatalf("Open(%q) succeeded, want ErrBadDSN", tc.dsn)
			}
			if !errors.Is(err, ErrBadDSN) {
				t.Errorf("Open(%q) = %v, want ErrBadDSN", tc.dsn, err)
			}
			if !strings.Contains(err.Error(), tc.wantPart) {
				t.Errorf("error %q does not say %q", err, tc.wantPart)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

func TestLoadMigrations(t *testing.T) {
	if _, err := loadMigrations(migrationFiles, "migrations"); err != nil {
		t.Fatalf("the embedded migrations: %v", err)
	}
	tests := map[string]struct {
		files    []string
		wantPart string
	}{
		"gap":      {files: []string{"0001_a.sql", "0003_c.sql"}, wantPart: "want version 2"},
		"twice":    {files: []string{"0001_a.sql", "1_b.sql"}, wantPart: "want version 2"},
		"bad name": {files: []string{"0001_a.sql", "two.sql"}, wantPart: "NNNN_name.sql"},
		"not sql":  {files: []string{"0001_a.txt"}, wantPart: "NNNN_name.sql"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for _, f := range tc.files {
				fsys["m/"+f] = &fstest.MapFile{Data: []byte("SELECT 1;")}
			}
			_, err := loadMigrations(fsys, "m")
			if err == nil || !strings.Contains(err.Error(), tc.wantPart) {
				t.Errorf("loadMigrations(%v) = %v, want an error saying %q", tc.files, err, tc.wantPart)
			}
		})
	}
}

func TestRunningSegments(t *testing.T) {
	now := t0.Add(time.Hour)
	got := RunningSegments([]gangway.Assignment{
		{JobID: "gang", Attempt: 3, Team: "ml", Project: "llm", At: t0, Members: []gangway.Member{
			{Pool: "onprem", GPUs: []int{0, 1, 2, 3}, PricePerGPUHour: 2},
			{Pool: "onprem", GPUs: []int{4, 5, 6, 7}, PricePerGPUHour: 2},
			{Pool: "aws-spot", CapacityType: gangway.CapacitySpot, GPUs: []int{0}, PricePerGPUHour: 1.1},
		}},
		{JobID: "cpu-only", At: t0, Members: []gangway.Member{{Pool: "onprem"}}},
		{JobID: "later", At: now.Add(time.Second), Members: []gangway.Member{{Pool: "onprem", GPUs: []int{0}}}},
	}, now)
	want := []gangway.UsageSegment{
		{JobID: "gang", Attempt: 3, Team: "ml", Project: "llm", Pool: "onprem", CapacityType: gangway.CapacityOnPrem, GPUs: 8, GPUMilli: 8000, Start: t0, End: now, PricePerGPUHour: 2},
		{JobID: "gang", Attempt: 3, Team: "ml", Project: "llm", Pool: "aws-spot", CapacityType: gangway.CapacitySpot, GPUs: 1, GPUMilli: 1000, Start: t0, End: now, PricePerGPUHour: 1.1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("RunningSegments (-want +got):\n%s", diff)
	}
}

// TestPriceCloud: a cloud member without a price gets its pool's offer's
// price per GPU-hour (for its replica's GPUs); on-prem members, members
// already priced and pools without an offer keep theirs; the input is not
// changed.
func TestPriceCloud(t *testing.T) {
	offers := []gangway.Offer{
		{Pool: "aws-spot", CapacityType: gangway.CapacitySpot, GPUsPerInstance: 8, PricePerHour: 8},
		{Pool: "aws-od", CapacityType: gangway.CapacityOnDemand, GPUsPerInstance: 8, PricePerHour: 32},
	}
	in := []gangway.Assignment{{JobID: "j", Members: []gangway.Member{
		{Pool: "onprem", GPUs: []int{0}, PricePerGPUHour: 2},
		{Pool: "aws-spot", CapacityType: gangway.CapacitySpot, GPUs: []int{0, 1, 2, 3}},
		{Pool: "aws-od", CapacityType: gangway.CapacityOnDemand, GPUs: []int{0}, PricePerGPUHour: 5},
		{Pool: "gcp-spot", CapacityType: gangway.CapacitySpot, GPUs: []int{0}},
	}}}
	got := PriceCloud(in, offers)
	var prices []float64
	for _, m := range got[0].Members {
		prices = append(prices, m.PricePerGPUHour)
	}
	if want := []float64{2, 2, 5, 0}; !cmp.Equal(prices, want) {
		t.Errorf("prices %v, want %v", prices, want)
	}
	if in[0].Members[1].PricePerGPUHour != 0 {
		t.Errorf("PriceCloud changed its input")
	}
}
