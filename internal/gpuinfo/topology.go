package gpuinfo

import (
	"fmt"
	"strconv"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// switchVertex stands for every NVSwitch of the node: they form one
// fabric, so all GPUs linked to any of them share one domain.
const switchVertex = -1

// topology reads NVLinks, fabric membership and PCIe distances, and labels
// each GPU with its NVLink domain (and NUMA node where NVML had none).
func (n *NVML) topology(nodeID string) Topology {
	byBus := map[string]int{}
	for i, g := range n.gpus {
		if g.info.PCIBusID != "" {
			byBus[g.info.PCIBusID] = i
		}
	}
	uf := newUnionFind(len(n.gpus))
	fabric := make([]string, len(n.gpus))
	switched := make([]bool, len(n.gpus))
	for i, g := range n.gpus {
		g.info.NVLinks = readLinks(g.h, byBus)
		for _, l := range g.info.NVLinks {
			switch j, isGPU := byBus[l.Remote]; {
			case l.RemoteType == "gpu" && isGPU:
				uf.union(i, j)
			case l.RemoteType == "switch" || (l.RemoteType == "unknown" && !isGPU):
				uf.union(i, switchVertex)
				switched[i] = true
			}
		}
		fabric[i] = fabricDomain(g.h)
	}

	var topo Topology
	groups := map[int]*Domain{}
	for i := range n.gpus {
		root := uf.find(i)
		d := groups[root]
		if d == nil {
			d = &Domain{}
			groups[root] = d
		}
		d.GPUs = append(d.GPUs, i)
		d.Switched = d.Switched || switched[i]
		if fabric[i] != "" {
			d.Name, d.Fabric = fabric[i], true
		}
	}
	for i := range n.gpus {
		d := groups[uf.find(i)]
		if d.GPUs[0] != i {
			continue // named when its first GPU came by
		}
		switch {
		case d.Fabric:
		case d.Switched:
			d.Name = nodeID + "/nvswitch"
		case len(d.GPUs) > 1:
			d.Name = nodeID + "/nvlink-" + strconv.Itoa(i)
		default:
			continue // alone: no domain
		}
		for _, j := range d.GPUs {
			n.gpus[j].info.NVLinkDomain = d.Name
		}
		topo.NVLinkDomains = append(topo.NVLinkDomains, *d)
	}

	levels := n.ancestors()
	n.fillNUMA(levels)
	topo.Matrix = n.matrix(levels, uf)
	return topo
}

// readLinks lists a GPU's active NVLinks.
func readLinks(h nvml.Device, byBus map[string]int) []NVLink {
	var links []NVLink
	for l := range nvml.NVLINK_MAX_LINKS {
		st, ret := h.GetNvLinkState(l)
		if ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_FUNCTION_NOT_FOUND {
			break // no NVLink on this GPU
		}
		if ret != nvml.SUCCESS || st != nvml.FEATURE_ENABLED {
			continue
		}
		link := NVLink{Link: l, RemoteType: "unknown"}
		if p, ret := h.GetNvLinkRemotePciInfo(l); ret == nvml.SUCCESS {
			link.Remote = busID(p)
		}
		if t, ret := h.GetNvLinkRemoteDeviceType(l); ret == nvml.SUCCESS {
			switch t {
			case nvml.NVLINK_DEVICE_TYPE_GPU:
				link.RemoteType = "gpu"
			case nvml.NVLINK_DEVICE_TYPE_SWITCH:
				link.RemoteType = "switch"
			}
		} else if _, isGPU := byBus[link.Remote]; isGPU {
			link.RemoteType = "gpu"
		}
		links = append(links, link)
	}
	return links
}

// fabricDomain names the rack-scale NVLink domain a GPU belongs to (its
// fabric's cluster UUID and clique ID, the same on every node of the
// domain), or "" when it is in none.
func fabricDomain(h nvml.Device) string {
	fi, ret := h.GetGpuFabricInfo()
	if ret != nvml.SUCCESS || fi.State != nvml.GPU_FABRIC_STATE_COMPLETED || fi.Status != uint32(nvml.SUCCESS) {
		return ""
	}
	if fi.ClusterUuid == [16]uint8{} {
		return ""
	}
	u := fi.ClusterUuid
	return fmt.Sprintf("fabric-%x-%x-%x-%x-%x/clique-%d", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16], fi.CliqueId)
}

