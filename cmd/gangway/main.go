package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
	tclient "go.temporal.io/sdk/client"

	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gangway:", err)
		os.Exit(1)
	}
}

// app carries the loaded config to subcommands.
type app struct {
	cfg        config.Config
	configFile string
	log        *slog.Logger
	cli        config.CLIConfig // the job commands' user API
}

func newRootCmd() *cobra.Command {
	a := &app{cfg: config.Default()}
	root := &cobra.Command{
		Use:   "gangway",
		Short: "Gangway: an elastic GPU job scheduler for on-prem and spot fleets",
		Long: `Gangway queues GPU training jobs, places gangs all-or-nothing on on-prem
nodes or bursts them to spot and on-demand cloud capacity when waiting costs
more, checkpoints and moves them when capacity is reclaimed, and bills every
GPU-second to a team. Each job's lifecycle is a durable Temporal workflow;
Redis holds the live view of capacity.

Start everything on one machine with 'gangway dev'; run 'gangway server' and
'gangway agent' in production; submit with 'gangway submit job.yaml'.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	config.BindGlobalFlags(root.PersistentFlags(), &a.cfg, &a.configFile)
	// The job commands speak the user API.
	for _, c := range []*cobra.Command{newSubmitCmd(a), newStatusCmd(a), newWhyCmd(a), newListCmd(a), newCancelCmd(a),
		newLogsCmd(a), newNodesCmd(a), newCordonCmd(a), newUncordonCmd(a), newDrainCmd(a), newRemoveNodeCmd(a), newCostCmd(a), newWhoAmICmd(a)} {
		config.BindCLIFlags(c.Flags(), &a.cli)
		root.AddCommand(c)
	}
	root.AddCommand(newDevCmd(a), newServerCmd(a), newAgentCmd(a), newTokenCmd(a), newDemoTrainCmd(), newReplayCmd(), newBenchCmd(a))
	return root
}

// setup loads and validates the config for a command.
func (a *app) setup(cmd *cobra.Command, server, agent bool) error {
	if err := config.Load(cmd.Flags(), &a.cfg, a.configFile); err != nil {
		return err
	}
	if err := a.cfg.Validate(server, agent); err != nil {
		return fmt.Errorf("invalid config:\n%w", err)
	}
	a.log = config.NewLogger(a.cfg.Log)
	return nil
}

// conns are the connections a command needs.
type conns struct {
	temporal tclient.Client
	redis    redis.UniversalClient
	view     *capacity.View
}

func (c conns) Close() {
	if c.temporal != nil {
		c.temporal.Close()
	}
	if c.redis != nil {
		_ = c.redis.Close()
	}
}

func (a *app) connect(ctx context.Context) (conns, error) {
	rdb, err := a.cfg.Redis.Dial(ctx)
	if err != nil {
		return conns{}, err
	}
	t, err := a.cfg.Temporal.Dial(ctx, a.log)
	if err != nil {
		rdb.Close()
		return conns{}, err
	}
	return conns{temporal: t, redis: rdb, view: capacity.New(rdb, capacity.Options{Prefix: a.cfg.Redis.Prefix, NodeTTL: a.cfg.Server.NodeTTL.Duration})}, nil
}
