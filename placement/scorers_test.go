package placement

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"

	"github.com/gangwayhq/gangway"
)

// scNode is a schedulable node of model with one GPU per free value (free
// milli-GPU of that GPU), 64 CPUs and 256 GiB, nothing else in use.
func scNode(id, model string, free ...int) Node {
	n := Node{ID: id, Addr: id + ":29500", Pool: "onprem", Model: model, CPUMilli: 64000, MemMiB: 256 << 10, Schedulable: true}
	for g, f := range free {
		n.GPUs = append(n.GPUs, GPU{Index: g, Model: model, Healthy: true, UsedMilli: Whole - f})
	}
	return n
}

// scCPU sets the node's free CPU.
func scCPU(n Node, milli int64) Node { n.CPUMilli = milli; return n }

// scDomains puts the node's GPUs in NVLink domains, one name per GPU.
func scDomains(n Node, domains ...string) Node {
	n.GPUs = slices.Clone(n.GPUs)
	for g, d := range domains {
		n.GPUs[g].Domain = d
	}
	return n
}

func scWhole(gpus int) gangway.QueueEntry {
	return gangway.QueueEntry{JobID: "j", Replicas: 1, GPUsPerReplica: gpus, CPUMilli: 1000, MemMiB: 1024}
}

func scShare(milli int) gangway.QueueEntry {
	return gangway.QueueEntry{JobID: "j", Replicas: 1, GPUsPerReplica: 1, GPUMilli: milli, CPUMilli: 1000, MemMiB: 1024}
}

func scCPUJob(milli int64) gangway.QueueEntry {
	return gangway.QueueEntry{JobID: "j", Replicas: 1, CPUMilli: milli, MemMiB: 1024}
}

// scHalfHalf is a workload of 50% one-GPU and 50% half-GPU tasks.
var scHalfHalf = []WorkloadClass{
	{GPUs: 1, Milli: Whole, CPUMilli: 1000, Weight: 0.5},
	{GPUs: 1, Milli: 500, CPUMilli: 1000, Weight: 0.5},
}

// scView is a view of nodes against workload with a fixed seed.
func scView(nodes []Node, workload []WorkloadClass) *View {
	s := Snapshot{Nodes: nodes}
	return newView(&s, workload, rand.New(rand.NewPCG(1, 2)))
}

// placed is where a session put the one replica of a job.
type placed struct {
	Node string
	GPUs []int
}

// scPlace places each job in turn with scorer sc and reports where each
// went ("" when it did not fit).
func scPlace(t *testing.T, sc Scorer, nodes []Node, workload []WorkloadClass, jobs ...gangway.QueueEntry) []placed {
	t.Helper()
	se := NewSession(Snapshot{Nodes: nodes}, Options{Scorer: sc, Workload: workload, Seed: 7})
	var out []placed
	for k, j := range jobs {
		j.JobID = "j" + itoa(k)
		plan := se.Place([]gangway.QueueEntry{j})
		if len(plan.Assignments) == 0 {
			out = append(out, placed{})
			continue
		}
		m := plan.Assignments[0].Members[0]
		out = append(out, placed{Node: m.NodeID, GPUs: m.GPUs})
	}
	return out
}

