// Package devstacktest starts the real servers of package devstack for a
// test: each in a temporary directory of the test (PostgreSQL's in one the
// postgres user can reach, see PostgresDir), on free ports, stopped when the
// test ends. A server's output is shown (through t.Log) only when the
// test fails.
//
// For the security tests it also makes a test CA with server and client
// certificates (NewCerts), a TLS-terminating proxy that demands a client
// certificate in front of a plaintext server such as the Temporal dev
// server (StartMTLSProxy), and Unix users to run tasks as (UnixUsers,
// which skips the test without root). Dump and PutBack take a Redis
// server back to an earlier moment, as a failover to a replica that
// missed writes does.
//
// A missing binary fails the test rather than skipping it, so that CI notices
// an environment without the servers instead of passing vacuously.
package devstacktest
