// Package devstack runs the servers Gangway depends on — a redis-server, a
// Temporal dev server (`temporal server start-dev`) and, for the production
// ledger's tests, a PostgreSQL server — as child processes on free loopback
// ports.
//
// It is the one place that knows how to start, wait for, and stop them, so
// that `gangway dev`, the end-to-end tests (both through package fullstack,
// which builds the whole dev system on top) and the integration tests
// (through package devstacktest) run exactly the same servers the same way.
// It owns:
//
//   - picking free ports on 127.0.0.1 ([FreePort]);
//   - finding the binaries ([FindTemporal], [FindPostgres]; redis-server
//     comes from PATH);
//   - starting each server and waiting until it really serves (Redis answers
//     PING; Temporal passes a health check and describes the "default"
//     namespace; PostgreSQL, after initdb on a new directory, accepts a
//     connection), with an error that quotes the server's last output when it
//     does not;
//   - stopping it: SIGTERM (PostgreSQL: SIGINT, its fast shutdown) to its
//     process group, SIGKILL after a grace period; [Redis.Kill],
//     [Temporal.Kill] and [Postgres.Kill] simulate a crash.
//
// A redis-server may speak TLS only and know only ACL users
// ([RedisOptions] TLS, Users, Auth), as production's should.
//
// A child never outlives the Go process that started it: it runs in its own
// process group and gets SIGKILL from the kernel (Pdeathsig) when its parent
// dies, even if the parent is killed with SIGKILL and never runs a cleanup.
//
// PostgreSQL refuses to run as root: when this process is root, initdb and
// the server run as the "postgres" user that Debian's package creates.
//
// The context passed to StartRedis, StartTemporal and StartPostgres bounds only the start-up
// wait; the servers run until Stop or Kill, or until this process exits.
//
// The Temporal CLI is built from source by `make bin/temporal` (v1.5.1, into
// the repository's bin/); redis-server and PostgreSQL come from the OS
// (`make redis`, `make postgres`).
package devstack
