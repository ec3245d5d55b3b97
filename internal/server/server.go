package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/cloud"
	"github.com/gangwayhq/gangway/internal/dispatch"
	"github.com/gangwayhq/gangway/internal/metrics"
	"github.com/gangwayhq/gangway/providers"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/activities"
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
	Log       *slog.Logger
	// Ready, if set, is called once the worker polls and metrics listen.
	Ready func(metricsAddr string)
}

// Register registers JobWorkflow and the server-side activities on w.
func Register(w worker.Registry, view *capacity.View, log *slog.Logger) {
	w.RegisterWorkflowWithOptions(workflows.JobWorkflow, workflow.RegisterOptions{Name: workflows.WorkflowName})
	(&activities.Activities{Capacity: view, Log: log}).Register(w)
}

// Run serves until ctx is done.
func Run(ctx context.Context, o Options) error {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	o.Dispatch.Metrics = metrics.New(reg)
	o.Dispatch.Log = log

	w := worker.New(o.Temporal, workflows.TaskQueue, worker.Options{})
	Register(w, o.View, log)
	cloudMetrics := metrics.NewCloud(reg)
	(&activities.Cloud{Providers: o.Cloud, Nodes: o.View, Join: o.Join, Metrics: cloudMetrics, Log: log}).Register(w)
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	defer w.Stop()

	addr := ""
	if o.MetricsAddr != "" {
		ln, err := net.Listen("tcp", o.MetricsAddr)
		if err != nil {
			return fmt.Errorf("metrics listen on %s: %w", o.MetricsAddr, err)
		}
		addr = ln.Addr().String()
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics server stopped", "error", err)
			}
		}()
		defer srv.Close()
		log.Info("serving metrics", "addr", "http://"+addr+"/metrics")
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
		rec := cloud.NewReconciler(o.Cloud, cloud.TemporalJobs{Client: o.Temporal}, rc)
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = rec.Run(rctx)
		}()
		defer func() { cancel(); <-done }()
	}
	loop := dispatch.New(o.Dispatch, o.View, dispatch.TemporalWorkflows{Client: o.Temporal})
	return loop.Run(ctx)
}
