package agent

import (
	"fmt"
	"log/slog"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/gpuinfo"
)

// NodeGPUs is what an agent knows of its node's GPUs: the node record to
// register, the inventory behind it, and the source of faults and samples
// (Config.GPU.Source). Close releases the source.
type NodeGPUs struct {
	Node      gangway.Node
	Inventory gpuinfo.Inventory
	Source    GPUSource
	Close     func() error
}

// NodeGPUOptions name the node and say where its GPUs come from: the
// synthetic GPUs of Fake (FakeShapeNode), or NVML's when Fake.GPUs is 0.
type NodeGPUOptions struct {
	NodeID, Pool, Addr string
	Fake               NodeShape
}

// OpenNodeGPUs reads the node's GPUs from lib (or makes synthetic ones)
// and the host's CPU and memory. Without a driver it returns an error
// wrapping gpuinfo.ErrNoDriver.
func OpenNodeGPUs(lib gpuinfo.Library, o NodeGPUOptions, log *slog.Logger) (NodeGPUs, error) {
	if o.Fake.GPUs > 0 {
		node := FakeShapeNode(o.NodeID, o.Pool, o.Addr, o.Fake)
		src := gpuinfo.NewSynthetic(node.GPUs)
		return NodeGPUs{Node: node, Inventory: src.Inventory(), Source: src, Close: func() error { return nil }}, nil
	}
	n, err := gpuinfo.Open(lib, gpuinfo.Options{Log: log})
	if err != nil {
		return NodeGPUs{}, err
	}
	inv, err := n.Inventory(o.NodeID)
	if err != nil {
		_ = n.Close()
		return NodeGPUs{}, fmt.Errorf("GPU inventory: %w", err)
	}
	cpu, mem, err := gpuinfo.HostResources()
	if err != nil {
		_ = n.Close()
		return NodeGPUs{}, err
	}
	for _, w := range inv.Warnings {
		log.Warn("GPU inventory: " + w)
	}
	return NodeGPUs{Node: inv.Node(o.NodeID, o.Pool, o.Addr, cpu, mem), Inventory: inv, Source: n, Close: n.Close}, nil
}
