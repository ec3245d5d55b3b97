package baselines

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
)

// scNode is a schedulable node of model with one GPU per free value (free
// milli-GPU of that GPU), 64 CPUs and 256 GiB, nothing else in use.
func scNode(id, model string, free ...int) placement.Node {
	n := placement.Node{ID: id, Addr: id + ":29500", Pool: "onprem", Model: model, CPUMilli: 64000, MemMiB: 256 << 10, Schedulable: true}
	for g, f := range free {
		n.GPUs = append(n.GPUs, placement.GPU{Index: g, Model: model, Healthy: true, UsedMilli: placement.Whole - f})
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

// placed is where a session put the one replica of a job.
type placed struct {
	Node string
	GPUs []int
}

// scPlace places each job in turn with scorer sc and reports where each
// went ("" when it did not fit).
func scPlace(t *testing.T, sc placement.Scorer, nodes []placement.Node, jobs ...gangway.QueueEntry) []placed {
	t.Helper()
	se := placement.NewSession(placement.Snapshot{Nodes: nodes}, placement.Options{Scorer: sc, Seed: 7})
	var out []placed
	for k, j := range jobs {
		j.JobID = "j" + string(rune('0'+k))
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

func TestBaselinesPrefer(t *testing.T) {
	tests := []struct {
		name   string
		scorer placement.Scorer
		nodes  []placement.Node
		jobs   []gangway.QueueEntry
		want   []placed
	}{
		{
			name:   "packing fills a partly used GPU before an empty one",
			scorer: &GPUPacking{},
			nodes: []placement.Node{
				scNode("idle", "G2", 1000, 1000),
				scNode("whole-free", "G2", 1000, 0),
				scNode("shared", "G2", 1000, 500),
			},
			jobs: []gangway.QueueEntry{scShare(300)},
			want: []placed{{"shared", []int{1}}},
		},
		{
			name:   "packing takes free GPUs of a used node before an idle node",
			scorer: &GPUPacking{},
			nodes:  []placement.Node{scNode("idle", "G2", 1000, 1000), scNode("used", "G2", 1000, 0)},
			jobs:   []gangway.QueueEntry{scWhole(1)},
			want:   []placed{{"used", []int{0}}},
		},
		{
			name:   "clustering keeps shares with shares and whole GPUs with whole GPUs",
			scorer: &GPUClustering{},
			nodes: []placement.Node{
				scNode("idle", "G2", 1000, 1000, 1000, 1000),
				scNode("shares", "G2", 1000, 1000, 1000, 700),
				scNode("ones", "G2", 1000, 1000, 1000, 0),
			},
			jobs: []gangway.QueueEntry{scShare(200), scWhole(1), scShare(200)},
			want: []placed{{"shares", []int{3}}, {"ones", []int{0}}, {"shares", []int{3}}},
		},
		{
			name:   "clustering remembers the kinds it placed",
			scorer: &GPUClustering{},
			nodes:  []placement.Node{scNode("a", "G2", 1000, 1000, 1000, 1000), scNode("b", "G2", 1000, 1000, 1000, 1000)},
			// The first share opens a: a now runs only shares, so a 2-GPU
			// task avoids it for idle b, and the next share follows the first.
			jobs: []gangway.QueueEntry{scShare(200), scWhole(2), scShare(200)},
			want: []placed{{"a", []int{0}}, {"b", []int{0, 1}}, {"a", []int{0}}},
		},
		{
			name:   "dot-product prefers the node with the smaller product",
			scorer: &DotProduct{},
			nodes:  []placement.Node{scNode("big", "G2", 1000, 1000, 1000, 1000), scNode("small", "G2", 1000, 0, 0, 0)},
			jobs:   []gangway.QueueEntry{scWhole(1)},
			want:   []placed{{"small", []int{0}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := scPlace(t, tt.scorer, tt.nodes, tt.jobs...)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("placements (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRandomIsSeededAndUniform(t *testing.T) {
	nodes := []placement.Node{scNode("a", "T4", 1000), scNode("b", "T4", 1000), scNode("c", "T4", 1000), scNode("d", "T4", 1000)}
	counts := map[string]int{}
	for seed := range uint64(400) {
		pick := func() string {
			se := placement.NewSession(placement.Snapshot{Nodes: nodes}, placement.Options{Scorer: &Random{}, Seed: seed})
			return se.Place([]gangway.QueueEntry{scWhole(1)}).Assignments[0].Members[0].NodeID
		}
		first := pick()
		if again := pick(); again != first {
			t.Fatalf("seed %d: picked %s, then %s", seed, first, again)
		}
		counts[first]++
	}
	for _, n := range nodes {
		if c := counts[n.ID]; c < 60 || c > 140 {
			t.Errorf("node %s picked %d times out of 400; want about 100 (all: %v)", n.ID, c, counts)
		}
	}
}

// TestArtifactScores checks node scores against values worked out from the
// artifact's formulas (its gpu_packing_score_test.go gives the packing
// ones).
func TestArtifactScores(t *testing.T) {
	tests := []struct {
		name      string
		score     func(v *placement.View, i int, j *gangway.QueueEntry) int64
		node      placement.Node
		job       gangway.QueueEntry
		wantScore int64
	}{
		{"packing, free GPUs of a used node", packingScore, scNode("n", "T4", 200, 1000, 1000, 500), scWhole(2), 48},
		{"packing, idle 4-GPU node", packingScore, scNode("n", "T4", 1000, 1000, 1000, 1000), scWhole(2), 29},
		{"packing, idle 8-GPU node", packingScore, scNode("n", "T4", 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000), scWhole(2), 25},
		// The tightest GPU that fits has 200 free: 100 − (200·100/1000)/10.
		{"packing, share on a used GPU", packingScore, scNode("n", "T4", 200, 1000, 1000, 500), scShare(200), 98},
		{"packing, CPU-only task", packingScore, scNode("n", "T4", 200), scCPUJob(1000), 0},
		// 100·(1 − (64000·8000/128000² + 8000·1000/8000²)/2) = 92.1875.
		{"dot-product", dotProductScore, scNode("n", "G2", 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000),
			gangway.QueueEntry{Replicas: 1, GPUsPerReplica: 1, CPUMilli: 8000}, 92},
		// An idle node: 25·(8000 − 8000)/8000 + 25.
		{"clustering, idle node", func(v *placement.View, i int, j *gangway.QueueEntry) int64 {
			var s GPUClustering
			s.Prepare(v)
			return s.clusterScore(v, i, j)
		}, scNode("n", "G2", 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000), scWhole(1), 25},
		// Runs shares only (GPU 1 is partly used): 25·(8000 − 1500)/8000 + 75.
		{"clustering, share on a share node", func(v *placement.View, i int, j *gangway.QueueEntry) int64 {
			var s GPUClustering
			s.Prepare(v)
			return s.clusterScore(v, i, j)
		}, scNode("n", "G2", 1000, 500), scShare(100), 95},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := placement.NewSession(placement.Snapshot{Nodes: []placement.Node{tt.node}}, placement.Options{}).View()
			if got := tt.score(v, 0, &tt.job); got != tt.wantScore {
				t.Errorf("score = %d, want %d", got, tt.wantScore)
			}
		})
	}
}

func TestScorerByName(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			sc, err := ScorerByName(name)
			if err != nil {
				t.Fatalf("ScorerByName(%q): %v", name, err)
			}
			if sc.Name() != name {
				t.Errorf("ScorerByName(%q).Name() = %q", name, sc.Name())
			}
		})
	}
	t.Run("unknown", func(t *testing.T) {
		_, err := ScorerByName("tetris")
		if !errors.Is(err, ErrUnknownScorer) {
			t.Fatalf("err = %v, want ErrUnknownScorer", err)
		}
		for _, name := range Names() {
			if !strings.Contains(err.Error(), name) {
				t.Errorf("error %q does not list %q", err, name)
			}
		}
	})
	t.Run("names", func(t *testing.T) {
		want := []string{"random", "first-fit", "best-fit", "gpu-packing", "gpu-clustering", "dot-product", "fgd", "topology", "gangway"}
		if diff := cmp.Diff(want, Names()); diff != "" {
			t.Errorf("Names (-want +got):\n%s", diff)
		}
	})
}
