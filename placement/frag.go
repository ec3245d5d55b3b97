package placement

import (
	"math"
	"slices"
	"sort"

	"github.com/gangwayhq/gangway"
)

// Fragmentation, as defined by Weng et al., "Beware of Fragmentation:
// Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent"
// (USENIX ATC 2023), and as its artifact computes it
// (hkust-adsl/kubernetes-scheduler-simulator, pkg/utils/frag.go:
// NodeGpuShareFragAmount, GetNodePodFrag, GetGpuFragMilliByNodeResAndPodRes).
//
// A node's free GPU capacity is fragmented for a class of tasks when tasks
// of that class cannot use it. For each workload class m with weight p_m:
//
//   - the class cannot be placed on the node at all (its model is not
//     allowed, CPU or memory is short, or fewer than GPUs(m) GPUs have
//     Milli(m) free): all of the node's free GPU milli is fragmented for it;
//   - a class that asks for no GPU: also all of it (the artifact counts a
//     node's idle GPUs as fragments from a CPU-only task's point of view —
//     its frag types XL and XR are summed like the others);
//   - otherwise: the free milli of the GPUs whose free capacity is below the
//     class's per-GPU demand (Milli(m), which is Whole for whole-GPU
//     classes, so min(demand, 1 GPU)).
//
// The node's fragmentation is the expectation Σ_m p_m·F_n(m), in milli-GPU.
//
// One deliberate extension: the artifact's pod resource has no memory
// dimension, so it never counts memory. Here a class with MemMiB > 0 also
// needs that much free memory; give classes MemMiB 0 to get the artifact's
// numbers exactly.

// FragmentationOf is the fragmentation kernel: the expected fragmented GPU
// capacity, in milli-GPU, of a node with free milli-GPU per GPU free, free
// CPU cpu (milli) and memory mem (MiB) and GPU model model, against
// workload. It is the reference the cached scorers are tested against.
func FragmentationOf(free []int, cpu, mem int64, model string, workload []WorkloadClass) float64 {
	total := 0
	for _, f := range free {
		total += f
	}
	if total == 0 {
		return 0
	}
	frag := 0.0
	for _, w := range workload {
		if w.GPUs <= 0 || !allowed(w.Models, model) || cpu < w.CPUMilli || (w.MemMiB > 0 && mem < w.MemMiB) {
			frag += w.Weight * float64(total)
			continue
		}
		milli := classMilli(w)
		fit, below := 0, 0
		for _, f := range free {
			if f >= milli {
				fit++
			} else {
				below += f
			}
		}
		if fit < w.GPUs {
			frag += w.Weight * float64(total)
			continue
		}
		frag += w.Weight * float64(below)
	}
	return frag
}

// classMilli is a class's demand per GPU: Milli when it is a share, else a
// whole GPU.
func classMilli(w WorkloadClass) int {
	if w.Milli <= 0 || w.Milli > Whole {
		return Whole
	}
	return w.Milli
}

// NodeFragmentation is node i's fragmented GPU capacity in milli-GPU
// against v.Workload() (see FragmentationOf).
func NodeFragmentation(v *View, i int) float64 {
	return FragmentationOf(v.free[i], v.cpu[i], v.mem[i], v.nodes[i].Model, v.workload)
}

// ClusterFragmentation sums fragmented and free GPU capacity, in milli-GPU,
// over the schedulable nodes; fragMilli/freeMilli is the fragmentation
// rate. It compiles the workload once per call; a caller that measures
// after every change should keep a FragMeter, which recomputes only the
// nodes that changed.
func ClusterFragmentation(v *View) (fragMilli, freeMilli float64) {
	var m FragMeter
	return m.Cluster(v)
}

// FragMeter measures fragmentation repeatedly over one view, recomputing
// only nodes whose free capacity changed since the last measurement. The
// zero value is ready to use; it is not safe for concurrent use.
type FragMeter struct {
	cache fragCache
}

// Node is node i's fragmented GPU capacity in milli-GPU, as
// NodeFragmentation.
func (m *FragMeter) Node(v *View, i int) float64 {
	m.cache.ensure(v)
	return m.cache.before(v, i)
}

// Cluster is ClusterFragmentation, reusing what did not change.
func (m *FragMeter) Cluster(v *View) (fragMilli, freeMilli float64) {
	m.cache.ensure(v)
	for i := range v.nodes {
		if !v.nodes[i].Schedulable {
			continue
		}
		fragMilli += m.cache.before(v, i)
		freeMilli += float64(v.FreeMilli(i))
	}
	return fragMilli, freeMilli
}