func TestScorerPrefers(t *testing.T) {
	tests := []struct {
		name     string
		scorer   Scorer
		nodes    []Node
		workload []WorkloadClass
		jobs     []gangway.QueueEntry
		want     []placed
	}{
		{
			name:   "first-fit takes the lowest index",
			scorer: FirstFit{},
			nodes:  []Node{scNode("a", "T4", 1000, 1000), scNode("b", "T4", 1000, 0)},
			jobs:   []gangway.QueueEntry{scWhole(1)},
			want:   []placed{{"a", []int{0}}},
		},
		{
			name:   "best-fit picks the node with the least left",
			scorer: &BestFit{},
			nodes: []Node{
				scNode("empty", "G2", 1000, 1000, 1000, 1000),
				scNode("tight", "G2", 1000, 0, 0, 0),
				scNode("half", "G2", 1000, 1000, 0, 0),
			},
			jobs: []gangway.QueueEntry{scWhole(1)},
			want: []placed{{"tight", []int{0}}},
		},
		{
			name:   "best-fit puts a share on the tightest GPU of the chosen node",
			scorer: &BestFit{},
			nodes:  []Node{scNode("a", "G2", 1000, 600, 300, 0)},
			jobs:   []gangway.QueueEntry{scShare(250)},
			want:   []placed{{"a", []int{2}}},
		},
		{
			// Workload: 50% 1-GPU, 50% ½-GPU tasks. A ½-GPU share on
			//   a [1000 1000] GPU0 → [500 1000]: F 0 → 250 (1-GPU class: 500 below 1000), −ΔF = −250
			//   b [500 1000]  GPU0 → [0 1000]:   F 250 → 0,                                 −ΔF = +250
			//   b [500 1000]  GPU1 → [500 500]:  F 250 → 500 (1-GPU class no longer fits), −ΔF = −250
			// so FGD fills b's half-used GPU.
			name:     "fgd fills the half-used GPU",
			scorer:   &FGD{},
			nodes:    []Node{scNode("a", "V100", 1000, 1000), scNode("b", "V100", 500, 1000)},
			workload: scHalfHalf,
			jobs:     []gangway.QueueEntry{scShare(500)},
			want:     []placed{{"b", []int{0}}},
		},
		{
			// A 1-GPU task: on a ([1000 1000] → [0 1000]) F stays 0; on b
			// ([500 1000] → [500 0]) F stays 250 (the 1-GPU class no longer
			// fits: ½·500; the ½ class fits: 0). ΔF is 0 on both: the tie
			// goes to the first node.
			name:     "fgd ties go to the first node",
			scorer:   &FGD{},
			nodes:    []Node{scNode("a", "V100", 1000, 1000), scNode("b", "V100", 500, 1000)},
			workload: scHalfHalf,
			jobs:     []gangway.QueueEntry{scWhole(1)},
			want:     []placed{{"a", []int{0}}},
		},
		{
			name:     "fgd keeps model-constrained capacity whole",
			scorer:   &FGD{},
			nodes:    []Node{scNode("a100", "A100", 1000, 1000), scNode("t4", "T4", 1000, 1000)},
			workload: []WorkloadClass{{GPUs: 2, Milli: Whole, Models: []string{"A100"}, Weight: 0.5}, {GPUs: 1, Milli: Whole, Weight: 0.5}},
			// On a100 a 1-GPU task leaves 1000 the 2×A100 class cannot use:
			// F 0 → ½·1000, −ΔF = −500. On t4 that class has no access, so
			// all free GPU is fragmented for it: F ½·2000 → ½·1000, −ΔF = +500.
			jobs: []gangway.QueueEntry{scWhole(1)},
			want: []placed{{"t4", []int{0}}},
		},
		{
			// Workload: 1-GPU tasks with 4 CPUs, i.e. 4 milli-CPU per
			// milli-GPU. A CPU-only task of 14 CPUs leaves FGD indifferent
			// (both nodes still fit the class: ΔF 0, tie to "lean"), but on
			// "lean" (20 CPUs) it leaves 6 CPUs for 2 GPUs: 500 milli-GPU
			// stranded, −0.3·500 = −150 → int(100·σ(−0.15)) = 46 < 50.
			name:     "gangway steers CPU-heavy work to CPU-rich nodes",
			scorer:   &Gangway{},
			nodes:    []Node{scCPU(scNode("lean", "G2", 1000, 1000), 20000), scNode("rich", "G2", 1000, 1000)},
			workload: []WorkloadClass{{GPUs: 1, Milli: Whole, CPUMilli: 4000, Weight: 1}},
			jobs:     []gangway.QueueEntry{scCPUJob(14000)},
			want:     []placed{{"rich", nil}},
		},
		{
			name:     "fgd leaves that CPU-heavy task on the first node",
			scorer:   &FGD{},
			nodes:    []Node{scCPU(scNode("lean", "G2", 1000, 1000), 20000), scNode("rich", "G2", 1000, 1000)},
			workload: []WorkloadClass{{GPUs: 1, Milli: Whole, CPUMilli: 4000, Weight: 1}},
			jobs:     []gangway.QueueEntry{scCPUJob(14000)},
			want:     []placed{{"lean", nil}},
		},
		{
			name:   "topology fills a partly used NVLink domain before a free one",
			scorer: TopologyLocality{},
			nodes: []Node{
				scDomains(scNode("free", "H100", 1000, 1000, 1000, 1000), "f", "f", "f", "f"),
				scDomains(scNode("partly", "H100", 0, 0, 1000, 1000, 1000, 1000), "p0", "p0", "p0", "p0", "p1", "p1"),
			},
			jobs: []gangway.QueueEntry{scWhole(2)},
			want: []placed{{"partly", []int{2, 3}}},
		},
		{
			name:   "gangway keeps a gang in one NVLink domain",
			scorer: &Gangway{},
			nodes: []Node{
				scDomains(scNode("split", "H100", 1000, 0, 1000, 0), "s0", "s0", "s1", "s1"),
				scDomains(scNode("whole", "H100", 1000, 1000, 0, 0), "w0", "w0", "w1", "w1"),
			},
			workload: []WorkloadClass{{GPUs: 2, Milli: Whole, Weight: 1}},
			jobs:     []gangway.QueueEntry{{JobID: "g", Replicas: 1, GPUsPerReplica: 2, CPUMilli: 1000, MemMiB: 1024}},
			want:     []placed{{"whole", []int{0, 1}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := scPlace(t, tt.scorer, tt.nodes, tt.workload, tt.jobs...)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("placements (-want +got):\n%s", diff)
			}
		})
	}
}

