// Package sim replays public GPU cluster traces through Gangway's real
// placement engine (placement.Session, the code the dispatch loop runs),
// never a copy of its logic, and reports the field's yardsticks per policy.
//
// It owns the trace loaders (the Alibaba openb trace of the FGD paper:
// LoadOpenBNodes, LoadOpenBTasks; gang-job CSV files: LoadGangJobs) and
// the protocols built on them. The FGD protocol (RunFGD) is the USENIX ATC
// 2023 "Beware of Fragmentation" experiment as its artifact runs it:
//
//	Prepare(seed): sort tasks by name, shuffle, tune to 1.3 × GPU capacity,
//	               permute the node order            (math/rand v1, seeded)
//	per arrival:   Session.Place([task]) — placed, or failed for good
//	               (no departures, no retries)
//	record:        arrived GPU %, unallocated GPU %, fragmented GPU %
//	headline:      the curves at arrived workload = 100%, over seeds
//
// Runs (policy × seed) are independent and run in parallel.
//
// RunTrace is the dynamic replay (gangway replay trace): a discrete-event
// simulation in virtual time over TraceJobs (from an openb pod list,
// OpenBTraceJobs, or a gang-job CSV, LoadGangJobs; LoadTraceJobs picks and
// reads either from a TraceInput), one placement.Session
// per policy:
//
//	per instant:   departures (Session.Release), arrivals (to the queue),
//	               then Session.Place(queue) if anything changed — again at
//	               the same instant when the plan preempted, once the
//	               victims stopped (Release, requeued with the work left
//	               plus the work lost since their last checkpoint)
//	record:        allocated GPU, fragmented GPU (FragMeter), queue length
//	report:        time-weighted allocation, queue waits, preemptions
//
// RunScale (gangway replay scale) times one placement.Place call, as the
// dispatch loop makes it each cycle, on synthetic fleets (SyntheticFleet,
// FillFleet) and queues (SyntheticQueue) of growing size.
//
// RunSpot (gangway replay spot) replays deadline jobs over spot
// availability traces (LoadSpotTraces reads a trace file or a directory
// of them) under each internal/spotpolicy policy and reports, per trace
// and policy, the cost relative to on-demand on the same seeded starts and
// the deadlines met.
//
// Trace paths given as defaults are relative to the project root and
// found from wherever gangway runs (FindTrace, FlagTracePath, LocateTrace).
//
// The package does no logging; the command in cmd/gangway prints its
// results.
package sim
