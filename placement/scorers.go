package placement

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/gangwayhq/gangway"
)

// The baselines below are those of Weng et al., "Beware of Fragmentation:
// Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent"
// (USENIX ATC 2023), scored the way its artifact scores them
// (github.com/hkust-adsl/kubernetes-scheduler-simulator,
// pkg/simulator/plugin/*_score.go), so that replaying the paper's protocol
// reproduces its numbers. That artifact is a Kubernetes scheduler: each
// plugin returns an integer node score in [0, 100], the node with the
// highest score wins, and a GPU share then goes to the GPU its "GPU
// selection method" picks (the tightest GPU that fits, unless the policy
// says otherwise). Ties between nodes go to the node whose name sorts
// first (its Kubernetes fork, github.com/mental2008/kubernetes
// v1.20.5-minor, replaces selectHost's random pick "for reproducibility"),
// and the simulator prefixes node names with a seeded random permutation —
// so ties go to a fixed, seeded node order. The engine breaks ties by the
// lowest node index, which is the same thing when the snapshot lists nodes
// in that order: a replay of the paper's protocol should shuffle the node
// list with its seed.
//
// The scorers return the artifact's integer score; where the artifact then
// picks a GPU on the node, they add a fraction below 1 that orders the
// node's candidates that way while keeping the lowest-index order between
// nodes with the same integer score.

// Artifact constants (pkg/type/open-gpu-share/utils/const.go and the
// scheduler framework).
const (
	maxNodeScore = 100    // framework.MaxNodeScore
	specCPUMilli = 128000 // MaxSpecCpu: normalizes CPU in best-fit and dot-product
	specGPUMilli = 8000   // MaxSpecGpu: normalizes GPU milli likewise
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

func (t *nodeDraw) at(v *View, node int, j *gangway.QueueEntry) float64 {
	if !t.set || node != t.node || j != t.job {
		t.set, t.node, t.job = true, node, j
		t.val = v.Rand().Float64()
	}
	return t.val
}

func (t *nodeDraw) reset() { t.set = false }

// nodeOrder is the fraction added to an integer node score: it keeps ties
// between nodes in lowest-index order, as the engine would, and adds pref
// (in [0, 1]) to order the candidates of one node without ever reordering
// nodes. It is below 1, so integer scores still decide first.
func nodeOrder(v *View, node int, pref float64) float64 {
	step := 0.5 / float64(len(v.nodes)+1)
	return float64(len(v.nodes)-node)*step + pref*step/2
}

// tightness orders the candidates of one node as the artifact's default
// GPU selection ("best": the GPU with the least free capacity that fits a
// share) does: in [0, 1], higher for a tighter GPU; 0 for whole GPUs.
func tightness(v *View, c Candidate, j *gangway.QueueEntry) float64 {
	if !j.Share() || len(c.GPUs) != 1 {
		return 0
	}
	return float64(Whole-v.free[c.Node][c.GPUs[0]]) / Whole
}

// replicaGPUMilli is one replica's total GPU demand in milli-GPU.
func replicaGPUMilli(j *gangway.QueueEntry) int {
	if j.GPUsPerReplica <= 0 {
		return 0
	}
	return j.GPUsPerReplica * milliPerGPU(j)
}

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
	_ Scorer    = (*Random)(nil)
	_ Committer = (*Random)(nil)
)

// Name implements Scorer.
func (*Random) Name() string { return "random" }

// Changed implements Committer.
func (s *Random) Changed(*View, int) { s.ties.reset() }

// Score implements Scorer.
func (s *Random) Score(v *View, c Candidate, j *gangway.QueueEntry) float64 {
	u := s.ties.at(v, c.Node, j)
	if !j.Share() || len(c.GPUs) != 1 {
		return u
	}
	// The engine offers one candidate per free level; a level held by n
	// GPUs wins with the maximum of n uniforms, U^(1/n), so each GPU is
	// equally likely.
	f, n := v.free[c.Node][c.GPUs[0]], 0
	for _, x := range v.free[c.Node] {
		if x == f {
			n++
		}
	}
	return u + math.Pow(v.Rand().Float64(), 1/float64(n))*randomGrain
}

