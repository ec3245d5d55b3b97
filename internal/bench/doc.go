// Package bench is `gangway bench`: the end-to-end benchmark of the whole
// path, on a real redis-server and Temporal dev server it starts itself
// (package fullstack, as `gangway dev` does), with the server in-process
// and thousands of simulated nodes run by one agent host (agent.Host).
//
// Each step submits one-GPU jobs of a short command through the user API
// (client.NewAPI with a bench user's token: the path `gangway submit`
// takes, the server's fleet check included; Options.Via = ViaTemporal
// submits straight to Temporal instead) at a fixed rate, open loop —
// every submit on its own goroutine at its scheduled time, whatever the earlier ones are doing —
// for a fixed duration. It measures:
//
//   - submit → started: from the start of the Submit call to the moment the
//     agent starts the task's process (agent.Recorder, in-process, so
//     measuring costs nothing). JobWorkflow sets the Running phase in the
//     workflow task that schedules RunTask, a few milliseconds earlier.
//   - job starts per second: sustained over the step, and the most in any
//     5-second window (what the stack delivers with a backlog);
//   - dispatch cycle p50/p99, from the server's own histogram
//     (gangway_dispatch_cycle_duration_seconds) read before and after the
//     step, interpolated within its buckets (25–50 ms wide between 64 ms
//     and 500 ms);
//   - CPU seconds of redis-server, the Temporal dev server and this process
//     (server, agent host, load generator) from /proc, and of the tasks
//     (reaped children).
//
// A sweep runs steps at rising rates and stops once p99 passes the
// latency limit or starts stop growing with the rate: the saturation
// point, with the component that used the most CPU there. Optional pending
// jobs (Options.Pending) sit in the queue through every step, kept there
// by a pool whose only node is cordoned: every cycle reads, places and
// gives reasons for them, as it would for a backlog. They are written
// straight into the queue, as their Enqueue activity would, without
// workflows: they never run, and 10,000 workflow starts would outlast the
// measurement.
//
// The load generator has connections of its own, as `gangway submit`
// processes would: HTTP to the user API or, ViaTemporal, Temporal and
// Redis, where Options.FleetCheck turns the fleet check on as the API has
// it.
// Each step also reports CPU milliseconds per job by component and the
// history length of one finished job: on a busy machine those move far
// less than latencies do.
package bench
