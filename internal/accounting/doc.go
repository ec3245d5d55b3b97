// Package accounting owns the usage and cost ledger: every run segment of
// every job (job, attempt, team, project, pool, capacity type, GPUs and
// the milli-GPU they count for, start, end, price per GPU-hour) kept in an
// SQL database, and the pure
// aggregation behind `gangway cost` — GPU-hours and dollars per team,
// project or pool, split into on-prem, spot and on-demand, and what spot
// saved against on-demand — and behind the team budgets.
//
// The ledger stores the segments themselves, never pre-rounded dollars:
// every total is computed with gangway.UsageSegment.Dollars, the method
// JobWorkflow uses for the job's own result, so the two agree exactly.
//
// # Databases
//
// The ledger is the bill, so it lives in a database that keeps it, never
// only in Redis (the live view, which may be lost and rebuilt). Open takes a
// data source name:
//
//	sqlite:PATH                         an SQLite file (modernc.org/sqlite, pure Go), created if missing
//	postgres://USER@HOST:PORT/DB?...    a PostgreSQL database (pgx v5; postgresql:// too)
//
// SQLite is the embedded default: `gangway dev` keeps the ledger in its
// state directory, and a single `gangway server` may use a file (WAL mode,
// so `gangway cost` reads while the server writes). Several servers share
// one PostgreSQL database. Both run the same SQL and pass the same
// conformance suite (conformance_test.go), against a real PostgreSQL server
// started by the test.
//
// # Schema
//
//	usage_segments     one row per segment
//	  job_id, attempt, pool, start_ns     the segment's identity: the primary key
//	  end_ns                              indexed: reports read a window by end
//	  team, project, capacity_type, gpus, price_per_gpu_hour
//	  gpu_milli                           what the gpus count for together (version 2; 0: whole GPUs)
//	  recorded_at_ns                      when the first recording arrived
//	schema_migrations  version (primary key), name, applied_at_ns
//
// Times are Unix nanoseconds in BIGINT columns: exact on both databases
// (PostgreSQL's timestamps stop at microseconds), so a segment reads back
// equal to what was recorded and its Dollars() to the last bit.
//
// # Metering in milli-GPU-seconds
//
// A segment is billed per GPU at its share: gpu_milli is the sum over its
// GPUs of each one's milli-GPU (gangway.Member.MeteredMilli) — 500 for a
// half-GPU share, a MIG device its compute slices out of seven of a GPU
// (gangway.MIGMilli: 1g.10gb is 142), 1000 for a whole GPU — and
// GPUSeconds is seconds × gpu_milli / 1000. A job holding half a GPU for
// an hour is billed 1,800 GPU-seconds, and half the GPU's hourly price.
// Segments recorded before version 2 have gpu_milli 0 and bill their GPUs
// whole, as they did.
//
// # Migrations
//
// The schema is versioned by the embedded files migrations/NNNN_name.sql,
// numbered 1, 2, 3, ... without gaps. Open runs Migrate: in one
// transaction it creates schema_migrations if missing, applies every
// version the table does not list, in order, and records each; a failure
// rolls all of it back. Concurrent servers do not race: on PostgreSQL the
// transaction first takes an advisory lock (pg_advisory_xact_lock), on
// SQLite it begins IMMEDIATE, holding the write lock. Migrating again
// changes nothing. A database at a version this binary does not know (a
// newer Gangway migrated it) is refused with ErrSchemaTooNew: upgrades only,
// never downgrades. A released migration file is never edited; a change is
// a new file.
//
// # Idempotency
//
// JobWorkflow records each segment through an activity, which Temporal runs
// at least once, and a replayed workflow may record it again. A segment is
// identified by job, attempt, pool and start; recording one that is already
// there with the same end, or an earlier one, changes nothing and Record
// reports nothing new, so counters fed from Record never count a segment
// twice. Recording it with a later end extends it, and Record returns the
// extension: the activity runs as a local activity, inside a workflow task
// (or, after 20 s of failed tries, on the server task queue), and a task
// that ran it but did not complete (the Temporal server died) runs again
// at a later workflow time, whose end the job's status keeps.
// A segment's end only moves later, also when several servers record the
// same segment at once.
//
// # Runs in flight
//
// A run's segments are recorded when it ends. The runs still going are the
// capacity view's allocations: RunningSegments turns them into segments up
// to now, and a report given them (Query.Running) counts them as cost so
// far and counts the runs in each row's InFlight. Ledger.Report drops a
// run whose segments are already recorded (it ended; its allocation is not
// released yet), so nothing counts twice. This needs no extra write in the
// workflow, at the price that a run's cost so far starts at its commit,
// slightly before the run itself starts, and that without Redis only the
// ended runs are reported.
//
// # Budgets
//
// Team limits (monthly budget, price cap) are config; the spend they are
// checked against is computed from the ledger's segments each dispatch
// cycle (Budgets), so it is as durable as the ledger and nothing else is
// stored. Spend counts ended runs only.
//
// # Retention
//
// Segments are kept for good: the ledger is the record of what was spent.
// Pruning old rows is a DELETE an operator runs on purpose.
package accounting
