package devstack

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/gangwayhq/gangway/workflows"
)

const (
	// temporalReadyTimeout is how long StartTemporal waits for the frontend.
	// The dev server is usually ready in under a second.
	temporalReadyTimeout = 30 * time.Second
	// temporalNamespace is the namespace the dev server always creates.
	temporalNamespace = "default"
	// TemporalBinEnv names the environment variable that points FindTemporal
	// at a temporal CLI binary.
	TemporalBinEnv = "GANGWAY_TEMPORAL_BIN"
	// modulePath identifies this repository's go.mod for FindTemporal.
	modulePath = "github.com/gangwayhq/gangway"
)

// ErrTemporalNotFound means that FindTemporal found no temporal CLI.
var ErrTemporalNotFound = errors.New("temporal CLI not found")

// TemporalOptions configure StartTemporal.
type TemporalOptions struct {
	// Dir is the server's working directory (created if missing) and the
	// default home of its database. Required.
	Dir string
	// Binary is the temporal CLI to run. Default: FindTemporal().
	Binary string
	// Port is the frontend gRPC port on 127.0.0.1. Zero picks a free port.
	Port int
	// UIPort is the Web UI's port when Headless is false. Zero picks a
	// free port.
	UIPort int
	// Headless disables the Web UI.
	Headless bool
	// DBFile is the SQLite file holding the server's state; a server
	// started again on the same file resumes where the last one stopped,
	// even one that was killed. Default: Dir/temporal.db.
	DBFile string
	// InMemory keeps the server's state in memory instead of DBFile: it is
	// lost when the server stops, and writes do not wait for the disk
	// (many times faster where syncing is slow, as for a test whose server
	// takes hundreds of activity heartbeats a second).
	InMemory bool
	// Log receives the server's stdout and stderr (it logs at level warn).
	// Nil discards them (the last few KiB still appear in start-up errors).
	Log io.Writer
}

// Temporal is a running Temporal dev server child process.
type Temporal struct {
	// Addr is the frontend's host:port, 127.0.0.1:port: client.Options.HostPort.
	Addr string
	// UIURL is the Web UI's base URL, "" when headless.
	UIURL string
	// Namespace is the namespace that the server created, "default".
	Namespace string
	// DBFile is the absolute path of the server's SQLite database; ""
	// for one InMemory.
	DBFile string

	mu      sync.Mutex
	p       *process
	restart func(context.Context) (*process, error)
}

