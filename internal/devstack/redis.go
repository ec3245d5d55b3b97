package devstack

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
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
	// TLS, when set, makes the server speak TLS only, on Port.
	TLS *RedisTLS
	// Users are ACL users, each as redis.conf's user directive takes it
	// after the word user: "agent on >secret ~{gangway}:log:* +xadd". With
	// any, the default user is turned off, and Auth must name a user that
	// may run PING.
	Users []string
	// Auth is the user the readiness probe, and Redis.URL, log in as.
	Auth RedisAuth
	// ReplicaOf, "host:port", starts the server as a replica of that
	// master.
	ReplicaOf string
	// Sentinel, when set, starts a Redis Sentinel instead of a server
	// (redis-server sentinel.conf --sentinel), watching one master.
	Sentinel *RedisSentinel
	// Cluster starts the server as a Redis Cluster node (cluster-enabled,
	// its node table in Dir), with no slots until it is made part of a
	// cluster (devstacktest.RedisCluster).
	Cluster bool
}

// RedisSentinel is what a Sentinel watches: the master named MasterName at
// Master ("host:port"), with a quorum of one; it calls the master down
// after DownAfter without an answer (default 1 s) and fails it over to a
// replica, trying again after FailoverTimeout (default 3 s).
type RedisSentinel struct {
	MasterName      string
	Master          string
	DownAfter       time.Duration
	FailoverTimeout time.Duration
}

// RedisTLS is the server's side of TLS.
type RedisTLS struct {
	// CertFile and KeyFile are the server's certificate and key; CAFile
	// holds the CA clients check it with (and, with AuthClients, the CA
	// client certificates must chain to).
	CertFile, KeyFile, CAFile string
	// AuthClients demands a client certificate (tls-auth-clients yes).
	AuthClients bool
	// ClientCertFile and ClientKeyFile are what the readiness probe shows
	// when AuthClients is set.
	ClientCertFile, ClientKeyFile string
}

// RedisAuth is an ACL user and its password.
type RedisAuth struct{ User, Password string }

// Redis is a running redis-server child process.
type Redis struct {
	// Addr is the server's host:port, 127.0.0.1:port.
	Addr string
	// URL is the redis:// URL of database 0 (rediss:// with TLS), with
	// RedisOptions.Auth's user and password, for redis.ParseURL.
	URL string

	mu      sync.Mutex
	p       *process
	restart func(context.Context) (*process, error)
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
		r, p, err := startRedis(ctx, path, dir, port, opts)
		if err == nil {
			r.restart = func(ctx context.Context) (*process, error) {
				_, p, err := startRedis(ctx, path, dir, port, opts)
				if err != nil {
					return nil, err
				}
				return p, nil
			}
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

// sentinelConf writes a Sentinel's config file in dir.
func sentinelConf(dir string, port int, sn RedisSentinel) (string, error) {
	host, mport, err := net.SplitHostPort(sn.Master)
	if err != nil {
		return "", fmt.Errorf("RedisSentinel.Master: %w", err)
	}
	if sn.DownAfter <= 0 {
		sn.DownAfter = time.Second
	}
	if sn.FailoverTimeout <= 0 {
		sn.FailoverTimeout = 3 * time.Second
	}
	conf := filepath.Join(dir, "sentinel.conf")
	body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor %s %s %s 1\n"+
		"sentinel down-after-milliseconds %s %d\nsentinel failover-timeout %s %d\n",
		port, dir, sn.MasterName, host, mport, sn.MasterName, sn.DownAfter.Milliseconds(), sn.MasterName, sn.FailoverTimeout.Milliseconds())
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		return "", err
	}
	return conf, nil
}

