package accounting

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrSchemaTooNew: the database was migrated by a newer Gangway than this
// one, to a schema version this one does not know. Upgrade this binary;
// downgrades are not supported.
var ErrSchemaTooNew = errors.New("accounting: ledger schema is newer than this gangway")

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one schema version: migrations/NNNN_name.sql.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations are the embedded schema versions, in order. Their numbers
// must run 1, 2, 3, ... without a gap; a test checks that.
var migrations = mustLoadMigrations()

func mustLoadMigrations() []migration {
	ms, err := loadMigrations(migrationFiles, "migrations")
	if err != nil {
		panic(err)
	}
	return ms
}

func loadMigrations(fsys fs.FS, dir string) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries {
		num, name, ok := strings.Cut(strings.TrimSuffix(e.Name(), ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 || !strings.HasSuffix(e.Name(), ".sql") {
			return nil, fmt.Errorf("migration file %s: want NNNN_name.sql", e.Name())
		}
		body, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: name, sql: string(body)})
	}
	slices.SortFunc(ms, func(a, b migration) int { return a.version - b.version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %04d_%s: want version %d (versions run 1, 2, 3, ... without gaps)", m.version, m.name, i+1)
		}
	}
	return ms, nil
}

// SchemaVersion is the newest schema version this Gangway knows.
func SchemaVersion() int { return len(migrations) }

// Migrate brings the schema up to SchemaVersion: in one transaction, under
// a lock that makes a second server wait rather than migrate too, it
// creates the schema_migrations table if missing and runs every migration
// it does not list, recording each. Running it again changes nothing. A
// database already past SchemaVersion fails with ErrSchemaTooNew and is
// left alone. Open calls it.
func (l *Ledger) Migrate(ctx context.Context) error {
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate ledger: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if l.d.lockMigrations != "" {
		if _, err := tx.ExecContext(ctx, l.d.lockMigrations); err != nil {
			return fmt.Errorf("migrate ledger: lock: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version       INTEGER PRIMARY KEY,
		name          TEXT    NOT NULL,
		applied_at_ns BIGINT  NOT NULL
	)`); err != nil {
		return fmt.Errorf("migrate ledger: %w", err)
	}
	current, err := schemaVersion(ctx, tx)
	if err != nil {
		return fmt.Errorf("migrate ledger: %w", err)
	}
	if current > len(migrations) {
		return fmt.Errorf("%w: the %s database is at version %d, this gangway knows up to %d", ErrSchemaTooNew, l.d.name, current, len(migrations))
	}
	for _, m := range migrations[current:] {
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("migrate ledger to version %d (%s): %w", m.version, m.name, err)
		}
		if _, err := tx.ExecContext(ctx, l.d.bind("INSERT INTO schema_migrations (version, name, applied_at_ns) VALUES (?, ?, ?)"),
			m.version, m.name, time.Now().UnixNano()); err != nil {
			return fmt.Errorf("migrate ledger to version %d (%s): %w", m.version, m.name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate ledger: %w", err)
	}
	return nil
}

// SchemaVersion is the schema version the database is at.
func (l *Ledger) SchemaVersion(ctx context.Context) (int, error) {
	v, err := schemaVersion(ctx, l.db)
	if err != nil {
		return 0, fmt.Errorf("ledger schema version: %w", err)
	}
	return v, nil
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func schemaVersion(ctx context.Context, q querier) (int, error) {
	var v sql.NullInt64
	if err := q.QueryRowContext(ctx, "SELECT MAX(version) FROM schema_migrations").Scan(&v); err != nil {
		return 0, err
	}
	return int(v.Int64), nil
}
