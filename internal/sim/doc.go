// Package sim replays public GPU cluster traces through Gangway's real
// placement engine and dispatch loop, never a copy of their logic, and
// reports the field's yardsticks per policy.
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
// GenerateMix derives workload variants of a pod list, seeded, one knob
// at a time as the artifact's gpushare, multigpu, gpuspec and cpu
// variants relate to its default list (GPU-sharing and multi-GPU shares
// of GPU demand, model-constrained share of GPU tasks, CPU-only demand),
// and RunSweep (gangway replay sweep) runs the FGD protocol on each point
// of a sweep of them.
//
// With TraceConfig.ETA (gangway replay trace --eta) the replay also
// measures start-time estimates: jobs declare only limits (their work
// times a seeded factor), each loop estimates as the server does, and an
// estimator that knows every runtime and the Slurm-style baseline estimate
// on the same cycles; each job's estimate at submit is scored against its
// real start (eta.go). LoadedFleet sizes the fleet so that it is loaded.
//
// RunTrace is the dynamic replay (gangway replay trace): a discrete-event
// simulation in virtual time over TraceJobs (from an openb pod list,
// OpenBTraceJobs, or a gang-job CSV, LoadGangJobs; LoadTraceJobs picks and
// reads either from a TraceInput) that runs the server's
// dispatch.Loop, one per policy, on a virtual clock against dispatchtest's
// in-memory view and workflows. The replay plays what is outside the loop:
// the job workflows and the agents.
//
//	per instant:   departures (release through the view), arrivals
//	               (enqueued), then loop.Tick if anything changed: snapshot,
//	               Place, commit (with the view's stale and double-booking
//	               checks), reasons, signals — again at the same instant
//	               when the cycle preempted, once the victims stopped (on
//	               the preempt signal: release, requeue the next attempt with
//	               the work left plus the work lost since the last checkpoint)
//	record:        allocated GPU, fragmented GPU (FragmentationOf), queue length
//	report:        time-weighted allocation, queue waits, preemptions
//
// With TraceConfig.Defrag (gangway replay trace --defrag) every policy is
// replayed twice on the same jobs, without and with planned
// defragmentation (placement.Defrag): in the second run each job
// checkpoints every CheckpointEvery, the in-memory view reports the newest
// checkpoint as the agents report theirs, and a job the plan moves stops
// on its preempt signal like a victim, keeps its work up to that
// checkpoint, and restarts with the restart overhead to redo. The report
// adds the waits of jobs of LargeJobGPUs or more and what the moves cost.
// A TraceInput may replay a GenerateMix variant of the pod list (--mix).
//
// GPU shares travel as they do on a server: a queue entry carries its
// share (GPUMilli) and an allocation's members theirs (Milli), from which
// dispatch's snapshot conversion sums what each shared GPU holds, so
// openb's GPU-share tasks are not rounded up to whole GPUs.
//
// RunScale (gangway replay scale) times one placement.Place call, as the
// dispatch loop makes it each cycle, on synthetic fleets (SyntheticFleet,
// FillFleet) and queues (SyntheticQueue) of growing size.
//
// RunSpot (gangway replay spot) replays deadline jobs over spot
// availability traces (LoadSpotTraces reads a trace file or a directory
// of them) under each internal/spotpolicy policy and reports, per trace
// and policy, the cost relative to on-demand on the same seeded starts and
// the deadlines met. Each trace's job is sized to its pool and priced at
// its instance type's on-demand list price; a trace shorter than the
// deadline is skipped with a warning. The traces of one directory, device
// and pool size form a zone set, replayed also under the multi-zone
// policies.
//
// Trace paths given as defaults are relative to the project root and
// found from wherever gangway runs (FindTrace, FlagTracePath, LocateTrace).
//
// The package logs only RunSpot's warnings (to SpotConfig.Log): traces
// and zone sets skipped, traces priced at the fallback on-demand price;
// the command in cmd/gangway prints its results. Its only I/O beyond
// reading traces and writing reports is the command's progress bar
// (ProgressBar) and the trace-path lookups above.
package sim