// TestScorerArtifactScores checks node scores against values worked out
// from the artifact's formulas (the baselines' are in placement/baselines).
func TestScorerArtifactScores(t *testing.T) {
	tests := []struct {
		name      string
		score     func(v *View, i int, j *gangway.QueueEntry) int64
		node      Node
		job       gangway.QueueEntry
		wantScore int64
	}{
		// 100·(1 − ½·(64000−8000)/128000 − ½·(8000−1000)/8000) = 34.375.
		{"best-fit", bestFitScore, scNode("n", "G2", 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000),
			gangway.QueueEntry{Replicas: 1, GPUsPerReplica: 1, CPUMilli: 8000}, 34},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := scView([]Node{tt.node}, nil)
			if got := tt.score(v, 0, &tt.job); got != tt.wantScore {
				t.Errorf("score = %d, want %d", got, tt.wantScore)
			}
		})
	}
}

func TestFragNodeFragmentation(t *testing.T) {
	tests := []struct {
		name     string
		node     Node
		workload []WorkloadClass
		wantFrag float64
	}{
		{
			// 1-GPU class fits (GPU 0): the 500 and 0 below 1000 are
			// fragmented, ½·500; the ½ class fits and nothing is below 500.
			name: "1000/500/0 against half 1-GPU, half ½-GPU", node: scNode("n", "V100", 1000, 500, 0),
			workload: scHalfHalf, wantFrag: 250,
		},
		{
			// Neither class fits at all: all 600 free for both.
			name: "300/300 against half 1-GPU, half ½-GPU", node: scNode("n", "V100", 300, 300),
			workload: scHalfHalf, wantFrag: 600,
		},
		{
			name: "an idle node", node: scNode("n", "V100", 1000, 1000),
			workload: scHalfHalf, wantFrag: 0,
		},
		{
			name: "a full node", node: scNode("n", "V100", 0, 0),
			workload: scHalfHalf, wantFrag: 0,
		},
		{
			name: "CPU short", node: scCPU(scNode("n", "V100", 1000), 1000),
			workload: []WorkloadClass{{GPUs: 1, Milli: Whole, CPUMilli: 2000, Weight: 1}}, wantFrag: 1000,
		},
		{
			name: "memory short", node: scNode("n", "V100", 1000),
			workload: []WorkloadClass{{GPUs: 1, Milli: Whole, MemMiB: 1 << 20, Weight: 1}}, wantFrag: 1000,
		},
		{
			name: "model not allowed", node: scNode("n", "V100", 1000, 400),
			workload: []WorkloadClass{{GPUs: 1, Milli: 300, Models: []string{"A100"}, Weight: 1}}, wantFrag: 1400,
		},
		{
			// As the artifact counts it, a CPU-only class sees every free GPU
			// as fragmented: ⅕·1400; the 1-GPU class fits: ⅘·400.
			name: "CPU-only class", node: scNode("n", "V100", 1000, 400),
			workload: []WorkloadClass{{Weight: 0.2, CPUMilli: 1000}, {GPUs: 1, Milli: Whole, Weight: 0.8}}, wantFrag: 600,
		},
		{
			name: "a 2-GPU class with one whole GPU", node: scNode("n", "V100", 1000, 700),
			workload: []WorkloadClass{{GPUs: 2, Milli: Whole, Weight: 1}}, wantFrag: 1700,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := scView([]Node{tt.node}, tt.workload)
			if got := NodeFragmentation(v, 0); math.Abs(got-tt.wantFrag) > 1e-9 {
				t.Errorf("NodeFragmentation = %v, want %v", got, tt.wantFrag)
			}
			var m FragMeter
			if got := m.Node(v, 0); math.Abs(got-tt.wantFrag) > 1e-9 {
				t.Errorf("FragMeter.Node = %v, want %v", got, tt.wantFrag)
			}
		})
	}
}