// BestFit prefers the node with the least CPU and GPU left after the
// replica lands, each normalized by the largest node spec and weighted
// half: score = 100·(1 − ½·cpuLeft/128 cores − ½·gpuLeft/8 GPUs), then the
// tightest GPU on it (artifact best_fit_score.go, GPU selection "best").
type BestFit struct{}

var _ Scorer = BestFit{}

// Name implements Scorer.
func (BestFit) Name() string { return "best-fit" }

// Score implements Scorer.
func (BestFit) Score(v *View, c Candidate, j *gangway.QueueEntry) float64 {
	return float64(bestFitScore(v, c.Node, j)) + nodeOrder(v, c.Node, tightness(v, c, j))
}

func bestFitScore(v *View, i int, j *gangway.QueueEntry) int64 {
	cpuLeft := float64(v.cpu[i] - j.CPUMilli)
	gpuLeft := float64(v.FreeMilli(i) - replicaGPUMilli(j))
	left := 0.5*cpuLeft/specCPUMilli + 0.5*gpuLeft/specGPUMilli
	return int64((1 - left) * maxNodeScore)
}

// GPUPacking prefers, in this order, (1) putting a share on a GPU that is
// already partly used (the fuller the better), (2) using entirely free GPUs
// of a node that is already partly used (the fewer the better), (3) an
// entirely free node (the smaller the better) — the paper's "GPU Packing"
// baseline (artifact gpu_packing_score.go; CPU-only tasks score 0
// everywhere and so land at random). GPUs are taken tightest first.
type GPUPacking struct{}

var _ Scorer = GPUPacking{}

// Name implements Scorer.
func (GPUPacking) Name() string { return "gpu-packing" }

// Score implements Scorer.
func (GPUPacking) Score(v *View, c Candidate, j *gangway.QueueEntry) float64 {
	return float64(packingScore(v, c.Node, j)) + nodeOrder(v, c.Node, tightness(v, c, j))
}

func packingScore(v *View, i int, j *gangway.QueueEntry) int64 {
	if replicaGPUMilli(j) == 0 {
		return 0
	}
	free := v.free[i]
	if v.whole[i] == len(free) { // (3) an idle node
		return max(maxNodeScore/3-int64(len(free)), int64(len(free)))
	}
	var buf [fragKeyGPUs]int
	var s []int
	if len(free) <= fragKeyGPUs {
		s = buf[:len(free)]
	} else {
		s = make([]int, len(free))
	}
	copy(s, free)
	sortDesc(s)
	need, wholeUsed, freeOnUsed := j.GPUsPerReplica, 0, int64(0)
	milli := milliPerGPU(j)
	for g := len(s) - 1; g >= 0 && need > 0; g-- { // least free first
		if s[g] < milli {
			continue
		}
		need--
		if s[g] == Whole {
			wholeUsed++
		}
		freeOnUsed += int64(s[g]) * 100 / Whole
	}
	if wholeUsed > 0 { // (2) free GPUs of a used node
		return max(maxNodeScore/2-int64(wholeUsed), maxNodeScore/3)
	}
	return max(maxNodeScore-freeOnUsed/10, maxNodeScore/2) // (1) partly used GPUs
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
	view  *View
	kinds [][]int32           // per node: tasks per kind (0: share, k: k whole GPUs)
	free  []int               // per node: free milli when last reported
	last  *gangway.QueueEntry // the job the engine scored last, i.e. the one it commits
}

var (
	_ Scorer    = (*GPUClustering)(nil)
	_ Preparer  = (*GPUClustering)(nil)
	_ Committer = (*GPUClustering)(nil)
)

// Name implements Scorer.
func (*GPUClustering) Name() string { return "gpu-clustering" }

