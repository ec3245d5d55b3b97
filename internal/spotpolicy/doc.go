// Package spotpolicy prices a job on a cloud offer (a gangway.Offer) and
// decides, for a job with a deadline, when to run it on spot, on
// on-demand, or not at all. It also owns the spot availability trace
// (Trace, LoadTrace) that the fake cloud follows and the policies are
// replayed over. It is pure (no clock, no logging, no I/O but LoadTrace
// reading a file): the placement engine calls the cost model live, and
// internal/sim (`gangway replay spot`) replays the policies over traces.
//
// # Cost model
//
// ExpectedCost(offer, work) = PricePerGPUHour × GPUs × hours of
// ExpectedDuration(offer, work), where PricePerGPUHour (Offer.PricePerGPUHourFor) is the instance's
// price over the GPUs a replica uses (a replica rents a whole instance and
// pays for the GPUs it leaves idle) and GPUs are the replicas' GPUs. With
// T the uninterrupted run time left, λ the offer's interruption rate (per
// instance-hour) and O the restart overhead (boot + restore),
// interruptions arrive as a Poisson process while the job makes progress,
// and each costs O plus the work redone since the last checkpoint. A
// stretch of s hours of work that restarts from its beginning when
// interrupted takes (e^{λs} − 1)/λ hours of running in expectation (the
// classic restart-from-scratch completion time), so
//
//	D = T · (e^{λs} − 1)/(λs) · (1 + λO)
//
// where s, the work one interruption can lose, is
//
//   - T for a job that is not checkpointable: it starts over each time,
//     and D = (e^{λT} − 1)(1/λ + O);
//   - min(interval, T) for a checkpointable job that saves every
//     interval: T/s stretches of s each; to first order each interruption
//     loses half an interval, D ≈ T(1 + λ(s/2 + O));
//   - 0 for one that checkpoints only on the preemption notice: nothing
//     is redone, D = T(1 + λO).
//
// At λ = 0 (on-demand) D = T, and D grows with λ, O, the interval and T.
// Restarts are taken as not interrupted themselves (they are short next
// to the time between interruptions) and as paid for: the instance runs
// while it boots and restores.
//
// # Deadline policies
//
// The setting is that of Wu et al., "Can't Be Late: Optimizing Spot
// Instance Savings under Deadlines" (NSDI 2024): a job needs Work hours
// on one instance before its Deadline; spot comes and goes (a trace);
// on-demand is always there at k times the spot price; every new instance
// costs a changeover delay d (boot, restore, work since the last
// checkpoint) that passes, and is paid for, without progress. Sim.Simulate
// steps tick by tick, asks a Policy for a Choice (Spot, OnDemand, Wait)
// given the State, preempts a spot instance when the trace drops to zero,
// and charges every tick an instance is held.
//
// Every policy but on-demand keeps the Safety Net Rule (State.Safe):
// starting spot, or waiting a tick, must leave slack (time left minus
// work left) for two changeovers, so a preemption right after still
// leaves time to finish on on-demand. Hence none of them misses a deadline
// that allows one changeover.
//
//   - OnDemandOnly: the baseline costs are measured against.
//   - Greedy: spot whenever there is any, wait otherwise, on-demand to the
//     end once waiting longer would break the safety net.
//   - UniformProgress: the paper's policy (§5.2): keep progress on the line
//     ep(t) = Work × t / Deadline, on-demand when idle and behind it, spot
//     whenever available (even when behind), and, once on on-demand, stay
//     until done ≥ ep(t + 2d) (hysteresis).
//
// Gangway's policy is Uniform Progress with sticky on-demand:
//
//  1. on spot: stay until preempted (Exploitation Rule);
//  2. idle (not started, waiting, or just preempted): spot if it is there,
//     on-demand if behind the line, else wait;
//  3. on on-demand: stay on it while spot is gone, whatever the progress;
//     move to spot as soon as it is back and progress is within
//     SwitchLag (2) changeover delays of the line: done ≥ ep(t − 2d).
//
// Uniform Progress wastes most of its money in rule 3's place. Spot
// outages last hours as often as minutes, so a job that went to on-demand
// because it fell behind reaches ep(t + 2d), goes idle, falls behind again
// before spot is back, and pays another on-demand changeover — on the
// shared AWS traces a 48-hour job with a 72-hour deadline starts on-demand
// a dozen times. Progress made on on-demand while spot is gone is work
// the job needs anyway (it costs more than spot would have only if spot
// turns out plentiful later), whereas an on-demand changeover buys
// nothing; so Gangway keeps the instance and leaves it only for spot. Its progress then runs ahead of the line during outages, which is
// why it can take spot back while slightly behind: the line is a pace,
// the safety net is the guarantee, and a spot attempt that fails at once
// costs two changeovers, the lag allowed. Hysteresis in the other sense
// (waiting on on-demand for spot to prove itself, or for more slack to be
// banked), patience before going to on-demand after a preemption, a wider
// safety reserve, and steering by the interruption rate observed so far
// were each measured on the same traces and each cost more.
//
// # Pools, prices and zones
//
// A Job of k Instances is a gang: it makes progress only while it holds
// all k, so on a pool trace it runs on spot only while the trace has k
// available and is preempted as soon as it has fewer; every tick is paid
// once per instance. Where a trace has per-tick prices spot costs those;
// on-demand costs the list price of the trace's instance type
// (Trace.OnDemandFor: the trace's metadata, else OnDemandPrices, an
// explicit table of AWS list prices), never a default of another type.
//
// ZoneSim replays a job across the zones of one instance type, a new
// instance in another zone than the job's last costing ZoneSim.Move on top
// of the changeover (the checkpoint has to follow). A ZonePolicy picks
// what to run and where; ZoneFollow makes one of a single-zone Policy and
// a rule for which zone to take spot in next, asking the policy as if that
// zone were the only one (with the move added to its changeover), so the
// safety net and the pacing stay the single-zone policy's:
//
//   - RoundRobin (uniform-progress-rr): UniformProgress, the next zone in
//     order that has spot — the multi-region baseline;
//   - MultiZone (gangway-multizone): Gangway, staying in the job's zone
//     while it has spot, else the cheapest zone with spot, the one whose
//     spot has lasted longest among equals.
//
// # One policy, two users
//
// The server's burst decision for a job with a deadline
// (placement's burst) asks RentNow(BurstPolicy(), QueuedState(...)): the
// same Decide the replay calls each tick, for a job that holds nothing,
// before the cloud says whether spot has capacity. It rents spot when the
// policy would take spot, on-demand when it would without spot (as the
// fallback after a spot launch that finds none), and nothing yet when it
// would wait. The replay makes every decision of a job that holds nothing
// through RentNow as well (then Rent.Choice with the tick's availability),
// so the two users share one function, and TestRentNowIsDecide checks on
// random states that it is the policy's Decide.
package spotpolicy
