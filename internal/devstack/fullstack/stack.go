package fullstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gangwayhq/gangway/internal/redact"

	"github.com/redis/go-redis/v9"
	tclient "go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/checkpoint"
	"github.com/gangwayhq/gangway/internal/accounting"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/internal/api"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/cloud"
	"github.com/gangwayhq/gangway/internal/devstack"
	"github.com/gangwayhq/gangway/internal/dispatch"
	"github.com/gangwayhq/gangway/internal/gpuinfo"
	"github.com/gangwayhq/gangway/internal/nodeauth"
	"github.com/gangwayhq/gangway/internal/server"
	"github.com/gangwayhq/gangway/providers"
)

// nodesTimeout bounds how long Start waits for Options.Nodes to register.
const nodesTimeout = 30 * time.Second

// Options describe the stack Start brings up. With only Dir set it is Redis
// and Temporal alone, with their clients.
type Options struct {
	// Dir holds the servers' state, the agents' data, the checkpoint store
	// and the logs (required; Close leaves it).
	Dir string
	// Headless turns the Temporal Web UI off.
	Headless bool
	// ServerOutput receives the output of redis-server and the Temporal
	// dev server; nil means Dir/servers.log.
	ServerOutput io.Writer
	// Log is the components' log (server, agents, fake clouds); nil
	// discards it. TemporalLogger is the Temporal SDK's; nil discards it.
	Log            *slog.Logger
	TemporalLogger tlog.Logger
	// RedisPrefix starts every key of the view; "" means
	// capacity.DefaultPrefix.
	RedisPrefix string
	// LedgerDSN is the usage ledger (accounting.Open); "" means an SQLite
	// file, Dir/ledger.db, so usage outlives Redis and survives a restart
	// on the same Dir.
	LedgerDSN string

	// Nodes are simulated on-prem nodes, each run by an in-process agent
	// with Agent as its config (Node set per node; DataDir, Checkpoints and
	// Log default to the stack's). Start returns once all have registered.
	Nodes []gangway.Node
	Agent agent.Config
	// IdleGPUs gives each of Nodes' agents simulated GPUs (SimulatedGPUs)
	// unless Agent has a GPU source: they report 0% utilization, so idle
	// policies act on them.
	IdleGPUs bool
	// HostedNodes are simulated nodes run by one in-process agent host
	// (agent.Host, one Temporal worker for all of them) with Agent as
	// their base config and DataDir defaulting to Dir/hosted: how a test
	// or `gangway bench` registers thousands of nodes. Start returns once
	// they, too, have registered.
	HostedNodes []gangway.Node

	// Server runs the server in-process (workflow worker, dispatch loop,
	// reconciler, /metrics on a free port); nil runs none, for callers that
	// run their own (`gangway server` processes).
	Server *ServerOptions
	// Cloud builds the providers bursts rent from, given the hooks that
	// boot fake instances into in-process agents; nil means no cloud.
	Cloud func(ctx context.Context, hooks FakeHooks) (*Cloud, error)
	// Supervise, when set, watches redis-server and the Temporal dev
	// server: one that exits before Close is started again — Redis empty,
	// the view then rebuilds itself; Temporal on the same database file —
	// and Supervise is told so, a line each time (supervise.go).
	Supervise func(event string)

	// CloudAgent is the base config of the agents of fake cloud instances,
	// as Agent is for Nodes; its DataDir defaults to Dir/cloud.
	CloudAgent agent.Config
}

// ServerOptions tune the in-process server.
type ServerOptions struct {
	// Dispatch configures the loop; Holder defaults to "dev".
	Dispatch   dispatch.Config
	TeamLimits map[string]accounting.TeamLimit
	Reconcile  cloud.ReconcilerConfig
	// Join is what launched instances' agents get; empty addresses and
	// namespace mean the stack's own.
	Join providers.Join
	// API, when set, serves the user API as it configures it (Listen ""
	// = a free port on 127.0.0.1) at Stack.APIURL; Mount mounts more on it.
	API   *api.Config
	Mount func(*api.Server)
	// Web serves the web view on the user API (API must be set) at
	// Stack.WebURL; nil: none.
	Web *server.WebOptions
	// NodeAuth checks agents that join through the server (`gangway
	// agent` processes); nil refuses them. In-process agents need none.
	NodeAuth *nodeauth.Authority
}

