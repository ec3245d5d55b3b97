// Package placement is Gangway's pure scheduling core:
//
//	Place(snapshot, queue, options) Plan
//
// It reads an immutable snapshot of the fleet and the pending queue and
// returns which jobs start where, and for every job it did not start, a typed
// reason with numbers a person can act on. It never commits, logs, sleeps,
// reads the clock or draws global randomness: now is in the snapshot and any
// randomness comes from options. The dispatch loop commits the plan; the
// trace simulator runs the same function.
//
// The policy here is first-fit in queue order (priority, then submit time)
// with gangs placed all-or-nothing on a copy-on-write view of free GPUs.
// Topology, fragmentation, fair share, backfill and preemption replace it
// behind the same Placer seam.
package placement
