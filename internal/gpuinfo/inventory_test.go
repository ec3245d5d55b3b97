package gpuinfo

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
)

func mustInventory(t *testing.T, lib Library, nodeID string) (*NVML, Inventory) {
	t.Helper()
	n, err := Open(lib, Options{})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := n.Inventory(nodeID)
	if err != nil {
		t.Fatal(err)
	}
	return n, inv
}

func TestInventoryDGXH100(t *testing.T) {
	srv, _ := dgxH100()
	_, inv := mustInventory(t, srv, "node-a")

	if inv.DriverVersion != "550.54.15" || inv.CUDAVersion != "12.4" {
		t.Errorf("driver %q CUDA %q, want 550.54.15 and 12.4", inv.DriverVersion, inv.CUDAVersion)
	}
	var want []gangway.GPU
	for i, d := range srv.Devices {
		want = append(want, gangway.GPU{Index: i, UUID: d.(*server.Device).UUID, Model: "H100", MemMiB: 81920,
			Healthy: true, NVLinkDomain: "node-a/nvswitch", NUMA: i / 4})
	}
	if diff := cmp.Diff(want, inv.Slots); diff != "" {
		t.Errorf("slots (-want +got):\n%s", diff)
	}
	wantDomains := []Domain{{Name: "node-a/nvswitch", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}, Switched: true}}
	if diff := cmp.Diff(wantDomains, inv.Topology.NVLinkDomains); diff != "" {
		t.Errorf("NVLink domains (-want +got):\n%s", diff)
	}
	for i, row := range inv.Topology.Matrix {
		for j, cell := range row {
			if want := map[bool]string{true: "X", false: "NV18"}[i == j]; cell != want {
				t.Errorf("matrix[%d][%d] = %q, want %q", i, j, cell, want)
			}
		}
	}
	g0, g4 := inv.GPUs[0], inv.GPUs[4]
	if g0.CPUAffinity != "0-55,112-167" || g4.CPUAffinity != "56-111,168-223" {
		t.Errorf("CPU affinity %q and %q, want 0-55,112-167 and 56-111,168-223", g0.CPUAffinity, g4.CPUAffinity)
	}
	if g0.PCIBusID != bus(0x18) || len(g0.NVLinks) != 18 || g0.NVLinks[0].RemoteType != "switch" {
		t.Errorf("GPU 0: bus %s, %d NVLinks (%+v)", g0.PCIBusID, len(g0.NVLinks), g0.NVLinks)
	}
	if len(inv.Warnings) > 0 {
		t.Errorf("warnings: %q", inv.Warnings)
	}
	node := inv.Node("node-a", "onprem", "10.0.0.1", 224000, 2<<20)
	if node.DriverVersion != "550.54.15" || node.CUDAVersion != "12.4" || node.Model() != "H100" || len(node.GPUs) != 8 {
		t.Errorf("node record %+v", node)
	}
}

