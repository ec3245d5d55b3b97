package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// postgresReadyTimeout is how long StartPostgres waits for the server
	// to accept connections after initdb.
	postgresReadyTimeout = 30 * time.Second
	// postgresStopGrace is how long Stop waits for a fast shutdown, which
	// writes a checkpoint first, before it kills the server: on a busy
	// machine that takes more than the other servers' grace.
	postgresStopGrace = 30 * time.Second
	// PostgresUser is the superuser initdb creates in the cluster.
	PostgresUser = "gangway"
	// postgresOSUser is the account that runs initdb and the server when
	// this process is root: PostgreSQL refuses to run as root, and
	// Debian's package creates this user.
	postgresOSUser = "postgres"
	// PostgresBinEnv names the environment variable that points
	// FindPostgres at a directory holding initdb and postgres.
	PostgresBinEnv = "GANGWAY_POSTGRES_BIN"
)

// ErrPostgresNotFound means that FindPostgres found no PostgreSQL server
// binaries.
var ErrPostgresNotFound = errors.New("postgresql server binaries (initdb, postgres) not found")

// PostgresOptions configure StartPostgres.
type PostgresOptions struct {
	// Dir holds the cluster (created by initdb if it holds none yet) and
	// the server's Unix socket. A server started again on the same Dir
	// finds the data the last one left. Required. When this process is
	// root the server runs as the "postgres" user, which must be able to
	// reach Dir: a directory under os.TempDir() of its own, not one under
	// t.TempDir(), whose parent only root may enter.
	Dir string
	// BinDir holds initdb and postgres. Default: FindPostgres().
	BinDir string
	// Port is the port to listen on, on 127.0.0.1. Zero picks a free port.
	Port int
	// Log receives the server's stdout and stderr. Nil discards them (the
	// last few KiB still appear in start-up errors).
	Log io.Writer
}

// Postgres is a running PostgreSQL server child process (the postmaster,
// run directly rather than through pg_ctl, so that it is this process's
// child and dies with it).
type Postgres struct {
	// Addr is the server's host:port, 127.0.0.1:port.
	Addr string
	// Dir is the cluster's data directory, absolute.
	Dir string

	p *process
}

