package spotpolicy

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"time"
)

// Job is one deadline job of the replay: Work of uninterrupted run time
// on one instance, due Deadline after it starts, each new instance
// costing Overhead (the changeover delay) before it makes progress.
type Job struct {
	Work     time.Duration
	Deadline time.Duration
	Overhead time.Duration
}

// Validate names what is wrong with the job.
func (j Job) Validate() error {
	switch {
	case j.Work <= 0:
		return fmt.Errorf("job work %v: want a positive duration", j.Work)
	case j.Deadline <= 0:
		return fmt.Errorf("job deadline %v: want a positive duration", j.Deadline)
	case j.Overhead < 0:
		return fmt.Errorf("job changeover overhead %v: want 0 or more", j.Overhead)
	}
	return nil
}

// Sim replays deadline jobs over one trace.
type Sim struct {
	Trace *Trace
	Job   Job
	// OnDemandPrice is per instance-hour; SpotFraction prices spot at that
	// share of it where the trace has no prices.
	OnDemandPrice float64
	SpotFraction  float64
}

// Validate checks the trace, the job and the prices.
func (s *Sim) Validate() error {
	if s.Trace == nil {
		return errors.New("no spot trace")
	}
	if err := s.Trace.Validate(); err != nil {
		return err
	}
	if err := s.Job.Validate(); err != nil {
		return err
	}
	switch {
	case s.OnDemandPrice <= 0:
		return fmt.Errorf("on-demand price %g: want a positive price", s.OnDemandPrice)
	case s.Trace.Prices == nil && s.SpotFraction <= 0:
		return fmt.Errorf("spot trace %s has no prices and the spot fraction is %g: want a positive fraction of the on-demand price", s.Trace.Name, s.SpotFraction)
	}
	return nil
}

// Run is one job's replay under one policy.
type Run struct {
	Start       time.Duration // offset of the job's start into the trace
	Cost        float64       // dollars, every tick an instance was held
	Finished    bool          // the work was done (by the deadline or after)
	MetDeadline bool
	// FinishedAt is when the work was done, since the start (the
	// simulation's horizon when it was not).
	FinishedAt time.Duration
	// SpotTime and OnDemandTime are the instance time held, changeovers
	// included.
	SpotTime, OnDemandTime time.Duration
	Changeovers            int // instances started
	Preemptions            int
}

// Ticks is the number of ticks a job's deadline spans, rounded up.
func (s *Sim) Ticks() int {
	return int((s.Job.Deadline + s.Trace.Gap - 1) / s.Trace.Gap)
}

// ShortTraceError is Starts' error for a trace that cannot hold a job's
// whole deadline.
type ShortTraceError struct {
	Trace            string
	Covers, Deadline time.Duration
}

func (e *ShortTraceError) Error() string {
	return fmt.Sprintf("spot trace %s covers %v, less than the job's deadline %v", e.Trace, e.Covers, e.Deadline)
}

// Starts draws n start ticks, uniformly, among those from which the job's
// whole deadline lies within the trace (a *ShortTraceError when there is
// none). The stream depends only on the seed and the trace's name.
func (s *Sim) Starts(n int, seed uint64) ([]int, error) {
	last := len(s.Trace.Available) - s.Ticks()
	if last < 0 {
		return nil, &ShortTraceError{Trace: s.Trace.Name, Covers: s.Trace.Duration(), Deadline: s.Job.Deadline}
	}
	h := fnv.New64a()
	h.Write([]byte(s.Trace.Name))
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))
	starts := make([]int, n)
	for i := range starts {
		starts[i] = rng.IntN(last + 1)
	}
	return starts, nil
}

// Simulate replays the job from tick start of the trace under p, tick by
// tick: at each tick a spot instance the job holds is preempted if the
// trace has none available, then p decides what the job runs on for the
// tick; a new instance pays the changeover overhead before it makes
// progress; every tick an instance is held is charged at its price. Ticks
// past the trace's end wrap to its start. A job that runs past its
// deadline goes on until it finishes or until the deadline plus its work
// plus two overheads have passed. Sim must be valid (Validate).
func (s *Sim) Simulate(p Policy, start int) Run {
	tr, job := s.Trace, s.Job
	gap := tr.Gap
	avail := func(k int) bool { return tr.Available[tr.wrap(k)] > 0 }

	run := Run{Start: time.Duration(start) * gap}
	left := job.Work
	running, overheadLeft := Wait, time.Duration(0)
	horizon := job.Deadline + job.Work + 2*job.Overhead
	for i := 0; ; i++ {
		now := time.Duration(i) * gap
		if now >= horizon {
			run.FinishedAt = horizon
			return run
		}
		k := start + i
		up := avail(k)
		if running == Spot && !up {
			running, overheadLeft = Wait, 0
			run.Preemptions++
		}
		spotPrice := s.OnDemandPrice * s.SpotFraction
		if tr.Prices != nil {
			spotPrice = tr.Prices[tr.wrap(k)]
		}
		c := p.Decide(State{Now: now, Deadline: job.Deadline, Work: job.Work, WorkLeft: left, SpotAvailable: up,
			Running: running, Overhead: job.Overhead, OverheadLeft: overheadLeft, Tick: gap,
			SpotPrice: spotPrice, OnDemandPrice: s.OnDemandPrice})
		if c == Spot && !up || c < Wait || c > OnDemand {
			c = Wait // a policy cannot run on spot that is not there
		}
		if c != running {
			running, overheadLeft = c, 0
			if c != Wait {
				overheadLeft = job.Overhead
				run.Changeovers++
			}
		}
		switch running {
		case Wait:
			continue
		case Spot:
			run.Cost += spotPrice * gap.Hours()
			run.SpotTime += gap
		case OnDemand:
			run.Cost += s.OnDemandPrice * gap.Hours()
			run.OnDemandTime += gap
		}
		paid := min(overheadLeft, gap)
		overheadLeft -= paid
		progress := gap - paid
		if progress >= left {
			run.Finished = true
			run.FinishedAt = now + paid + left
			run.MetDeadline = run.FinishedAt <= job.Deadline
			return run
		}
		left -= progress
	}
}
