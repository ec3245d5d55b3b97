// Package sim replays public GPU cluster traces through Gangway's real
// placement engine (placement.Session, the code the dispatch loop runs),
// never a copy of its logic, and reports the field's yardsticks per policy.
//
// It owns the trace loaders (the Alibaba openb trace of the FGD paper:
// LoadOpenBNodes, LoadOpenBTasks) and the protocols built on them. The FGD
// protocol (RunFGD) is the USENIX ATC 2023 "Beware of Fragmentation"
// experiment as its artifact runs it:
//
//	Prepare(seed): sort tasks by name, shuffle, tune to 1.3 × GPU capacity,
//	               permute the node order            (math/rand v1, seeded)
//	per arrival:   Session.Place([task]) — placed, or failed for good
//	               (no departures, no retries)
//	record:        arrived GPU %, unallocated GPU %, fragmented GPU %
//	headline:      the curves at arrived workload = 100%, over seeds
//
// Runs (policy × seed) are independent and run in parallel. The package
// does no logging; the command in cmd/gangway prints its results.
package sim
