package spotpolicy

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Choice is what a deadline policy runs the job on for the next tick.
type Choice int8

const (
	Wait     Choice = iota // hold no instance
	Spot                   // a spot instance (only while one is available)
	OnDemand               // an on-demand instance (always available)
)

func (c Choice) String() string {
	switch c {
	case Wait:
		return "wait"
	case Spot:
		return "spot"
	case OnDemand:
		return "on-demand"
	}
	return fmt.Sprintf("Choice(%d)", int8(c))
}

// State is what a policy knows when it decides: the job, the clock and
// the spot market now — never the future.
type State struct {
	Now      time.Duration // since the job started
	Deadline time.Duration // since the job started
	Work     time.Duration // the job's whole uninterrupted run time
	WorkLeft time.Duration
	// SpotAvailable is whether a spot instance can be had (or kept) for
	// the next tick.
	SpotAvailable bool
	// Running is what the job holds now: Wait for nothing (not started,
	// idle, or just preempted), Spot or OnDemand.
	Running Choice
	// Overhead is the changeover delay every new instance costs (boot,
	// restore, work lost since the last checkpoint): time that passes,
	// and is paid for, without progress.
	Overhead time.Duration
	// OverheadLeft is what the instance the job holds still has to pay of
	// its changeover delay.
	OverheadLeft time.Duration
	// Tick is the time until the next decision.
	Tick                     time.Duration
	SpotPrice, OnDemandPrice float64 // per instance-hour, now
}

// Slack is the time to the deadline that is not needed for the work
// left: what waiting and changeovers may still spend.
func (s State) Slack() time.Duration { return s.Deadline - s.Now - s.WorkLeft }

// Done is the work done so far.
func (s State) Done() time.Duration { return s.Work - s.WorkLeft }

// Safe reports whether choice c keeps the deadline within reach whatever
// spot availability does next (the paper's Safety Net Rule, in ticks):
//
//   - on-demand is always as safe as it gets;
//   - keeping a spot instance is safe: it was started with slack for two
//     changeovers, and after its own one is paid, a preemption still
//     leaves slack for the move to on-demand;
//   - starting a spot instance needs slack for two changeovers, its own
//     and the one to on-demand should it be preempted at once;
//   - waiting one tick must leave slack for two changeovers, so that spot
//     can still be taken afterwards (and on-demand, with one to spare).
func (s State) Safe(c Choice) bool {
	switch c {
	case OnDemand:
		return true
	case Spot:
		if !s.SpotAvailable {
			return false
		}
		return s.Running == Spot || s.Slack() >= 2*s.Overhead
	case Wait:
		return s.Slack()-s.Tick >= 2*s.Overhead
	}
	return false
}

// Policy decides, tick by tick, what a job with a deadline runs on.
// Decide must not keep state between calls: everything it may use is in
// the State, so one Policy value serves many runs at once.
type Policy interface {
	Name() string
	Decide(State) Choice
}

// Policy names, in the order reports list them.
const (
	NameOnDemand        = "on-demand"
	NameGreedy          = "greedy"
	NameUniformProgress = "uniform-progress"
	NameGangway         = "gangway"
)

// Names lists every policy ByName knows.
func Names() []string {
	return []string{NameOnDemand, NameGreedy, NameUniformProgress, NameGangway}
}

// ByName returns the named policy with its default parameters.
func ByName(name string) (Policy, error) {
	switch name {
	case NameOnDemand:
		return OnDemandOnly{}, nil
	case NameGreedy:
		return Greedy{}, nil
	case NameUniformProgress:
		return UniformProgress{}, nil
	case NameGangway:
		return DefaultGangway(), nil
	}
	return nil, fmt.Errorf("unknown spot policy %q (valid: %s)", name, strings.Join(Names(), ", "))
}

// ByNames returns the named policies in order; a name given twice is an
// error, as a comparison would show the same policy twice.
func ByNames(names []string) ([]Policy, error) {
	out := make([]Policy, 0, len(names))
	for _, name := range names {
		p, err := ByName(name)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(out, func(q Policy) bool { return q.Name() == name }) {
			return nil, fmt.Errorf("%q given twice", name)
		}
		out = append(out, p)
	}
	return out, nil
}

// OnDemandOnly always runs on on-demand: the baseline costs are measured
// against.
type OnDemandOnly struct{}

func (OnDemandOnly) Name() string { return NameOnDemand }

func (OnDemandOnly) Decide(State) Choice { return OnDemand }

// Greedy runs on spot whenever there is any and waits when there is none,
// until waiting longer would leave too little slack to ever use spot
// again (the Safety Net Rule); from then on it stays on on-demand to the
// end.
type Greedy struct{}

func (Greedy) Name() string { return NameGreedy }

func (Greedy) Decide(s State) Choice {
	switch {
	case s.Running == OnDemand:
		return OnDemand
	case s.Safe(Spot):
		return Spot
	case s.Safe(Wait):
		return Wait
	}
	return OnDemand
}

// UniformProgress is the policy of Wu et al., "Can't Be Late: Optimizing
// Spot Instance Savings under Deadlines" (NSDI 2024), §5.2: expected
// progress is the straight line ep(t) = Work × t / Deadline, and
//
//  1. Uniform Progress: idle and behind the line (done < ep(now)): run on
//     on-demand to catch up;
//  2. Taking Risks: run on spot whenever it is available, even when
//     behind, and stay on it until it is preempted (Exploitation Rule);
//  3. Hysteresis: on on-demand, stay on it until done >= ep(now + 2d);
//
// with the Safety Net Rule (State.Safe) on top.
type UniformProgress struct{}

func (UniformProgress) Name() string { return NameUniformProgress }

func (UniformProgress) Decide(s State) Choice {
	done := s.Done()
	if s.Running == Spot && s.SpotAvailable {
		return Spot
	}
	if s.Running == OnDemand && done < expectedProgress(s, s.Now+2*s.Overhead) {
		return OnDemand
	}
	if s.Safe(Spot) {
		return Spot
	}
	if done < expectedProgress(s, s.Now) {
		return OnDemand
	}
	if s.Safe(Wait) {
		return Wait
	}
	return OnDemand
}

// expectedProgress is the uniform-progress line at t: Work × t / Deadline.
func expectedProgress(s State, t time.Duration) time.Duration {
	if s.Deadline <= 0 {
		return s.Work
	}
	return time.Duration(float64(s.Work) * float64(t) / float64(s.Deadline))
}
