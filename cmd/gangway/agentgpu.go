package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/internal/config"
	"github.com/gangwayhq/gangway/internal/gpuinfo"
	"github.com/gangwayhq/gangway/internal/metrics"
)

// openAgentGPUs reads the node's GPUs: synthetic ones for --fake-gpus,
// else NVML's. Without --fake-gpus on a machine with no NVIDIA driver it
// fails saying so.
func openAgentGPUs(ac config.AgentConfig, lib gpuinfo.Library, log *slog.Logger) (agent.NodeGPUs, error) {
	o := agent.NodeGPUOptions{NodeID: ac.NodeID, Pool: ac.Pool, Addr: ac.Addr}
	if ac.FakeGPUs != "" {
		gpus, model, err := config.ParseFakeGPUs(ac.FakeGPUs)
		if err != nil {
			return agent.NodeGPUs{}, fmt.Errorf("--fake-gpus: %w", err)
		}
		o.FakeGPUs, o.FakeModel = gpus, model
	}
	g, err := agent.OpenNodeGPUs(lib, o, log)
	if errors.Is(err, gpuinfo.ErrNoDriver) {
		return g, fmt.Errorf("%w; on a machine without NVIDIA GPUs use --fake-gpus 8xH100 for a synthetic inventory", err)
	}
	return g, err
}

// nvmlLibrary is the real NVML, loaded when first used.
func nvmlLibrary() gpuinfo.Library { return nvml.New() }

// printInventory writes what --inventory-only shows: the node record the
// agent would register, and the GPUs and topology behind it.
func printInventory(w io.Writer, g agent.NodeGPUs) error {
	return printJSON(w, struct {
		Node     gangway.Node      `json:"node"`
		GPUs     []gpuinfo.GPUInfo `json:"gpus"`
		Topology gpuinfo.Topology  `json:"topology"`
		Warnings []string          `json:"warnings,omitempty"`
	}{g.Node, g.Inventory.GPUs, g.Inventory.Topology, g.Inventory.Warnings})
}

// agentGPUConfig turns the agent's GPU health and reclaim on with the
// configured periods, exporting per-GPU metrics to reg.
func agentGPUConfig(ac config.AgentConfig, g agent.NodeGPUs, reg prometheus.Registerer) agent.GPUConfig {
	return agent.GPUConfig{Source: g.Source, Metrics: metrics.NewGPU(reg), SampleInterval: ac.SampleInterval.Duration,
		ZombieGrace: ac.ZombieGrace.Duration, IdleReport: ac.IdleReport.Duration}
}
