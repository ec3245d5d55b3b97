// Package dispatch is the leader-elected dispatch loop. One server at a time
// holds the Redis lease and, every cycle:
//
//  1. takes a snapshot of nodes, free GPUs and the queue;
//  2. calls placement (pure) for a plan, measuring fragmentation against
//     the jobs it has seen arrive (placement.WorkloadHistory, recent ones
//     weighing more), unless Config.Placement sets a workload: the leader
//     stores that history in the view (Config.Records, learned.go) and
//     a new leader goes on from it; with none stored, the queue stands in
//     until jobs arrive;
//  3. commits the whole plan in one Lua script — all GPUs of every gang or
//     nothing; a plan made on stale data is rejected and made again;
//  4. signals each placed job's workflow. Commit comes before signal; a job
//     whose workflow is gone has its GPUs released.
//
// Every job the plan leaves waiting gets its typed reason (code, detail,
// whether waiting helps, its own reservation, the moves made for it) in
// the view, for `gangway why` and the client, and beside it the start-time
// estimate of placement/forecast: every Config.ETA cycles (10 by default),
// and at once for a job that has none yet, but never so often that
// forecasting takes more than a fifth of the loop's time, the loop
// simulates the cycle's snapshot forward through the same placement
// engine; the estimator learns runtimes from the allocations it sees end
// and calibrates against the starts it sees, and what it learned is
// stored in the view beside the typical workload (learned.go: at most
// every minute, and as the leader stops), for a new leader to go on from. On the wall clock the
// forecast runs beside the cycles, not inside them (cycles that start
// while it runs skip estimating; its estimates are stored from the next
// cycle on), and so does the fragmentation measure behind the metrics —
// against the same typical workload — taken at most every five seconds: neither adds to a cycle's time. On a
// virtual clock both run inside the cycle, so a replay is deterministic.
// The reasons are written as differences from the last cycle's
// (capacity.View.SetReasons): with ten thousand jobs waiting for the same
// thing, a cycle writes only what changed.
//
// Preemption victims and defragmentation moves (placement.Defrag, when
// configured) go out as preempt signals, fenced by the lease: the job
// checkpoints, stops and is requeued without spending a retry. The loop
// keeps each defragmentation under way — and hands it back to placement
// every cycle, which keeps the waiting job's destination and each moved
// job's landing spot reserved — until the job starts or stops waiting for
// it, at most ten minutes, and keeps the last hour's moves for the budget
// (defrag.go). The leader stores this record in the view as it changes,
// before it asks the moved jobs to stop (Config.Records), and a new
// leader goes on from it. Workflows are reached through the small Workflows
// interface; in production that is *jobs.Jobs (workflows/jobs), whose
// ErrJobGone is the loop's "workflow not running".
//
// A server that takes over the lease re-signals every allocation (the old
// leader may have died between commit and signal; workflows ignore
// repeats), Config.SignalParallelism at a time, and every so often the loop
// releases allocations whose workflow is no longer running. When Redis
// loses the view (restarted empty, FLUSHALL) the lease goes with it; a
// standby that has seen another server lead leaves the free lease alone
// for half a LeaseTTL while the view is not rebuilt, so the leader, which
// holds in memory what it learned and the defragmentations under way,
// takes it back and stores them in the new view (yieldToLastLeader).
//
// Cycles start on the ticker (Config.Interval) and, sooner, on Config.Wake:
// the server wires the view's change events to it (a job enqueued, GPUs
// released, a node changed), so a submitted job is placed within
// milliseconds, not at the next tick. Woken cycles are rate-limited
// (Config.MinGap, and never more often than a cycle takes). While leading,
// Run renews the lease every LeaseTTL/3 on its own, so a long cycle does not
// lose it; commits are fenced by the lease in the commit script either way.
//
// The loop reads the time only through Config.Clock (the wall clock by
// default), and Run is nothing but Tick on that clock's interval and on
// wakes: the simulator (internal/sim) calls Tick at virtual instants against the
// in-memory view and workflows of dispatchtest, so a replay runs this code.
package dispatch