func TestFragClusterSkipsUnschedulable(t *testing.T) {
	cordoned := scNode("c", "V100", 300, 300)
	cordoned.Schedulable = false
	v := scView([]Node{scNode("a", "V100", 1000, 500, 0), scNode("b", "V100", 300, 300), cordoned}, scHalfHalf)
	frag, free := ClusterFragmentation(v)
	if diff := cmp.Diff([2]float64{250 + 600, 1500 + 600}, [2]float64{frag, free}); diff != "" {
		t.Errorf("(frag, free) (-want +got):\n%s", diff)
	}
}

// scGenState draws a small fleet, a workload and a job.
func scGenState(t *rapid.T) ([]Node, []WorkloadClass, gangway.QueueEntry) {
	models := []string{"A", "B"}
	levels := []int{0, 50, 100, 250, 300, 500, 700, 750, 1000, 1000, 1000}
	nodes := make([]Node, rapid.IntRange(1, 6).Draw(t, "nodes"))
	for i := range nodes {
		g := rapid.IntRange(0, 8).Draw(t, "gpus")
		if rapid.IntRange(0, 9).Draw(t, "big") == 0 {
			g = rapid.IntRange(fragKeyGPUs-1, fragKeyGPUs+3).Draw(t, "bigGPUs")
		}
		free := make([]int, g)
		for k := range free {
			free[k] = rapid.SampledFrom(levels).Draw(t, "free")
		}
		n := scNode("n"+itoa(i), rapid.SampledFrom(models).Draw(t, "model"), free...)
		n.CPUMilli = rapid.Int64Range(0, 16).Draw(t, "cpu") * 1000
		n.MemMiB = rapid.Int64Range(0, 8).Draw(t, "mem") * 1024
		nodes[i] = n
	}
	workload := make([]WorkloadClass, rapid.IntRange(1, 5).Draw(t, "classes"))
	for k := range workload {
		w := WorkloadClass{Weight: rapid.Float64Range(0.01, 1).Draw(t, "weight"),
			CPUMilli: rapid.Int64Range(0, 8).Draw(t, "wcpu") * 1000}
		switch rapid.IntRange(0, 2).Draw(t, "kind") {
		case 0:
		case 1:
			w.GPUs, w.Milli = 1, rapid.SampledFrom([]int{100, 250, 300, 500, 800}).Draw(t, "milli")
		default:
			w.GPUs, w.Milli = rapid.IntRange(1, 4).Draw(t, "wgpus"), Whole
		}
		if rapid.Bool().Draw(t, "wmem") {
			w.MemMiB = rapid.Int64Range(1, 8).Draw(t, "wmemMiB") * 1024
		}
		if rapid.IntRange(0, 3).Draw(t, "constrained") == 0 {
			w.Models = []string{rapid.SampledFrom(models).Draw(t, "wmodel")}
		}
		workload[k] = w
	}
	j := gangway.QueueEntry{JobID: "j", Replicas: 1, CPUMilli: rapid.Int64Range(0, 4).Draw(t, "jcpu") * 1000,
		MemMiB: rapid.Int64Range(0, 2).Draw(t, "jmem") * 1024}
	switch rapid.IntRange(0, 2).Draw(t, "jkind") {
	case 0:
	case 1:
		j.GPUsPerReplica, j.GPUMilli = 1, rapid.SampledFrom([]int{50, 250, 500}).Draw(t, "jmilli")
	default:
		j.GPUsPerReplica = rapid.IntRange(1, 3).Draw(t, "jgpus")
	}
	return nodes, workload, j
}

