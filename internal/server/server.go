package server

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/checkpoint"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/accounting"
	"github.com/gangwayhq/gangway/internal/api"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/cloud"
	"github.com/gangwayhq/gangway/internal/dispatch"
	"github.com/gangwayhq/gangway/internal/health"
	"github.com/gangwayhq/gangway/internal/metrics"
	"github.com/gangwayhq/gangway/internal/nodeauth"
	"github.com/gangwayhq/gangway/internal/web"
	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/providers"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/activities"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// jobWorkerPollers is how many long polls the server's job worker keeps
// for workflow tasks and for activity tasks each: every task of every
// job's workflow comes through one of them. With the SDK's default of two
// the worker could not take them as fast as 50 submits a second bring them
// (`gangway bench --rate 50` on two cores: p99 3.2 s with 2 here and the
// agent host's former 4, 0.28 s with 16 and agent.DefaultHostPollers;
// docs/benchmarks.md, "Pollers"). An idle poll costs a goroutine here and
// a waiting request on Temporal's matching service.
const jobWorkerPollers = 16

// Options configure a server.
type Options struct {
	Temporal tclient.Client
	View     *capacity.View
	// MetricsAddr is where /metrics is served ("" = not served).
	MetricsAddr string
	Dispatch    dispatch.Config
	// Cloud is the providers bursts rent from (nil: none); the burst
	// activities launch through it, the dispatch loop reads its offers
	// (unless Dispatch.Cloud is set) and the reconciler terminates the
	// orphans it finds there. Join is what launched instances' agents get.
	Cloud *cloud.Registry
	Join  providers.Join
	// NodeAuth checks the credentials of agents that join (NodeUpdate) and
	// signs the one-use join tokens of launched instances; nil refuses
	// every agent that joins through the server (in-process agents write
	// the view directly).
	NodeAuth  *nodeauth.Authority
	Reconcile cloud.ReconcilerConfig
	// Ledger records usage (nil: usage is counted in metrics only);
	// TeamLimits are the teams' cloud budgets and price caps, checked
	// against the ledger's month-to-date spend.
	Ledger     Ledger
	TeamLimits map[string]accounting.TeamLimit
	// Checkpoints is the store agents upload to; the workflow asks it for
	// the checkpoint a moved job resumes from (nil: jobs start over).
	Checkpoints checkpoint.Store
	Log         *slog.Logger
	// Ready, if set, is called once the worker polls and metrics listen.
	Ready func(metricsAddr string)
	// API, when set with a listen address, serves the user API.
	API *APIOptions
	// Web, when set, serves the web view at WebPath on the user API: its
	// pages behind the API's authentication, its sign-in form and assets
	// without. Without the API there is none.
	Web *WebOptions
}

// APIOptions are the user API's: its config, the on-demand prices its
// cost reports count spot savings against, and what else it serves.
type APIOptions struct {
	Config         api.Config
	OnDemandPrices map[string]float64
	Validate       []gangway.ValidateOption
	// Mount, if set, mounts more handlers (the web view) on the API's
	// server before it serves.
	Mount func(*api.Server)
	// Ready, if set, gets the address the API listens on.
	Ready func(addr string)
}

// WebPath is where Options.Web serves the web view.
const WebPath = "/ui/"

// WebOptions tune the web view.
type WebOptions struct {
	// SampleEvery is how often the fragmentation chart is sampled
	// (web.FragEvery when not positive); Refresh how often pages refresh
	// themselves (web.DefaultRefresh when zero).
	SampleEvery time.Duration
	Refresh     time.Duration
}

// Ledger is what the server needs of the usage ledger (an
// *accounting.Ledger): RecordUsage writes segments, the team budgets read
// them.
type Ledger interface {
	activities.UsageLedger
	accounting.SegmentSource
}

// Deps are what the server-side activities use. Only View is required.
type Deps struct {
	View        *capacity.View
	Ledger      activities.UsageLedger
	Checkpoints activities.CheckpointStore
	Cloud       *cloud.Registry
	Join        providers.Join
	// NodeAuth checks joining agents (nil: all are refused); a node whose
	// agent was silent NodeGrace may be registered again with a pool's
	// token.
	NodeAuth  *nodeauth.Authority
	NodeGrace time.Duration
	// Metrics; nil ones are created on a private registry.
	Usage       *metrics.Usage
	CloudMetric *metrics.Cloud
	Lifecycle   *metrics.Lifecycle
	Log         *slog.Logger
}

