package devstack_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gangwayhq/gangway/internal/devstack"
	"github.com/gangwayhq/gangway/internal/devstack/devstacktest"
)

// TestPostgresRestartKeepsData starts a real server, writes a row, stops it
// (and later kills it) and starts another on the same directory, which must
// find the row.
func TestPostgresRestartKeepsData(t *testing.T) {
	ctx := context.Background()
	dir := devstacktest.PostgresDir(t)
	pg := devstacktest.PostgresIn(t, dir)
	if err := pg.CreateDatabase(ctx, "restart"); err != nil {
		t.Fatal(err)
	}
	exec := func(pg *devstack.Postgres, sql string) int {
		t.Helper()
		c, err := pgx.Connect(ctx, pg.URL("restart"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := c.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	exec(pg, "CREATE TABLE t (x int); INSERT INTO t VALUES (1)")
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}

	again := devstacktest.PostgresIn(t, dir)
	if n := exec(again, "INSERT INTO t VALUES (2)"); n != 2 {
		t.Fatalf("after a stop and a start: %d rows, want 2", n)
	}
	if err := again.Kill(); err != nil {
		t.Fatal(err)
	}
	afterCrash := devstacktest.PostgresIn(t, dir)
	if n := exec(afterCrash, "SELECT 1"); n != 2 {
		t.Fatalf("after a kill and a start: %d rows, want 2", n)
	}
}

func TestPostgresStartErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := devstack.StartPostgres(ctx, devstack.PostgresOptions{}); err == nil {
		t.Error("StartPostgres without Dir: no error")
	}
	_, err := devstack.StartPostgres(ctx, devstack.PostgresOptions{Dir: t.TempDir(), BinDir: t.TempDir()})
	if !errors.Is(err, devstack.ErrPostgresNotFound) {
		t.Errorf("StartPostgres with an empty BinDir = %v, want ErrPostgresNotFound", err)
	}
	t.Setenv(devstack.PostgresBinEnv, os.DevNull)
	if _, err := devstack.FindPostgres(); !errors.Is(err, devstack.ErrPostgresNotFound) {
		t.Errorf("FindPostgres with $%s=%s = %v, want ErrPostgresNotFound", devstack.PostgresBinEnv, os.DevNull, err)
	}
}