// scCandidates lists every way one replica of j fits on node i, built
// here rather than by the engine: every GPU a share fits on, the first
// free GPUs for whole GPUs.
func scCandidates(v *View, i int, j *gangway.QueueEntry) []Candidate {
	if v.cpu[i] < j.CPUMilli || v.mem[i] < j.MemMiB {
		return nil
	}
	switch {
	case j.GPUsPerReplica == 0:
		return []Candidate{{Node: i, Milli: Whole}}
	case j.Share():
		var out []Candidate
		for g, f := range v.free[i] {
			if f >= j.GPUMilli {
				out = append(out, Candidate{Node: i, GPUs: []int{g}, Milli: j.GPUMilli})
			}
		}
		return out
	}
	var gpus []int
	for g, f := range v.free[i] {
		if f == Whole && len(gpus) < j.GPUsPerReplica {
			gpus = append(gpus, g)
		}
	}
	if len(gpus) < j.GPUsPerReplica {
		return nil
	}
	return []Candidate{{Node: i, GPUs: gpus, Milli: Whole}}
}

// scRefDelta is F_before − F_after computed by the plain kernel.
func scRefDelta(v *View, c Candidate, j *gangway.QueueEntry) float64 {
	i := c.Node
	after := slices.Clone(v.free[i])
	for _, g := range c.GPUs {
		after[g] -= c.Milli
	}
	model := v.nodes[i].Model
	return FragmentationOf(v.free[i], v.cpu[i], v.mem[i], model, v.workload) -
		FragmentationOf(after, v.cpu[i]-j.CPUMilli, v.mem[i]-j.MemMiB, model, v.workload)
}

