package spotpolicy

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"time"
)

// Job is one deadline job of the replay: Work of uninterrupted run time
// on Instances instances at once (a gang: it makes progress only while it
// holds all of them), due Deadline after it starts, each new instance
// costing Overhead (the changeover delay) before it makes progress.
type Job struct {
	Work     time.Duration
	Deadline time.Duration
	Overhead time.Duration
	// Instances is the gang's size (0 means 1). On a pool trace the job
	// runs on spot only while at least this many are available.
	Instances int
}

// Size is the job's instance count: Instances, at least 1.
func (j Job) Size() int { return max(j.Instances, 1) }

// Validate names what is wrong with the job.
func (j Job) Validate() error {
	switch {
	case j.Work <= 0:
		return fmt.Errorf("job work %v: want a positive duration", j.Work)
	case j.Deadline <= 0:
		return fmt.Errorf("job deadline %v: want a positive duration", j.Deadline)
	case j.Overhead < 0:
		return fmt.Errorf("job changeover overhead %v: want 0 or more", j.Overhead)
	case j.Instances < 0:
		return fmt.Errorf("job instances %d: want 1 or more (0 means 1)", j.Instances)
	}
	return nil
}

// Sim replays deadline jobs over one trace.
type Sim struct {
	Trace *Trace
	Job   Job
	// OnDemandPrice is per instance-hour (of the trace's instance type:
	// Trace.OnDemandFor); SpotFraction prices spot at that share of it
	// where the trace has no prices.
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
	Cost        float64       // dollars, every tick an instance was held, per instance
	Finished    bool          // the work was done (by the deadline or after)
	MetDeadline bool
	// FinishedAt is when the work was done, since the start (the
	// simulation's horizon when it was not).
	FinishedAt time.Duration
	// SpotTime and OnDemandTime are the time the job's instances were held
	// (once for the gang, not per instance), changeovers included.
	SpotTime, OnDemandTime time.Duration
	Changeovers            int // instances (gangs) started
	Preemptions            int
	// Moves is the changeovers into another zone than the job's last
	// (ZoneSim only).
	Moves int
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
	return drawStarts(s.Trace.Name, len(s.Trace.Available), s.Trace.Gap, s.Job.Deadline, n, seed)
}

// drawStarts draws n start ticks among the ticks-long trace's, seeded by
// seed and name, from which the deadline lies within it.
func drawStarts(name string, ticks int, gap, deadline time.Duration, n int, seed uint64) ([]int, error) {
	last := ticks - int((deadline+gap-1)/gap)
	if last < 0 {
		return nil, &ShortTraceError{Trace: name, Covers: time.Duration(ticks) * gap, Deadline: deadline}
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))
	starts := make([]int, n)
	for i := range starts {
		starts[i] = rng.IntN(last + 1)
	}
	return starts, nil
}

// Simulate replays the job from tick start of the trace under p, tick by
// tick: at each tick a spot instance the job holds is preempted if the
// trace has fewer than the job's instances available, then p decides what
// the job runs on for the tick; a new instance pays the changeover
// overhead before it makes progress; every tick an instance is held is
// charged at its price, once per instance of the job. Ticks past the
// trace's end wrap to its start. A job that runs past its deadline goes on
// until it finishes or until the deadline plus its work plus two overheads
// have passed. Sim must be valid (Validate).
func (s *Sim) Simulate(p Policy, start int) Run {
	z := &ZoneSim{Zones: []*Trace{s.Trace}, Job: s.Job, OnDemandPrice: s.OnDemandPrice, SpotFraction: s.SpotFraction}
	return z.Simulate(OneZone{Policy: p}, start)
}
