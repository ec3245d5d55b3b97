package metrics

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

	"github.com/gangwayhq/gangway/internal/health"
)

// NewProcessRegistry is a registry with the Go runtime's and the process's
// collectors on it, the base every Gangway process exports.
func NewProcessRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Serve serves reg's /metrics on addr ("host:port"; port 0 picks one), and
// /healthz and /readyz with checks (health.Handlers), and returns the
// address it listens on and a stop function that shuts the server down,
// giving requests in flight two seconds.
func Serve(addr string, reg *prometheus.Registry, log *slog.Logger, checks ...health.Check) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("metrics listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	healthz, readyz := health.Handlers(checks)
	mux.Handle("/healthz", healthz)
	mux.Handle("/readyz", readyz)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "error", err)
		}
	}()
	bound := ln.Addr().String()
	log.Info("serving metrics", "addr", "http://"+bound+"/metrics")
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}
	return bound, stop, nil
}
