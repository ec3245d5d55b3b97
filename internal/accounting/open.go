package accounting

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite" // the "sqlite" database/sql driver, pure Go
	sqlite3 "modernc.org/sqlite/lib"
)

// ErrBadDSN: Open was given a data source name it does not understand.
var ErrBadDSN = errors.New("accounting: bad ledger DSN")

// sqliteBusyTimeoutMS is how long an SQLite write waits for another
// connection's (or process's) write to finish before it fails.
const sqliteBusyTimeoutMS = 10000

// dialect is what differs between the two databases the ledger runs on.
// The SQL itself is the same: both speak INSERT ... ON CONFLICT DO NOTHING,
// and the schema uses only types both have.
type dialect struct {
	name string // "sqlite" or "postgres", for messages
	// numbered: placeholders are $1, $2, ... (PostgreSQL) rather than ?.
	numbered bool
	// lockMigrations, run first in the migration transaction, keeps a
	// second server from migrating at the same time ("" where the
	// transaction itself takes the database's write lock: SQLite's BEGIN
	// IMMEDIATE).
	lockMigrations string
}

var (
	sqliteDialect = dialect{name: "sqlite"}
	// 0x67616e67776179 is "gangway" in ASCII: the advisory lock's key,
	// held until the migration transaction ends.
	postgresDialect = dialect{name: "postgres", numbered: true,
		lockMigrations: "SELECT pg_advisory_xact_lock(29099049411371385)"}
)

// bind rewrites a query written with ? placeholders for the dialect.
// The ledger's queries have no ? anywhere else.
func (d dialect) bind(query string) string {
	if !d.numbered {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// DSNHelp lists the data source names Open takes, for error and help
// texts.
const DSNHelp = "sqlite:PATH (an SQLite file, created if missing) or postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=...] (also postgresql://)"

// Open connects to the ledger named by dsn, brings its schema up to date
// (see Migrate) and returns it. dsn is one of
//
//	sqlite:PATH                       an SQLite file, created (with its directory) if missing
//	postgres://USER@HOST:PORT/DB?...  a PostgreSQL database (postgresql:// too), in pgx's URL syntax
//
// SQLite suits a single server (`gangway dev`); several servers share one
// PostgreSQL database. Close the ledger when done.
func Open(ctx context.Context, dsn string) (*Ledger, error) {
	db, d, err := openDB(dsn)
	if err != nil {
		return nil, err
	}
	l := &Ledger{db: db, d: d}
	if err := l.migrateRetryingBusy(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return l, nil
}

func openDB(dsn string) (*sql.DB, dialect, error) {
	switch {
	case strings.HasPrefix(dsn, "sqlite:"):
		path := strings.TrimPrefix(dsn, "sqlite:")
		if path == "" || strings.ContainsAny(path, "?#") || path == ":memory:" {
			return nil, dialect{}, fmt.Errorf("%w %q: sqlite: needs a file path without ? or # (an in-memory database would not be durable); want %s",
				ErrBadDSN, dsn, DSNHelp)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, dialect{}, fmt.Errorf("open ledger %s: %w", path, err)
		}
		// WAL lets `gangway cost` read while the server writes; the busy
		// timeout makes a writer wait for another instead of failing; an
		// immediate transaction takes the write lock at BEGIN, so the
		// migration check and its writes cannot interleave with another's.
		db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout("+strconv.Itoa(sqliteBusyTimeoutMS)+
			")&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_txlock=immediate")
		if err != nil {
			return nil, dialect{}, fmt.Errorf("open ledger %s: %w", path, err)
		}
		return db, sqliteDialect, nil
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			// pgx's message names the part that is wrong, and hides any
			// password.
			return nil, dialect{}, fmt.Errorf("%w: %w", ErrBadDSN, err)
		}
		return stdlib.OpenDB(*cfg), postgresDialect, nil
	}
	shown := dsn
	if i := strings.Index(shown, "://"); i >= 0 {
		shown = shown[:i+3] + "..." // may hold a password
	}
	return nil, dialect{}, fmt.Errorf("%w %q: want %s", ErrBadDSN, shown, DSNHelp)
}

// migrateRetryingBusy runs Migrate, again while SQLite answers busy, for
// up to the busy timeout. The busy timeout makes SQLite itself wait for
// another writer in most cases, but in a few it answers busy at once (a new
// file's first switch to WAL, as several servers or `gangway cost` open it
// together, is one), and a migration is safe to retry: it is one
// transaction.
func (l *Ledger) migrateRetryingBusy(ctx context.Context) error {
	deadline := time.Now().Add(sqliteBusyTimeoutMS * time.Millisecond)
	for {
		err := l.Migrate(ctx)
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// isBusy reports whether err is SQLite's SQLITE_BUSY (any extended code).
func isBusy(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_BUSY
}

// Close closes the ledger's connections.
func (l *Ledger) Close() error { return l.db.Close() }
