package agent

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gangwayhq/gangway"
)

// NodeShape is one group of identical synthetic nodes, "4x8:H100".
type NodeShape struct {
	Count int
	GPUs  int
	Model string
}

// ParseFleet parses a comma-separated list of COUNTxGPUS:MODEL groups, e.g.
// "4x8:H100,2x4:A100".
func ParseFleet(s string) ([]NodeShape, error) {
	var out []NodeShape
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		shape, err := parseShape(part)
		if err != nil {
			return nil, fmt.Errorf("node group %q: %w (want COUNTxGPUS:MODEL, e.g. 4x8:H100)", part, err)
		}
		out = append(out, shape)
	}
	return out, nil
}

func parseShape(s string) (NodeShape, error) {
	sizes, model, ok := strings.Cut(s, ":")
	if !ok || model == "" {
		return NodeShape{}, fmt.Errorf("missing GPU model")
	}
	count, gpus, ok := strings.Cut(sizes, "x")
	if !ok {
		return NodeShape{}, fmt.Errorf("missing 'x'")
	}
	c, err := strconv.Atoi(count)
	if err != nil || c < 1 || c > 10000 {
		return NodeShape{}, fmt.Errorf("node count must be 1..10000, got %q", count)
	}
	g, err := strconv.Atoi(gpus)
	if err != nil || g < 1 || g > 8 {
		return NodeShape{}, fmt.Errorf("GPUs per node must be 1..8, got %q", gpus)
	}
	return NodeShape{Count: c, GPUs: g, Model: model}, nil
}

// FakeNode builds a synthetic node inventory: gpus healthy GPUs of model,
// with 16 CPU cores and 128 GiB of memory per GPU, all on one NVSwitch
// (one NVLink domain per node) and split over two NUMA nodes, as on
// typical 8-GPU servers.
func FakeNode(id, pool, addr string, gpus int, model string) gangway.Node {
	n := gangway.Node{ID: id, Addr: addr, Pool: pool, CPUMilli: int64(gpus) * 16000, MemMiB: int64(gpus) * 128 * 1024}
	for i := range gpus {
		n.GPUs = append(n.GPUs, gangway.GPU{
			Index: i, UUID: fmt.Sprintf("GPU-fake-%s-%d", id, i), Model: model, MemMiB: 80 * 1024, Healthy: true,
			NVLinkDomain: id + "/nvswitch", NUMA: i * 2 / max(gpus, 1),
		})
	}
	return n
}

// InRacks labels nodes, in order, with racks of perRack nodes each:
// rack-0, rack-1, ... A simulated fleet uses it so that a gang kept
// within a rack (gang.topology.level: rack) has racks to keep to.
func InRacks(nodes []gangway.Node, perRack int) []gangway.Node {
	for i := range nodes {
		nodes[i].Rack = fmt.Sprintf("rack-%d", i/max(perRack, 1))
	}
	return nodes
}

// FakeFleet expands shapes into nodes named prefix-0, prefix-1, ...
func FakeFleet(prefix, pool string, shapes []NodeShape) []gangway.Node {
	var nodes []gangway.Node
	for _, s := range shapes {
		for range s.Count {
			id := fmt.Sprintf("%s-%d", prefix, len(nodes))
			nodes = append(nodes, FakeNode(id, pool, "127.0.0.1", s.GPUs, s.Model))
		}
	}
	return nodes
}
