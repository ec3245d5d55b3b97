package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gangwayhq/gangway/internal/bench"
	"github.com/gangwayhq/gangway/internal/config"
	"github.com/gangwayhq/gangway/internal/devstack"
)

// sweepRates are the steps of --sweep when --rate is not given.
var sweepRates = []float64{5, 10, 20, 30, 40, 50, 60, 80, 100, 150, 200}

func newBenchCmd(a *app) *cobra.Command {
	var o bench.Options
	var rates, command, output, dataDir string
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark the whole path: submit → running on a real Temporal and Redis",
		Long: `Start a Temporal dev server and a redis-server as child processes (as
'gangway dev' does), the server in-process with the configured dispatch
settings and its user API, and --nodes simulated nodes run by one agent
host; then submit one-GPU jobs running --command through the user API, as
'gangway submit' does (--via temporal: straight to Temporal), at
each --rate (jobs/s, open loop) for --duration, and report per rate: submit
→ task started latency p50/p95/p99, job starts per second (sustained, and
the most in any 5 s), dispatch cycle p50/p99 from the server's histogram,
and the CPU seconds used by redis, temporal, this process and the tasks.

--sweep steps through the rates (by default 5 … 200/s) and stops at the
first that saturates: p99 over --latency-limit, starts below 90% of the
rate, or starts not growing with the rate. --pending keeps that many more
jobs waiting in the queue through the run (their pool's only node is
cordoned), so every cycle works on a backlog.

The machine's own load shows in the numbers: run it on a quiet machine,
and see docs/benchmarks.md for the commands behind the published ones.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if err := a.setup(cmd, false, false); err != nil {
				return err
			}
			var err error
			if o.Rates, err = bench.ParseRates(rates); err != nil {
				return fmt.Errorf("--rate: %w", err)
			}
			if o.Sweep && !cmd.Flags().Changed("rate") {
				o.Rates = sweepRates
			}
			o.Command = strings.Fields(command)
			if o.Dispatch, err = a.cfg.Server.Dispatch(0, nil); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return runBench(cmd, a, o, dataDir, output)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Nodes, "nodes", 1000, "simulated nodes to register")
	f.IntVar(&o.GPUsPerNode, "gpus-per-node", 8, "GPUs of each simulated node")
	// A string: config loading sets changed flags again from their text,
	// which a slice flag does not read back.
	f.StringVar(&rates, "rate", "20", "submit rates in jobs/s, one step each (e.g. 5,10,20)")
	f.BoolVar(&o.Sweep, "sweep", false, "step the rate up until the stack saturates")
	f.DurationVar(&o.Duration, "duration", 30*time.Second, "how long each step submits")
	f.StringVar(&command, "command", "sleep 0.1", "every job's task")
	f.StringVar(&o.Via, "via", bench.ViaAPI, "how jobs are submitted: api (the user API, as 'gangway submit' does) or temporal (a client inside the trust boundary)")
	f.BoolVar(&o.FleetCheck, "fleet-check", true, "with --via temporal: check every submit against the registered fleet, as the user API does")
	f.IntVar(&o.Pending, "pending", 0, "jobs kept waiting in the queue through the run")
	f.DurationVar(&o.LatencyLimit, "latency-limit", time.Second, "p99 submit → started past which a step is saturated")
	f.DurationVar(&o.Drain, "drain", 30*time.Second, "how long after a step to wait for its jobs to start")
	f.StringVarP(&output, "output", "o", "text", "text or json (one object)")
	f.StringVar(&dataDir, "data-dir", "", "state directory (default: a temporary directory removed on exit)")
	return cmd
}

func runBench(cmd *cobra.Command, a *app, o bench.Options, dataDir, output string) error {
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	dir, logFile, cleanup, err := devstack.StateDir(dataDir, "gangway-bench-")
	if err != nil {
		return err
	}
	defer cleanup()
	o.Dir, o.Log = dir, config.NewLoggerTo(logFile, a.cfg.Log)
	// Progress goes to stderr, so --output json stays one object on stdout.
	o.Progress = func(line string) {
		fmt.Fprintf(errOut, "[%s] gangway bench: %s\n", time.Now().Format(time.TimeOnly), line)
	}
	res, err := bench.Run(cmd.Context(), o)
	if err != nil {
		return err
	}
	if output == "json" {
		return printJSON(out, res)
	}
	res.WriteText(out)
	return nil
}
