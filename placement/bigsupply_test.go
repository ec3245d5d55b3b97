package placement

import (
	"math"
	"testing"

	"pgregory.net/rapid"

	"github.com/gangwayhq/gangway"
)

func TestBigSupplyShortfall(t *testing.T) {
	// Two 8-GPU nodes of 64 cores and a 4-GPU one: 20 GPUs free, room
	// for two replicas of the 8-GPU, 32-core class. Its share of the GPU
	// demand sets its need of the 20,000 free milli: tight 8/9 (17,778:
	// no slack), loose 8/27 (5,926: slack 10,074), partial 0.6 (12,000:
	// slack 4,000).
	mix := func(w8 float64) []WorkloadClass {
		return []WorkloadClass{
			{GPUs: 8, Milli: Whole, CPUMilli: 32000, Weight: w8},
			{GPUs: 1, Milli: Whole, CPUMilli: 1000, Weight: 1 - w8},
		}
	}
	tight, loose, partial := mix(0.5), mix(0.05), mix(3.0/19)
	g8 := func(id string) Node { return scNode(id, "G2", 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000) }
	nodes := []Node{g8("a"), g8("b"), scNode("c", "G2", 1000, 1000, 1000, 1000)}
	own := scWhole(8)
	own.CPUMilli = 32000
	smaller := scWhole(8) // 8 GPUs, 1 core: another class's shape
	tests := []struct {
		name     string
		workload []WorkloadClass
		job      gangway.QueueEntry
		node     int
		want     float64
	}{
		{"a GPU taken from a node with room for the tight class loses the room", tight, scWhole(1), 0, 8000},
		{"a share of one too", tight, scShare(300), 0, 8000},
		{"a node without room for it loses nothing", tight, scWhole(1), 2, 0},
		{"a replica of the class's own shape serves it", tight, own, 0, 0},
		{"another 8-GPU shape takes the room", tight, smaller, 0, 8000},
		{"CPU taken below the class's need loses the room", tight, scCPUJob(40000), 0, 8000},
		{"CPU the class can spare loses nothing", tight, scCPUJob(30000), 0, 0},
		{"within the slack nothing is lost", loose, scWhole(1), 0, 0},
		{"past the slack, what exceeds it", partial, scWhole(1), 0, 4000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := scView(nodes, tt.workload)
			var ms modelSupply
			ms.prepare(v)
			take := 0
			if tt.job.GPUsPerReplica > 0 {
				take = tt.job.GPUsPerReplica
			}
			got := ms.big.shortfall(v, tt.node, &tt.job, take, ms.total)
			if math.Abs(got-tt.want) > 1e-6 {
				t.Errorf("shortfall = %g, want %g", got, tt.want)
			}
		})
	}
	t.Run("gangway keeps the room: the GPU goes to the small node", func(t *testing.T) {
		if got := scPlace(t, &Gangway{}, nodes, tight, scWhole(1)); got[0].Node != "c" {
			t.Errorf("placed on %q, want c", got[0].Node)
		}
	})
}

// TestMergeBig: past bigMaxClasses classes, each dropped class's share
// goes to a kept class of its GPU count that asks at least its CPU, the
// least such; with none, the one asking the most.
func TestMergeBig(t *testing.T) {
	var cs []bigClass
	for k := range bigMaxClasses {
		cs = append(cs, bigClass{bigShape: bigShape{gpus: 2, cpu: int64(k+1) * 10000}, share: 0.05})
	}
	cs = append(cs,
		bigClass{bigShape: bigShape{gpus: 2, cpu: 25000}, share: 0.01},  // to the 30-core class
		bigClass{bigShape: bigShape{gpus: 2, cpu: 900000}, share: 0.01}, // above all: to the largest
		bigClass{bigShape: bigShape{gpus: 4, cpu: 1000}, share: 0.01},   // no 4-GPU class kept: dropped
	)
	got := mergeBig(cs)
	if len(got) != bigMaxClasses {
		t.Fatalf("%d classes kept, want %d", len(got), bigMaxClasses)
	}
	shares := map[int64]float64{}
	for _, c := range got {
		shares[c.cpu] = c.share
	}
	if math.Abs(shares[30000]-0.06) > 1e-12 || math.Abs(shares[160000]-0.06) > 1e-12 || math.Abs(shares[20000]-0.05) > 1e-12 {
		t.Errorf("shares after the merge: %v", shares)
	}
}

// TestBigSupplyFollowsTheView: after any run of placements the supply
// followed incrementally is what counting the view afresh gives.
func TestBigSupplyFollowsTheView(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var nodes []Node
		for i := range rapid.IntRange(1, 8).Draw(t, "nodes") {
			free := make([]int, rapid.SampledFrom([]int{2, 4, 8}).Draw(t, "gpus"))
			for g := range free {
				free[g] = Whole
			}
			nodes = append(nodes, scCPU(scNode("n"+itoa(i), "G2", free...), rapid.Int64Range(8, 128).Draw(t, "cores")*1000))
		}
		var jobs []gangway.QueueEntry
		for range rapid.IntRange(1, 20).Draw(t, "jobs") {
			j := scWhole(rapid.SampledFrom([]int{0, 1, 2, 4, 8}).Draw(t, "jobGPUs"))
			j.CPUMilli = rapid.Int64Range(1, 64).Draw(t, "jobCores") * 1000
			if j.GPUsPerReplica == 1 && rapid.Bool().Draw(t, "share") {
				j.GPUMilli = rapid.IntRange(100, 900).Draw(t, "milli")
			}
			jobs = append(jobs, j)
		}
		workload := WorkloadFromJobs(jobs)
		sc := &Gangway{}
		se := NewSession(Snapshot{Nodes: nodes}, Options{Scorer: sc, Workload: workload, Seed: 7})
		for k, j := range jobs {
			j.JobID = "j" + itoa(k)
			se.Place([]gangway.QueueEntry{j})
		}
		v := se.View()
		if !sc.models.big.active() {
			return
		}
		sc.models.sync(v)
		var fresh modelSupply
		fresh.prepare(v)
		for k := range fresh.big.classes {
			if got, want := sc.models.big.supply[k], fresh.big.supply[k]; got != want {
				t.Fatalf("class %+v: supply followed %g, counted afresh %g", fresh.big.classes[k], got, want)
			}
		}
		if sc.models.total != fresh.total {
			t.Fatalf("free total followed %g, counted afresh %g", sc.models.total, fresh.total)
		}
	})
}
