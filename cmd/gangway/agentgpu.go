package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/internal/gpuinfo"
	"github.com/gangwayhq/gangway/internal/metrics"
)

// agentGPUs is what `gangway agent` knows of its node's GPUs: the node
// record to register, the inventory behind it, and the source of faults
// and samples.
type agentGPUs struct {
	node   gangway.Node
	inv    gpuinfo.Inventory
	source agent.GPUSource
	close  func() error
}

// openAgentGPUs reads the node's GPUs: synthetic ones for --fake-gpus,
// else NVML's. Without --fake-gpus on a machine with no NVIDIA driver it
// fails saying so.
func openAgentGPUs(ac AgentConfig, lib gpuinfo.Library, log *slog.Logger) (agentGPUs, error) {
	if ac.FakeGPUs != "" {
		gpus, model, err := parseFakeGPUs(ac.FakeGPUs)
		if err != nil {
			return agentGPUs{}, fmt.Errorf("--fake-gpus: %w", err)
		}
		node := agent.FakeNode(ac.NodeID, ac.Pool, ac.Addr, gpus, model)
		src := gpuinfo.NewSynthetic(node.GPUs)
		return agentGPUs{node: node, inv: src.Inventory(), source: src, close: func() error { return nil }}, nil
	}
	n, err := gpuinfo.Open(lib, gpuinfo.Options{Log: log})
	if errors.Is(err, gpuinfo.ErrNoDriver) {
		return agentGPUs{}, fmt.Errorf("%w; on a machine without NVIDIA GPUs use --fake-gpus 8xH100 for a synthetic inventory", err)
	}
	if err != nil {
		return agentGPUs{}, err
	}
	inv, err := n.Inventory(ac.NodeID)
	if err != nil {
		_ = n.Close()
		return agentGPUs{}, fmt.Errorf("GPU inventory: %w", err)
	}
	cpu, mem, err := gpuinfo.HostResources()
	if err != nil {
		_ = n.Close()
		return agentGPUs{}, err
	}
	for _, w := range inv.Warnings {
		log.Warn("GPU inventory: " + w)
	}
	return agentGPUs{node: inv.Node(ac.NodeID, ac.Pool, ac.Addr, cpu, mem), inv: inv, source: n, close: n.Close}, nil
}

// nvmlLibrary is the real NVML, loaded when first used.
func nvmlLibrary() gpuinfo.Library { return nvml.New() }

// printInventory writes what --inventory-only shows: the node record the
// agent would register, and the GPUs and topology behind it.
func printInventory(w io.Writer, g agentGPUs) error {
	return printJSON(w, struct {
		Node     gangway.Node      `json:"node"`
		GPUs     []gpuinfo.GPUInfo `json:"gpus"`
		Topology gpuinfo.Topology  `json:"topology"`
		Warnings []string          `json:"warnings,omitempty"`
	}{g.node, g.inv.GPUs, g.inv.Topology, g.inv.Warnings})
}

// agentGPUConfig turns the agent's GPU health and reclaim on with the
// configured periods, exporting per-GPU metrics to reg.
func agentGPUConfig(ac AgentConfig, g agentGPUs, reg prometheus.Registerer) agent.GPUConfig {
	return agent.GPUConfig{Source: g.source, Metrics: metrics.NewGPU(reg), SampleInterval: ac.SampleInterval.Duration,
		ZombieGrace: ac.ZombieGrace.Duration, IdleReport: ac.IdleReport.Duration}
}

// newAgentRegistry is the agent's metrics registry.
func newAgentRegistry() *prometheus.Registry { return prometheus.NewRegistry() }

// serveAgentMetrics serves reg's /metrics on addr until ctx ends ("" = off).
func serveAgentMetrics(ctx context.Context, addr string, reg *prometheus.Registry, log *slog.Logger) error {
	if addr == "" {
		return nil
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("agent metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("agent metrics server stopped", "error", err)
		}
	}()
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	log.Info("serving GPU metrics", "addr", "http://"+ln.Addr().String()+"/metrics")
	return nil
}
