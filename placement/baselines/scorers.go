package baselines

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
)

// nodeDraw draws one uniform value per node per scan, so that the best
// draw picks a node uniformly: the engine scores a node's candidates one
// after another, so a new node (or a new job) means a new draw.
type nodeDraw struct {
	set  bool
	node int
	job  *gangway.QueueEntry
	val  float64
}

func (t *nodeDraw) at(v *placement.View, node int, j *gangway.QueueEntry) float64 {
	if !t.set || node != t.node || j != t.job {
		t.set, t.node, t.job = true, node, j
		t.val = v.Rand().Float64()
	}
	return t.val
}

func (t *nodeDraw) reset() { t.set = false }

// randomGrain scales Random's within-node draw so that it orders the
// candidates of one node and, but for draws less than 1e-9 apart, never
// two nodes.
const randomGrain = 1e-9

// Random places each replica on a node drawn uniformly from the feasible
// ones, and a share on a GPU drawn uniformly from those it fits: the
// paper's "Random-fit" baseline (artifact random_score.go, GPU selection
// "random").
type Random struct{ ties nodeDraw }

var (
	_ placement.Scorer    = (*Random)(nil)
	_ placement.Committer = (*Random)(nil)
	_ placement.Cloner    = (*Random)(nil)
)

// Clone implements placement.Cloner.
func (*Random) Clone() placement.Scorer { return &Random{} }

// Name implements placement.Scorer.
func (*Random) Name() string { return "random" }

// Changed implements placement.Committer.
func (s *Random) Changed(*placement.View, int) { s.ties.reset() }

// Score implements placement.Scorer.
func (s *Random) Score(v *placement.View, c placement.Candidate, j *gangway.QueueEntry) float64 {
	u := s.ties.at(v, c.Node, j)
	if !j.Share() || len(c.GPUs) != 1 {
		return u
	}
	// The engine offers one candidate per free level; a level held by n
	// GPUs wins with the maximum of n uniforms, U^(1/n), so each GPU is
	// equally likely.
	f, n := v.Free(c.Node)[c.GPUs[0]], 0
	for _, x := range v.Free(c.Node) {
		if x == f {
			n++
		}
	}
	return u + math.Pow(v.Rand().Float64(), 1/float64(n))*randomGrain
}

// GPUPacking prefers, in this order, (1) putting a share on a GPU that is
// already partly used (the fuller the better), (2) using entirely free GPUs
// of a node that is already partly used (the fewer the better), (3) an
// entirely free node (the smaller the better) — the paper's "GPU Packing"
// baseline (artifact gpu_packing_score.go; CPU-only tasks score 0
// everywhere and so land at random). GPUs are taken tightest first.
type GPUPacking struct{}

var _ placement.ClassScorer = GPUPacking{}

// Name implements placement.Scorer.
func (GPUPacking) Name() string { return "gpu-packing" }

// Score implements placement.Scorer.
func (GPUPacking) Score(v *placement.View, c placement.Candidate, j *gangway.QueueEntry) float64 {
	return float64(packingScore(v, c.Node, j)) + placement.NodeOrder(v, c.Node, placement.Tightness(v, c, j))
}

// Depends implements placement.ClassScorer: packing reads neither CPU nor
// memory, and orders equal nodes by index.
func (GPUPacking) Depends(*placement.View, int, int64, int64) placement.NodeDeps {
	return placement.NodeDeps{ByIndex: true}
}