func TestInventoryPCIe(t *testing.T) {
	tests := map[string]struct {
		devs        func() []*mock.Device
		ancestor    func(i, j int) nvml.GpuTopologyLevel
		wantDomains []Domain
		wantSlots   []gangway.GPU // UUID and Healthy filled in by the test
		wantMatrix  [][]string
	}{
		"L40S without NVLink, NUMA from PCIe distances": {
			devs: func() []*mock.Device {
				var ds []*mock.Device
				for i := range 4 {
					ds = append(ds, handDevice("NVIDIA L40S", "GPU-l40s-"+string(rune('a'+i)), 46068, topo{bus: uint32(0x20 + i), numa: -1}))
				}
				return ds
			},
			ancestor: func(i, j int) nvml.GpuTopologyLevel {
				if i/2 == j/2 {
					return nvml.TOPOLOGY_SINGLE
				}
				return nvml.TOPOLOGY_SYSTEM
			},
			wantSlots: []gangway.GPU{
				{Index: 0, Model: "L40S", MemMiB: 46068, NUMA: 0}, {Index: 1, Model: "L40S", MemMiB: 46068, NUMA: 0},
				{Index: 2, Model: "L40S", MemMiB: 46068, NUMA: 1}, {Index: 3, Model: "L40S", MemMiB: 46068, NUMA: 1},
			},
			wantMatrix: [][]string{{"X", "PIX", "SYS", "SYS"}, {"PIX", "X", "SYS", "SYS"}, {"SYS", "SYS", "X", "PIX"}, {"SYS", "SYS", "PIX", "X"}},
		},
		"A100 PCIe with NVLink bridges in pairs": {
			devs: func() []*mock.Device {
				var ds []*mock.Device
				for i := range 4 {
					peer := uint32(0x30 + i ^ 1)
					ds = append(ds, handDevice("NVIDIA A100 80GB PCIe", "GPU-a100-"+string(rune('a'+i)), 81920, topo{
						bus: uint32(0x30 + i), numa: i / 2,
						links: []link{{peer, nvml.NVLINK_DEVICE_TYPE_GPU}, {peer, nvml.NVLINK_DEVICE_TYPE_GPU}, {peer, nvml.NVLINK_DEVICE_TYPE_GPU}},
					}))
				}
				return ds
			},
			ancestor: func(i, j int) nvml.GpuTopologyLevel {
				if i/2 == j/2 {
					return nvml.TOPOLOGY_HOSTBRIDGE
				}
				return nvml.TOPOLOGY_SYSTEM
			},
			wantDomains: []Domain{{Name: "node-p/nvlink-0", GPUs: []int{0, 1}}, {Name: "node-p/nvlink-2", GPUs: []int{2, 3}}},
			wantSlots: []gangway.GPU{
				{Index: 0, Model: "A100", MemMiB: 81920, NVLinkDomain: "node-p/nvlink-0", NUMA: 0},
				{Index: 1, Model: "A100", MemMiB: 81920, NVLinkDomain: "node-p/nvlink-0", NUMA: 0},
				{Index: 2, Model: "A100", MemMiB: 81920, NVLinkDomain: "node-p/nvlink-2", NUMA: 1},
				{Index: 3, Model: "A100", MemMiB: 81920, NVLinkDomain: "node-p/nvlink-2", NUMA: 1},
			},
			wantMatrix: [][]string{{"X", "NV3", "SYS", "SYS"}, {"NV3", "X", "SYS", "SYS"}, {"SYS", "SYS", "X", "NV3"}, {"SYS", "SYS", "NV3", "X"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			devs := tc.devs()
			setAncestors(devs, tc.ancestor)
			_, inv := mustInventory(t, handLibrary("570.86.15", 12080, devs...), "node-p")
			for i := range tc.wantSlots {
				tc.wantSlots[i].UUID, tc.wantSlots[i].Healthy = inv.GPUs[i].UUID, true
			}
			if diff := cmp.Diff(tc.wantSlots, inv.Slots); diff != "" {
				t.Errorf("slots (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantDomains, inv.Topology.NVLinkDomains); diff != "" {
				t.Errorf("domains (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantMatrix, inv.Topology.Matrix); diff != "" {
				t.Errorf("matrix (-want +got):\n%s", diff)
			}
			if inv.CUDAVersion != "12.8" {
				t.Errorf("CUDA %q, want 12.8", inv.CUDAVersion)
			}
		})
	}
}

// migNode is two H100s on an NVSwitch; GPU 0 is split into two 3g.40gb
// MIG devices, GPU 1 too unless whole1.
func migNode(whole1 bool) []*mock.Device {
	var devs []*mock.Device
	for i := range 2 {
		t := topo{bus: uint32(0x40 + i), numa: 0}
		for range 18 {
			t.links = append(t.links, link{0xa0, nvml.NVLINK_DEVICE_TYPE_SWITCH})
		}
		d := handDevice("NVIDIA H100 80GB HBM3", "GPU-h100-"+string(rune('a'+i)), 81559, t)
		if i == 0 || !whole1 {
			withMIG(d, "NVIDIA H100 80GB HBM3", migSpec{"3g.40gb", 40192, 1, 0}, migSpec{"3g.40gb", 40192, 2, 0})
		}
		devs = append(devs, d)
	}
	setAncestors(devs, func(i, j int) nvml.GpuTopologyLevel { return nvml.TOPOLOGY_NODE })
	return devs
}

func TestInventoryMIG(t *testing.T) {
	_, inv := mustInventory(t, handLibrary("570.86.15", 12080, migNode(false)...), "node-m")
	want := []gangway.GPU{
		{Index: 0, UUID: "MIG-h100-a-1-0", Model: "H100", MemMiB: 40192, Healthy: true, MIGProfile: "3g.40gb", ParentIndex: 0, ParentUUID: "GPU-h100-a"},
		{Index: 1, UUID: "MIG-h100-a-2-0", Model: "H100", MemMiB: 40192, Healthy: true, MIGProfile: "3g.40gb", ParentIndex: 0, ParentUUID: "GPU-h100-a"},
		{Index: 2, UUID: "MIG-h100-b-1-0", Model: "H100", MemMiB: 40192, Healthy: true, MIGProfile: "3g.40gb", ParentIndex: 1, ParentUUID: "GPU-h100-b"},
		{Index: 3, UUID: "MIG-h100-b-2-0", Model: "H100", MemMiB: 40192, Healthy: true, MIGProfile: "3g.40gb", ParentIndex: 1, ParentUUID: "GPU-h100-b"},
	}
	if diff := cmp.Diff(want, inv.Slots); diff != "" {
		t.Errorf("slots (-want +got):\n%s", diff)
	}
	g1 := inv.GPUs[1]
	wantMIG := []MIGDevice{
		{UUID: "MIG-h100-b-1-0", Name: "NVIDIA H100 80GB HBM3 MIG 3g.40gb", Profile: "3g.40gb", MemMiB: 40192, GPUInstance: 1, Slot: 2},
		{UUID: "MIG-h100-b-2-0", Name: "NVIDIA H100 80GB HBM3 MIG 3g.40gb", Profile: "3g.40gb", MemMiB: 40192, GPUInstance: 2, Slot: 3},
	}
	if diff := cmp.Diff(wantMIG, g1.MIGDevices); diff != "" || !g1.MIG || !slices.Equal(g1.Slots, []int{2, 3}) {
		t.Errorf("GPU 1: MIG %v slots %v, devices (-want +got):\n%s", g1.MIG, g1.Slots, diff)
	}
	// The physical GPUs keep their NVLink domain; their MIG devices, which
	// cannot use it, have none.
	if g1.NVLinkDomain != "node-m/nvswitch" {
		t.Errorf("GPU 1 domain %q, want node-m/nvswitch", g1.NVLinkDomain)
	}
	if len(inv.Warnings) > 0 {
		t.Errorf("warnings: %q", inv.Warnings)
	}

	t.Run("one GPU whole, one split", func(t *testing.T) {
		_, inv := mustInventory(t, handLibrary("570.86.15", 12080, migNode(true)...), "node-m")
		// One model: a job asking for the profile takes a MIG device, a
		// whole-GPU job the whole GPU.
		var models, profiles []string
		for _, s := range inv.Slots {
			models, profiles = append(models, s.Model), append(profiles, s.MIGProfile)
		}
		if want := []string{"H100", "H100", "H100"}; !slices.Equal(models, want) {
			t.Errorf("slot models %q, want %q", models, want)
		}
		if want := []string{"3g.40gb", "3g.40gb", ""}; !slices.Equal(profiles, want) {
			t.Errorf("slot MIG profiles %q, want %q", profiles, want)
		}
		if inv.Slots[2].NVLinkDomain != "node-m/nvswitch" {
			t.Errorf("the whole GPU's domain %q, want node-m/nvswitch", inv.Slots[2].NVLinkDomain)
		}
		if len(inv.Warnings) > 0 {
			t.Errorf("warnings: %q", inv.Warnings)
		}
	})
}

// rackNode is one 4-GPU tray of a rack-scale NVLink domain: every tray's
// GPUs report the same fabric cluster and clique.
func rackNode() *mock.Interface {
	fabric := &nvml.GpuFabricInfo{ClusterUuid: [16]uint8{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12},
		CliqueId: 7, State: nvml.GPU_FABRIC_STATE_COMPLETED}
	var devs []*mock.Device
	for i := range 4 {
		t := topo{bus: uint32(0x50 + i), numa: i / 2, fabric: fabric}
		for range 18 {
			t.links = append(t.links, link{0xb0, nvml.NVLINK_DEVICE_TYPE_SWITCH})
		}
		devs = append(devs, handDevice("NVIDIA GB200", "GPU-gb200-"+string(rune('a'+i)), 189471, t))
	}
	setAncestors(devs, func(i, j int) nvml.GpuTopologyLevel { return nvml.TOPOLOGY_NODE })
	return handLibrary("570.86.15", 12080, devs...)
}

func TestInventoryRackScaleFabric(t *testing.T) {
	_, a := mustInventory(t, rackNode(), "tray-0")
	_, b := mustInventory(t, rackNode(), "tray-1")
	const want = "fabric-deadbeef-0102-0304-0506-0708090a0b0c/clique-7"
	for _, inv := range []Inventory{a, b} {
		for _, s := range inv.Slots {
			if s.NVLinkDomain != want {
				t.Errorf("slot %d domain %q, want %q on both trays", s.Index, s.NVLinkDomain, want)
			}
		}
	}
	if d := a.Topology.NVLinkDomains; len(d) != 1 || !d[0].Fabric || !d[0].Switched {
		t.Errorf("domains %+v, want one switched fabric domain", d)
	}
}

// placementNode is what dispatch hands placement for a registered node
// (internal/dispatch/convert.go).
func placementNode(n gangway.Node) placement.Node {
	pn := placement.Node{ID: n.ID, Pool: n.Pool, Model: n.Model(), CapacityType: "on-prem", CPUMilli: n.CPUMilli,
		MemMiB: n.MemMiB, Schedulable: true}
	for _, g := range n.GPUs {
		pn.GPUs = append(pn.GPUs, placement.GPU{Index: g.Index, Model: g.Model, Healthy: g.Healthy, Domain: g.NVLinkDomain, NUMA: g.NUMA, MIG: g.MIGProfile})
	}
	return pn
}

// TestInventoryMeetsPlacement registers inventories read from the mocks
// and checks that the placement engine reads their topology labels as
// meant: an NVSwitch node is one 8-GPU domain, bridged pairs are domains of
// two, a rack-scale domain spans trays, MIG devices go to jobs asking for
// their profile and to no other.
func TestInventoryMeetsPlacement(t *testing.T) {
	dgx, _ := dgxH100()
	pcie := func() Library {
		var devs []*mock.Device
		for i := range 4 {
			peer := uint32(0x30 + i ^ 1)
			devs = append(devs, handDevice("NVIDIA A100 80GB PCIe", "GPU-a100-"+string(rune('a'+i)), 81920, topo{
				bus: uint32(0x30 + i), numa: i / 2, links: []link{{peer, nvml.NVLINK_DEVICE_TYPE_GPU}}}))
		}
		setAncestors(devs, func(i, j int) nvml.GpuTopologyLevel { return nvml.TOPOLOGY_SYSTEM })
		return handLibrary("570.86.15", 12080, devs...)
	}
	libs := []struct {
		id  string
		lib Library
	}{{"node-a", dgx}, {"node-p", pcie()}, {"node-m", handLibrary("570.86.15", 12080, migNode(false)...)},
		{"tray-0", rackNode()}, {"tray-1", rackNode()}}
	snap := placement.Snapshot{Now: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
	for _, l := range libs {
		_, inv := mustInventory(t, l.lib, l.id)
		snap.Nodes = append(snap.Nodes, placementNode(inv.Node(l.id, "onprem", l.id, 256000, 1<<21)))
	}
	nvlink := gangway.Topology{Level: gangway.LevelNVLink, Required: true}
	job := func(id string, replicas, gpus int, model string) gangway.QueueEntry {
		return gangway.QueueEntry{JobID: id, Team: "ml", Replicas: replicas, GPUsPerReplica: gpus, CPUMilli: 1000, MemMiB: 1024,
			GPUModels: []string{model}, Topology: nvlink, SubmittedAt: snap.Now}
	}
	mig := func(id string, replicas int, profile string, topology gangway.Topology) gangway.QueueEntry {
		j := job(id, replicas, 1, "H100")
		j.MIGProfile, j.Topology = profile, topology
		return j
	}
	tests := map[string]struct {
		job       gangway.QueueEntry
		wantNodes []string // nil: not placed
	}{
		"8 GPUs in one NVLink domain: the NVSwitch node":     {job("h100x8", 1, 8, "H100"), []string{"node-a"}},
		"2 × 4 in one domain: the rack spans its two trays":  {job("gb200-2x4", 2, 4, "GB200"), []string{"tray-0", "tray-1"}},
		"2 bridged A100s are one domain":                     {job("a100x2", 1, 2, "A100"), []string{"node-p"}},
		"4 A100s are two domains of two: never in one":       {job("a100x4", 1, 4, "A100"), nil},
		"a MIG job takes a MIG device of its profile":        {mig("mig", 1, "3g.40gb", gangway.Topology{}), []string{"node-m"}},
		"four MIG replicas on one node":                      {mig("mig4", 4, "3g.40gb", gangway.Topology{Level: gangway.LevelNode, Required: true}), []string{"node-m", "node-m", "node-m", "node-m"}},
		"MIG devices share no NVLink: two never in a domain": {mig("mig2", 2, "3g.40gb", nvlink), nil},
		"no MIG device of another profile":                   {mig("mig1g", 1, "1g.10gb", gangway.Topology{}), nil},
		"a whole H100 job never takes a MIG-partitioned GPU": {job("h100x8-2", 2, 8, "H100"), nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			plan := placement.Place(snap, []gangway.QueueEntry{tc.job}, placement.Options{})
			var nodes []string
			for _, a := range plan.Assignments {
				for _, m := range a.Members {
					nodes = append(nodes, m.NodeID)
				}
			}
			slices.Sort(nodes)
			if diff := cmp.Diff(tc.wantNodes, nodes, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("placed on (-want +got):\n%s\nunplaced: %+v", diff, plan.Unplaced)
			}
		})
	}
}

func TestOpenWithoutDriver(t *testing.T) {
	lib := &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
	_, err := Open(lib, Options{})
	if !errors.Is(err, ErrNoDriver) {
		t.Fatalf("Open without a driver: %v, want ErrNoDriver", err)
	}
	// And the real library, on a machine without a driver, says the same.
	if _, err := Open(nvml.New(), Options{}); err != nil && !errors.Is(err, ErrNoDriver) {
		t.Errorf("Open(nvml.New()) on this machine: %v", err)
	}
}

func TestShortModel(t *testing.T) {
	for name, want := range map[string]string{
		"NVIDIA H100 80GB HBM3":      "H100",
		"NVIDIA A100-SXM4-40GB":      "A100",
		"NVIDIA A100 80GB PCIe":      "A100",
		"NVIDIA H200":                "H200",
		"NVIDIA L40S":                "L40S",
		"Tesla V100-SXM2-16GB":       "V100",
		"NVIDIA GeForce RTX 4090":    "RTX-4090",
		"NVIDIA RTX A6000":           "RTX-A6000",
		"NVIDIA GB200":               "GB200",
		"Mock NVIDIA A100-SXM4-40GB": "A100",
		"NVIDIA B200 180GB HBM3e":    "B200",
		"NVIDIA GH200 480GB":         "GH200",
	} {
		if got := ShortModel(name); got != want {
			t.Errorf("ShortModel(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestCPUList(t *testing.T) {
	for _, tc := range []struct {
		words []uint
		want  string
	}{
		{[]uint{0}, ""},
		{[]uint{0b1011}, "0-1,3"},
		{[]uint{1 << 63, 1}, "63-64"},
		{[]uint{^uint(0), ^uint(0)}, "0-127"},
	} {
		if got := cpuList(tc.words); got != tc.want {
			t.Errorf("cpuList(%b) = %q, want %q", tc.words, got, tc.want)
		}
	}
}

func TestXidBlame(t *testing.T) {
	var app []int
	for code := range 200 {
		if AppXid(code) {
			app = append(app, code)
		}
	}
	if want := []int{13, 31, 43, 45, 68, 109}; !slices.Equal(app, want) {
		t.Errorf("application Xids %v, want %v (NVIDIA's device plugin list)", app, want)
	}
	for _, code := range []int{48, 63, 64, 74, 79, 92, 94, 95, 119, 120, 999} {
		if m, b := Xid(code); b != BlameGPU || m == "" {
			t.Errorf("Xid %d: %q blames %s, want the GPU", code, m, b)
		}
	}
}