// FindPostgres returns the directory holding PostgreSQL's initdb and
// postgres: $GANGWAY_POSTGRES_BIN if set, else the directory of initdb on
// PATH (Debian links it there only with postgresql-common's wrapper), else
// the newest /usr/lib/postgresql/*/bin (Debian and Ubuntu's layout).
func FindPostgres() (string, error) {
	if dir := os.Getenv(PostgresBinEnv); dir != "" {
		if err := hasPostgres(dir); err != nil {
			return "", fmt.Errorf("%w: $%s=%s: %v", ErrPostgresNotFound, PostgresBinEnv, dir, err)
		}
		return dir, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil && hasPostgres(filepath.Dir(real)) == nil {
			return filepath.Dir(real), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	// Newest major version first: 15 sorts after 9.6 by number, not by text.
	slices.SortFunc(dirs, func(a, b string) int { return majorOf(b) - majorOf(a) })
	for _, dir := range dirs {
		if hasPostgres(dir) == nil {
			return dir, nil
		}
	}
	return "", fmt.Errorf("%w: run `make postgres` or `apt-get install -y postgresql`, or set $%s",
		ErrPostgresNotFound, PostgresBinEnv)
}

// majorOf reads the version out of /usr/lib/postgresql/<version>/bin.
func majorOf(binDir string) int {
	n, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return int(n * 10)
}

func hasPostgres(dir string) error {
	for _, name := range []string{"initdb", "postgres"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// StartPostgres starts a PostgreSQL server on 127.0.0.1, running initdb
// first when Dir holds no cluster yet, and returns once it accepts a
// connection as PostgresUser. Authentication is "trust" and TLS is off:
// it is for tests and development only. It fails, quoting the server's last
// output, if the server exits or is not ready within 30 s. ctx bounds only
// the start-up; the server runs until Stop or Kill.
func StartPostgres(ctx context.Context, opts PostgresOptions) (*Postgres, error) {
	if opts.Dir == "" {
		return nil, errors.New("start postgres: PostgresOptions.Dir is required")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("start postgres: PostgresOptions.Dir: %w", err)
	}
	bin := opts.BinDir
	if bin == "" {
		if bin, err = FindPostgres(); err != nil {
			return nil, err
		}
	} else if err := hasPostgres(bin); err != nil {
		return nil, fmt.Errorf("%w: PostgresOptions.BinDir %s: %v", ErrPostgresNotFound, bin, err)
	}
	cred, err := postgresCredential()
	if err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("start postgres: give %s to the %s user: %w", dir, postgresOSUser, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		if err := initdb(ctx, bin, dir, cred); err != nil {
			return nil, fmt.Errorf("start postgres: %w", err)
		}
	}
	for attempt := 1; ; attempt++ {
		port := opts.Port
		if port == 0 {
			if port, err = FreePort(); err != nil {
				return nil, fmt.Errorf("start postgres: %w", err)
			}
		}
		pg, p, err := startPostgres(ctx, filepath.Join(bin, "postgres"), dir, port, opts.Log, cred)
		if err == nil {
			return pg, nil
		}
		if opts.Port == 0 && attempt < portAttempts && p != nil && p.exited() && p.portTaken() {
			continue
		}
		return nil, fmt.Errorf("start postgres: %w", err)
	}
}

// postgresCredential is who runs initdb and the server: nil (this process's
// user) unless this process is root, which PostgreSQL refuses.
func postgresCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(postgresOSUser)
	if err != nil {
		return nil, fmt.Errorf("running as root, PostgreSQL must run as the %q user, which is missing (install the postgresql package): %w",
			postgresOSUser, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %s: uid %q: %w", postgresOSUser, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %s: gid %q: %w", postgresOSUser, u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

func initdb(ctx context.Context, bin, dir string, cred *syscall.Credential) error {
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "initdb"),
		"-D", dir, "-A", "trust", "-U", PostgresUser, "--no-sync", "-E", "UTF8", "--locale", "C")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb %s: %w; its output:\n%s", dir, err, out)
	}
	return nil
}

func startPostgres(ctx context.Context, path, dir string, port int, log io.Writer, cred *syscall.Credential) (*Postgres, *process, error) {
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := []string{
		"-D", dir,
		"-p", strconv.Itoa(port),
		"-k", dir, // the Unix socket, where nobody else looks
		"-c", "listen_addresses=127.0.0.1",
		"-c", "logging_collector=off",
	}
	p, err := startProcessAs("postgres", path, args, dir, log, cred)
	if err != nil {
		return nil, nil, err
	}
	// SIGINT is PostgreSQL's fast shutdown: it ends the sessions and
	// stops, where SIGTERM (smart) would wait for every client to leave.
	p.stopSig = syscall.SIGINT
	pg := &Postgres{Addr: addr, Dir: dir, p: p}
	err = p.waitReady(ctx, postgresReadyTimeout, time.Second, func(ctx context.Context) error {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		conn.Close()
		c, err := pgx.Connect(ctx, pg.URL("postgres"))
		if err != nil {
			return err
		}
		defer c.Close(context.WithoutCancel(ctx))
		return c.Ping(ctx)
	})
	if err != nil {
		if kerr := p.kill(); kerr != nil {
			err = errors.Join(err, kerr)
		}
		return nil, p, err
	}
	return pg, p, nil
}

// URL is the postgres:// URL of database on this server, as PostgresUser,
// without TLS.
func (pg *Postgres) URL(database string) string {
	u := url.URL{Scheme: "postgres", User: url.User(PostgresUser), Host: pg.Addr, Path: "/" + database,
		RawQuery: "sslmode=disable"}
	return u.String()
}

// CreateDatabase creates an empty database on the server.
func (pg *Postgres) CreateDatabase(ctx context.Context, name string) error {
	c, err := pgx.Connect(ctx, pg.URL("postgres"))
	if err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	if _, err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// Stop stops the server with a fast shutdown (SIGINT: sessions end, data is
// flushed), SIGKILL if it is still running after 30 s, and returns once
// every process of the server is gone, so that another may start on Dir.
// It is idempotent, and returns nil if the server had already exited (see
// Kill).
func (pg *Postgres) Stop() error {
	if err := pg.p.stop(postgresStopGrace); err != nil {
		return err
	}
	return pg.p.waitGroupGone(killWait)
}

// Kill sends SIGKILL to the server's process group now, as a crash would,
// and waits until its processes are gone. A server started again on the
// same Dir recovers from its write-ahead log.
func (pg *Postgres) Kill() error {
	if err := pg.p.kill(); err != nil {
		return err
	}
	return pg.p.waitGroupGone(killWait)
}

// Pid is the server's process id.
func (pg *Postgres) Pid() int { return pg.p.pid }

// Done is closed when the server process has exited, for whatever reason.
func (pg *Postgres) Done() <-chan struct{} { return pg.p.done }
