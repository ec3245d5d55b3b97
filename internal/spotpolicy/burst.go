package spotpolicy

import (
	"time"

	"github.com/gangwayhq/gangway"
)

// Rent is what a job that holds no instance may rent now: spot, on-demand,
// both (spot first; on-demand should spot give no capacity), or neither
// (wait).
type Rent struct{ Spot, OnDemand bool }

// Any reports whether the job should rent anything now.
func (r Rent) Any() bool { return r.Spot || r.OnDemand }

// Choice is what the job runs on once it is known whether spot has
// capacity: spot if it may and can, else on-demand if it may, else
// nothing.
func (r Rent) Choice(spotAvailable bool) Choice {
	switch {
	case r.Spot && spotAvailable:
		return Spot
	case r.OnDemand:
		return OnDemand
	}
	return Wait
}

// decide is p's choice in state s. For a job that holds nothing it goes
// through RentNow, so the replay (ZoneSim and Sim, through OneZone and
// ZoneFollow) makes the decision with the very function the server's
// burst decision calls; TestRentNowIsDecide holds that to be Decide's own
// choice.
func decide(p Policy, s State) Choice {
	if s.Running != Wait {
		return p.Decide(s)
	}
	return RentNow(p, s).Choice(s.SpotAvailable)
}

// RentNow is p's decision, the one the replay makes tick by tick, for a
// job that holds no instance, asked before the cloud says whether spot has
// capacity: spot if p would take spot were it there; on-demand if p would
// take it with or, as the fallback after a spot launch that finds none,
// without spot; nothing if p would wait either way.
func RentNow(p Policy, s State) Rent {
	s.Running, s.OverheadLeft = Wait, 0
	s.SpotAvailable = true
	withSpot := p.Decide(s)
	s.SpotAvailable = false
	withoutSpot := p.Decide(s)
	switch withSpot {
	case Spot:
		return Rent{Spot: true, OnDemand: withoutSpot == OnDemand}
	case OnDemand:
		return Rent{OnDemand: true}
	}
	return Rent{}
}

// QueuedState is the State of a queued job with a deadline, now, for
// RentNow: its clock starts when it was submitted (now, if that is not
// known), its work is its expected runtime, all of it left (the queue does
// not know what a requeued job has saved, so the decision errs on the safe
// side), and every new instance costs overhead. ok is false for a job
// without a deadline or a runtime.
func QueuedState(j *gangway.QueueEntry, now time.Time, overhead time.Duration) (State, bool) {
	runtime := j.Runtime
	if runtime <= 0 {
		runtime = j.MaxRuntime
	}
	if j.Deadline.IsZero() || runtime <= 0 {
		return State{}, false
	}
	start := j.SubmittedAt
	if start.IsZero() || start.After(now) {
		start = now
	}
	return State{Now: now.Sub(start), Deadline: j.Deadline.Sub(start), Work: runtime, WorkLeft: runtime,
		Overhead: overhead, Running: Wait}, true
}

// BurstPolicy is the deadline policy the server's burst decision runs:
// the one `gangway replay spot` reports as gangway.
func BurstPolicy() Policy { return DefaultGangway() }