// ancestors is GetTopologyCommonAncestor for every pair (-1 where NVML
// could not say).
func (n *NVML) ancestors() [][]nvml.GpuTopologyLevel {
	out := make([][]nvml.GpuTopologyLevel, len(n.gpus))
	for i := range out {
		out[i] = make([]nvml.GpuTopologyLevel, len(n.gpus))
	}
	for i := range n.gpus {
		for j := i + 1; j < len(n.gpus); j++ {
			l, ret := n.gpus[i].h.GetTopologyCommonAncestor(n.gpus[j].h)
			if ret != nvml.SUCCESS {
				l = -1
			}
			out[i][j], out[j][i] = l, l
		}
	}
	return out
}

// fillNUMA gives every GPU a NUMA node when NVML reported none for any:
// GPUs whose closest common ancestor is within one CPU socket (NODE or
// nearer) share one, numbered in GPU order.
func (n *NVML) fillNUMA(levels [][]nvml.GpuTopologyLevel) {
	for _, g := range n.gpus {
		if g.info.NUMA >= 0 {
			return
		}
	}
	uf := newUnionFind(len(n.gpus))
	for i := range n.gpus {
		for j := i + 1; j < len(n.gpus); j++ {
			if l := levels[i][j]; l >= 0 && l <= nvml.TOPOLOGY_NODE {
				uf.union(i, j)
			}
		}
	}
	ids := map[int]int{}
	for i, g := range n.gpus {
		r := uf.find(i)
		if _, seen := ids[r]; !seen {
			ids[r] = len(ids)
		}
		g.info.NUMA = ids[r]
	}
}

// matrix is nvidia-smi topo -m's GPU matrix.
func (n *NVML) matrix(levels [][]nvml.GpuTopologyLevel, uf *unionFind) [][]string {
	m := make([][]string, len(n.gpus))
	for i, gi := range n.gpus {
		m[i] = make([]string, len(n.gpus))
		for j, gj := range n.gpus {
			switch {
			case i == j:
				m[i][j] = "X"
			case uf.find(i) == uf.find(j):
				m[i][j] = "NV" + strconv.Itoa(nvlinksBetween(gi, gj))
			default:
				m[i][j] = pcieLevel(levels[i][j])
			}
		}
	}
	return m
}

// nvlinksBetween counts the links from a to b: direct ones, or, through
// NVSwitches, the fewer of the two GPUs' switch links.
func nvlinksBetween(a, b *physGPU) int {
	direct, sa, sb := 0, 0, 0
	for _, l := range a.info.NVLinks {
		if l.RemoteType == "gpu" && l.Remote == b.info.PCIBusID {
			direct++
		}
		if l.RemoteType != "gpu" {
			sa++
		}
	}
	for _, l := range b.info.NVLinks {
		if l.RemoteType != "gpu" {
			sb++
		}
	}
	if direct > 0 {
		return direct
	}
	return min(sa, sb)
}

func pcieLevel(l nvml.GpuTopologyLevel) string {
	switch {
	case l < 0:
		return "?"
	case l <= nvml.TOPOLOGY_SINGLE:
		return "PIX"
	case l <= nvml.TOPOLOGY_MULTIPLE:
		return "PXB"
	case l <= nvml.TOPOLOGY_HOSTBRIDGE:
		return "PHB"
	case l <= nvml.TOPOLOGY_NODE:
		return "NODE"
	}
	return "SYS"
}

// unionFind is a disjoint-set forest over GPU indices plus switchVertex.
type unionFind struct{ parent map[int]int }

func newUnionFind(n int) *unionFind {
	u := &unionFind{parent: make(map[int]int, n+1)}
	for i := range n {
		u.parent[i] = i
	}
	u.parent[switchVertex] = switchVertex
	return u
}

func (u *unionFind) find(x int) int {
	for u.parent[x] != x {
		u.parent[x] = u.parent[u.parent[x]]
		x = u.parent[x]
	}
	return x
}

// union joins two sets, keeping the smaller root so that a set's root is
// its lowest member (switchVertex when it has one).
func (u *unionFind) union(a, b int) {
	ra, rb := u.find(a), u.find(b)
	if ra == rb {
		return
	}
	if ra < rb {
		u.parent[rb] = ra
	} else {
		u.parent[ra] = rb
	}
}
