// Package fullstack runs the whole Gangway system on one machine from typed
// options: a redis-server and a Temporal dev server (package devstack), the
// clients of both and the Redis view, the usage ledger (an SQLite file in
// the stack's directory, or Options.LedgerDSN), a shared file:// checkpoint
// store, the server in-process (workflow worker, dispatch loop, reconciler,
// /metrics and, with ServerOptions.Web, the web view), simulated on-prem nodes run by in-process agents (or, by the
// thousand, by one agent host: Options.HostedNodes), and fake
// clouds whose instances boot into in-process agents ([FakeAgents]).
//
// `gangway dev` and the end-to-end tests both start their stack here, so
// they wire the pieces the same way; the tests leave Options.Server nil and
// run `gangway server` processes they can kill. [Stack.Close] stops
// everything in reverse order and leaves no child process behind.
//
// It also holds what `gangway dev` and `gangway server` share beyond the
// stack: BuildCloud builds the providers from typed specs (the SDK clients
// of AWS and GCP, fake clouds following spot traces), RunServer runs the
// server with a cloud whose fake instances boot into in-process agents,
// and Demo submits the demo workload (DemoSpecs) and follows it, reporting
// progress to the caller, which prints it.
//
// It is a package of its own, not part of devstack, because the unit tests
// of capacity, agent, accounting and the activities start their servers
// with devstack (through devstacktest), and this package imports all of
// them.
package fullstack
