package server

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/checkpoint"
	"github.com/gangwayhq/gangway/internal/accounting"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/cloud"
	"github.com/gangwayhq/gangway/internal/dispatch"
	"github.com/gangwayhq/gangway/internal/metrics"
	"github.com/gangwayhq/gangway/providers"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/activities"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

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
	Cloud     *cloud.Registry
	Join      providers.Join
	Reconcile cloud.ReconcilerConfig
	// Ledger records usage (nil: usage is counted in metrics only);
	// TeamLimits are the teams' cloud budgets and price caps, checked
	// against the ledger's month-to-date spend.
	Ledger     *accounting.Ledger
	TeamLimits map[string]accounting.TeamLimit
	// Checkpoints is the store agents upload to; the workflow asks it for
	// the checkpoint a moved job resumes from (nil: jobs start over).
	Checkpoints checkpoint.Store
	Log         *slog.Logger
	// Ready, if set, is called once the worker polls and metrics listen.
	Ready func(metricsAddr string)
}

// Deps are what the server-side activities use. Only View is required.
type Deps struct {
	View        *capacity.View
	Ledger      activities.UsageLedger
	Checkpoints activities.CheckpointStore
	Cloud       *cloud.Registry
	Join        providers.Join
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
		d.Lifecycle = metrics.NewLifecycle(prometheus.NewRegistry())
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
	ca.Register(w)
}

// noLedger stands in when no ledger is configured: every segment is new,
// so the usage metrics still count.
type noLedger struct{}

func (noLedger) Record(context.Context, gangway.UsageSegment) (bool, error) { return true, nil }

// Run serves until ctx is done.
func Run(ctx context.Context, o Options) error {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg := metrics.NewProcessRegistry()
	o.Dispatch.Metrics = metrics.New(reg)
	o.Dispatch.Log = log

	w := worker.New(o.Temporal, workflows.TaskQueue, worker.Options{})
	cloudMetrics := metrics.NewCloud(reg)
	d := Deps{View: o.View, Checkpoints: o.Checkpoints, Cloud: o.Cloud, Join: o.Join,
		Usage: metrics.NewUsage(reg), CloudMetric: cloudMetrics, Lifecycle: metrics.NewLifecycle(reg), Log: log}
	if o.Ledger != nil {
		d.Ledger = o.Ledger
		if len(o.TeamLimits) > 0 && o.Dispatch.Budgets == nil {
			o.Dispatch.Budgets = accounting.Budgets{Ledger: o.Ledger, Teams: o.TeamLimits}
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
		if addr, stop, err = metrics.Serve(o.MetricsAddr, reg, log); err != nil {
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
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = rec.Run(rctx)
		}()
		defer func() { cancel(); <-done }()
	}
	loop := dispatch.New(o.Dispatch, o.View, routed{Workflows: jobs.New(o.Temporal), nodes: o.View})
	return loop.Run(ctx)
}
