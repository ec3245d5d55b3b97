// Package fake is an in-process cloud for `gangway dev`, the simulator and
// tests. It implements providers.Provider over pools configured in
// Options:
//
//   - Launched instances are pending for BootDelay, then running; OnRunning
//     tells the dev stack to start an agent with the instance's synthetic
//     GPUs (its boot script carries --fake-gpus).
//   - A spot pool may follow a spot trace (a spotpolicy.Trace, which
//     spotpolicy.LoadTrace reads from the files in ../shared/traces/spot/):
//     the trace's availability caps launches and, when it drops below the
//     pool's live instances, the newest get a preemption notice (OnNotice,
//     and Notice for a watcher that polls like IMDS) and are taken
//     NoticeLead later — 2 minutes AWS-style, 30 seconds GCP-style. Prices
//     follow the trace's prices when it has them. Traces replay from the
//     start when they run out.
//   - Launch is idempotent by token, ListByTag and Terminate behave as the
//     contract says, and FailNext, HangNextLaunch and LimitLaunches inject
//     faults for the conformance suite.
//
// Time comes from an injected Clock and moves only when the fake is called
// (or Tick / Run): a simulator moves its virtual clock and ticks, and tests
// never sleep.
package fake
