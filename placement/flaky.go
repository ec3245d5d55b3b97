package placement

import (
	"time"

	"github.com/gangwayhq/gangway"
)

// Flaky GPUs. A GPU that faulted recently carries a flakiness score (its
// fences, decayed; see gangway.GPUHealth.Flakiness). A gang of more than
// one replica, or a job expected to run long, stays off GPUs above
// FlakyThreshold: its next fault would stop every member and throw away
// the most work. Short single-replica jobs may still use them, so a flaky
// GPU is not simply lost to the fleet.
const (
	// FlakyThreshold: above this a GPU counts as flaky. A GPU fenced once
	// scores 1, decaying to 0.5 after a week; one fenced twice within a few
	// days scores nearly 2.
	FlakyThreshold = 1.5
	// LongRuntime: a job expected to run at least this long avoids flaky
	// GPUs whatever its size.
	LongRuntime = 4 * time.Hour
)

// avoidsFlaky reports whether j must stay off flaky GPUs: a gang, or a job
// whose expected runtime (estimated, else its max runtime) is long or
// unknown.
func avoidsFlaky(j *gangway.QueueEntry) bool {
	runtime := j.Runtime
	if runtime <= 0 {
		runtime = j.MaxRuntime
	}
	return j.Replicas > 1 || runtime <= 0 || runtime >= LongRuntime
}

// flakyOK reports whether GPU g of node i may go to the job being placed.
func (v *View) flakyOK(i, g int) bool {
	return !v.avoidFlaky || v.nodes[i].GPUs[g].Flakiness <= FlakyThreshold
}
