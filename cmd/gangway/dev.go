package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/internal/api"
	"github.com/gangwayhq/gangway/internal/cloud"
	"github.com/gangwayhq/gangway/internal/config"
	"github.com/gangwayhq/gangway/internal/devstack"
	"github.com/gangwayhq/gangway/internal/devstack/fullstack"
	"github.com/gangwayhq/gangway/internal/redact"
	"github.com/gangwayhq/gangway/internal/server"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

type devOptions struct {
	nodes     string
	keep      bool
	noDemo    bool
	dataDir   string
	stepTime  time.Duration
	headless  bool
	cloud     bool
	spotTrace string
	apiAddr   string
}

func newDevCmd(a *app) *cobra.Command {
	var o devOptions
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the whole system on this machine and a demo workload",
		Long: `Start a Temporal dev server and a redis-server as child processes on free
ports (state, the SQLite usage ledger among it, in a temporary directory or
--data-dir), the workflow worker, the dispatch loop, simulated on-prem nodes
(--nodes) and a fake cloud beside them (a spot and an on-demand pool of
8 × A100 instances that boot into in-process agents), then submit a demo workload — single-GPU jobs, 4-GPU jobs, 2 × 8-GPU
gangs, and 8-GPU jobs allowed to burst — running 'gangway demo-train', show
progress live, and end with a table per job and the pool it ran in.

The workload overflows the on-prem fleet: jobs with burst enabled go to the
fake cloud when their on-prem wait would exceed 15s, and every instance is
terminated when its job ends. The spot pool's availability and price follow
--spot-trace (by default a trace in ../shared/traces/spot/ when present,
started at its longest stretch of availability; else a fixed price). A
config file with cloud.providers replaces the fake cloud with those.

The simulated nodes sit two to a rack, and their GPUs report 0% utilization,
so an idle policy reclaims a job's GPUs (examples/notebook-idle.yaml). The
jobs find this binary first on their PATH, as 'gangway': the files in
examples/ run 'gangway demo-train' and run here as they are.

The server serves the user API on --api-addr, and the web view at /ui/ on
it; an admin token for both is written to the state directory: --keep prints
the GANGWAY_API and GANGWAY_TOKEN_FILE settings the CLI finds it with.

--keep leaves the stack up afterwards and prints how to reach it. Ctrl-C
stops everything and leaves no process behind. If redis-server or the
Temporal dev server dies, gangway dev says so and starts it again: Redis
empty (the view rebuilds itself), Temporal on the same database file.

Needs redis-server on PATH and the Temporal CLI in bin/ or on PATH
('make dev' installs both).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.setup(cmd, false, false); err != nil {
				return err
			}
			shapes, err := agent.ParseFleet(o.nodes)
			if err != nil {
				return fmt.Errorf("--nodes: %w", err)
			}
			return runDev(cmd.Context(), a, o, shapes, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.nodes, "nodes", "4x8:H100", "simulated nodes: COUNTxGPUS:MODEL[:mig[N]=PROFILE[*K]/...][,...], e.g. 4x8:H100,1x8:H100:mig2=1g.10gb*7")
	f.BoolVar(&o.keep, "keep", false, "keep the stack up after the demo (Ctrl-C stops it)")
	f.BoolVar(&o.noDemo, "no-demo", false, "do not submit the demo workload (implies --keep)")
	f.StringVar(&o.dataDir, "data-dir", "", "state directory (default: a temporary directory removed on exit)")
	f.DurationVar(&o.stepTime, "step-time", 100*time.Millisecond, "demo-train time per step")
	f.BoolVar(&o.headless, "headless", false, "do not serve the Temporal Web UI")
	f.BoolVar(&o.cloud, "cloud", true, "run a fake cloud beside the on-prem nodes for bursts")
	f.StringVar(&o.spotTrace, "spot-trace", "", "spot trace for the fake spot pool (default: one in ../shared/traces/spot/ if present)")
	f.StringVar(&o.apiAddr, "api-addr", "127.0.0.1:8080", "listen address of the user API the CLI speaks")
	return cmd
}

func runDev(ctx context.Context, a *app, o devOptions, shapes []agent.NodeShape, out io.Writer) error {
	cc, err := devCloud(a.cfg.Cloud, o)
	if err != nil {
		return err
	}
	dc, err := a.cfg.Server.Dispatch(devBurstAfter, cc.OnPremPricePerGPUHour)
	if err != nil {
		return err
	}
	dc.Interval, dc.LeaseTTL = 250*time.Millisecond, 2*time.Second
	dir, logFile, cleanup, err := devstack.StateDir(o.dataDir, "gangway-dev-")
	if err != nil {
		return err
	}
	defer cleanup()
	log := config.NewLoggerTo(logFile, a.cfg.Log)

	fmt.Fprintf(out, "gangway dev: state and logs in %s\n", dir)
	// Jobs name `gangway demo-train` as the examples do: this binary
	// comes first on their PATH.
	self, _ := os.Executable()
	os.Setenv("PATH", filepath.Dir(self)+string(os.PathListSeparator)+os.Getenv("PATH"))
	nodes := agent.InRacks(agent.FakeFleet("node", "onprem", shapes), 2)
	// The CLI speaks the user API: an admin token for whoever runs this.
	tokens, tokenFile, err := fullstack.AdminToken(dir, time.Now())
	if err != nil {
		return err
	}
	st, err := fullstack.Start(ctx, fullstack.Options{
		Dir: dir, Headless: o.headless, Log: log, TemporalLogger: config.TemporalLogger(log), RedisPrefix: a.cfg.Redis.Prefix,
		Nodes: nodes, Agent: agent.Config{HeartbeatInterval: time.Second}, IdleGPUs: true,
		Supervise:  func(event string) { fmt.Fprintf(out, "gangway dev: %s\n", event) },
		CloudAgent: agent.Config{HeartbeatInterval: time.Second},
		Cloud: func(ctx context.Context, hooks fullstack.FakeHooks) (*fullstack.Cloud, error) {
			return fullstack.BuildConfiguredCloud(ctx, cc, hooks, log)
		},
		Server: &fullstack.ServerOptions{
			Dispatch:   dc,
			TeamLimits: cc.TeamLimits(), Join: cc.Join.ProviderJoin(),
			// Instances of a finished demo job are gone within seconds.
			Reconcile: cloud.ReconcilerConfig{Interval: 10 * time.Second, Grace: time.Minute},
			API:       &api.Config{Listen: o.apiAddr, TokenFile: tokens},
			Web:       &server.WebOptions{},
		},
	})
	if err != nil {
		return err
	}
	defer st.Close()
	// The demo stops when the server does.
	runCtx, stop := st.Until(ctx)
	defer stop()
	fmt.Fprintf(out, "gangway dev: redis at %s, temporal at %s, user API at %s\n", redact.URL(st.Redis.URL), st.Temporal.Addr, st.APIURL)
	fmt.Fprintf(out, "gangway dev: %d simulated nodes up (%s); web view at %s\n", len(nodes), o.nodes, st.WebURL)
	for _, line := range st.Cloud.Describe(runCtx) {
		fmt.Fprintf(out, "gangway dev: %s\n", line)
	}

	ok := true
	if !o.noDemo {
		ok, err = runDemo(runCtx, st, o, out)
		if err != nil && runCtx.Err() == nil {
			return err
		}
		if runCtx.Err() == nil {
			st.Cloud.ReportLeftovers(runCtx, out)
		}
	}
	if (o.keep || o.noDemo) && runCtx.Err() == nil {
		st.WriteReach(out, filepath.Dir(self), tokens, tokenFile)
		<-runCtx.Done()
	}
	serverErr := st.Err()
	st.Close()
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(out, "gangway dev: interrupted; everything stopped")
		return nil
	case serverErr != nil:
		return serverErr
	}
	fmt.Fprintln(out, "gangway dev: stopped")
	if !ok {
		return errors.New("some demo jobs did not succeed")
	}
	return nil
}

// runDemo submits the demo workload, shows its progress and prints the
// summary; it reports whether every job succeeded.
func runDemo(ctx context.Context, st *fullstack.Stack, o devOptions, out io.Writer) (bool, error) {
	self, err := os.Executable()
	if err != nil {
		return false, fmt.Errorf("find own binary for demo-train: %w", err)
	}
	d := fullstack.Demo{
		Client: client.New(jobs.New(st.TemporalClient), st.View),
		Specs:  fullstack.DemoSpecs(self, o.stepTime, time.Now().Format("150405")),
		GPUUse: func(ctx context.Context) (int, int, int) { return fullstack.GPUUse(ctx, st.View) },
		Events: st.Events(),
	}
	d.PrintTo(out)
	res, err := d.Run(ctx)
	if err != nil {
		return false, err
	}
	return res.WriteSummary(out), nil
}
