package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/gangwayhq/gangway/internal/redact"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
	tclient "go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

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
	root.AddCommand(
		newDevCmd(a), newServerCmd(a), newAgentCmd(a),
		newSubmitCmd(a), newStatusCmd(a), newWhyCmd(a), newListCmd(a), newCancelCmd(a), newLogsCmd(a), newNodesCmd(a), newCordonCmd(a), newUncordonCmd(a), newDrainCmd(a),
		newDemoTrainCmd(),
	)
	root.AddCommand(newReplayCmd(), newBenchCmd(a))
	root.AddCommand(newCostCmd(a))
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
	redis    *redis.Client
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

// connect dials Temporal and Redis with the loaded config.
func (a *app) connect(ctx context.Context) (conns, error) {
	return dial(ctx, a.cfg.Temporal, a.cfg.Redis, a.log)
}

func dial(ctx context.Context, tc config.TemporalConfig, rc config.RedisConfig, log *slog.Logger) (conns, error) {
	rdb, err := dialRedis(ctx, rc)
	if err != nil {
		return conns{}, err
	}
	t, err := tclient.DialContext(ctx, tclient.Options{
		HostPort:  tc.Address,
		Namespace: tc.Namespace,
		Logger:    temporalLogger(log),
	})
	if err != nil {
		rdb.Close()
		return conns{}, fmt.Errorf("temporal at %s: %w", tc.Address, err)
	}
	return conns{temporal: t, redis: rdb, view: capacity.New(rdb, capacity.Options{Prefix: rc.Prefix})}, nil
}

// dialRedis connects to the Redis view and checks it answers.
func dialRedis(ctx context.Context, rc config.RedisConfig) (*redis.Client, error) {
	opts, err := redis.ParseURL(rc.URL)
	if err != nil {
		return nil, fmt.Errorf("redis url: %w", redact.Error(err))
	}
	rdb := redis.NewClient(opts)
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("redis at %s: %w", redact.URL(rc.URL), err)
	}
	return rdb, nil
}

// temporalLogger keeps the SDK's chatty info logs out of the way: only its
// warnings and errors reach the log.
func temporalLogger(log *slog.Logger) tlog.Logger {
	h := log.Handler()
	return tlog.NewStructuredLogger(slog.New(minLevel{h, slog.LevelWarn}))
}

type minLevel struct {
	slog.Handler
	min slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.Handler.Enabled(ctx, l)
}

func (m minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{m.Handler.WithAttrs(attrs), m.min}
}

func (m minLevel) WithGroup(name string) slog.Handler {
	return minLevel{m.Handler.WithGroup(name), m.min}
}