// Stack is a running dev system. Its fields are set by Start and must not
// be changed.
type Stack struct {
	Dir      string
	Redis    *devstack.Redis
	Temporal *devstack.Temporal
	// Clients of the servers, and the Redis view over RedisClient.
	TemporalClient tclient.Client
	RedisClient    *redis.Client
	View           *capacity.View
	// Ledger is the usage ledger the server records to, open on
	// LedgerDSN.
	Ledger    *accounting.Ledger
	LedgerDSN string
	// CheckpointURL names the file:// store every node shares, as shared
	// storage would be in production; Checkpoints is that store.
	CheckpointURL string
	Checkpoints   checkpoint.Store
	// Cloud is nil without Options.Cloud.
	Cloud *Cloud
	// MetricsAddr is the in-process server's /metrics address ("" without
	// one); APIURL its user API's base URL ("" without one), WebURL the
	// web view on it ("" without ServerOptions.Web).
	MetricsAddr string
	APIURL      string
	WebURL      string
	// Host runs Options.HostedNodes; nil without them.
	Host *agent.Host

	log        *slog.Logger
	prefix     string
	events     chan string
	fakeAgents *FakeAgents
	// nodeAuth is the server's authority: in-process agents sign with
	// the node tokens it gives (agent.DirectView).
	nodeAuth *nodeauth.Authority
	closers  []func() // clients, servers and files, closed in reverse by Close

	stop     context.CancelFunc // ends the server and the fake clouds
	done     chan struct{}      // closed when the server stops
	serverMu sync.Mutex
	err      error // why the server stopped early
	wg       sync.WaitGroup

	mu        sync.Mutex
	agents    map[*Agent]bool
	closeOnce sync.Once
}

