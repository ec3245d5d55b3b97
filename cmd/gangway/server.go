package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gangwayhq/gangway/internal/accounting"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/internal/agent/notice"
	"github.com/gangwayhq/gangway/internal/cloud"
	"github.com/gangwayhq/gangway/internal/devstack/fullstack"
	"github.com/gangwayhq/gangway/internal/health"
	"github.com/gangwayhq/gangway/internal/metrics"
	"github.com/gangwayhq/gangway/internal/nodeauth"
	"github.com/gangwayhq/gangway/internal/server"
	"github.com/gangwayhq/gangway/placement/baselines"
)

func newServerCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the workflow worker, the dispatch loop, the user API and /metrics",
		Long: `Run JobWorkflow and its server-side activities on the "gangway" task queue,
compete for the Redis dispatch lease and, while leading, place queued jobs
every dispatch interval; serve the user API on --api-addr (docs/api.md: users
authenticate with tokens from --api-tokens, OIDC or client certificates), the
web view at /ui/ on it, and Prometheus metrics on --metrics-addr. Usage is
recorded in the SQL ledger named by --ledger: an SQLite file for a single
server, one PostgreSQL database shared by all of them otherwise.

Run several for availability: one leads dispatch, the others take over
within the lease TTL when it dies.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.setup(cmd, true, false); err != nil {
				return err
			}
			c, err := a.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			s, cl := a.cfg.Server, a.cfg.Cloud
			dc, err := s.Dispatch(cl.BurstAfter.Duration, cl.OnPremPricePerGPUHour)
			if err != nil {
				return err
			}
			dc.Holder = server.Holder()
			ckstore, err := a.cfg.Checkpoint.Open(cmd.Context())
			if err != nil {
				return err
			}
			ledger, err := accounting.Open(cmd.Context(), a.cfg.Ledger.DSN)
			if err != nil {
				return fmt.Errorf("--ledger: %w", err)
			}
			defer ledger.Close()
			auth, err := nodeauth.Open(nodeauth.Options{TokensFile: s.Join.TokensFile, SecretFile: s.Join.SecretFile, Uses: c.view})
			if err != nil {
				return err
			}
			a.log.Info("gangway server connected", "temporal", a.cfg.Temporal.Transport().Describe(), "redis", a.cfg.Redis.Transport().Describe())
			return fullstack.RunServer(cmd.Context(), server.Options{
				Temporal:    c.temporal,
				View:        c.view,
				MetricsAddr: s.MetricsAddr,
				Log:         a.log,
				Dispatch:    dc,
				Join:        a.cfg.Join(),
				NodeAuth:    auth,
				Reconcile:   cloud.ReconcilerConfig{Interval: cl.ReconcileInterval.Duration, Grace: cl.OrphanGrace.Duration},
				Ledger:      ledger,
				TeamLimits:  cl.TeamLimits(),
				Checkpoints: ckstore,
				API: &server.APIOptions{Config: a.cfg.API.Options(), OnDemandPrices: cl.OnDemandPrices(),
					Validate: a.cfg.Jobs.ValidateOptions()},
				Web: &server.WebOptions{},
			},
				// Fake providers' instances become in-process agents.
				agent.Config{DataDir: filepath.Join(os.TempDir(), "gangway-fake-cloud"), Checkpoints: ckstore, Log: a.log},
				func(ctx context.Context, hooks fullstack.FakeHooks) (*fullstack.Cloud, error) {
					return fullstack.BuildConfiguredCloud(ctx, cl, hooks, a.log)
				})
		},
	}
	f := cmd.Flags()
	f.StringVar(&a.cfg.Checkpoint.Store, "checkpoint-store", a.cfg.Checkpoint.Store, "checkpoint store jobs resume from: file:///dir or s3://bucket/prefix")
	f.StringVar(&a.cfg.Ledger.DSN, "ledger", a.cfg.Ledger.DSN, "usage ledger: "+accounting.DSNHelp+" (ledger.dsn; env GANGWAY_LEDGER_DSN)")
	f.StringVar(&a.cfg.Server.MetricsAddr, "metrics-addr", a.cfg.Server.MetricsAddr, "listen address for /metrics (empty: off)")
	f.StringVar(&a.cfg.API.Listen, "api-addr", a.cfg.API.Listen, "listen address of the user API (empty: off)")
	f.StringVar(&a.cfg.API.TokenFile, "api-tokens", a.cfg.API.TokenFile, "the user API's token file (gangway token create adds to it)")
	f.DurationVar(&a.cfg.Server.DispatchInterval.Duration, "dispatch-interval", a.cfg.Server.DispatchInterval.Duration, "time between dispatch cycles")
	f.DurationVar(&a.cfg.Server.LeaseTTL.Duration, "lease-ttl", a.cfg.Server.LeaseTTL.Duration, "dispatch lease TTL: a dead leader is replaced after this")
	f.DurationVar(&a.cfg.Server.NodeTTL.Duration, "node-ttl", a.cfg.Server.NodeTTL.Duration, "a node silent this long gets no new work")
	p := &a.cfg.Server.Placement
	f.StringVar(&p.Policy, "policy", p.Policy, "placement policy: "+strings.Join(baselines.Names(), ", "))
	f.IntVar(&p.Reservations, "reservations", p.Reservations, "blocked jobs that get GPUs reserved while smaller jobs backfill (0: off)")
	f.BoolVar(&p.Preempt, "preempt", p.Preempt, "let higher-priority jobs and quota owners preempt preemptible jobs")
	f.DurationVar(&p.MinRuntime.Duration, "min-runtime", p.MinRuntime.Duration, "jobs younger than this are never preempted")
	f.BoolVar(&p.Defrag.Enabled, "defrag", p.Defrag.Enabled, "move cheap checkpointing jobs so that fragmented jobs fit (budget: server.placement.defrag)")
	return cmd
}

func newAgentCmd(a *app) *cobra.Command {
	var inventoryOnly bool
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the node agent: register GPUs, heartbeat, run gang members",
		Long: `Register this node's GPUs through the server, which checks the node's join