// TestFragMemoizedFGDMatchesKernel checks the cached, memoized FGD against
// the plain kernel, also after the view changes without the engine saying
// so (inside a gang transaction), and FragMeter against NodeFragmentation.
func TestFragMemoizedFGDMatchesKernel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nodes, workload, j := scGenState(t)
		v := scView(nodes, workload)
		exact, artifact := &FGD{Exact: true}, &FGD{}
		exact.Prepare(v)
		var meter FragMeter
		for step := range 4 {
			var all []Candidate
			for i := range v.nodes {
				all = append(all, scCandidates(v, i, &j)...)
			}
			for _, c := range all {
				want := scRefDelta(v, c, &j)
				if got := exact.Score(v, c, &j); math.Abs(got-want) > 1e-6*max(1, math.Abs(want)) {
					t.Fatalf("step %d, %+v: FGD = %v, kernel ΔF = %v", step, c, got, want)
				}
				if got, want := artifact.Score(v, c, &j), fgdScale(want); got != want {
					t.Fatalf("step %d, %+v: artifact FGD = %v, want %v", step, c, got, want)
				}
			}
			for i := range v.nodes {
				if got, want := meter.Node(v, i), NodeFragmentation(v, i); math.Abs(got-want) > 1e-6*max(1, want) {
					t.Fatalf("step %d: FragMeter.Node(%d) = %v, NodeFragmentation = %v", step, i, got, want)
				}
			}
			if len(all) == 0 {
				return
			}
			// Take one candidate, telling the scorer only every other time.
			c := all[rapid.IntRange(0, len(all)-1).Draw(t, "take")]
			c.GPUs = slices.Clone(c.GPUs)
			v.take(c, j.CPUMilli, j.MemMiB)
			if step%2 == 1 {
				exact.Changed(v, c.Node)
			}
		}
	})
}

func TestScorerByName(t *testing.T) {
	for _, name := range ScorerNames() {
		sc, err := ScorerByName(name)
		if err != nil || sc.Name() != name {
			t.Errorf("ScorerByName(%q) = %v, %v", name, sc, err)
		}
	}
	if _, err := ScorerByName("random"); !errors.Is(err, ErrUnknownScorer) {
		t.Errorf("ScorerByName(random): err = %v, want ErrUnknownScorer (baselines live in placement/baselines)", err)
	}
}

// scOpenbLike is a fleet shaped like openb (8-GPU, 2-GPU, 4-GPU and 1-GPU
// nodes of several models), partly filled at random, and its workload.
func scOpenbLike(seed uint64) ([]Node, []WorkloadClass) {
	rnd := rand.New(rand.NewPCG(seed, 1))
	shapes := []struct {
		n, gpus int
		model   string
		cpu     int64
	}{{550, 8, "G2", 96000}, {390, 2, "T4", 104000}, {130, 2, "P100", 16000}, {40, 8, "G3", 128000},
		{45, 4, "V100M16", 32000}, {30, 8, "V100M32", 96000}, {20, 1, "V100M16", 8000}}
	levels := []int{0, 0, 190, 350, 530, 540, 680, 1000, 1000, 1000, 1000, 1000}
	var nodes []Node
	for _, s := range shapes {
		for range s.n {
			free := make([]int, s.gpus)
			for g := range free {
				free[g] = levels[rnd.IntN(len(levels))]
			}
			n := scNode(fmt.Sprintf("n%04d", len(nodes)), s.model, free...)
			n.CPUMilli = s.cpu
			n.UsedCPUMilli = rnd.Int64N(s.cpu / 2)
			nodes = append(nodes, n)
		}
	}
	var workload []WorkloadClass
	for k, m := range []int{1000, 810, 470, 320, 650, 230, 460, 160, 590, 220, 550, 110} {
		for _, cpu := range []int64{3152, 8000, 11300} {
			workload = append(workload, WorkloadClass{GPUs: 1, Milli: m, CPUMilli: cpu, Weight: 1 / float64(k+2)})
		}
	}
	workload = append(workload,
		WorkloadClass{CPUMilli: 12500, Weight: 0.5}, WorkloadClass{GPUs: 8, Milli: Whole, CPUMilli: 64000, Weight: 0.05},
		WorkloadClass{GPUs: 2, Milli: Whole, CPUMilli: 16000, Weight: 0.02}, WorkloadClass{GPUs: 4, Milli: Whole, CPUMilli: 32000, Weight: 0.02})
	total := 0.0
	for _, w := range workload {
		total += w.Weight
	}
	for k := range workload {
		workload[k].Weight /= total
	}
	return nodes, workload
}