// StartTemporal starts `temporal server start-dev` on 127.0.0.1 and returns
// once the frontend passes a health check and describes the "default"
// namespace (and, unless headless, the Web UI answers). It fails, quoting the
// server's last output, if the server exits or is not ready within 30 s.
// ctx bounds only the start-up; the server runs until Stop or Kill.
func StartTemporal(ctx context.Context, opts TemporalOptions) (*Temporal, error) {
	if opts.Dir == "" {
		return nil, errors.New("start temporal: TemporalOptions.Dir is required")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("start temporal: TemporalOptions.Dir: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("start temporal: %w", err)
	}
	dbFile := opts.DBFile
	switch {
	case opts.InMemory && dbFile != "":
		return nil, errors.New("start temporal: TemporalOptions.InMemory and DBFile are exclusive")
	case opts.InMemory:
	case dbFile == "":
		dbFile = filepath.Join(dir, "temporal.db")
	case !filepath.IsAbs(dbFile):
		// Relative to the caller's directory, not to the server's.
		if dbFile, err = filepath.Abs(dbFile); err != nil {
			return nil, fmt.Errorf("start temporal: TemporalOptions.DBFile: %w", err)
		}
	}
	bin := opts.Binary
	if bin == "" {
		if bin, err = FindTemporal(); err != nil {
			return nil, err
		}
	} else if bin, err = exec.LookPath(bin); err != nil {
		return nil, fmt.Errorf("%w: TemporalOptions.Binary: %v", ErrTemporalNotFound, err)
	}

	for attempt := 1; ; attempt++ {
		port, uiPort := opts.Port, opts.UIPort
		if port == 0 || (!opts.Headless && uiPort == 0) {
			ports, err := freePorts(2)
			if err != nil {
				return nil, fmt.Errorf("start temporal: %w", err)
			}
			if port == 0 {
				port = ports[0]
			}
			if uiPort == 0 {
				uiPort = ports[1]
			}
		}
		if opts.Headless {
			uiPort = 0
		}
		t, p, err := startTemporal(ctx, bin, dir, dbFile, port, uiPort, opts.Log)
		if err == nil {
			t.restart = func(ctx context.Context) (*process, error) {
				_, p, err := startTemporal(ctx, bin, dir, dbFile, port, uiPort, opts.Log)
				if err != nil {
					return nil, err
				}
				return p, nil
			}
			return t, nil
		}
		pickedPorts := opts.Port == 0 || (!opts.Headless && opts.UIPort == 0)
		if pickedPorts && attempt < portAttempts && p != nil && p.exited() && p.portTaken() {
			continue
		}
		return nil, fmt.Errorf("start temporal: %w", err)
	}
}

// startTemporal makes one attempt on one set of ports; uiPort 0 means
// headless. On failure the process, if it was started, is returned dead,
// for the caller to inspect.
func startTemporal(ctx context.Context, bin, dir, dbFile string, port, uiPort int, log io.Writer) (*Temporal, *process, error) {
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := []string{
		"server", "start-dev",
		"--ip", "127.0.0.1",
		"--port", strconv.Itoa(port),
	}
	uiURL := ""
	if uiPort == 0 {
		args = append(args, "--headless")
	} else {
		args = append(args, "--ui-port", strconv.Itoa(uiPort))
		uiURL = "http://127.0.0.1:" + strconv.Itoa(uiPort)
	}
	if dbFile != "" {
		// Write-ahead logging, synced at checkpoints rather than at every
		// commit: what was committed survives the server process's
		// death (the WAL is in the file system; `gangway dev` restarts it
		// on the same file), not the machine's. With a sync per commit,
		// the disk's latency bounds the workflow tasks a second.
		args = append(args, "--db-filename", dbFile,
			"--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=normal")
	}
	args = append(args, "--log-level", "warn")
	// As the CLI sets it up, the dev server re-reads the search
	// attributes and the namespace record from its database on every use
	// (33 reads per job, measured; a tenth of its CPU). Gangway's are
	// registered here, at start; the server's cache, refreshed every
	// minute, sees any registered later.
	args = append(args, "--dynamic-config-value", "system.forceSearchAttributesCacheRefreshOnRead=false")
	// Job workflows' search attributes (team, priority class, phase,
	// pool), so Temporal's UI can filter on them.
	for _, sa := range workflows.SearchAttributeFlags() {
		args = append(args, "--search-attribute", sa)
	}
	p, err := startProcess("temporal dev server", bin, args, dir, log)
	if err != nil {
		return nil, nil, err
	}
	err = p.waitReady(ctx, temporalReadyTimeout, 5*time.Second, func(ctx context.Context) error {
		return probeTemporal(ctx, addr, uiURL)
	})
	if err != nil {
		if kerr := p.kill(); kerr != nil {
			err = errors.Join(err, kerr)
		}
		return nil, p, err
	}
	return &Temporal{
		Addr:      addr,
		UIURL:     uiURL,
		Namespace: temporalNamespace,
		DBFile:    dbFile,
		p:         p,
	}, p, nil
}

// probeTemporal returns nil once the frontend at addr serves: the health
// check passes and the default namespace exists. When uiURL is set, the Web
// UI must answer too.
func probeTemporal(ctx context.Context, addr, uiURL string) error {
	// A plain TCP connect first: cheap, and it keeps the SDK's retrying
	// dial away from a port that nobody listens on yet.
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	conn.Close()

	opts := client.Options{
		HostPort:  addr,
		Namespace: temporalNamespace,
		// The SDK logs every failed attempt; the probe reports its own.
		Logger: quietLogger(),
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	defer c.Close()
	if _, err := c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return fmt.Errorf("check health: %w", err)
	}
	nc, err := client.NewNamespaceClient(opts)
	if err != nil {
		return fmt.Errorf("namespace client: %w", err)
	}
	defer nc.Close()
	if _, err := nc.Describe(ctx, temporalNamespace); err != nil {
		return fmt.Errorf("describe namespace %q: %w", temporalNamespace, err)
	}

	if uiURL != "" {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, uiURL, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("web UI: %w", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			return fmt.Errorf("web UI: GET %s: %s", uiURL, resp.Status)
		}
	}
	return nil
}

// quietLogger is a Temporal SDK logger that discards everything.
func quietLogger() tlog.Logger { return tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)) }