// Prepare implements Preparer.
func (s *GPUClustering) Prepare(v *View) {
	s.view, s.last = v, nil
	s.kinds = make([][]int32, len(v.nodes))
	s.free = make([]int, len(v.nodes))
	for i, free := range v.free {
		s.free[i] = v.FreeMilli(i)
		for g, f := range free {
			switch {
			case !v.nodes[i].GPUs[g].Healthy:
			case f > 0 && f < Whole:
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

// Changed implements Committer: a node lost free GPU capacity to the job
// scored last, or got back what one released member held.
func (s *GPUClustering) Changed(v *View, i int) {
	if s.view != v {
		s.Prepare(v)
		return
	}
	now := v.FreeMilli(i)
	d := s.free[i] - now
	s.free[i] = now
	switch {
	case d > 0 && s.last != nil && replicaGPUMilli(s.last) > 0:
		s.add(i, kindOf(s.last), int32(max(d/replicaGPUMilli(s.last), 1)))
	case d < 0 && -d < Whole:
		s.add(i, 0, -1)
	case d < 0:
		s.add(i, -d/Whole, -1)
	}
}

func kindOf(j *gangway.QueueEntry) int {
	if j.Share() {
		return 0
	}
	return j.GPUsPerReplica
}

// Score implements Scorer.
func (s *GPUClustering) Score(v *View, c Candidate, j *gangway.QueueEntry) float64 {
	if s.view != v {
		s.Prepare(v)
	}
	s.last = j
	return float64(s.clusterScore(v, c.Node, j)) + nodeOrder(v, c.Node, tightness(v, c, j))
}

func (s *GPUClustering) clusterScore(v *View, i int, j *gangway.QueueEntry) int64 {
	if replicaGPUMilli(j) == 0 {
		return 0
	}
	fill := maxNodeScore / 4 * (specGPUMilli - int64(v.FreeMilli(i))) / specGPUMilli
	kinds, mine := 0, false
	for k, n := range s.kinds[i] {
		if n > 0 {
			kinds++
			mine = mine || k == kindOf(j)
		}
	}
	switch {
	case mine && kinds == 1:
		return fill + maxNodeScore*3/4
	case mine:
		return fill + maxNodeScore*2/4
	case kinds == 0:
		return fill + maxNodeScore/4
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

var _ Scorer = DotProduct{}

// Name implements Scorer.
func (DotProduct) Name() string { return "dot-product" }

// Score implements Scorer.
func (DotProduct) Score(v *View, c Candidate, j *gangway.QueueEntry) float64 {
	return float64(dotProductScore(v, c.Node, j)) + nodeOrder(v, c.Node, tightness(v, c, j))
}

func dotProductScore(v *View, i int, j *gangway.QueueEntry) int64 {
	if v.cpu[i] < j.CPUMilli {
		return 0
	}
	dot := float64(v.cpu[i])/specCPUMilli*float64(j.CPUMilli)/specCPUMilli +
		float64(v.FreeMilli(i))/specGPUMilli*float64(replicaGPUMilli(j))/specGPUMilli
	return int64(maxNodeScore * (1 - dot/2))
}

// FGD is Fragmentation Gradient Descent (Weng et al., ATC 2023): place the
// replica where the node's expected fragmented GPU capacity against the
// typical workload (v.Workload(); see FragmentationOf) grows least, i.e.
// maximize −ΔF = F_before − F_after. The artifact (fgd_score.go) scores
// int(100·sigmoid(−ΔF/1000)), takes the best over a node's GPUs for a
// share (the lowest GPU index on ties) and the first node on ties; that is
// the zero value. With Exact set it returns −ΔF itself, in milli-GPU.
//
// It caches each node's F_before (checked against the node's state on
// every use) and memoizes F by node state, so identical nodes are computed
// once.
type FGD struct {
	Exact bool
	frag  fragCache
}

var (
	_ Scorer    = (*FGD)(nil)
	_ Preparer  = (*FGD)(nil)
	_ Committer = (*FGD)(nil)
)

// Name implements Scorer.
func (*FGD) Name() string { return "fgd" }

// Prepare implements Preparer.
func (s *FGD) Prepare(v *View) { s.frag.prepare(v) }

// Changed implements Committer.
func (s *FGD) Changed(_ *View, node int) { s.frag.invalidate(node) }

// Score implements Scorer.
func (s *FGD) Score(v *View, c Candidate, j *gangway.QueueEntry) float64 {
	d := s.frag.delta(v, c, j)
	if s.Exact {
		return d
	}
	return fgdScale(d)
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// fgdScale is the artifact's integer FGD score of a fragmentation drop of x
// milli-GPU, int(100·sigmoid(x/1000)). x is first rounded to a
// micro-milli-GPU so that float noise in a zero change (sums of the same
// terms in another order) cannot flip 50 to 49.
func fgdScale(x float64) float64 {
	x = math.Round(x*1e6) / 1e6
	return float64(int64(sigmoid(x/1000) * maxNodeScore))
}

// Topology locality weights: a replica's GPUs spread over more NVLink
// domains, or NUMA nodes, cost the most; then the fuller the touched
// domains and the node end up, the better, so that entirely free domains
// and nodes stay whole for large gangs.
const (
	topoDomainSpread = 10.0
	topoNUMASpread   = 4.0
	topoDomainFill   = 2.0
	topoNodeFill     = 1.0
)

// TopologyLocality prefers candidates whose GPUs share one NVLink domain
// and one NUMA node, and among those the domains and nodes that are
// already partly used, so that whole domains stay free for large gangs.
// It is Gangway's own policy, not one of the paper's baselines; the
// weights are the topo* constants. Ties go to the lowest node index.
type TopologyLocality struct{}

var _ Scorer = TopologyLocality{}

// Name implements Scorer.
func (TopologyLocality) Name() string { return "topology" }

// Score implements Scorer.
func (TopologyLocality) Score(v *View, c Candidate, _ *gangway.QueueEntry) float64 {
	if len(c.GPUs) == 0 {
		return 0
	}
	n := &v.nodes[c.Node]
	free := v.free[c.Node]
	if v.oneDomain[c.Node] && n.GPUs[0].Domain != "" {
		return topologyOneDomain(v, c)
	}
	domains, numas := 0, 0
	size, used := 0, 0 // GPUs in the touched domains, and those not entirely free after
	for x, g := range c.GPUs {
		newDomain, newNUMA := true, true
		for _, h := range c.GPUs[:x] {
			if sameDomain(n, g, h) {
				newDomain = false
			}
			if n.GPUs[g].NUMA == n.GPUs[h].NUMA {
				newNUMA = false
			}
		}
		if newNUMA {
			numas++
		}
		if !newDomain {
			continue
		}
		domains++
		for h := range n.GPUs {
			if !sameDomain(n, g, h) {
				continue
			}
			size++
			if free[h] < Whole || slices.Contains(c.GPUs, h) {
				used++
			}
		}
	}
	nodeUsed := 1.0
	if len(free) > 0 {
		nodeUsed = 1 - float64(v.whole[c.Node])/float64(len(free))
	}
	return -topoDomainSpread*float64(domains-1) - topoNUMASpread*float64(numas-1) +
		topoDomainFill*float64(used)/float64(size) + topoNodeFill*nodeUsed
}

// topologyOneDomain is TopologyLocality's score on a node whose GPUs all
// share one NVLink domain (the common NVSwitch server), without comparing
// domain names.
func topologyOneDomain(v *View, c Candidate) float64 {
	n := &v.nodes[c.Node]
	free := v.free[c.Node]
	numas := 0
	for x, g := range c.GPUs {
		seen := false
		for _, h := range c.GPUs[:x] {
			seen = seen || n.GPUs[g].NUMA == n.GPUs[h].NUMA
		}
		if !seen {
			numas++
		}
	}
	used := 0
	for h, f := range free {
		if f < Whole || slices.Contains(c.GPUs, h) {
			used++
		}
	}
	nodeUsed := 1 - float64(v.whole[c.Node])/float64(len(free))
	return -topoNUMASpread*float64(numas-1) + topoDomainFill*float64(used)/float64(len(free)) + topoNodeFill*nodeUsed
}

// sameDomain reports whether GPUs g and h of n share an NVLink domain (a
// GPU without a domain is alone in its own).
func sameDomain(n *Node, g, h int) bool {
	return g == h || (n.GPUs[g].Domain != "" && n.GPUs[g].Domain == n.GPUs[h].Domain)
}

// Gangway's default policy weights, tuned against FGD on the openb traces
// (gangway replay fgd). Every term is in milli-GPU, added to FGD's −ΔF
// before it is put on FGD's integer scale.
const (
	// gwStrand weighs the change in stranded GPU capacity: free GPU milli a
	// node cannot use because its free CPU (or memory) would run out first
	// at the workload's average CPU (memory) per GPU. FGD sees CPU only
	// when a class no longer fits; this steers CPU-heavy tasks to CPU-rich
	// nodes before that happens. On openb it removes about a tenth to a
	// fifth of FGD's unallocated GPUs; anywhere in 0.1–3 does about as well.
	gwStrand = 0.3
	// gwScarcity penalizes a task that may run on any model, per milli-GPU
	// it takes, on a model that model-constrained workload classes depend
	// on, in proportion to how oversubscribed the model is by them. Off: on
	// openb gpuspec10 FGD's −ΔF already counts constrained classes; 0.02
	// changed nothing and 0.1 or more did worse. Kept for fleets whose
	// constrained demand is larger.
	gwScarcity = 0.0
	// gwTopology weighs the TopologyLocality score (−10 per extra NVLink
	// domain a replica spans, …) for whole-GPU gangs on nodes whose GPUs
	// carry NVLink domains.
	gwTopology = 50.0
)

// Gangway is Gangway's default policy. It starts from FGD as the artifact
// scores it and adds what beats it:
//
//   - stranded capacity: FGD's −ΔF minus gwStrand times the growth of the
//     node's stranded GPU capacity (see gwStrand);
//   - model scarcity: a penalty for tasks without a model constraint that
//     take GPUs constrained tasks need (gwScarcity, off by default);
//   - topology locality for whole-GPU gangs (gwTopology).
//
// The sum is put on FGD's coarse integer scale, int(100·sigmoid(x/1000)),
// and ties go to the lowest node index, as in FGD. That coarseness is part
// of why FGD works: candidates within a few tens of milli-GPU of each
// other count as equal and the fleet is filled in one fixed order, which
// consolidates work; ranking by the exact −ΔF instead leaves about twice
// as much GPU capacity unallocated on openb.
type Gangway struct {
	frag                 fragCache
	view                 *View
	scarcity             []float64 // per fragCache model index
	cpuPerGPU, memPerGPU float64   // workload demand per milli-GPU; 0 = not counted
}

var (
	_ Scorer    = (*Gangway)(nil)
	_ Preparer  = (*Gangway)(nil)
	_ Committer = (*Gangway)(nil)
)

// Name implements Scorer.
func (*Gangway) Name() string { return "gangway" }

// Prepare implements Preparer.
func (s *Gangway) Prepare(v *View) {
	s.frag.prepare(v)
	s.view = v
	byModel := modelScarcity(v)
	s.scarcity = make([]float64, len(s.frag.per))
	for m, at := range s.frag.models {
		s.scarcity[at] = byModel[m]
	}
	s.cpuPerGPU, s.memPerGPU = demandPerGPU(v.workload)
}

// Changed implements Committer.
func (s *Gangway) Changed(_ *View, node int) { s.frag.invalidate(node) }

// Score implements Scorer.
func (s *Gangway) Score(v *View, c Candidate, j *gangway.QueueEntry) float64 {
	if s.view != v || !sameWorkload(s.frag.workload, v.workload) {
		s.Prepare(v)
	}
	i := c.Node
	x := s.frag.delta(v, c, j)
	gpu := replicaGPUMilli(j)
	x -= gwStrand * (s.stranded(v.FreeMilli(i)-gpu, v.cpu[i]-j.CPUMilli, v.mem[i]-j.MemMiB) -
		s.stranded(v.FreeMilli(i), v.cpu[i], v.mem[i]))
	if gwScarcity != 0 && len(j.GPUModels) == 0 && gpu > 0 {
		x -= gwScarcity * s.scarcity[s.frag.models[v.nodes[i].Model]] * float64(gpu)
	}
	gang := j.GPUsPerReplica > 1 || (j.GPUsPerReplica == 1 && j.Replicas > 1)
	if gang && !j.Share() && hasDomains(&v.nodes[i], c.GPUs) {
		x += gwTopology * TopologyLocality{}.Score(v, c, j)
	}
	return fgdScale(x)
}

// stranded is the GPU capacity, in milli-GPU, a node with gpu milli-GPU,
// cpu and mem free cannot use at the workload's CPU and memory per GPU.
func (s *Gangway) stranded(gpu int, cpu, mem int64) float64 {
	usable := float64(gpu)
	if s.cpuPerGPU > 0 {
		usable = min(usable, float64(max(cpu, 0))/s.cpuPerGPU)
	}
	if s.memPerGPU > 0 {
		usable = min(usable, float64(max(mem, 0))/s.memPerGPU)
	}
	return float64(gpu) - usable
}

// demandPerGPU is the workload's CPU (milli) and memory (MiB) demand per
// milli-GPU of its GPU demand, CPU-only classes included; 0 when there is
// no GPU demand or no such demand.
func demandPerGPU(workload []WorkloadClass) (cpu, mem float64) {
	gpu := 0.0
	for _, w := range workload {
		cpu += w.Weight * float64(max(w.CPUMilli, 0))
		mem += w.Weight * float64(max(w.MemMiB, 0))
		if w.GPUs > 0 {
			gpu += w.Weight * float64(w.GPUs*classMilli(w))
		}
	}
	if gpu == 0 {
		return 0, 0
	}
	return cpu / gpu, mem / gpu
}

// hasDomains reports whether any of the GPUs carries an NVLink domain.
func hasDomains(n *Node, gpus []int) bool {
	for _, g := range gpus {
		if n.GPUs[g].Domain != "" {
			return true
		}
	}
	return false
}

// modelScarcity is, per GPU model, the share of the workload's GPU demand
// that may run only on a subset of models including it, spread over those
// models by capacity, divided by the model's share of the fleet's GPUs: 0
// for models no constrained class needs, above 1 where constrained demand
// alone outweighs the model's capacity share.
func modelScarcity(v *View) map[string]float64 {
	capacity := map[string]float64{}
	total := 0.0
	for i := range v.nodes {
		if g := float64(len(v.nodes[i].GPUs)); g > 0 && v.nodes[i].Model != "" {
			capacity[v.nodes[i].Model] += g
			total += g
		}
	}
	demand, all := map[string]float64{}, 0.0
	for _, w := range v.workload {
		d := w.Weight * float64(max(w.GPUs, 0)) * float64(classMilli(w)) / Whole
		all += d
		if len(w.Models) == 0 || d == 0 {
			continue
		}
		pool := 0.0
		for _, m := range w.Models {
			pool += capacity[m]
		}
		for _, m := range w.Models {
			if pool > 0 {
				demand[m] += d * capacity[m] / pool
			}
		}
	}
	out := map[string]float64{}
	if all == 0 || total == 0 {
		return out
	}
	for m, d := range demand {
		if c := capacity[m]; c > 0 {
			out[m] = (d / all) / (c / total)
		}
	}
	return out
}

// ErrUnknownScorer is returned by ScorerByName for a name it does not know.
var ErrUnknownScorer = errors.New("unknown scorer")

// scorerNames lists the policies in the order reports show them.
var scorerNames = []string{
	"random", "first-fit", "best-fit", "gpu-packing", "gpu-clustering", "dot-product", "fgd", "topology", "gangway",
}

// ScorerNames lists the names ScorerByName accepts.
func ScorerNames() []string { return append([]string(nil), scorerNames...) }

// ScorerByName returns a new scorer for a policy name (see ScorerNames).
// Scorers keep per-session caches: use a new one for each session.
func ScorerByName(name string) (Scorer, error) {
	switch name {
	case "random":
		return &Random{}, nil
	case "first-fit":
		return FirstFit{}, nil
	case "best-fit":
		return BestFit{}, nil
	case "gpu-packing":
		return GPUPacking{}, nil
	case "gpu-clustering":
		return &GPUClustering{}, nil
	case "dot-product":
		return DotProduct{}, nil
	case "fgd":
		return &FGD{}, nil
	case "topology":
		return TopologyLocality{}, nil
	case "gangway":
		return &Gangway{}, nil
	}
	return nil, fmt.Errorf("scorer %q: %w; valid: %s", name, ErrUnknownScorer, strings.Join(scorerNames, ", "))
}
