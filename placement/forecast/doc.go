// Package forecast estimates when each waiting job starts: P50 and P90 of
// its start time, the jobs whose end frees what it needs, and the priced
// cloud alternative (priced over the median runtime the model predicts).
// Predicted hands the model's medians to the burst decision
// (placement.Options.Predicted), and the simulations' own burst decisions
// expect the runtimes they play.
//
// It simulates the current state forward with the placement engine itself
// (a placement.Session over the dispatch loop's snapshot and queue, with
// the loop's options: queue order, fair share, quotas, reservations and
// backfill, preemption, bursting): running jobs end when a runtime model
// says they will, each end is a cycle of Place, and the instant a job is
// placed is its start. Running it twice, with every runtime at its median
// and at its 90th percentile, gives P50 and P90. Far ahead, ends close
// together (relative to how far ahead they are) are one instant, and the
// number of instants is bounded, so a forecast costs a bounded number of
// Place calls.
//
// Runtime models (Runtimes): History learns, from the allocations the loop
// saw end, the distribution of actual ÷ requested runtime (the job's
// estimatedRuntime, else its maxRuntime; the runs that declared an
// estimate and those that declared only a limit learned apart, since one
// typically runs near its request and the other a share of it) per team,
// team and project, and team, project and name prefix, each shrunk
// towards the coarser group while it has few observations (the coarsest
// towards what the job declared, so that a few runs do not outweigh it),
// and conditions a job's remaining time on how long it has run — for an
// attempt that resumed from a checkpoint, what its earlier attempts kept
// (Job.Kept) and this one, which is also what it is learned as when it
// ends; with no history it falls back to estimatedRuntime, then
// maxRuntime, less what has run. Limits is the Slurm-style baseline:
// every job runs to its limit.
//
// An Estimator keeps the model, learns from each cycle's snapshot, decides
// when a forecast is due, and calibrates: it compares the first estimate
// of each job with the start it got (not a job the plan places in the
// cycle that estimate was made in: it never waited on it, and nobody saw
// it), and scales later estimates by the
// median and the 90th percentile of those ratios (split conformal
// prediction, per priority and band of predicted wait, falling back to
// coarser groups), the P90 also multiplied by a factor per priority
// tracked from its misses (quantile tracking, adaptive conformal
// inference) so that nine in ten start by it while the workload drifts.
// A P90 counts as missed as soon as the job has waited past it or the
// latest simulation starts it past it, before the job starts: in a burst
// the factor rises while the queue grows. Until it has seen starts, the
// P90 is twice the median wait, tracked the same way.
//
// What an Estimator has learned — the History's histograms, the
// calibration's scores, the tracking factors, the waiting jobs' first
// estimates — is its State, which another Estimator can Restore: the
// dispatch leader stores it in the view, and a new leader goes on from it
// instead of from the declared runtimes, uncalibrated, and scores a job
// that waited through the change against the estimate shown at its
// submit.
//
// Like placement, the package is pure: no clock (now is the snapshot's),
// no I/O, no global randomness. The dispatch loop feeds it; the trace
// replay measures how well it is calibrated (`gangway replay trace --eta`).
package forecast