func packingScore(v *placement.View, i int, j *gangway.QueueEntry) int64 {
	if placement.ReplicaGPUMilli(j) == 0 {
		return 0
	}
	free := v.Free(i)
	if v.FreeWhole(i) == len(free) { // (3) an idle node
		return max(placement.MaxNodeScore/3-int64(len(free)), int64(len(free)))
	}
	var buf [16]int // no allocation for nodes of up to 16 GPUs
	s := append(buf[:0], free...)
	slices.Sort(s)
	need, wholeUsed, freeOnUsed := j.GPUsPerReplica, 0, int64(0)
	milli := j.MilliEachGPU()
	for g := 0; g < len(s) && need > 0; g++ { // least free first
		if s[g] < milli {
			continue
		}
		need--
		if s[g] == placement.Whole {
			wholeUsed++
		}
		freeOnUsed += int64(s[g]) * 100 / placement.Whole
	}
	if wholeUsed > 0 { // (2) free GPUs of a used node
		return max(placement.MaxNodeScore/2-int64(wholeUsed), placement.MaxNodeScore/3)
	}
	return max(placement.MaxNodeScore-freeOnUsed/10, placement.MaxNodeScore/2) // (1) partly used GPUs
}

// GPUClustering keeps tasks of the same kind together: it prefers nodes
// that already run only tasks of the replica's kind (GPU share, or k whole
// GPUs), then nodes that run that kind among others, then idle nodes, then
// nodes running other kinds, and within each tier the node with the least
// free GPU — the paper's "GPU Clustering" baseline (artifact
// gpu_clustering_score.go; CPU-only tasks score 0 everywhere).
//
// Which kinds a node runs is not in the view, so the scorer records it
// from the placements and releases the engine reports (Changed); kinds
// already running when the session starts are inferred from GPU use
// (partly used GPUs hold shares, fully used ones one-GPU tasks). Use one
// instance per session.
type GPUClustering struct {
	view  *placement.View
	kinds [][]int32           // per node: tasks per kind (0: share, k: k whole GPUs)
	free  []int               // per node: free milli when last reported
	last  *gangway.QueueEntry // the job the engine scored last, i.e. the one it commits
}

var (
	_ placement.Scorer    = (*GPUClustering)(nil)
	_ placement.Preparer  = (*GPUClustering)(nil)
	_ placement.Committer = (*GPUClustering)(nil)
	_ placement.Cloner    = (*GPUClustering)(nil)
)

// Clone implements placement.Cloner.
func (*GPUClustering) Clone() placement.Scorer { return &GPUClustering{} }

// Name implements placement.Scorer.
func (*GPUClustering) Name() string { return "gpu-clustering" }

// Prepare implements placement.Preparer.
func (s *GPUClustering) Prepare(v *placement.View) {
	s.view, s.last = v, nil
	s.kinds = make([][]int32, len(v.Nodes()))
	s.free = make([]int, len(v.Nodes()))
	for i := range v.Nodes() {
		s.free[i] = v.FreeMilli(i)
		for g, f := range v.Free(i) {
			switch {
			case !v.Nodes()[i].GPUs[g].Healthy:
			case f > 0 && f < placement.Whole:
				s.add(i, 0, 1)
			case f == 0:
				s.add(i, 1, 1)
			}
		}
	}
}

func (s *GPUClustering) add(i, kind int, n int32) {
	for len(s.kinds[i]) <= kind {
		s.kinds[i] = append(s.kinds[i], 0)
	}
	s.kinds[i][kind] = max(s.kinds[i][kind]+n, 0)
}

// Changed implements placement.Committer: a node lost free GPU capacity to the job
// scored last, or got back what one released member held.
func (s *GPUClustering) Changed(v *placement.View, i int) {
	if s.view != v {
		s.Prepare(v)
		return
	}
	now := v.FreeMilli(i)
	d := s.free[i] - now
	s.free[i] = now
	switch {
	case d > 0 && s.last != nil && placement.ReplicaGPUMilli(s.last) > 0:
		s.add(i, kindOf(s.last), int32(max(d/placement.ReplicaGPUMilli(s.last), 1)))
	case d < 0 && -d < placement.Whole:
		s.add(i, 0, -1)
	case d < 0:
		s.add(i, -d/placement.Whole, -1)
	}
}

func kindOf(j *gangway.QueueEntry) int {
	if j.Share() {
		return 0
	}
	return j.GPUsPerReplica
}

// Score implements placement.Scorer.
func (s *GPUClustering) Score(v *placement.View, c placement.Candidate, j *gangway.QueueEntry) float64 {
	if s.view != v {
		s.Prepare(v)
	}
	s.last = j
	return float64(s.clusterScore(v, c.Node, j)) + placement.NodeOrder(v, c.Node, placement.Tightness(v, c, j))
}

