// Package placement is Gangway's pure scheduling core:
//
//	Place(snapshot, queue, options) Plan
//
// It reads an immutable snapshot of the fleet (nodes, GPUs with their
// NVLink domains and shares in use, and the running allocations, each the
// gangway.Assignment it was committed as) and the pending queue (the
// gangway.QueueEntry values dispatch reads, unconverted), and returns which
// jobs start where, which running jobs to preempt for whom, which running
// jobs to move so that a fragmented job fits (defrag.go), which blocked
// jobs hold reservations, and for every job left waiting a typed reason
// with numbers a person can act on. Each assignment it returns is complete
// (team, priority, runtimes, preemptibility, CPU and memory per member): it
// is what dispatch commits and what a later call reads back as running.
// Feasibility is one filter chain (filter.go); explain builds the reasons
// from the nodes each filter rules out.
//
// It never commits, logs, sleeps, reads the clock or draws global
// randomness: now is in the snapshot and randomness comes from a seed in
// the options. The dispatch loop commits the plan (the dynamic trace replay
// runs that same loop); the FGD protocol places one task at a time through
// a Session that keeps its view between arrivals. The paper's baseline scorers other than best-fit and FGD live
// in placement/baselines, which also holds the registry of every policy
// name.
//
// Scoring is by node class (classes.go): nodes whose state is the same
// for placement — model, pool, free GPUs and shares, CPU and memory up to
// what any queued replica or the scorer can tell apart, the GPU layout
// within the node — form classes, and a ClassScorer scores one node per
// class, kept up to date as the plan commits, with exactly the plan
// scoring every node gives.
//
// README.md in this directory walks through the pipeline.
package placement
