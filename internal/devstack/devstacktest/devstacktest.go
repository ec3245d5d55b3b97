package devstacktest

import (
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
	log := &logBuffer{}
	r, err := devstack.StartRedis(t.Context(), devstack.RedisOptions{
		Dir: t.TempDir(),
		Log: log,
	})
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
	log := &logBuffer{}
	s, err := devstack.StartTemporal(t.Context(), devstack.TemporalOptions{
		Dir:      t.TempDir(),
		Headless: true,
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