// startRedis makes one attempt on one port. On failure the process, if it
// was started, is returned dead, for the caller to inspect.
func startRedis(ctx context.Context, path, dir string, port int, opts RedisOptions) (*Redis, *process, error) {
	addr := "127.0.0.1:" + strconv.Itoa(port)
	var args []string
	if len(opts.Users) > 0 {
		// ACL lines hold passwords: a file, not the command line ps shows.
		conf := filepath.Join(dir, "acl.conf")
		lines := "user default off\n"
		for _, u := range opts.Users {
			lines += "user " + u + "\n"
		}
		if err := os.WriteFile(conf, []byte(lines), 0o600); err != nil {
			return nil, nil, err
		}
		args = append(args, conf)
	}
	plainPort := strconv.Itoa(port)
	if opts.TLS != nil {
		plainPort = "0" // TLS only
	}
	args = append(args,
		"--port", plainPort,
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--dir", dir,
	)
	if opts.Cluster {
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000")
	}
	if opts.ReplicaOf != "" {
		host, mport, err := net.SplitHostPort(opts.ReplicaOf)
		if err != nil {
			return nil, nil, fmt.Errorf("RedisOptions.ReplicaOf: %w", err)
		}
		args = append(args, "--replicaof", host, mport)
	}
	if sn := opts.Sentinel; sn != nil {
		// A Sentinel reads (and rewrites) its own config file.
		conf, err := sentinelConf(dir, port, *sn)
		if err != nil {
			return nil, nil, err
		}
		args = []string{conf, "--sentinel"}
	}
	var tlsConf *tls.Config
	scheme := "redis"
	if t := opts.TLS; t != nil {
		authClients := "no"
		if t.AuthClients {
			authClients = "yes"
		}
		args = append(args, "--tls-port", strconv.Itoa(port), "--tls-cert-file", t.CertFile,
			"--tls-key-file", t.KeyFile, "--tls-ca-cert-file", t.CAFile, "--tls-auth-clients", authClients)
		var err error
		if tlsConf, err = t.clientConfig(); err != nil {
			return nil, nil, err
		}
		scheme = "rediss"
	}
	p, err := startProcess("redis-server", path, args, dir, opts.Log)
	if err != nil {
		return nil, nil, err
	}

	c := redis.NewClient(&redis.Options{
		Addr:      addr,
		Username:  opts.Auth.User,
		Password:  opts.Auth.Password,
		TLSConfig: tlsConf,
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
	u := url.URL{Scheme: scheme, Host: addr, Path: "/0"}
	if opts.Auth.User != "" || opts.Auth.Password != "" {
		u.User = url.UserPassword(opts.Auth.User, opts.Auth.Password)
	}
	return &Redis{
		Addr: addr,
		URL:  u.String(),
		p:    p,
	}, p, nil
}

// clientConfig is what the readiness probe dials with.
func (t *RedisTLS) clientConfig() (*tls.Config, error) {
	pem, err := os.ReadFile(t.CAFile)
	if err != nil {
		return nil, fmt.Errorf("redis tls: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("redis tls: no certificate in %s", t.CAFile)
	}
	c := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if t.AuthClients {
		cert, err := tls.LoadX509KeyPair(t.ClientCertFile, t.ClientKeyFile)
		if err != nil {
			return nil, fmt.Errorf("redis tls: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// Stop stops the server: SIGTERM to its process group, SIGKILL if it is
// still running after 5 s. It is idempotent, and returns nil if the server
// had already exited (see Kill).
func (r *Redis) Stop() error { return r.proc().stop(stopGrace) }

// Kill sends SIGKILL to the server's process group now, as a crash would, and
// waits until the process is gone.
func (r *Redis) Kill() error { return r.proc().kill() }

// Restart starts the server again on the same port once the process has
// exited (after Kill or Stop, or a crash). It starts empty: nothing is
// persisted. A server still running is left alone (nil). Pid and Done
// then refer to the new process.
func (r *Redis) Restart(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.p.exited() {
		return nil
	}
	p, err := r.restart(ctx)
	if err != nil {
		return fmt.Errorf("restart redis: %w", err)
	}
	r.p = p
	return nil
}

func (r *Redis) proc() *process {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.p
}

// Pid is the server's process id.
func (r *Redis) Pid() int { return r.proc().pid }

// Done is closed when the server process has exited, for whatever reason.
func (r *Redis) Done() <-chan struct{} { return r.proc().done }
