package spotpolicy

import (
	"math"
	"time"

	"github.com/gangwayhq/gangway"
)

// DefaultRestartOverhead is the boot + restore time a restart costs when
// Work.RestartOverhead is not set.
const DefaultRestartOverhead = 5 * time.Minute

// Work describes what a job runs on an offer and what it has left.
type Work struct {
	// Replicas is the instances the job rents, one per replica; each uses
	// GPUsPerReplica of its instance's GPUs and pays for all of them.
	Replicas, GPUsPerReplica int
	// Remaining is the uninterrupted run time left.
	Remaining time.Duration
	// Checkpointable jobs resume from their newest checkpoint; the others
	// start over after every interruption.
	Checkpointable bool
	// CheckpointInterval is how often a checkpointable job saves on its
	// own; 0 means it checkpoints only on a preemption notice, and so
	// loses no work to an interruption.
	CheckpointInterval time.Duration
	// RestartOverhead is the boot + restore time of every restart
	// (<= 0: DefaultRestartOverhead).
	RestartOverhead time.Duration
}

// ExpectedDuration is the expected run time to completion on the offer:
// the work left plus the work redone and the restart overheads its
// expected interruptions cost (doc.go has the formula). It saturates at
// the largest time.Duration.
func ExpectedDuration(o gangway.Offer, w Work) time.Duration {
	if w.Remaining <= 0 {
		return 0
	}
	d := float64(w.Remaining) * factor(o, w)
	if d >= math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(d)
}

// ExpectedCost is the expected dollars to completion on the offer:
// PricePerGPUHour × the GPUs the replicas use × ExpectedDuration in hours
// (+Inf when that overflows a float64; 0 for a job with no GPUs or no work
// left).
func ExpectedCost(o gangway.Offer, w Work) float64 {
	gpus := w.Replicas * w.GPUsPerReplica
	if gpus <= 0 || w.Remaining <= 0 {
		return 0
	}
	return max(o.PricePerGPUHourFor(w.GPUsPerReplica), 0) * float64(gpus) * w.Remaining.Hours() * factor(o, w)
}

// factor is ExpectedDuration over the work left, T > 0:
//
//	D/T = (e^{λs} − 1)/(λs) · (1 + λO)
//
// with λ the interruption rate, O the restart overhead and s the work an
// interruption can lose: T for a job that is not checkpointable,
// min(interval, T) for one that is (s → 0, the first factor → 1, for one
// that checkpoints on notice).
func factor(o gangway.Offer, w Work) float64 {
	lambda := o.InterruptionRate
	if !(lambda > 0) {
		return 1
	}
	overhead := w.RestartOverhead
	if overhead <= 0 {
		overhead = DefaultRestartOverhead
	}
	t := w.Remaining.Hours()
	s := t
	if w.Checkpointable {
		s = min(max(w.CheckpointInterval.Hours(), 0), t)
	}
	return redoFactor(lambda*s) * (1 + lambda*overhead.Hours())
}

// redoFactor is (e^x − 1)/x, the expected time per unit of work of a
// stretch that restarts from its beginning when interrupted, where x is
// the expected interruptions in one uninterrupted pass (1 at x = 0).
func redoFactor(x float64) float64 {
	if x < 1e-9 {
		return 1 + x/2
	}
	return math.Expm1(x) / x
}
