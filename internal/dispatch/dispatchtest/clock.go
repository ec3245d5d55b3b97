package dispatchtest

import (
	"sync"
	"time"

	"github.com/gangwayhq/gangway/internal/dispatch"
	"github.com/gangwayhq/gangway/internal/testclock"
)

// Clock is a manual dispatch.Clock: testclock's clock plus After, whose
// channels fire when Advance or Set moves the time past them.
type Clock struct {
	*testclock.Clock
	mu      sync.Mutex
	waiters []waiter
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

var _ dispatch.Clock = (*Clock)(nil)

// NewClock returns a clock that reads t until moved.
func NewClock(t time.Time) *Clock { return &Clock{Clock: testclock.New(t)} }

// After implements dispatch.Clock.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	now := c.Now()
	if d <= 0 {
		ch <- now
		return ch
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waiters = append(c.waiters, waiter{at: now.Add(d), ch: ch})
	return ch
}

// Advance moves the clock forward by d and fires the waiters now due.
func (c *Clock) Advance(d time.Duration) {
	c.Clock.Advance(d)
	now := c.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(now) {
			kept = append(kept, w)
			continue
		}
		w.ch <- now
	}
	c.waiters = kept
}

// Set moves the clock to t (never back).
func (c *Clock) Set(t time.Time) {
	if d := t.Sub(c.Now()); d > 0 {
		c.Advance(d)
	}
}
