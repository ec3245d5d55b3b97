// Package activities implements JobWorkflow's server-side activities, each
// registered under its name in the workflows contract. Temporal runs
// activities at least once, so each is idempotent — except RecordRun, whose
// metrics may count a retried report twice: they are rates and
// distributions, not the bill.
//
// Each group's dependencies are held in a struct whose Register method
// registers its activities; internal/server registers them all on the
// worker that `gangway server` and `gangway dev` run:
//
//   - Activities (Capacity, the Redis view): Enqueue, Dequeue and Release —
//     queue the job, take it out of the queue, free an attempt's GPUs.
//   - Usage (Ledger, the usage ledger; optional Metrics and Log):
//     RecordUsage adds one run segment to the ledger. A segment recorded
//     before is kept as it was and counted once.
//   - Checkpoints (Store, the checkpoint store): LatestCheckpoint returns
//     the job's newest committed checkpoint, or an empty reference when it
//     has none or no store is configured.
//   - Runs (Metrics): RecordRun turns the workflow's report of a run that
//     ended, or of a job running again after a stop, into metrics.
//   - Cloud (Providers, Nodes, Join; optional Metrics and Log): the burst
//     saga's Provision (launch an offer's instances, idempotent by token),
//     AwaitNodes (wait until their agents have registered) and Terminate
//     (the compensation: end everything launched with a token and remove
//     its nodes from the view). Provider errors become application errors
//     of the ErrType* constants, non-retryable except for throttling and
//     transient failures.
//
// RunTask is not here: it runs on each node's agent (internal/agent).
package activities
