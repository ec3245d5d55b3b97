package devstacktest

import (
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/gangwayhq/gangway/internal/devstack"
)

// maxLog bounds the output kept per server; older output is dropped.
const maxLog = 1 << 20

// Redis starts a redis-server for the test and stops it when the test ends.
func Redis(t testing.TB) *devstack.Redis {
	t.Helper()
	return RedisWith(t, devstack.RedisOptions{})
}

// RedisWith is Redis with options (TLS, ACL users); Dir and Log are the
// test's.
func RedisWith(t testing.TB, opts devstack.RedisOptions) *devstack.Redis {
	t.Helper()
	log := &logBuffer{}
	opts.Dir, opts.Log = t.TempDir(), log
	r, err := devstack.StartRedis(t.Context(), opts)
	if err != nil {
		t.Fatalf("devstacktest: %v", err)
	}
	// Registered after t.TempDir, so it runs before the directory goes.
	t.Cleanup(func() {
		if err := r.Stop(); err != nil {
			t.Errorf("devstacktest: stop redis: %v", err)
		}
		if t.Failed() {
			t.Logf("redis-server output (%s):\n%s", r.Addr, log)
		}
	})
	return r
}

// Temporal starts a headless Temporal dev server for the test and stops it
// when the test ends. Clients dial Addr in Namespace.
func Temporal(t testing.TB) *devstack.Temporal {
	t.Helper()
	return startTemporal(t, false)
}

// TemporalInMemory is Temporal with the server's state in memory
// (devstack.TemporalOptions.InMemory): for a test that writes to it
// faster than the disk syncs.
func TemporalInMemory(t testing.TB) *devstack.Temporal {
	t.Helper()
	return startTemporal(t, true)
}

func startTemporal(t testing.TB, inMemory bool) *devstack.Temporal {
	t.Helper()
	log := &logBuffer{}
	s, err := devstack.StartTemporal(t.Context(), devstack.TemporalOptions{
		Dir:      t.TempDir(),
		Headless: true,
		InMemory: inMemory,
		Log:      log,
	})
	if err != nil {
		t.Fatalf("devstacktest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("devstacktest: stop temporal: %v", err)
		}
		if t.Failed() {
			t.Logf("temporal dev server output (%s):\n%s", s.Addr, log)
		}
	})
	return s
}

// Postgres starts a PostgreSQL server for the test in a fresh directory
// (PostgresDir) and stops it when the test ends. Clients connect to
// URL(database); CreateDatabase makes one.
func Postgres(t testing.TB) *devstack.Postgres {
	t.Helper()
	return PostgresIn(t, PostgresDir(t))
}

// PostgresDir returns a fresh directory for a PostgreSQL cluster, removed
// when the test ends. It is not under t.TempDir(): when tests run as root
// the server runs as the postgres user, which may not enter that.
func PostgresDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gangway-postgres-")
	if err != nil {
		t.Fatalf("devstacktest: %v", err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("devstacktest: remove postgres dir: %v", err)
		}
	})
	return dir
}

// PostgresIn starts a PostgreSQL server on the cluster in dir, creating it
// if dir holds none: a server started on the dir of one stopped before
// finds its data. The server is stopped when the test ends (if it has not
// been already); call this after PostgresDir, so that it stops before the
// directory goes.
func PostgresIn(t testing.TB, dir string) *devstack.Postgres {
	t.Helper()
	log := &logBuffer{}
	pg, err := devstack.StartPostgres(t.Context(), devstack.PostgresOptions{Dir: dir, Log: log})
	if err != nil {
		t.Fatalf("devstacktest: %v", err)
	}
	t.Cleanup(func() {
		if err := pg.Stop(); err != nil {
			t.Errorf("devstacktest: stop postgres: %v", err)
		}
		if t.Failed() {
			t.Logf("postgres output (%s):\n%s", pg.Addr, log)
		}
	})
	return pg
}

// logBuffer collects a server's output until the test ends. It is written
// by the server's output goroutine and read by the cleanup.
type logBuffer struct {
	mu      sync.Mutex
	b       []byte
	dropped int
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	if over := len(l.b) - maxLog; over > 0 {
		// Keep the newest output.
		l.b = l.b[:copy(l.b, l.b[over:])]
		l.dropped += over
	}
	return len(p), nil
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case len(l.b) == 0:
		return "(no output)"
	case l.dropped > 0:
		return "(" + strconv.Itoa(l.dropped) + " earlier bytes dropped)\n" + string(l.b)
	default:
		return string(l.b)
	}
}
