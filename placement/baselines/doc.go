// Package baselines holds the baseline scorers of Weng et al., "Beware of
// Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation
// Gradient Descent" (USENIX ATC 2023) that Gangway does not run in
// production — random, GPU packing, GPU clustering and dot-product — scored
// as the paper's artifact scores them, so that `gangway replay` reproduces
// its numbers. Like placement they are pure: they read a placement.View and
// draw randomness only from its seeded source.
//
// Its ScorerByName and Names are the by-name registry of every policy,
// baselines and placement's production scorers (first-fit, best-fit, fgd,
// topology, gangway) alike, for config and the replay harnesses: placement
// cannot import this package, so the complete list lives here.
package baselines
