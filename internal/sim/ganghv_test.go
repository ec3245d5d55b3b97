package sim

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestGangHeavyJobs: the mix is seeded, its classes come in their shares,
// only the small jobs may be preempted, and the arrivals offer the fleet
// about its capacity.
func TestGangHeavyJobs(t *testing.T) {
	nodes := SyntheticFleet(FleetSpec{Nodes: 64, GPUsPerNode: 8}, 1)
	jobs, err := GangHeavyJobs(4000, nodes, 7)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := GangHeavyJobs(4000, nodes, 7)
	if d := cmp.Diff(jobs, again); d != "" {
		t.Fatalf("same seed, different jobs:\n%s", d)
	}
	count := map[[2]int]int{}
	for _, j := range jobs {
		e := j.Job
		count[[2]int{e.Replicas, e.GPUsPerReplica}]++
		if large := e.GPUs() >= LargeJobGPUs; large == e.Preemptible {
			t.Fatalf("%s: %d GPUs, preemptible %v: want the small jobs preemptible, the large not", e.JobID, e.GPUs(), e.Preemptible)
		}
	}
	for _, c := range GangHeavyMix {
		got := float64(count[[2]int{c.Replicas, c.GPUs}]) / float64(len(jobs))
		if math.Abs(got-c.Share) > 0.03 {
			t.Errorf("%d × %d GPUs: %.3f of the jobs, want about %.2f", c.Replicas, c.GPUs, got, c.Share)
		}
	}
	mean, _ := offeredLoad(jobs, float64(GPUCapacityMilli(nodes))/1000)
	if mean < 0.85 || mean > 1.15 {
		t.Errorf("offered load %.2f of GPU capacity over the arrivals, want about 1", mean)
	}
	if _, err := GangHeavyJobs(0, nodes, 7); err == nil {
		t.Error("no jobs: want an error")
	}
}
