package dispatch

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/placement"
)

// TestPlacementSnapshotShares: a GPU that runs shares is held by the sum
// of the shares the view records; a GPU held whole stays whole.
func TestPlacementSnapshotShares(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	node := gangway.Node{ID: "n1", Pool: "onprem", GPUs: []gangway.GPU{
		{Index: 0, Model: "H100", Healthy: true}, {Index: 1, Model: "H100", Healthy: true}, {Index: 2, Model: "H100", Healthy: true}}}
	s := capacity.Snapshot{Now: now,
		Nodes: []gangway.NodeStatus{{Node: node, State: gangway.NodeReady, LastHeartbeat: now,
			Allocated: map[int]gangway.JobID{1: "c"}, Shared: map[int]map[gangway.JobID]int{0: {"a": 300, "b": 400}}}},
		Allocations: []gangway.Assignment{
			{JobID: "a", Members: []gangway.Member{{NodeID: "n1", GPUs: []int{0}, Milli: 300}}},
			{JobID: "b", Members: []gangway.Member{{NodeID: "n1", GPUs: []int{0}, Milli: 400}}},
			{JobID: "c", Members: []gangway.Member{{NodeID: "n1", GPUs: []int{1}}}},
		}}
	ps := placementSnapshot(s, time.Minute, nil)
	var used []int
	for _, g := range ps.Nodes[0].GPUs {
		used = append(used, g.UsedMilli)
	}
	if diff := cmp.Diff([]int{700, placement.Whole, 0}, used); diff != "" {
		t.Errorf("used milli per GPU (-want +got):\n%s", diff)
	}
}

// TestPlacementSnapshotMIG: a MIG device reaches placement with its
// profile, used while a job holds it.
func TestPlacementSnapshotMIG(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	node := gangway.Node{ID: "m1", Pool: "onprem", GPUs: []gangway.GPU{
		{Index: 0, Model: "H100", Healthy: true, MIGProfile: "3g.40gb", ParentUUID: "GPU-a"},
		{Index: 1, Model: "H100", Healthy: true, MIGProfile: "3g.40gb", ParentUUID: "GPU-a"},
		{Index: 2, Model: "H100", Healthy: true}}}
	s := capacity.Snapshot{Now: now,
		Nodes: []gangway.NodeStatus{{Node: node, State: gangway.NodeReady, LastHeartbeat: now, Allocated: map[int]gangway.JobID{1: "m"}}},
		Allocations: []gangway.Assignment{
			{JobID: "m", Members: []gangway.Member{{NodeID: "m1", GPUs: []int{1}, MIG: "3g.40gb", MIGMilli: 428}}},
		}}
	ps := placementSnapshot(s, time.Minute, nil)
	type gpu struct {
		MIG  string
		Used int
	}
	var got []gpu
	for _, g := range ps.Nodes[0].GPUs {
		got = append(got, gpu{g.MIG, g.UsedMilli})
	}
	if diff := cmp.Diff([]gpu{{"3g.40gb", 0}, {"3g.40gb", placement.Whole}, {"", 0}}, got); diff != "" {
		t.Errorf("GPUs (-want +got):\n%s", diff)
	}
}

// TestMeasure: the report counts free GPUs on schedulable nodes only; a
// node silent past the TTL is left out. Fragmentation is measured against
// the stored typical workload, the queue's mix only while there is none.
func TestMeasure(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	node := func(id string, heartbeat time.Time, held ...int) gangway.NodeStatus {
		n := gangway.NodeStatus{Node: gangway.Node{ID: id, Pool: "onprem"}, State: gangway.NodeReady, LastHeartbeat: heartbeat,
			Allocated: map[int]gangway.JobID{}}
		for i := range 4 {
			n.Node.GPUs = append(n.Node.GPUs, gangway.GPU{Index: i, Model: "H100", Healthy: true})
		}
		for _, i := range held {
			n.Allocated[i] = "j"
		}
		return n
	}
	s := capacity.Snapshot{Now: now, Nodes: []gangway.NodeStatus{node("n1", now, 0), node("n2", now.Add(-time.Hour))},
		Queue: []gangway.QueueEntry{{JobID: "q", Replicas: 1, GPUsPerReplica: 4}}}
	r := Measure(s, nil, time.Minute)
	if r.FreeGPUs != 3 || r.Largest[string(gangway.LevelNode)] != 3 {
		t.Errorf("free %d, largest per node %d; want 3 and 3 (n2 is silent)", r.FreeGPUs, r.Largest[string(gangway.LevelNode)])
	}
	if r.Rate != 1 {
		t.Errorf("rate %v, want 1: no 4-GPU job fits in 3 free GPUs", r.Rate)
	}
	ones := []placement.WorkloadClass{{GPUs: 1, Milli: placement.Whole, Weight: 1}}
	if r := Measure(s, ones, time.Minute); r.Rate != 0 {
		t.Errorf("rate %v against a workload of 1-GPU jobs, want 0: the queue's 4-GPU job is not the typical one", r.Rate)
	}
	fours := []placement.WorkloadClass{{GPUs: 4, Milli: placement.Whole, Weight: 1}}
	s.Queue = nil
	if r := Measure(s, fours, time.Minute); r.Rate != 1 {
		t.Errorf("rate %v against a workload of 4-GPU jobs with nothing queued, want 1", r.Rate)
	}
	if r := Measure(s, nil, time.Minute); r.Rate != 0 {
		t.Errorf("rate %v with no workload and nothing queued, want 0", r.Rate)
	}
}

// TestPriceCloudNodes: a cloud node is priced by the offer it was rented
// from, the dearest of its pool's matching offers, else of any pool's;
// on-prem nodes, priced nodes and nodes no offer matches keep their price.
func TestPriceCloudNodes(t *testing.T) {
	a100 := func(id, pool string, kind gangway.CapacityType, price float64) placement.Node {
		return placement.Node{ID: id, Pool: pool, Model: "A100", CapacityType: kind, PricePerGPUHour: price,
			GPUs: make([]placement.GPU, 8)}
	}
	offer := func(pool string, kind gangway.CapacityType, perHour float64) gangway.Offer {
		return gangway.Offer{Pool: pool, GPUModel: "A100", GPUsPerInstance: 8, CapacityType: kind, PricePerHour: perHour}
	}
	nodes := []placement.Node{
		a100("own-pool", "spot-a", gangway.CapacitySpot, 0),
		a100("pool-gone", "spot-old", gangway.CapacitySpot, 0),
		a100("on-demand", "od", gangway.CapacityOnDemand, 0),
		a100("priced", "spot-a", gangway.CapacitySpot, 5),
		a100("onprem", "onprem", gangway.CapacityOnPrem, 1.5),
		{ID: "other-model", Pool: "spot-a", Model: "H100", CapacityType: gangway.CapacitySpot, GPUs: make([]placement.GPU, 8)},
	}
	priceCloudNodes(nodes, []gangway.Offer{
		offer("spot-a", gangway.CapacitySpot, 8), offer("spot-a", gangway.CapacitySpot, 16), // two zones
		offer("spot-b", gangway.CapacitySpot, 24), offer("od", gangway.CapacityOnDemand, 32),
	})
	got := map[string]float64{}
	for _, n := range nodes {
		got[n.ID] = n.PricePerGPUHour
	}
	want := map[string]float64{"own-pool": 2, "pool-gone": 3, "on-demand": 4, "priced": 5, "onprem": 1.5, "other-model": 0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("prices per GPU-hour (-want +got):\n%s", diff)
	}
}
