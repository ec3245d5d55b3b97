package devstack

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/client"
)

func TestFreePort(t *testing.T) {
	ports, err := freePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("freePorts(3) = %v: port %d twice", ports, p)
		}
		seen[p] = true
		// Free means bindable, despite the TIME_WAIT left behind.
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d from freePorts is not free: %v", p, err)
		}
		l.Close()
	}
	if _, err := FreePort(); err != nil {
		t.Fatal(err)
	}
}

func TestTailBuffer(t *testing.T) {
	tests := map[string]struct {
		writes []string
		want   string
	}{
		"empty":    {want: ""},
		"fits":     {writes: []string{"ab\n", "cd\n"}, want: "ab\ncd\n"},
		"exactly":  {writes: []string{"0123456789"}, want: "0123456789"},
		"overflow": {writes: []string{"aaaa\nbb", "b\ncc\n"}, want: "...\nbbb\ncc\n"},
		"one big":  {writes: []string{"first line\nsecond\n"}, want: "...\nsecond\n"},
		"no newline after cut": {
			writes: []string{"xxxxxxxxxxxxxxxx"}, want: "...\nxxxxxxxxxx",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			b := &tailBuffer{max: 10}
			for _, w := range tc.writes {
				if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			if got := b.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRedisPingKill(t *testing.T) {
	var log syncBuffer
	r, err := StartRedis(t.Context(), RedisOptions{Dir: t.TempDir(), Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop() })
	if want := "redis://" + r.Addr + "/0"; r.URL != want {
		t.Errorf("URL = %q, want %q", r.URL, want)
	}
	opts, err := redis.ParseURL(r.URL)
	if err != nil {
		t.Fatal(err)
	}
	opts.MaxRetries = -1
	c := redis.NewClient(opts)
	defer c.Close()
	if err := c.Ping(t.Context()).Err(); err != nil {
		t.Fatalf("PING: %v", err)
	}
	if !strings.Contains(log.String(), "Ready to accept connections") {
		t.Errorf("Log did not receive the server's output; got:\n%s", log.String())
	}
	if err := c.Set(t.Context(), "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}

	if err := r.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	select {
	case <-r.Done():
	default:
		t.Fatal("Done not closed after Kill returned")
	}
	assertGone(t, r.Pid())
	if conn, err := net.Dial("tcp", r.Addr); err == nil {
		conn.Close()
		t.Error("something still listens on the port after Kill")
	}
	// Kill and Stop after a kill are no-ops.
	for i := range 2 {
		if err := r.Kill(); err != nil {
			t.Errorf("Kill #%d after Kill: %v", i+2, err)
		}
		if err := r.Stop(); err != nil {
			t.Errorf("Stop #%d after Kill: %v", i+1, err)
		}
	}

	// Restart brings an empty server back at the same address.
	if err := r.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, err := c.DBSize(t.Context()).Result(); err != nil || n != 0 {
		t.Errorf("after Restart: %d keys, %v; want an empty server", n, err)
	}
}

func TestRedisStopLeavesNothing(t *testing.T) {
	before := runtime.NumGoroutine()
	r, err := StartRedis(t.Context(), RedisOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := r.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if d := time.Since(start); d > stopGrace {
		t.Errorf("Stop took %v: redis-server ignored SIGTERM?", d)
	}
	if err := r.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	assertGone(t, r.Pid())
	l, err := net.Listen("tcp", r.Addr)
	if err != nil {
		t.Errorf("port still taken after Stop: %v", err)
	} else {
		l.Close()
	}
	assertGoroutines(t, before)
}

func TestRedisStartErrors(t *testing.T) {
	t.Run("binary missing", func(t *testing.T) {
		_, err := StartRedis(t.Context(), RedisOptions{Dir: t.TempDir(), Binary: "/nonexistent/redis-server"})
		if !errors.Is(err, ErrRedisNotFound) || !strings.Contains(err.Error(), "make redis") {
			t.Fatalf("err = %v, want ErrRedisNotFound with the install hint", err)
		}
	})
	t.Run("dir missing", func(t *testing.T) {
		_, err := StartRedis(t.Context(), RedisOptions{})
		if err == nil || !strings.Contains(err.Error(), "RedisOptions.Dir") {
			t.Fatalf("err = %v, want one naming RedisOptions.Dir", err)
		}
	})
	t.Run("port taken", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		port := l.Addr().(*net.TCPAddr).Port
		_, err = StartRedis(t.Context(), RedisOptions{Dir: t.TempDir(), Port: port})
		// The error quotes the server's own explanation.
		if err == nil || !strings.Contains(err.Error(), "exited during start-up") ||
			!strings.Contains(err.Error(), "Address already in use") {
			t.Fatalf("err = %v, want the server's exit and its last output", err)
		}
	})
}

// TestChildDiesWithParent runs itself as a helper process that starts a
// redis-server, kills the helper with SIGKILL (no cleanup runs) and checks
// that the kernel took the redis-server down with it.
func TestChildDiesWithParent(t *testing.T) {
	if dir := os.Getenv("DEVSTACK_TEST_HELPER_DIR"); dir != "" {
		r, err := StartRedis(context.Background(), RedisOptions{Dir: dir})
		if err != nil {
			fmt.Println("ERROR", err)
			os.Exit(1)
		}
		// Make sure the forking thread is not the one printing or
		// sleeping: the child must survive other threads coming and going.
		runtime.GC()
		fmt.Println("PID", r.Pid())
		select {}
	}

	helper := exec.Command(os.Args[0], "-test.run=^TestChildDiesWithParent$")
	helper.Env = append(os.Environ(), "DEVSTACK_TEST_HELPER_DIR="+t.TempDir())
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	defer helper.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("helper: %v (read %q)", err, line)
	}
	pidText, ok := strings.CutPrefix(strings.TrimSpace(line), "PID ")
	if !ok {
		t.Fatalf("helper said %q", line)
	}
	pid, err := strconv.Atoi(pidText)
	if err != nil {
		t.Fatal(err)
	}
	if !isRunning(pid) {
		t.Fatalf("redis-server %d not running while the helper lives", pid)
	}

	if err := helper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()
	assertGone(t, pid)
}

func TestTemporalHeadless(t *testing.T) {
	before := runtime.NumGoroutine()
	var log syncBuffer
	s, err := StartTemporal(t.Context(), TemporalOptions{Dir: t.TempDir(), Headless: true, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Kill() })
	if s.UIURL != "" || s.Namespace != "default" || !strings.HasPrefix(s.Addr, "127.0.0.1:") {
		t.Errorf("got Addr %q UIURL %q Namespace %q, want 127.0.0.1:port, \"\", \"default\"", s.Addr, s.UIURL, s.Namespace)
	}

	c, err := client.Dial(client.Options{HostPort: s.Addr, Namespace: s.Namespace, Logger: quietLogger()})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	if _, err := c.CheckHealth(t.Context(), &client.CheckHealthRequest{}); err != nil {
		t.Errorf("CheckHealth: %v", err)
	}
	c.Close()

	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v\noutput:\n%s", err, log.String())
	}
	assertGone(t, s.Pid())
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	assertGoroutines(t, before)
}

// TestTemporalRestartSameDB starts a workflow (no worker runs it, so it
// stays open), restarts the server on the same database file and finds the
// workflow again. It runs with the Web UI to cover that path too.
func TestTemporalRestartSameDB(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(t.TempDir(), "state.db")
	opts := TemporalOptions{Dir: dir, DBFile: db}

	s1, err := StartTemporal(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s1.Kill() })
	if s1.UIURL == "" || s1.DBFile != db {
		t.Errorf("UIURL = %q, DBFile = %q; want a UI URL and %q", s1.UIURL, s1.DBFile, db)
	}
	c1 := dial(t, s1)
	run, err := c1.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{
		ID:        "devstack-restart",
		TaskQueue: "nobody-polls",
	}, "Nothing")
	if err != nil {
		t.Fatalf("start workflow: %v", err)
	}
	c1.Close()
	if err := s1.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := os.Stat(db); err != nil {
		t.Fatalf("database file: %v", err)
	}

	s2, err := StartTemporal(t.Context(), opts)
	if err != nil {
		t.Fatalf("restart on the same file: %v", err)
	}
	t.Cleanup(func() { _ = s2.Kill() })
	c2 := dial(t, s2)
	desc, err := c2.DescribeWorkflowExecution(t.Context(), "devstack-restart", run.GetRunID())
	if err != nil {
		t.Fatalf("workflow started before the restart: %v", err)
	}
	if got := desc.GetWorkflowExecutionInfo().GetStatus().String(); got != "Running" {
		t.Errorf("workflow status after restart = %s, want Running", got)
	}

	// A crash: Kill does not wait for a clean shutdown.
	c2.Close()
	if err := s2.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	assertGone(t, s2.Pid())

	// Restart brings it back at the same address, on the same file.
	if err := s2.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	c3 := dial(t, s2)
	defer c3.Close()
	if _, err := c3.DescribeWorkflowExecution(t.Context(), "devstack-restart", run.GetRunID()); err != nil {
		t.Fatalf("workflow after Kill and Restart: %v", err)
	}
	if err := s2.Restart(t.Context()); err != nil {
		t.Errorf("Restart of a running server: %v", err)
	}
}

func TestTemporalBinaryMissing(t *testing.T) {
	_, err := StartTemporal(t.Context(), TemporalOptions{Dir: t.TempDir(), Binary: "/nonexistent/temporal"})
	if !errors.Is(err, ErrTemporalNotFound) {
		t.Fatalf("err = %v, want ErrTemporalNotFound", err)
	}
}

func TestTemporalInMemoryWithDBFile(t *testing.T) {
	_, err := StartTemporal(t.Context(), TemporalOptions{Dir: t.TempDir(), InMemory: true, DBFile: "x.db"})
	if err == nil || !strings.Contains(err.Error(), "InMemory and DBFile are exclusive") {
		t.Fatalf("err = %v, want InMemory and DBFile refused together", err)
	}
}

const notFoundText = "temporal CLI not found: run `make bin/temporal` (installs v1.5.1 into bin/) or set GANGWAY_TEMPORAL_BIN"

func TestFindTemporal(t *testing.T) {
	// A fake repository: go.mod of this module, bin/temporal, a subdir.
	repo := t.TempDir()
	writeFile(t, filepath.Join(repo, "go.mod"), "// Gangway\nmodule github.com/gangwayhq/gangway // the scheduler\n\ngo 1.26\n", 0o644)
	repoBin := filepath.Join(repo, "bin", "temporal")
	writeFile(t, repoBin, "#!/bin/sh\n", 0o755)
	nested := filepath.Join(repo, "internal", "x")
	if err := os.MkdirAll(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	// Another module with a bin/temporal: not ours, not used.
	other := t.TempDir()
	writeFile(t, filepath.Join(other, "go.mod"), "module example.com/other\n", 0o644)
	writeFile(t, filepath.Join(other, "bin", "temporal"), "#!/bin/sh\n", 0o755)
	envBin := filepath.Join(t.TempDir(), "my-temporal")
	writeFile(t, envBin, "#!/bin/sh\n", 0o755)
	notExec := filepath.Join(t.TempDir(), "temporal")
	writeFile(t, notExec, "", 0o644)

	onPath := func(string) (string, error) { return "/usr/local/bin/temporal", nil }
	notOnPath := func(name string) (string, error) { return "", exec.ErrNotFound }

	tests := map[string]struct {
		env      string
		starts   []string
		lookPath func(string) (string, error)
		want     string
		wantErr  string
	}{
		"env wins":             {env: envBin, starts: []string{nested}, lookPath: onPath, want: envBin},
		"env not executable":   {env: notExec, starts: []string{nested}, lookPath: onPath, wantErr: "GANGWAY_TEMPORAL_BIN=\"" + notExec + "\" is not an executable file"},
		"repo from subdir":     {starts: []string{nested}, lookPath: onPath, want: repoBin},
		"repo from second dir": {starts: []string{other, repo}, lookPath: onPath, want: repoBin},
		"other module ignored": {starts: []string{other}, lookPath: onPath, want: "/usr/local/bin/temporal"},
		"nothing":              {starts: []string{other}, lookPath: notOnPath, wantErr: notFoundText},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := findTemporal(tc.env, tc.starts, tc.lookPath)
			if tc.wantErr != "" {
				if !errors.Is(err, ErrTemporalNotFound) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("findTemporal = %q, %v; want ErrTemporalNotFound containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("findTemporal = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestFindTemporalNotFound checks the message a user sees when nothing is
// installed: no env var, a cwd outside any repository, an empty PATH.
func TestFindTemporalNotFound(t *testing.T) {
	if exe, err := os.Executable(); err == nil {
		if root, ok := repoRoot(filepath.Dir(exe)); ok {
			t.Skipf("test binary lives inside the repository (%s): FindTemporal would find its bin/temporal", root)
		}
	}
	t.Setenv(TemporalBinEnv, "")
	t.Setenv("PATH", t.TempDir())
	t.Chdir(t.TempDir())
	_, err := FindTemporal()
	if err == nil || err.Error() != notFoundText {
		t.Fatalf("FindTemporal error = %v\nwant %s", err, notFoundText)
	}
	if !errors.Is(err, ErrTemporalNotFound) {
		t.Errorf("error does not wrap ErrTemporalNotFound")
	}
}

func dial(t *testing.T, s *Temporal) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: s.Addr, Namespace: s.Namespace, Logger: quietLogger()})
	if err != nil {
		t.Fatalf("dial %s: %v", s.Addr, err)
	}
	return c
}

// assertGone fails unless pid is gone (or a zombie waiting for init).
func assertGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for isRunning(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still running", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func isRunning(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// Field 3, after "pid (comm)", is the state; Z is a zombie.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// assertGoroutines waits for the goroutine count to drop back to before.
// Clients' connections may take a moment to wind down.
func assertGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= before {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines, %d before:\n%s", n, before, buf)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func writeFile(t *testing.T, path, content string, perm os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
}

// syncBuffer is a bytes.Buffer safe for the server's output goroutine and
// the test reading it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