// Stop stops the server: SIGTERM to its process group, SIGKILL if it is
// still running after 5 s (a clean shutdown takes about 3 s). It is
// idempotent, and returns nil if the server had already exited (see Kill).
func (t *Temporal) Stop() error { return t.proc().stop(stopGrace) }

// Kill sends SIGKILL to the server's process group now, as a crash would, and
// waits until the process is gone. State written to DBFile survives.
func (t *Temporal) Kill() error { return t.proc().kill() }

// Restart starts the server again, on the same ports and database file,
// once the process has exited (after Kill or Stop, or a crash): it picks up
// where the last one stopped, and clients connected to Addr reconnect. A
// server that is still running is left alone (nil). Pid and Done then
// refer to the new process.
func (t *Temporal) Restart(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.p.exited() {
		return nil
	}
	p, err := t.restart(ctx)
	if err != nil {
		return fmt.Errorf("restart temporal: %w", err)
	}
	t.p = p
	return nil
}

func (t *Temporal) proc() *process {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.p
}

// Pid is the server's process id.
func (t *Temporal) Pid() int { return t.proc().pid }

// Done is closed when the server process has exited, for whatever reason.
func (t *Temporal) Done() <-chan struct{} { return t.proc().done }

// FindTemporal returns the path of the temporal CLI to run, the first of:
//
//  1. $GANGWAY_TEMPORAL_BIN, when set (it must name an executable file);
//  2. bin/temporal in this repository's root, which is found by walking up
//     from the current directory, then from the running executable's
//     directory, to a go.mod declaring module github.com/gangwayhq/gangway;
//  3. temporal on PATH.
//
// The error wraps ErrTemporalNotFound and says how to install it.
func FindTemporal() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		if resolved, err := filepath.EvalSymlinks(exe); err == nil {
			exe = resolved
		}
		starts = append(starts, filepath.Dir(exe))
	}
	return findTemporal(os.Getenv(TemporalBinEnv), starts, exec.LookPath)
}

// findTemporal is FindTemporal with its inputs explicit, for tests.
func findTemporal(envBin string, starts []string, lookPath func(string) (string, error)) (string, error) {
	if envBin != "" {
		path, err := filepath.Abs(envBin)
		if err == nil && isExecutable(path) {
			return path, nil
		}
		return "", fmt.Errorf("%w: %s=%q is not an executable file: fix or unset it (`make bin/temporal` installs v1.5.1 into bin/)",
			ErrTemporalNotFound, TemporalBinEnv, envBin)
	}
	for _, start := range starts {
		if root, ok := repoRoot(start); ok {
			if path := filepath.Join(root, "bin", "temporal"); isExecutable(path) {
				return path, nil
			}
		}
	}
	if path, err := lookPath("temporal"); err == nil {
		if abs, err := filepath.Abs(path); err == nil {
			return abs, nil
		}
	}
	return "", fmt.Errorf("%w: run `make bin/temporal` (installs v1.5.1 into bin/) or set %s",
		ErrTemporalNotFound, TemporalBinEnv)
}

// repoRoot walks up from dir to the directory whose go.mod declares this
// module.
func repoRoot(dir string) (string, bool) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", false
	}
	for {
		if goModModule(filepath.Join(dir, "go.mod")) == modulePath {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// goModModule returns the module path declared in the go.mod file at path,
// or "" if there is none.
func goModModule(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if i := strings.Index(line, "//"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		rest, ok := strings.CutPrefix(line, "module")
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '\t' && rest[0] != '"') {
			continue
		}
		return strings.Trim(strings.TrimSpace(rest), `"`)
	}
	return ""
}

// isExecutable reports whether path is a regular file someone may execute.
func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