token (--join-token-file, or env GANGWAY_JOIN_TOKEN; the node token it returns
is kept in --data-dir), heartbeat to Redis, and run RunTask activities from the
node's task queue (node/<node-id>): each gang member is a child process group,
as its team's Unix user (jobs.users), with CUDA_VISIBLE_DEVICES and the
GANGWAY_* variables set in an environment built for it.

The GPUs are read with NVML (index, UUID, model, memory, MIG devices, NVLink
domains, NUMA, driver and CUDA versions) and watched: a GPU that reports a
hardware Xid, an uncorrectable ECC error or falls off the bus is fenced and its
jobs move; processes that hold a GPU without a task, and tasks whose job is
gone, are killed after --zombie-grace; jobs idle past their idle policy are
released. Per-GPU metrics are served on --metrics-addr. Without an NVIDIA
driver give a synthetic inventory (--fake-gpus 8xH100). --inventory-only
prints the inventory and topology as JSON and exits.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.setup(cmd, false, true); err != nil {
				return err
			}
			ac := a.cfg.Agent
			gpus, err := ac.OpenGPUs(nvmlLibrary(), a.log)
			if err != nil {
				return err
			}
			defer gpus.Close()
			if inventoryOnly {
				return printInventory(cmd.OutOrStdout(), gpus)
			}
			c, err := a.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			reg := prometheus.NewRegistry()
			if ac.MetricsAddr != "" {
				reg = metrics.NewProcessRegistry()
				_, stop, err := metrics.Serve(ac.MetricsAddr, reg, a.log, health.Temporal(c.temporal), health.Redis(c.redis), health.View(c.view))
				if err != nil {
					return fmt.Errorf("agent metrics: %w", err)
				}
				defer stop()
			}
			node := gpus.Node
			store, err := a.cfg.Checkpoint.Open(cmd.Context())
			if err != nil {
				return err
			}
			notices, err := notice.Start(cmd.Context(), ac.Notices, notice.Options{Log: a.log.With("component", "notices")})
			if err != nil {
				return fmt.Errorf("agent.notices: %w", err)
			}
			join, err := ac.Join()
			if err != nil {
				return err
			}
			// The inventory goes through the server, which checks the
			// token; heartbeats and task output go to Redis.
			view := agent.NewServerView(c.view, c.temporal, node.Pool, join)
			ag := agent.New(agent.Config{Node: node, DataDir: ac.DataDir,
				HeartbeatInterval: ac.HeartbeatInterval.Duration, ShutdownGrace: ac.ShutdownGrace.Duration, Log: a.log,
				Checkpoints: store, Notices: notices, CheckpointObserver: agent.CheckpointMetrics(metrics.NewCheckpoints(reg)), LogDrops: metrics.NewTaskLogs(reg),
				GPU: ac.GPUConfig(gpus, metrics.NewGPU(reg)), TaskUsers: a.cfg.Jobs.TaskUsers, PassEnv: a.cfg.Jobs.PassEnv}, view)
			return ag.Run(cmd.Context(), c.temporal)
		},
	}
	f := cmd.Flags()
	f.StringVar(&a.cfg.Agent.NodeID, "node-id", a.cfg.Agent.NodeID, "node ID (default: hostname)")
	f.StringVar(&a.cfg.Agent.Pool, "pool", a.cfg.Agent.Pool, "pool this node belongs to")
	f.StringVar(&a.cfg.Agent.Addr, "addr", a.cfg.Agent.Addr, "address other gang members reach this node at")
	f.StringVar(&a.cfg.Agent.DataDir, "data-dir", a.cfg.Agent.DataDir, "task logs and checkpoint directories")
	f.StringVar(&a.cfg.Agent.FakeGPUs, "fake-gpus", a.cfg.Agent.FakeGPUs, "synthetic inventory instead of NVML's, e.g. 8xH100 (8xH100:mig2=1g.10gb*7: GPUs 0-1 as MIG devices)")
	f.BoolVar(&inventoryOnly, "inventory-only", false, "print the GPU inventory and topology as JSON and exit")
	f.StringVar(&a.cfg.Agent.MetricsAddr, "metrics-addr", a.cfg.Agent.MetricsAddr, "listen address for per-GPU /metrics (empty: off)")
	f.DurationVar(&a.cfg.Agent.ZombieGrace.Duration, "zombie-grace", a.cfg.Agent.ZombieGrace.Duration, "how long a process may hold a GPU without a task before it is killed")
	f.DurationVar(&a.cfg.Agent.HeartbeatInterval.Duration, "heartbeat-interval", a.cfg.Agent.HeartbeatInterval.Duration, "node heartbeat period")
	f.StringVar(&a.cfg.Agent.JoinTokenFile, "join-token-file", a.cfg.Agent.JoinTokenFile, "file holding the token this node joins with (or env GANGWAY_JOIN_TOKEN)")
	f.StringVar(&a.cfg.Agent.Notices, "notices", a.cfg.Agent.Notices, "cloud preemption notices to watch: auto, aws, gcp or none")
	f.StringVar(&a.cfg.Checkpoint.Store, "checkpoint-store", a.cfg.Checkpoint.Store, "checkpoint store: file:///path (shared storage) or s3://bucket/prefix")
	return cmd
}