// Start brings up Redis and Temporal as child processes, connects to them,
// and starts what opts asks for: the in-process server, the fake clouds
// and their agents, and the simulated nodes. ctx bounds only the start-up;
// everything runs until Close. On error nothing is left running.
func Start(ctx context.Context, opts Options) (_ *Stack, err error) {
	s := &Stack{Dir: opts.Dir, log: opts.Log, done: make(chan struct{}), agents: map[*Agent]bool{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.Dir == "" {
		return nil, errors.New("fullstack: Options.Dir is required")
	}
	out := opts.ServerOutput
	if out == nil {
		f, err := os.Create(filepath.Join(s.Dir, "servers.log"))
		if err != nil {
			return nil, fmt.Errorf("server log: %w", err)
		}
		s.onClose(func() { f.Close() })
		out = f
	}
	if s.Redis, err = devstack.StartRedis(ctx, devstack.RedisOptions{Dir: filepath.Join(s.Dir, "redis"), Log: out}); err != nil {
		return nil, err
	}
	s.onClose(func() { _ = s.Redis.Stop() })
	s.Temporal, err = devstack.StartTemporal(ctx, devstack.TemporalOptions{Dir: filepath.Join(s.Dir, "temporal"),
		Headless: opts.Headless, Log: out})
	if err != nil {
		return nil, err
	}
	s.onClose(func() { _ = s.Temporal.Stop() })
	if err := s.connect(ctx, opts); err != nil {
		return nil, err
	}

	if opts.Server != nil {
		s.nodeAuth = opts.Server.NodeAuth
	}
	// The server, the fake clouds' ticks and their agents run until Close.
	runCtx, stop := context.WithCancel(context.Background())
	s.stop = stop
	if opts.Cloud != nil {
		if err := s.startCloud(ctx, runCtx, opts); err != nil {
			return nil, err
		}
	}
	if opts.Supervise != nil {
		s.wg.Go(func() { s.supervise(runCtx, opts.Supervise) })
	}
	if opts.Server != nil {
		if err := s.startServer(ctx, runCtx, *opts.Server); err != nil {
			return nil, err
		}
	} else {
		close(s.done)
	}
	for _, n := range opts.Nodes {
		cfg := opts.Agent
		cfg.Node = n
		if opts.IdleGPUs && cfg.GPU.Source == nil {
			cfg = SimulatedGPUs(cfg)
		}
		s.StartAgent(cfg)
	}
	if len(opts.HostedNodes) > 0 {
		if s.Host, err = s.StartHost(agent.HostConfig{ID: "fullstack", Nodes: opts.HostedNodes, Agent: opts.Agent}); err != nil {
			return nil, err
		}
	}
	if want := len(opts.Nodes) + len(opts.HostedNodes); want > 0 {
		wctx, cancel := context.WithTimeout(ctx, nodesTimeout)
		defer cancel()
		if err := s.WaitForNodes(wctx, want); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// connect dials both servers and opens the ledger and the checkpoint store.
func (s *Stack) connect(ctx context.Context, opts Options) error {
	logger := opts.TemporalLogger
	if logger == nil {
		logger = tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	}
	tc, err := tclient.DialContext(ctx, tclient.Options{HostPort: s.Temporal.Addr, Namespace: s.Temporal.Namespace, Logger: logger})
	if err != nil {
		return fmt.Errorf("temporal at %s: %w", s.Temporal.Addr, err)
	}
	s.TemporalClient = tc
	s.onClose(tc.Close)
	ropts, err := redis.ParseURL(s.Redis.URL)
	if err != nil {
		return fmt.Errorf("redis url: %w", redact.Error(err))
	}
	s.RedisClient = redis.NewClient(ropts)
	s.onClose(func() { _ = s.RedisClient.Close() })
	s.prefix = opts.RedisPrefix
	s.View = capacity.New(s.RedisClient, capacity.Options{Prefix: s.prefix})

	s.LedgerDSN = opts.LedgerDSN
	if s.LedgerDSN == "" {
		s.LedgerDSN = "sqlite:" + filepath.Join(s.Dir, "ledger.db")
	}
	if s.Ledger, err = accounting.Open(ctx, s.LedgerDSN); err != nil {
		return fmt.Errorf("usage ledger: %w", err)
	}
	s.onClose(func() { _ = s.Ledger.Close() })

	s.CheckpointURL = "file://" + filepath.Join(s.Dir, "checkpoints")
	if s.Checkpoints, err = checkpoint.Open(ctx, s.CheckpointURL, checkpoint.Options{CreateDir: true}); err != nil {
		return fmt.Errorf("checkpoint store: %w", err)
	}
	return nil
}

// startCloud builds the cloud with hooks that boot fake instances into
// agents, and ticks its fakes until Close.
func (s *Stack) startCloud(ctx, runCtx context.Context, opts Options) error {
	base := s.agentDefaults(opts.CloudAgent, "cloud")
	s.events = make(chan string, 64)
	s.fakeAgents = NewFakeAgents(s.View, s.TemporalClient, base, s.log, s.events)
	s.fakeAgents.Auth = s.nodeAuth
	c, err := opts.Cloud(ctx, s.fakeAgents.Hooks())
	if err != nil {
		return fmt.Errorf("cloud: %w", err)
	}
	s.Cloud = c
	s.wg.Go(func() { c.RunFakes(runCtx) })
	return nil
}

// startServer runs the server until Close and waits until it serves.
func (s *Stack) startServer(ctx, runCtx context.Context, o ServerOptions) error {
	d := o.Dispatch
	if d.Holder == "" {
		d.Holder = "dev"
	}
	if d.Log == nil {
		d.Log = s.log
	}
	join := o.Join
	if join.TemporalAddress == "" {
		join.TemporalAddress = s.Temporal.Addr
	}
	if join.Namespace == "" {
		join.Namespace = s.Temporal.Namespace
	}
	if join.RedisURL == "" {
		join.RedisURL = s.Redis.URL
	}
	var registry *cloud.Registry
	if s.Cloud != nil {
		registry = s.Cloud.Registry
	}
	var apiOpts *server.APIOptions
	if o.API != nil {
		cfg := *o.API
		if cfg.Listen == "" {
			cfg.Listen = "127.0.0.1:0"
		}
		scheme := "http"
		if cfg.TLS.Cert != "" {
			scheme = "https"
		}
		apiOpts = &server.APIOptions{Config: cfg, Mount: o.Mount,
			Ready: func(addr string) {
				s.APIURL = scheme + "://" + addr
				if o.Web != nil {
					s.WebURL = s.APIURL + server.WebPath
				}
			}}
	}
	ready := make(chan string, 1)
	s.wg.Go(func() {
		defer close(s.done)
		err := server.Run(runCtx, server.Options{
			Temporal: s.TemporalClient, View: s.View, MetricsAddr: "127.0.0.1:0", Log: s.log,
			Dispatch: d, Cloud: registry, Join: join, NodeAuth: o.NodeAuth, Reconcile: o.Reconcile,
			Ledger:      s.Ledger,
			Checkpoints: s.Checkpoints, TeamLimits: o.TeamLimits, Web: o.Web,
			Ready: func(addr string) { ready <- addr }, API: apiOpts,
		})
		if err != nil && runCtx.Err() == nil {
			s.log.Error("server stopped", "error", err)
			s.serverMu.Lock()
			s.err = fmt.Errorf("server stopped: %w", err)
			s.serverMu.Unlock()
		}
	})
	select {
	case s.MetricsAddr = <-ready:
		return nil
	case <-s.done:
		return s.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Prefix is the prefix of the view's Redis keys, for other clients of the
// same view.
func (s *Stack) Prefix() string { return s.prefix }

// Done is closed when the in-process server stops: after Close, or early
// when it fails (Err says why). Without a server it is closed already.
func (s *Stack) Done() <-chan struct{} { return s.done }

// Err is why the in-process server stopped before Close, or nil.
func (s *Stack) Err() error {
	s.serverMu.Lock()
	defer s.serverMu.Unlock()
	return s.err
}

// Events are a line per fake cloud instance booted, noticed or terminated;
// nil without a cloud.
func (s *Stack) Events() <-chan string { return s.events }

// agentDefaults fills what an agent's config leaves unset with the stack's.
func (s *Stack) agentDefaults(cfg agent.Config, dir string) agent.Config {
	if cfg.DataDir == "" {
		cfg.DataDir = filepath.Join(s.Dir, dir)
	}
	if cfg.Checkpoints == nil {
		cfg.Checkpoints = s.Checkpoints
	}
	if cfg.Log == nil {
		cfg.Log = s.log
	}
	return cfg
}

// SimulatedGPUs gives cfg.Node's agent a synthetic GPU source, sampled
// every second, whose GPUs all report 0% utilization: a simulated GPU does
// no work, so a job's idle policy (idle.after) releases it as it would a
// notebook left open. Without a source utilization is unknown and idle
// policies never act.
func SimulatedGPUs(cfg agent.Config) agent.Config {
	src := gpuinfo.NewSynthetic(cfg.Node.GPUs)
	for _, g := range cfg.Node.GPUs {
		src.SetUtilization(g.Index, 0)
	}
	cfg.GPU.Source = src
	if cfg.GPU.SampleInterval <= 0 {
		cfg.GPU.SampleInterval = time.Second
	}
	return cfg
}

// Agent is an in-process agent started by StartAgent.
type Agent struct {
	s      *Stack
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// StartAgent runs an agent for cfg.Node until Stop or Close. DataDir
// defaults to Dir/nodes/<node>, Checkpoints to the stack's store, Log to
// the stack's.
func (s *Stack) StartAgent(cfg agent.Config) *Agent {
	cfg = s.agentDefaults(cfg, filepath.Join("nodes", cfg.Node.ID))
	ag := agent.New(cfg, agent.DirectView{View: s.View, Token: s.nodeAuth.NodeToken(cfg.Node.ID, cfg.Node.Pool)})
	return s.run(func(ctx context.Context) error { return ag.Run(ctx, s.TemporalClient) }, "node", cfg.Node.ID)
}

// run runs an agent (or agent host) until Stop or Close.
func (s *Stack) run(f func(ctx context.Context) error, key, id string) *Agent {
	ctx, cancel := context.WithCancel(context.Background())
	a := &Agent{s: s, cancel: cancel, done: make(chan struct{})}
	s.mu.Lock()
	s.agents[a] = true
	s.mu.Unlock()
	go func() {
		defer close(a.done)
		if a.err = f(ctx); a.err != nil {
			s.log.Error("agent stopped", key, id, "error", a.err)
		}
	}()
	return a
}

// StartHost runs an agent host for cfg.Nodes until Stop or Close.
// Agent.DataDir defaults to Dir/hosted, Checkpoints and Log to the stack's.
func (s *Stack) StartHost(cfg agent.HostConfig) (*agent.Host, error) {
	cfg.Agent = s.agentDefaults(cfg.Agent, "hosted")
	h, err := agent.NewHost(cfg, s.View)
	if err != nil {
		return nil, err
	}
	s.run(func(ctx context.Context) error { return h.Run(ctx, s.TemporalClient) }, "host", cfg.ID)
	return h, nil
}

// Stop stops the agent (killing its tasks) and returns the error it
// stopped with, if any.
func (a *Agent) Stop() error {
	a.cancel()
	<-a.done
	a.s.mu.Lock()
	delete(a.s.agents, a)
	a.s.mu.Unlock()
	return a.err
}

// WaitForNodes waits until the view lists at least want nodes.
func (s *Stack) WaitForNodes(ctx context.Context, want int) error {
	for {
		nodes, err := s.View.FleetNodes(ctx)
		if err == nil && len(nodes) >= want {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("only %d of %d nodes registered: %w", len(nodes), want, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Close stops everything Start started, in reverse order — agents, server,
// fake clouds, clients, Temporal, Redis. No child process outlives it.
func (s *Stack) Close() {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		agents := make([]*Agent, 0, len(s.agents))
		for a := range s.agents {
			agents = append(agents, a)
		}
		s.mu.Unlock()
		for _, a := range agents {
			_ = a.Stop()
		}
		// The server and the fakes stop before the cloud agents and the
		// providers' clients they use; the clients and servers go last.
		if s.stop != nil {
			s.stop()
			s.wg.Wait()
		}
		if s.fakeAgents != nil {
			s.fakeAgents.Close()
		}
		if s.Cloud != nil {
			_ = s.Cloud.Close()
		}
		for i := len(s.closers) - 1; i >= 0; i-- {
			s.closers[i]()
		}
	})
}

func (s *Stack) onClose(f func()) { s.closers = append(s.closers, f) }
