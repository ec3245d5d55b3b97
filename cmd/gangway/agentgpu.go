package main

import (
	"io"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/internal/gpuinfo"
)

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