// Register registers JobWorkflow and every server-side activity on w.
func Register(w worker.Registry, d Deps) {
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Ledger == nil {
		d.Ledger = noLedger{}
	}
	if d.Usage == nil {
		d.Usage = metrics.NewUsage(prometheus.NewRegistry())
	}
	if d.CloudMetric == nil {
		d.CloudMetric = metrics.NewCloud(prometheus.NewRegistry())
	}
	if d.Lifecycle == nil {
		d.Lifecycle = metrics.NewLifecycle(prometheus.NewRegistry(), workflows.Causes...)
	}
	w.RegisterWorkflowWithOptions(workflows.JobWorkflow, workflow.RegisterOptions{Name: workflows.WorkflowName})
	(&activities.Activities{Capacity: d.View, Log: d.Log}).Register(w)
	(&activities.Usage{Ledger: d.Ledger, Metrics: d.Usage, Log: d.Log}).Register(w)
	(&activities.Checkpoints{Store: d.Checkpoints}).Register(w)
	(&activities.Runs{Metrics: d.Lifecycle}).Register(w)
	ca := &activities.Cloud{Nodes: d.View, Join: d.Join, Metrics: d.CloudMetric, Log: d.Log}
	if d.Cloud != nil {
		ca.Providers = d.Cloud
	}
	if d.NodeAuth.Signs() {
		ca.JoinTokens = d.NodeAuth
	}
	ca.Register(w)
	w.RegisterWorkflowWithOptions(workflows.NodeUpdateWorkflow, workflow.RegisterOptions{Name: workflows.NodeUpdateWorkflowName})
	(&activities.NodeUpdates{View: d.View, Auth: d.NodeAuth, Grace: d.NodeGrace, Log: d.Log}).Register(w)
}

// configuredTeams are the teams the server's config names (quotas,
// budgets), sorted.
func configuredTeams(o Options) []string {
	teams := map[string]bool{}
	for t := range o.TeamLimits {
		teams[t] = true
	}
	for _, q := range o.Dispatch.Placement.Quotas {
		teams[q.Team] = true
	}
	return slices.Sorted(maps.Keys(teams))
}

// meteredBudgets exports each team's budget and month-to-date cloud spend
// whenever the dispatch loop reads them.
type meteredBudgets struct {
	accounting.Budgets
	m *metrics.Metrics
}

func (b meteredBudgets) TeamPolicies(ctx context.Context, now time.Time) (map[string]placement.TeamPolicy, error) {
	ps, err := b.Budgets.TeamPolicies(ctx, now)
	if err != nil {
		return nil, err
	}
	for team, l := range b.Teams {
		if p, ok := ps[team]; ok && l.MonthlyBudget > 0 {
			b.m.TeamBudget(team, l.MonthlyBudget, l.MonthlyBudget-p.BudgetLeft)
		}
	}
	return ps, nil
}

// noLedger stands in when no ledger is configured: every segment is new,
// so the usage metrics still count.
type noLedger struct{}

func (noLedger) Record(_ context.Context, seg gangway.UsageSegment) (gangway.UsageSegment, bool, error) {
	return seg, true, nil
}

