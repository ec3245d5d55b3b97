// Package activities implements JobWorkflow's server-side activities —
// Enqueue, Dequeue and Release — against the Redis capacity view. Each is
// idempotent, because Temporal runs activities at least once.
//
// RunTask is not here: it runs on each node's agent (internal/agent).
package activities