// BenchmarkFGDScore scores every candidate of a ½-GPU share and of a 1-GPU
// task across an openb-sized fleet per iteration (fixed seed), with the
// per-node cache invalidated for one node per iteration as a placement
// would.
func BenchmarkFGDScore(b *testing.B) {
	nodes, workload := scOpenbLike(42)
	v := scView(nodes, workload)
	jobs := []gangway.QueueEntry{scShare(470), scWhole(1)}
	var cands [][]Candidate
	for k := range jobs {
		var all []Candidate
		for i := range v.nodes {
			all = append(all, scCandidates(v, i, &jobs[k])...)
		}
		cands = append(cands, all)
	}
	for _, tc := range []struct {
		name   string
		scorer Scorer
	}{{"fgd", &FGD{}}, {"gangway", &Gangway{}}} {
		b.Run(tc.name, func(b *testing.B) {
			tc.scorer.(Preparer).Prepare(v)
			n := 0
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				for k := range jobs {
					for _, c := range cands[k] {
						tc.scorer.Score(v, c, &jobs[k])
					}
					n += len(cands[k])
				}
				tc.scorer.(Committer).Changed(v, i%len(v.nodes))
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "candidates/s")
		})
	}
}

func TestGangwayModelShortfall(t *testing.T) {
	// Half the workload's GPU demand runs only on T4; the fleet has 2 T4
	// and 6 G2 GPUs free, 8000 milli in all: T4's constrained need is
	// 0.5 × 8000 = 4000 > its 2000 free, so T4 has no slack.
	tight := []WorkloadClass{
		{GPUs: 1, Milli: Whole, CPUMilli: 1000, Models: []string{"T4"}, Weight: 0.5},
		{GPUs: 1, Milli: Whole, CPUMilli: 1000, Weight: 0.5},
	}
	// A tenth on T4: need 800 of its 2000 free, slack 1200.
	loose := []WorkloadClass{
		{GPUs: 1, Milli: Whole, CPUMilli: 1000, Models: []string{"T4"}, Weight: 0.1},
		{GPUs: 1, Milli: Whole, CPUMilli: 1000, Weight: 0.9},
	}
	nodes := []Node{scNode("t4", "T4", 1000, 1000), scNode("g2", "G2", 1000, 1000, 1000, 1000, 1000, 1000)}
	t4Only := scWhole(1)
	t4Only.GPUModels = []string{"T4"}
	share := scShare(500)
	tests := []struct {
		name     string
		workload []WorkloadClass
		job      gangway.QueueEntry
		node     int
		want     float64
	}{
		{"an unconstrained GPU on a model without slack is lost to it", tight, scWhole(1), 0, 1000},
		{"so is a share of one", tight, share, 0, 500},
		{"a task constrained to the model pays nothing", tight, t4Only, 0, 0},
		{"nor does one on a model no class is constrained to", tight, scWhole(1), 1, 0},
		{"within the model's slack nothing is lost", loose, scWhole(1), 0, 0},
		{"past the slack, only what exceeds it", loose, scWhole(2), 0, 800},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := scView(nodes, tt.workload)
			var ms modelSupply
			ms.prepare(v)
			got := ms.shortfall(v, tt.node, &tt.job, ReplicaGPUMilli(&tt.job))
			if math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("shortfall = %g, want %g", got, tt.want)
			}
		})
	}
	t.Run("gangway sends the unconstrained task to the other model", func(t *testing.T) {
		got := scPlace(t, &Gangway{}, nodes, tight, scWhole(1))
		if got[0].Node != "g2" {
			t.Errorf("placed on %q, want g2", got[0].Node)
		}
	})
}

