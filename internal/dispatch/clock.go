package dispatch

import "time"

// Clock is where the loop reads the time and waits between cycles: the wall
// clock in a server, a virtual one in the simulator and in tests
// (dispatchtest.Clock), so that a replay runs the loop's own re-signal
// timing, budget cache and reconcile period.
type Clock interface {
	Now() time.Time
	// After delivers the clock's time once d has passed on it.
	After(d time.Duration) <-chan time.Time
}

// wallClock is the real time; the only place in this package that reads it.
type wallClock struct{}

func (wallClock) Now() time.Time                         { return time.Now() }
func (wallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
