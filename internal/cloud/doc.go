// Package cloud is the server's side of rented capacity: the Registry of
// configured providers and the Reconciler that keeps invariant 4 (every
// instance launched is terminated when no job needs it).
//
//   - Registry maps provider names to providers.Provider and lists offers
//     across all of them, cached briefly so a dispatch cycle does not call
//     every cloud's API each time; a provider that fails is logged and left
//     out of that listing, never fatal.
//   - Reconciler lists every Gangway-tagged instance in every provider on an
//     interval and terminates the orphans: instances whose job's workflow
//     is closed or unknown, or whose attempt is no longer the job's current
//     one, once they are older than a grace period (so a launch still in
//     flight is never killed). It is the backstop behind the burst saga's
//     own compensation, for what a crash left behind. Each pass returns a
//     Report, logs what it did and updates metrics. It also removes from
//     the capacity view the nodes of cloud instances that are gone.
//   - TemporalJobs answers the reconciler's question "which attempt is this
//     job on, and is it still running?" from the job's workflow, through
//     workflows/jobs.
//
// Several servers may reconcile at once: every step is idempotent.
package cloud
