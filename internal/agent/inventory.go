package agent

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gangwayhq/gangway"
)

// NodeShape is one group of identical synthetic nodes, "4x8:H100", whose
// first MIGGPUs GPUs may be in MIG mode, each cut into the MIG devices MIG
// lists ("1x8:H100:mig2=3g.40gb/2g.20gb/1g.10gb*2").
type NodeShape struct {
	Count int
	GPUs  int
	Model string
	// MIGGPUs is how many of each node's GPUs (the first ones) are in MIG
	// mode; MIG is the profiles of each one's devices, in order.
	MIGGPUs int
	MIG     []string
}

// ParseFleet parses a comma-separated list of COUNTxGPUS:MODEL groups, e.g.
// "4x8:H100,2x4:A100". A group may end in :mig=LAYOUT (every GPU in MIG
// mode) or :migN=LAYOUT (the first N), LAYOUT being the MIG profiles of
// each such GPU separated by '/', PROFILE*K for K alike: "1x8:H100:mig2=1g.10gb*7"
// is a node of 8 H100s whose GPUs 0 and 1 are each seven 1g.10gb devices.
func ParseFleet(s string) ([]NodeShape, error) {
	var out []NodeShape
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		shape, err := ParseNodeShape(part)
		if err != nil {
			return nil, fmt.Errorf("node group %q: %w (want COUNTxGPUS:MODEL, e.g. 4x8:H100)", part, err)
		}
		out = append(out, shape)
	}
	return out, nil
}

// ParseNodeShape parses one COUNTxGPUS:MODEL[:mig[N]=LAYOUT] group of
// ParseFleet.
func ParseNodeShape(s string) (NodeShape, error) {
	sizes, model, ok := strings.Cut(s, ":")
	if !ok || model == "" {
		return NodeShape{}, fmt.Errorf("missing GPU model")
	}
	model, mig, hasMIG := strings.Cut(model, ":")
	if model == "" {
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
	shape := NodeShape{Count: c, GPUs: g, Model: model}
	if hasMIG {
		if err := shape.parseMIG(mig); err != nil {
			return NodeShape{}, err
		}
	}
	return shape, nil
}

// parseMIG reads "mig=LAYOUT" or "migN=LAYOUT" into s.
func (s *NodeShape) parseMIG(spec string) error {
	key, layout, ok := strings.Cut(spec, "=")
	n, found := strings.CutPrefix(key, "mig")
	if !ok || !found {
		return fmt.Errorf("%q: want mig=PROFILES or migN=PROFILES, e.g. mig2=1g.10gb*7", spec)
	}
	s.MIGGPUs = s.GPUs
	if n != "" {
		k, err := strconv.Atoi(n)
		if err != nil || k < 1 || k > s.GPUs {
			return fmt.Errorf("%q: the MIG GPUs must be 1..%d, got %q", spec, s.GPUs, n)
		}
		s.MIGGPUs = k
	}
	used := 0
	for _, item := range strings.Split(layout, "/") {
		profile, times, repeated := strings.Cut(item, "*")
		k := 1
		if repeated {
			var err error
			if k, err = strconv.Atoi(times); err != nil || k < 1 || k > 7 {
				return fmt.Errorf("%q: a MIG profile repeats 1..7 times, got %q", spec, times)
			}
		}
		p, err := gangway.ParseMIGProfile(profile)
		if err != nil {
			return fmt.Errorf("%q: %w", spec, err)
		}
		for range k {
			s.MIG = append(s.MIG, profile)
		}
		used += k * p.GPUSlices
	}
	if most := gangway.MIGSlicesOf(s.Model); used > most {
		return fmt.Errorf("%q: the MIG devices take %d slices, more than the %d of a %s", spec, used, most, s.Model)
	}
	return nil
}

// FakeNode builds a synthetic node inventory: gpus healthy GPUs of model,
// with 16 CPU cores and 128 GiB of memory per GPU, all on one NVSwitch
// (one NVLink domain per node) and split over two NUMA nodes, as on
// typical 8-GPU servers.
func FakeNode(id, pool, addr string, gpus int, model string) gangway.Node {
	return FakeShapeNode(id, pool, addr, NodeShape{GPUs: gpus, Model: model})
}

// FakeShapeNode is FakeNode for a node of shape s (its Count is ignored):
// its first s.MIGGPUs GPUs are in MIG mode, each registering one slot per
// MIG device of s.MIG, with a MIG UUID, the device's profile and memory,
// no NVLink domain and its parent GPU, as NVML's inventory registers them.
func FakeShapeNode(id, pool, addr string, s NodeShape) gangway.Node {
	gpus := s.GPUs
	n := gangway.Node{ID: id, Addr: addr, Pool: pool, CPUMilli: int64(gpus) * 16000, MemMiB: int64(gpus) * 128 * 1024}
	for i := range gpus {
		uuid, numa := fmt.Sprintf("GPU-fake-%s-%d", id, i), i*2/max(gpus, 1)
		if i >= s.MIGGPUs {
			n.GPUs = append(n.GPUs, gangway.GPU{
				Index: len(n.GPUs), UUID: uuid, Model: s.Model, MemMiB: 80 * 1024, Healthy: true,
				NVLinkDomain: id + "/nvswitch", NUMA: numa,
			})
			continue
		}
		for k, profile := range s.MIG {
			p, _ := gangway.ParseMIGProfile(profile)
			n.GPUs = append(n.GPUs, gangway.GPU{
				Index: len(n.GPUs), UUID: fmt.Sprintf("MIG-fake-%s-%d-%d", id, i, k), Model: s.Model, MemMiB: p.MemGB * 1024,
				Healthy: true, NUMA: numa, MIGProfile: profile, ParentIndex: i, ParentUUID: uuid,
			})
		}
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
			nodes = append(nodes, FakeShapeNode(id, pool, "127.0.0.1", s))
		}
	}
	return nodes
}