// TestGangwayKeepsGapsCPU: the share-packing term prices a GPU's gap only
// while the node keeps CPU for the share tasks that would fill it. The
// typical workload (whole GPUs, no CPU per GPU) sees nothing to choose
// between the nodes for a CPU-only task — a 530 gap is fragmented for it
// either way — but the mix's 470-milli shares ask 4 CPUs: on "gappy" the
// task would leave 2, and the gap would lose the half GPU it is worth.
func TestGangwayKeepsGapsCPU(t *testing.T) {
	workload := []WorkloadClass{{GPUs: 1, Milli: Whole, Weight: 1}}
	demand := append(slices.Clone(workload), WorkloadClass{GPUs: 1, Milli: 470, CPUMilli: 4000, Weight: 1})
	nodes := []Node{scCPU(scNode("gappy", "G2", 530, 0), 8000), scCPU(scNode("full", "G2", 0, 0), 8000)}
	for _, tc := range []struct {
		sc   Scorer
		want string
	}{{&FGD{}, "gappy"}, {&Gangway{}, "full"}} {
		se := NewSession(Snapshot{Nodes: nodes}, Options{Scorer: tc.sc, Workload: workload, Demand: demand, Seed: 7})
		job := scCPUJob(6000)
		plan := se.Place([]gangway.QueueEntry{job})
		if len(plan.Assignments) != 1 {
			t.Fatalf("%s: not placed", tc.sc.Name())
		}
		if got := plan.Assignments[0].Members[0].NodeID; got != tc.want {
			t.Errorf("%s placed the CPU-only task on %q, want %q", tc.sc.Name(), got, tc.want)
		}
	}
}

func TestGangwayCPUBoundScale(t *testing.T) {
	// Two nodes of 2 GPUs and 8 cores: 4 cores per GPU. The mix's one-GPU
	// tasks ask 3 cores; CPU-only tasks of 2 cores, cpuOnly of them per GPU
	// task, make it CPU-bound above 0.5.
	nodes := []Node{scCPU(scNode("a", "G2", Whole, Whole), 8000), scCPU(scNode("b", "G2", Whole, Whole), 8000)}
	for _, tc := range []struct {
		cpuOnly float64
		bound   bool
	}{{0, false}, {0.5, false}, {1, true}} {
		v := scView(nodes, []WorkloadClass{{GPUs: 1, Milli: Whole, CPUMilli: 3000, Weight: 1}})
		v.demand = append(slices.Clone(v.workload), WorkloadClass{CPUMilli: 2000, Weight: tc.cpuOnly})
		if got := cpuBound(v); got != tc.bound {
			t.Errorf("cpuOnly %v: cpuBound = %v, want %v", tc.cpuOnly, got, tc.bound)
		}
		sc := &Gangway{}
		for _, jc := range []struct {
			job  gangway.QueueEntry
			gpus []int
			fine bool // on the gwFineLevels scale when bound
		}{{scWhole(1), []int{0}, true}, {scShare(500), []int{0}, true}, {scWhole(2), []int{0, 1}, false}, {scCPUJob(1000), nil, false}} {
			c := Candidate{Node: 0, GPUs: jc.gpus, Milli: jc.job.MilliEachGPU()}
			got := sc.Score(v, c, &jc.job)
			if fine := got > MaxNodeScore; fine != (tc.bound && jc.fine) {
				t.Errorf("cpuOnly %v, job %+v: score %v, fine scale %v, want %v", tc.cpuOnly, jc.job, got, fine, tc.bound && jc.fine)
			}
		}
	}
	// A node that takes no work adds no capacity: with a third,
	// unschedulable node of 64 cores the mix at 1 is still CPU-bound.
	fenced := scCPU(scNode("fenced", "G2", Whole, Whole), 64000)
	fenced.Schedulable = false
	v := scView(append(slices.Clone(nodes), fenced), []WorkloadClass{{GPUs: 1, Milli: Whole, CPUMilli: 3000, Weight: 1}})
	v.demand = append(slices.Clone(v.workload), WorkloadClass{CPUMilli: 2000, Weight: 1})
	if !cpuBound(v) {
		t.Errorf("an unschedulable node's CPU counted: cpuBound = false, want true")
	}
	for _, x := range []float64{-5000, -40, 0, 40, 5000} {
		if scaleBy(x, MaxNodeScore) != fgdScale(x) {
			t.Errorf("scaleBy(%v, MaxNodeScore) = %v, fgdScale = %v", x, scaleBy(x, MaxNodeScore), fgdScale(x))
		}
	}
}