func (s *GPUClustering) clusterScore(v *placement.View, i int, j *gangway.QueueEntry) int64 {
	if placement.ReplicaGPUMilli(j) == 0 {
		return 0
	}
	fill := placement.MaxNodeScore / 4 * (placement.SpecGPUMilli - int64(v.FreeMilli(i))) / placement.SpecGPUMilli
	kinds, mine := 0, false
	for k, n := range s.kinds[i] {
		if n > 0 {
			kinds++
			mine = mine || k == kindOf(j)
		}
	}
	switch {
	case mine && kinds == 1:
		return fill + placement.MaxNodeScore*3/4
	case mine:
		return fill + placement.MaxNodeScore*2/4
	case kinds == 0:
		return fill + placement.MaxNodeScore/4
	}
	return fill
}

// DotProduct is the paper's "Dot-product" baseline, Tetris-style alignment
// of the node's free (CPU, GPU) vector with the replica's demand, both
// normalized by the largest node spec, scored as the artifact does —
// 100·(1 − ⟨free, demand⟩/2), so the node with the smaller product wins —
// with all of a node's GPUs merged into one dimension (artifact
// dot_product_score.go, "merge" dimensions, "max" normalization, GPU
// selection "best").
type DotProduct struct{}

var _ placement.ClassScorer = DotProduct{}

// Name implements placement.Scorer.
func (DotProduct) Name() string { return "dot-product" }

// Score implements placement.Scorer.
func (DotProduct) Score(v *placement.View, c placement.Candidate, j *gangway.QueueEntry) float64 {
	return float64(dotProductScore(v, c.Node, j)) + placement.NodeOrder(v, c.Node, placement.Tightness(v, c, j))
}

// Depends implements placement.ClassScorer: dot-product reads the exact
// free CPU, no memory, and orders equal nodes by index.
func (DotProduct) Depends(*placement.View, int, int64, int64) placement.NodeDeps {
	return placement.NodeDeps{CPULevel: math.MaxInt64, ByIndex: true}
}

func dotProductScore(v *placement.View, i int, j *gangway.QueueEntry) int64 {
	if v.FreeCPU(i) < j.CPUMilli {
		return 0
	}
	dot := float64(v.FreeCPU(i))/placement.SpecCPUMilli*float64(j.CPUMilli)/placement.SpecCPUMilli +
		float64(v.FreeMilli(i))/placement.SpecGPUMilli*float64(placement.ReplicaGPUMilli(j))/placement.SpecGPUMilli
	return int64(placement.MaxNodeScore * (1 - dot/2))
}

// ErrUnknownScorer is placement's: a name neither the baselines nor the
// production scorers know.
var ErrUnknownScorer = placement.ErrUnknownScorer

// names lists every policy in the order reports show them.
var names = []string{
	"random", "first-fit", "best-fit", "gpu-packing", "gpu-clustering", "dot-product", "fgd", "topology", "gangway",
}

// Names lists every policy ScorerByName accepts — the paper's baselines and
// placement's production scorers — in the order reports show them.
func Names() []string { return slices.Clone(names) }

// ScorerByName returns a new scorer for any policy name in Names: a
// baseline from this package, or a production scorer from
// placement.ScorerByName. Scorers keep per-session caches: use a new one
// for each session.
func ScorerByName(name string) (placement.Scorer, error) {
	switch name {
	case "random":
		return &Random{}, nil
	case "gpu-packing":
		return GPUPacking{}, nil
	case "gpu-clustering":
		return &GPUClustering{}, nil
	case "dot-product":
		return DotProduct{}, nil
	}
	sc, err := placement.ScorerByName(name)
	if errors.Is(err, placement.ErrUnknownScorer) {
		return nil, fmt.Errorf("scorer %q: %w; valid: %s", name, ErrUnknownScorer, strings.Join(names, ", "))
	}
	return sc, err
}
