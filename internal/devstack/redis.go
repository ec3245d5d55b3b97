package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisReadyTimeout is how long StartRedis waits for the first PONG.
const redisReadyTimeout = 10 * time.Second

// ErrRedisNotFound means that no redis-server binary was found.
var ErrRedisNotFound = errors.New("redis-server not found")

// RedisOptions configure StartRedis.
type RedisOptions struct {
	// Dir is the server's working directory (created if missing). Required.
	// Nothing is persisted: the server runs with --save "" and
	// --appendonly no.
	Dir string
	// Binary is the redis-server to run. Default: "redis-server" from PATH.
	Binary string
	// Port is the port to listen on, on 127.0.0.1. Zero picks a free port.
	Port int
	// Log receives the server's stdout and stderr. Nil discards them (the
	// last few KiB still appear in start-up errors).
	Log io.Writer
}

// Redis is a running redis-server child process.
type Redis struct {
	// Addr is the server's host:port, 127.0.0.1:port.
	Addr string
	// URL is the redis:// URL of database 0, for redis.ParseURL.
	URL string

	p *process
}

// StartRedis starts a redis-server on 127.0.0.1 and returns once it answers
// PING. It fails, quoting the server's last output, if the server exits or
// does not answer within 10 s. ctx bounds only the start-up; the server runs
// until Stop or Kill.
func StartRedis(ctx context.Context, opts RedisOptions) (*Redis, error) {
	if opts.Dir == "" {
		return nil, errors.New("start redis: RedisOptions.Dir is required")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("start redis: RedisOptions.Dir: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("start redis: %w", err)
	}
	bin := opts.Binary
	if bin == "" {
		bin = "redis-server"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("%w (looked for %q: %v): run `make redis` or `apt-get install -y redis-server`, or set RedisOptions.Binary",
			ErrRedisNotFound, bin, err)
	}

	for attempt := 1; ; attempt++ {
		port := opts.Port
		if port == 0 {
			if port, err = FreePort(); err != nil {
				return nil, fmt.Errorf("start redis: %w", err)
			}
		}
		r, p, err := startRedis(ctx, path, dir, port, opts.Log)
		if err == nil {
			return r, nil
		}
		// Another process took the free port between FreePort and the
		// server's bind: try a fresh one.
		if opts.Port == 0 && attempt < portAttempts && p != nil && p.exited() && p.portTaken() {
			continue
		}
		return nil, fmt.Errorf("start redis: %w", err)
	}
}

// startRedis makes one attempt on one port. On failure the process, if it
// was started, is returned dead, for the caller to inspect.
func startRedis(ctx context.Context, path, dir string, port int, log io.Writer) (*Redis, *process, error) {
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--dir", dir,
	}
	p, err := startProcess("redis-server", path, args, dir, log)
	if err != nil {
		return nil, nil, err
	}

	c := redis.NewClient(&redis.Options{
		Addr: addr,
		// The probe loop retries; go-redis should give up fast. Its
		// timeouts, unlike ctx, also bound the connection handshake.
		DialTimeout:   500 * time.Millisecond,
		ReadTimeout:   500 * time.Millisecond,
		WriteTimeout:  500 * time.Millisecond,
		DialerRetries: 1,
		MaxRetries:    -1,
		PoolSize:      1,
	})
	defer c.Close()
	err = p.waitReady(ctx, redisReadyTimeout, time.Second, func(ctx context.Context) error {
		// A plain TCP connect first: go-redis logs every failed dial
		// to stderr, and until the server listens every dial fails.
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		conn.Close()
		return c.Ping(ctx).Err()
	})
	if err != nil {
		if kerr := p.kill(); kerr != nil {
			err = errors.Join(err, kerr)
		}
		return nil, p, err
	}
	return &Redis{
		Addr: addr,
		URL:  "redis://" + addr + "/0",
		p:    p,
	}, p, nil
}

// Stop stops the server: SIGTERM to its process group, SIGKILL if it is
// still running after 5 s. It is idempotent, and returns nil if the server
// had already exited (see Kill).
func (r *Redis) Stop() error { return r.p.stop(stopGrace) }

// Kill sends SIGKILL to the server's process group now, as a crash would, and
// waits until the process is gone.
func (r *Redis) Kill() error { return r.p.kill() }

// Pid is the server's process id.
func (r *Redis) Pid() int { return r.p.pid }

// Done is closed when the server process has exited, for whatever reason.
func (r *Redis) Done() <-chan struct{} { return r.p.done }
