package accounting

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/devstack/devstacktest"
)

// backend is a database the conformance suite runs the ledger on.
type backend struct {
	name string
	// fresh returns the DSN of a new, empty database.
	fresh func(t *testing.T) string
	// restart stops the database server and starts it again on the same
	// data, where there is a server (SQLite has none: the file is the
	// database), and returns the DSN that reaches dsn's database now.
	restart func(t *testing.T, dsn string) string
}

// conformance is the ledger's contract, every case run on every backend.
var conformance = map[string]func(t *testing.T, b backend){
	"RecordIsIdempotent":           testRecordIsIdempotent,
	"ConcurrentDuplicates":         testConcurrentDuplicates,
	"RecordRefusesInvalidSegments": testRecordRefusesInvalidSegments,
	"SegmentsWindow":               testSegmentsWindow,
	"PerJob":                       testPerJob,
	"ReportFromLedgerAddsUp":       testReportFromLedgerAddsUp,
	"ReportCountsRunsInFlight":     testReportCountsRunsInFlight,
	"Properties":                   testLedgerProperties,
	"Budgets":                      testBudgetsFromLedger,
	"MigrateTwice":                 testMigrateTwice,
	"ConcurrentOpen":               testConcurrentOpen,
	"SchemaTooNew":                 testSchemaTooNew,
	"RestartKeepsData":             testRestartKeepsData,
	"SharesBilledAtTheirShare":     testSharesBilledAtTheirShare,
	"UpgradeFromVersion1":          testUpgradeFromVersion1,
	"NodeStatesOutliveARestart":    testNodeStates,
}

// testNodeStates: a cordon is kept, through a restart of the database,
// until the node is uncordoned.
func testNodeStates(t *testing.T, b backend) {
	dsn := b.fresh(t)
	l := open(t, dsn)
	ctx := t.Context()
	for _, n := range []string{"n1", "n2"} {
		if err := l.SetNodeState(ctx, n, gangway.NodeCordoned); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.SetNodeState(ctx, "n1", gangway.NodeCordoned); err != nil { // again: no conflict
		t.Fatal(err)
	}
	if err := l.SetNodeState(ctx, "n2", gangway.NodeReady); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = open(t, b.restart(t, dsn))
	got, err := l.NodeStates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["n1"] != gangway.NodeCordoned {
		t.Errorf("node states after a restart: %v, want n1 cordoned only", got)
	}
}

// TestLedgerConformance runs the conformance suite on SQLite (a file in the
// test's directory) and on a real PostgreSQL server started for the test.
func TestLedgerConformance(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { runConformance(t, sqliteBackend()) })
	t.Run("postgres", func(t *testing.T) { runConformance(t, postgresBackend(t)) })
}

func runConformance(t *testing.T, b backend) {
	for name, test := range conformance {
		t.Run(name, func(t *testing.T) { test(t, b) })
	}
}

func sqliteBackend() backend {
	return backend{
		name: "sqlite",
		fresh: func(t *testing.T) string {
			return "sqlite:" + filepath.Join(t.TempDir(), "sub", "ledger.db")
		},
		restart: func(_ *testing.T, dsn string) string { return dsn },
	}
}

// postgresBackend starts one server for the suite; each case gets a
// database of its own on it.
func postgresBackend(suite *testing.T) backend {
	dir := devstacktest.PostgresDir(suite)
	pg := devstacktest.PostgresIn(suite, dir)
	var seq atomic.Int64
	return backend{
		name: "postgres",
		fresh: func(t *testing.T) string {
			name := fmt.Sprintf("ledger_%d", seq.Add(1))
			if err := pg.CreateDatabase(t.Context(), name); err != nil {
				t.Fatal(err)
			}
			return pg.URL(name)
		},
		restart: func(t *testing.T, dsn string) string {
			u, err := url.Parse(dsn)
			if err != nil {
				t.Fatal(err)
			}
			if err := pg.Stop(); err != nil {
				t.Fatal(err)
			}
			// The new server serves the suite's later cases too, so it
			// stops when the suite ends, not this case.
			pg = devstacktest.PostgresIn(suite, dir)
			return pg.URL(strings.TrimPrefix(u.Path, "/"))
		},
	}
}

// open opens the ledger at dsn and closes it when the test ends.
func open(t *testing.T, dsn string) *Ledger {
	t.Helper()
	l, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// newLedger opens a ledger on a fresh database of b.
func newLedger(t *testing.T, b backend) *Ledger {
	t.Helper()
	return open(t, b.fresh(t))
}

// reset empties the ledger, for property tests that reuse one database.
func reset(t interface{ Fatal(...any) }, l *Ledger) {
	if _, err := l.db.Exec("DELETE FROM usage_segments"); err != nil {
		t.Fatal(err)
	}
}