// fragClass is a workload class compiled for the nodes of one GPU model:
// only classes that may run on the model and ask for GPUs. Identical
// shapes are merged.
type fragClass struct {
	k, milli int
	cpu, mem int64
	weight   float64
	mi       int // index of milli in fragModel.millis
}

// fragModel is the workload as nodes of one GPU model see it.
type fragModel struct {
	// always is the weight of classes for which every free GPU of such a
	// node is fragmented whatever its state: CPU-only classes and classes
	// that do not allow the model.
	always  float64
	classes []fragClass
	// millis are the classes' distinct per-GPU demands: eval sums the free
	// milli below each once, not once per class.
	millis []int
}

// fragKeyGPUs is the most GPUs a node may have for its state to be
// memoized; larger nodes are computed directly.
const fragKeyGPUs = 16

// fragMemoMax bounds the memo; it is cleared when full.
const fragMemoMax = 1 << 20

// fragKey is a node state as far as fragmentation can tell: its model, its
// free GPU milli sorted high to low, and its CPU and memory reduced to how
// many of the workload's distinct CPU and memory demands they meet.
type fragKey struct {
	model    int32
	n        int32
	cpu, mem int32
	free     [fragKeyGPUs]uint16
}

// fragCache evaluates fragmentation fast for one view: the workload
// compiled per GPU model, each node's current fragmentation (validated
// against the node's state on every read, so it stays right inside gang
// transactions the engine does not report), and a memo keyed by node state
// so identical nodes are computed once.
type fragCache struct {
	view     *View
	workload []WorkloadClass
	models   map[string]int
	per      []fragModel
	cpuSteps []int64 // distinct class CPU demands, ascending
	memSteps []int64 // distinct class memory demands (> 0), ascending
	nodes    []nodeFrag
	memo     map[fragKey]float64
}

// nodeFrag is a node's fragmentation for the state it was computed on.
type nodeFrag struct {
	ok       bool
	cpu, mem int64
	free     []int
	frag     float64
}

// ensure (re)compiles the cache when it is first used on v, or v's
// workload changed.
func (c *fragCache) ensure(v *View) {
	if c.view == v && sameWorkload(c.workload, v.workload) {
		return
	}
	c.prepare(v)
}

func sameWorkload(a, b []WorkloadClass) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

func (c *fragCache) prepare(v *View) {
	c.view, c.workload = v, v.workload
	c.models = map[string]int{}
	c.per = c.per[:0]
	cpus, mems := map[int64]bool{}, map[int64]bool{}
	for _, w := range v.workload {
		if w.GPUs > 0 {
			cpus[w.CPUMilli] = true
			if w.MemMiB > 0 {
				mems[w.MemMiB] = true
			}
		}
	}
	c.cpuSteps = sortedKeys(cpus)
	c.memSteps = sortedKeys(mems)
	for i := range v.nodes {
		model := v.nodes[i].Model
		if _, ok := c.models[model]; ok {
			continue
		}
		c.models[model] = len(c.per)
		c.per = append(c.per, compileModel(model, v.workload))
	}
	c.nodes = make([]nodeFrag, len(v.nodes))
	for i := range c.nodes {
		c.nodes[i].free = make([]int, len(v.free[i]))
	}
	c.memo = make(map[fragKey]float64, 1024)
}

