// Package testclock is a manual clock for tests of code that reads the time
// through a Now() method (the fake cloud, the reconciler, the agent's
// reclaimer): time moves only when the test advances it.
package testclock
