// Package placement is Gangway's pure scheduling core:
//
//	Place(snapshot, queue, options) Plan
//
// It reads an immutable snapshot of the fleet (nodes, GPUs with their
// NVLink domains and shares in use, running allocations as the
// gangway.Assignment each was committed as) and the pending queue (the
// gangway.QueueEntry values dispatch reads from Redis, unconverted), and
// returns which jobs start where, which running jobs to preempt
// for whom, which blocked jobs hold reservations, and for every job left
// waiting a typed reason with numbers a person can act on. Each assignment
// it returns is complete (team, priority, runtimes, CPU and memory per
// member): it is what dispatch commits and what the next call reads back
// as running. It never
// commits, logs, sleeps, reads the clock or draws global randomness: now is
// in the snapshot and randomness comes from a seed in the options. The
// dispatch loop commits the plan; the trace simulator runs the same code
// through a Session that keeps its view between arrivals.
//
// README.md in this directory walks through the pipeline.
package placement