func sortedKeys(m map[int64]bool) []int64 {
	out := make([]int64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func compileModel(model string, workload []WorkloadClass) fragModel {
	type shape struct {
		k, milli int
		cpu, mem int64
	}
	var fm fragModel
	at := map[shape]int{} // a workload of a long queue has thousands of classes
	for _, w := range workload {
		if w.GPUs <= 0 || !allowed(w.Models, model) {
			fm.always += w.Weight
			continue
		}
		fc := fragClass{k: w.GPUs, milli: classMilli(w), cpu: w.CPUMilli, mem: max(w.MemMiB, 0), weight: w.Weight}
		key := shape{fc.k, fc.milli, fc.cpu, fc.mem}
		if k, ok := at[key]; ok {
			fm.classes[k].weight += fc.weight
			continue
		}
		at[key] = len(fm.classes)
		fc.mi = slices.Index(fm.millis, fc.milli)
		if fc.mi < 0 {
			fc.mi = len(fm.millis)
			fm.millis = append(fm.millis, fc.milli)
		}
		fm.classes = append(fm.classes, fc)
	}
	return fm
}

// levels is the free CPU and memory at or above which fragmentation, before
// and after a replica needing at most cpu and mem lands, no longer changes
// with them: fragmentation compares them only with the classes' demands.
func (c *fragCache) levels(v *View, cpu, mem int64) (cpuLevel, memLevel int64) {
	c.ensure(v)
	if n := len(c.cpuSteps); n > 0 {
		cpuLevel = satAdd(c.cpuSteps[n-1], max(cpu, 0))
	}
	if n := len(c.memSteps); n > 0 {
		memLevel = satAdd(c.memSteps[n-1], max(mem, 0))
	}
	return cpuLevel, memLevel
}

// satAdd is a+b for a, b >= 0, math.MaxInt64 where that overflows.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// invalidate forgets node i's cached fragmentation.
func (c *fragCache) invalidate(i int) {
	if i >= 0 && i < len(c.nodes) {
		c.nodes[i].ok = false
	}
}

// before is node i's fragmentation in its current state.
func (c *fragCache) before(v *View, i int) float64 {
	e := &c.nodes[i]
	if e.ok && e.cpu == v.cpu[i] && e.mem == v.mem[i] && slices.Equal(e.free, v.free[i]) {
		return e.frag
	}
	e.frag = c.state(c.models[v.nodes[i].Model], v.free[i], v.cpu[i], v.mem[i])
	e.cpu, e.mem, e.ok = v.cpu[i], v.mem[i], true
	copy(e.free, v.free[i])
	return e.frag
}

// after is node i's fragmentation once candidate cand of a replica needing
// cpu and mem is placed on it.
func (c *fragCache) after(v *View, cand Candidate, cpu, mem int64) float64 {
	i := cand.Node
	var buf [fragKeyGPUs]int
	var free []int
	if n := len(v.free[i]); n <= fragKeyGPUs {
		free = buf[:n]
	} else {
		free = make([]int, n)
	}
	copy(free, v.free[i])
	for _, g := range cand.GPUs {
		free[g] -= cand.Milli
	}
	return c.state(c.models[v.nodes[i].Model], free, v.cpu[i]-cpu, v.mem[i]-mem)
}

// delta is how much placing cand for one replica of j lowers node
// cand.Node's fragmentation: F_before − F_after (negative when it grows).
func (c *fragCache) delta(v *View, cand Candidate, j *gangway.QueueEntry) float64 {
	c.ensure(v)
	return c.before(v, cand.Node) - c.after(v, cand, j.CPUMilli, j.MemMiB)
}

// state is the fragmentation of a node of model index m with free GPU
// milli free (any order; not modified), cpu and mem.
func (c *fragCache) state(m int, free []int, cpu, mem int64) float64 {
	n := len(free)
	if n > fragKeyGPUs {
		s := slices.Clone(free)
		slices.SortFunc(s, func(a, b int) int { return b - a })
		return c.per[m].eval(s, cpu, mem)
	}
	var s [fragKeyGPUs]int
	copy(s[:], free)
	sortDesc(s[:n])
	if s[0] <= 0 {
		return 0
	}
	k := fragKey{model: int32(m), n: int32(n),
		cpu: int32(stepsMet(c.cpuSteps, cpu)), mem: int32(stepsMet(c.memSteps, mem))}
	for g := range n {
		k.free[g] = uint16(max(s[g], 0))
	}
	if f, ok := c.memo[k]; ok {
		return f
	}
	f := c.per[m].eval(s[:n], cpu, mem)
	if len(c.memo) >= fragMemoMax {
		clear(c.memo)
	}
	c.memo[k] = f
	return f
}

// stepsMet is how many of the ascending demands steps x meets.
func stepsMet(steps []int64, x int64) int {
	return sort.Search(len(steps), func(i int) bool { return steps[i] > x })
}

// sortDesc sorts a few ints high to low (insertion sort: no allocation,
// fast for a node's handful of GPUs).
func sortDesc(s []int) {
	for i := 1; i < len(s); i++ {
		x := s[i]
		j := i
		for ; j > 0 && s[j-1] < x; j-- {
			s[j] = s[j-1]
		}
		s[j] = x
	}
}

// eval is the fragmentation of a node whose free GPU milli, sorted high to
// low, is s.
func (fm *fragModel) eval(s []int, cpu, mem int64) float64 {
	total := 0
	for _, f := range s {
		total += f
	}
	if total == 0 {
		return 0
	}
	t := float64(total)
	frag := fm.always * t
	n := len(s)
	var buf [16]float64
	below := buf[:0]
	for _, milli := range fm.millis {
		b := 0
		for g := n - 1; g >= 0 && s[g] < milli; g-- {
			b += s[g]
		}
		below = append(below, float64(b))
	}
	for ci := range fm.classes {
		fc := &fm.classes[ci]
		if fc.k > n || s[fc.k-1] < fc.milli || cpu < fc.cpu || (fc.mem > 0 && mem < fc.mem) {
			frag += fc.weight * t
			continue
		}
		frag += fc.weight * below[fc.mi]
	}
	return frag
}
