// Package jobs is the one typed door to job workflows (JobWorkflow, one per
// job, workflow ID = job ID): start a job, signal it (placed, preempt,
// burst), query its status, describe it, cancel it, wait for its result and
// list jobs. The client, the dispatch loop, the cloud reconciler and the
// node agent all reach job workflows through it, so "the workflow is not
// running" is decided in one place and means one thing: ErrJobGone.
//
// It imports only the root package and workflows from Gangway (no
// internal/ package), so the public client can use it.
package jobs
