package spotpolicy

import "time"

// DefaultSwitchLag is Gangway.SwitchLag by default: the two changeover
// delays a spot attempt that fails at once costs.
const DefaultSwitchLag = 2

// Gangway is Gangway's deadline policy: Uniform Progress with sticky
// on-demand (doc.go has the rule and why).
type Gangway struct {
	// SwitchLag is how far behind the uniform-progress line, in changeover
	// delays, a job on on-demand may be and still move to spot.
	SwitchLag float64
}

// DefaultGangway is Gangway with its default parameters.
func DefaultGangway() Gangway { return Gangway{SwitchLag: DefaultSwitchLag} }

func (Gangway) Name() string { return NameGangway }

func (g Gangway) Decide(s State) Choice {
	switch s.Running {
	case Spot:
		if s.SpotAvailable {
			return Spot // Exploitation Rule
		}
	case OnDemand:
		// Leave on-demand only for spot, never to wait: a job that went
		// to on-demand because spot was gone would otherwise bounce
		// back as soon as it is on the line, fall behind again, and pay
		// another on-demand changeover each time.
		lag := time.Duration(g.SwitchLag * float64(s.Overhead))
		if s.Safe(Spot) && s.Done() >= expectedProgress(s, s.Now-lag) {
			return Spot
		}
		return OnDemand
	}
	switch {
	case s.Safe(Spot):
		return Spot
	case s.Done() < expectedProgress(s, s.Now) || !s.Safe(Wait):
		return OnDemand
	}
	return Wait
}