// Run serves until ctx is done.
func Run(ctx context.Context, o Options) error {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg := metrics.NewProcessRegistry()
	m := metrics.New(reg)
	m.Teams(configuredTeams(o))
	reasons := make([]string, len(placement.Reasons))
	for i, r := range placement.Reasons {
		reasons[i] = string(r)
	}
	m.Reasons(reasons)
	o.Dispatch.Metrics = m
	o.Dispatch.Log = log

	w := worker.New(o.Temporal, workflows.TaskQueue, worker.Options{
		MaxConcurrentWorkflowTaskPollers: jobWorkerPollers,
		MaxConcurrentActivityTaskPollers: jobWorkerPollers,
	})
	cloudMetrics := metrics.NewCloud(reg)
	cloudMetrics.Providers(o.Cloud.Names(), cloud.OrphanJobClosed, cloud.OrphanJobUnknown, cloud.OrphanStaleAttempt)
	if len(o.Cloud.Names()) > 0 {
		if offers, err := o.Cloud.Offers(ctx); err == nil {
			cloudMetrics.Offers(offers)
		} else {
			log.Warn("cannot read the cloud offers; their metric series appear with their first instance", "error", err)
		}
	}
	lifecycle := metrics.NewLifecycle(reg, workflows.Causes...)
	o.Dispatch.RunMetrics = lifecycle
	d := Deps{View: o.View, Checkpoints: o.Checkpoints, Cloud: o.Cloud, Join: o.Join, NodeAuth: o.NodeAuth, NodeGrace: o.Dispatch.NodeTTL,
		Usage: metrics.NewUsage(reg), CloudMetric: cloudMetrics, Lifecycle: lifecycle, Log: log}
	if o.Ledger != nil {
		d.Ledger = o.Ledger
		if len(o.TeamLimits) > 0 && o.Dispatch.Budgets == nil {
			b := meteredBudgets{Budgets: accounting.Budgets{Ledger: o.Ledger, Teams: o.TeamLimits}, m: m}
			// The budget gauges exist from the start, not from the first
			// cycle that reads the budgets (only cycles with cloud offers
			// do).
			if _, err := b.TeamPolicies(ctx, time.Now()); err != nil {
				log.Warn("cannot read the teams' cloud spend", "error", err)
			}
			o.Dispatch.Budgets = b
		}
	}
	Register(w, d)
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	defer w.Stop()

	addr := ""
	if o.MetricsAddr != "" {
		var stop func()
		var err error
		checks := []health.Check{health.Temporal(o.Temporal), {Name: "redis", Probe: o.View.Ping}, health.View(o.View)}
		if addr, stop, err = metrics.Serve(o.MetricsAddr, reg, log, checks...); err != nil {
			return err
		}
		defer stop()
	}
	if o.Web != nil && (o.API == nil || o.API.Config.Listen == "") {
		log.Info("no web view: it is served on the user API, which is off")
	} else if o.Web != nil {
		mount, stop, err := webView(ctx, o, log)
		if err != nil {
			return err
		}
		defer stop()
		ao := *o.API
		ao.Mount = mount
		o.API = &ao
	}
	if o.API != nil && o.API.Config.Listen != "" {
		stop, err := serveAPI(ctx, o, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	if o.Ready != nil {
		o.Ready(addr)
	}
	if len(o.Cloud.Names()) > 0 {
		if o.Dispatch.Cloud == nil {
			o.Dispatch.Cloud = o.Cloud
		}
		rc := o.Reconcile
		rc.Nodes, rc.Metrics, rc.Log = o.View, cloudMetrics, log
		rec := cloud.NewReconciler(o.Cloud, cloud.TemporalJobs{Jobs: jobs.New(o.Temporal)}, rc)
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{}, 2)
		go func() {
			defer func() { done <- struct{}{} }()
			_ = rec.Run(rctx)
		}()
		go func() {
			defer func() { done <- struct{}{} }()
			publishOffers(rctx, o.Cloud, o.View, log)
		}()
		defer func() { cancel(); <-done; <-done }()
	}
	if o.Dispatch.Wake == nil {
		o.Dispatch.Wake = o.View.Changes(ctx)
	}
	// A lost view is rebuilt from the job workflows and the durable
	// cordons (dispatch/rebuild.go).
	if o.Dispatch.Holdings == nil {
		o.Dispatch.Holdings = jobs.New(o.Temporal)
	}
	if ns, ok := o.Ledger.(dispatch.NodeStates); ok && o.Dispatch.NodeStates == nil {
		o.Dispatch.NodeStates = ns
	}
	// The leader's own records outlive it (dispatch/learned.go, defrag.go).
	if o.Dispatch.Records == nil {
		o.Dispatch.Records = o.View
	}
	loop := dispatch.New(o.Dispatch, o.View, jobs.New(o.Temporal))
	return loop.Run(ctx)
}

// Offers are published every offersEvery and kept for offersTTL after the
// last publish: a client's fleet check sees a server's cloud pools a few
// seconds after it starts and until a few minutes after it stops.
const (
	offersEvery = 30 * time.Second
	offersTTL   = 5 * time.Minute
)

// publishOffers records the providers' offers in the Redis view, at start
// and every offersEvery, until ctx ends: clients check jobs against the
// cloud pools through them, and price what spot saved. A failed round is
// logged and retried at the next.
func publishOffers(ctx context.Context, offers dispatch.Offers, view *capacity.View, log *slog.Logger) {
	t := time.NewTicker(offersEvery)
	defer t.Stop()
	for {
		list, err := offers.Offers(ctx)
		if err == nil {
			err = view.PublishOffers(ctx, list, offersTTL)
		}
		if err != nil && ctx.Err() == nil {
			log.Warn("publish cloud offers", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// serveAPI starts the user API over the server's own connections; stop
// shuts it down.
func serveAPI(ctx context.Context, o Options, log *slog.Logger) (stop func(), err error) {
	j := jobs.New(o.Temporal)
	ao := api.Options{Client: client.New(j, clientView(o)), Jobs: j, Fleet: o.View,
		OnDemandPrices: o.API.OnDemandPrices, Validate: o.API.Validate, Log: log.With("component", "api")}
	if r, ok := o.Ledger.(api.CostLedger); ok {
		ao.Ledger = r
	}
	srv, tlsConfig, err := api.Setup(ctx, o.API.Config, ao)
	if err != nil {
		return nil, err
	}
	if o.API.Mount != nil {
		o.API.Mount(srv)
	}
	actx, cancel := context.WithCancel(ctx)
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() {
		done <- api.Serve(actx, o.API.Config.Listen, tlsConfig, srv.Handler(), log, func(addr string) { ready <- addr })
	}()
	select {
	case addr := <-ready:
		log.Info("user API listening", "addr", addr, "tls", tlsConfig != nil)
		if o.API.Ready != nil {
			o.API.Ready(addr)
		}
	case err := <-done:
		cancel()
		return nil, err
	}
	return func() { cancel(); <-done }, nil
}

// webView builds the web view over the server's own connections and
// returns a Mount for the user API that mounts it, wrapping o.API.Mount,
// and a stop function that ends its fragmentation sampling.
func webView(ctx context.Context, o Options, log *slog.Logger) (func(*api.Server), func(), error) {
	var ledger accounting.SegmentSource
	if o.Ledger != nil {
		ledger = o.Ledger
	}
	b := web.NewBackend(client.New(jobs.New(o.Temporal), clientView(o)), o.View, ledger, o.Dispatch.NodeTTL, log)
	var srv *api.Server // set by the mount, before the API serves
	h, err := web.New(web.Options{Source: b, Prefix: WebPath, Identity: api.IdentityFrom,
		Verify: func(r *http.Request, token string) error {
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer "+token)
			_, err := srv.Authenticate(r)
			return err
		},
		Quotas: o.Dispatch.Placement.Quotas, Budgets: o.TeamLimits, NodeTTL: b.NodeTTL, Refresh: o.Web.Refresh, Log: log})
	if err != nil {
		return nil, nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Sample(sctx, o.Web.SampleEvery)
	}()
	more := o.API.Mount
	mount := func(s *api.Server) {
		if more != nil {
			more(s)
		}
		srv = s
		for _, p := range web.PublicPaths {
			s.MountPublic(WebPath+p, h)
		}
		s.MountPages(WebPath, h, h.SignedOut)
	}
	return mount, func() { cancel(); <-done }, nil
}

// clientView is the view the server's clients (the user API, the web view)
// use: cordons recorded durably where the ledger can keep them.
func clientView(o Options) client.View {
	if store, ok := o.Ledger.(nodeStateStore); ok {
		return durableStates{View: o.View, store: store}
	}
	return o.View
}

// nodeStateStore keeps the nodes' admin state where the Redis view's loss
// cannot take it (the ledger database).
type nodeStateStore interface {
	SetNodeState(ctx context.Context, nodeID, state string) error
}

// durableStates is the view with every cordon and uncordon recorded in
// the durable store first, so a rebuilt view keeps them, and a removed
// node's cordon forgotten there.
type durableStates struct {
	*capacity.View
	store nodeStateStore
}

func (d durableStates) SetNodeState(ctx context.Context, nodeID, state string) error {
	if err := d.store.SetNodeState(ctx, nodeID, state); err != nil {
		return err
	}
	return d.View.SetNodeState(ctx, nodeID, state)
}

// RemoveNode removes the node from the view, then its cordon from the
// durable store, so that a rebuilt view does not cordon it again.
func (d durableStates) RemoveNode(ctx context.Context, nodeID string) error {
	if err := d.View.RemoveNode(ctx, nodeID); err != nil {
		return err
	}
	return d.store.SetNodeState(ctx, nodeID, gangway.NodeReady)
}
