// Package dispatchtest holds in-memory stand-ins for what the dispatch loop
// talks to — the Redis view (Capacity), the job workflows (Workflows) and a
// manual clock (Clock) — so that dispatch's tests and the simulator
// (internal/sim) run the real dispatch.Loop without Redis or Temporal.
//
// Capacity makes the same checks as the Redis view's commit script (every
// GPU of every gang or nothing; a GPU already held, a job no longer queued
// at the plan's attempt or already holding GPUs is ErrStale) and releases
// like its release script (never a newer attempt's GPUs). It also holds
// GPU shares (a member's Milli), which the Redis view does not yet: a
// shared GPU is reported as held in the snapshot, and GPUMilli tells what
// is left of it. It records checkpoints as the agents report them to the
// view (RecordCheckpoint) or, for a replay, as if every checkpointing job
// saved on a fixed interval (CheckpointEvery), and reports them as the
// allocations' LastCheckpoint. Workflows records every signal for the
// caller to act on, as JobWorkflow would.
package dispatchtest
