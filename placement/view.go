package placement

import (
	"math/rand/v2"
	"slices"
	"time"
)

// View is the free capacity during one Place call. Scorers read it; only
// the engine changes it, inside transactions that either commit or leave no
// trace. It is the one place GPU accounting happens: take refuses to hand
// out capacity that is not free.
type View struct {
	nodes []Node
	now   time.Time
	free  [][]int // per node, per GPU: free milli-GPU (0 for unhealthy GPUs and MIG devices)
	// mig is, per node with MIG devices, each GPU's MIG state (migNone
	// for a whole GPU); nil for nodes without, and nil altogether in a
	// fleet without MIG. A MIG device's free stays 0, so whole-GPU and
	// share placement, scorers and node classes see it as taken.
	mig   [][]migState
	cpu   []int64 // free CPU per node
	mem   []int64 // free memory per node
	whole []int   // per node: GPUs with all Whole milli free
	// avoidFlaky: the job being placed stays off flaky GPUs (flaky.go).
	avoidFlaky bool
	// placing is the job being placed or explained: it may use GPUs
	// reserved for itself (a defragmentation's destination).
	placing string
	// oneDomain is, per node, whether all its GPUs name the same NVLink
	// domain (one per node, or rack-scale): pickWhole's common case.
	oneDomain []bool
	// resStart holds, per node and GPU, when a reservation for a blocked
	// job begins (zero: none). A job may use a reserved GPU only if it ends
	// before then.
	resStart [][]time.Time
	resJob   [][]string
	reserved bool // some resStart is set

	workload []WorkloadClass
	demand   []WorkloadClass // the whole mix (Options.Demand)
	rnd      *rand.Rand

	undo  []saved // node states saved by open transactions, oldest first
	depth int     // open transactions

	// cands and scratch are reused by candidates and pickWhole, so that
	// scanning the fleet for one replica does not allocate per node.
	cands   []Candidate
	scratch []int

	// dirty lists the nodes whose free capacity or reservations changed
	// since node classes last looked (isDirty: whether a node is listed);
	// classes.go keys them again before the next scan.
	dirty   []int
	isDirty []bool
	// supply lists, when supplyOn, every node change since the default
	// policy's model supply last counted (modelSupply.sync), in order.
	supply   []int
	supplyOn bool
}

// saved is a node's state before a transaction first touched it.
type saved struct {
	node     int
	free     []int
	mig      []migState
	cpu, mem int64
	whole    int
}

// migState is a MIG device's state in the view.
type migState uint8

const (
	migNone migState = iota // a whole GPU
	migFree
	migUsed
	migDown // unhealthy
)

// Candidate is one way to place one replica: a node, the GPUs on it and the
// share of each GPU taken (Whole for whole GPUs). A scorer gets GPUs only
// for the Score call: the engine reuses the slice afterwards.
type Candidate struct {
	Node  int
	GPUs  []int
	Milli int
}

// WorkloadClass is one kind of task in the typical workload, with its
// share of all tasks: what fragmentation is measured against.
// The JSON names are those the dispatch leader stores it under
// (capacity.View.SaveLearned).
type WorkloadClass struct {
	GPUs     int      `json:"gpus"`  // whole GPUs per task (1 with Milli < Whole for a share; 0 for CPU-only)
	Milli    int      `json:"milli"` // per GPU
	CPUMilli int64    `json:"cpuMilli"`
	MemMiB   int64    `json:"memMiB"`
	Models   []string `json:"models,omitempty"` // allowed models; empty = any
	Weight   float64  `json:"weight"`           // popularity; weights sum to 1
}

func newView(s *Snapshot, workload []WorkloadClass, rnd *rand.Rand) *View {
	n := len(s.Nodes)
	v := &View{nodes: s.Nodes, now: s.Now, free: make([][]int, n), cpu: make([]int64, n), mem: make([]int64, n),
		whole: make([]int, n), oneDomain: make([]bool, n), resStart: make([][]time.Time, n), resJob: make([][]string, n),
		workload: workload, demand: workload, rnd: rnd, isDirty: make([]bool, n)}
	for i := range s.Nodes {
		nd := &s.Nodes[i]
		v.free[i] = make([]int, len(nd.GPUs))
		for g, gpu := range nd.GPUs {
			if gpu.MIG != "" {
				v.addMIG(i, g, gpu)
				continue
			}
			if gpu.Healthy {
				v.free[i][g] = max(Whole-gpu.UsedMilli, 0)
			}
			if v.free[i][g] == Whole {
				v.whole[i]++
			}
		}
		v.oneDomain[i] = !slices.ContainsFunc(nd.GPUs, func(g GPU) bool { return g.Domain != nd.GPUs[0].Domain })
		v.cpu[i] = nd.CPUMilli - nd.UsedCPUMilli
		v.mem[i] = nd.MemMiB - nd.UsedMemMiB
	}
	return v
}

// addMIG records GPU g of node i, a MIG device, as free, used or down.
func (v *View) addMIG(i, g int, gpu GPU) {
	if v.mig == nil {
		v.mig = make([][]migState, len(v.nodes))
	}
	if v.mig[i] == nil {
		v.mig[i] = make([]migState, len(v.nodes[i].GPUs))
	}
	switch {
	case !gpu.Healthy:
		v.mig[i][g] = migDown
	case gpu.UsedMilli > 0:
		v.mig[i][g] = migUsed
	default:
		v.mig[i][g] = migFree
	}
}

// isMIG reports whether GPU g of node i is a MIG device.
func (v *View) isMIG(i, g int) bool {
	return v.mig != nil && v.mig[i] != nil && v.mig[i][g] != migNone
}

// migFree reports whether GPU g of node i is a free MIG device of profile
// that a job ending at end may use.
func (v *View) migFree(i, g int, profile string, end time.Time) bool {
	return v.mig[i][g] == migFree && v.nodes[i].GPUs[g].MIG == profile && v.usable(i, g, end)
}

// FreeMIG is how many of node i's MIG devices of profile are free.
func (v *View) FreeMIG(i int, profile string) int {
	if v.mig == nil || v.mig[i] == nil {
		return 0
	}
	n := 0
	for g, st := range v.mig[i] {
		if st == migFree && v.nodes[i].GPUs[g].MIG == profile {
			n++
		}
	}
	return n
}

// Nodes is the fleet; index i of every accessor refers to Nodes()[i].
func (v *View) Nodes() []Node { return v.nodes }

// Free is node i's free milli-GPU per GPU index. Read only.
func (v *View) Free(i int) []int { return v.free[i] }

// FreeCPU and FreeMem are node i's free CPU (milli) and memory (MiB).
func (v *View) FreeCPU(i int) int64 { return v.cpu[i] }
func (v *View) FreeMem(i int) int64 { return v.mem[i] }

// FreeWhole is how many of node i's GPUs are entirely free.
func (v *View) FreeWhole(i int) int { return v.whole[i] }

// FreeMilli is node i's total free milli-GPU.
func (v *View) FreeMilli(i int) int {
	t := 0
	for _, f := range v.free[i] {
		t += f
	}
	return t
}

// Workload is the typical workload fragmentation is measured against.
func (v *View) Workload() []WorkloadClass { return v.workload }

// Rand is the seeded source scorers may draw from.
func (v *View) Rand() *rand.Rand { return v.rnd }

// Now is the snapshot time.
func (v *View) Now() time.Time { return v.now }

// begin opens a transaction, possibly inside another; every take and give
// until its commit or rollback is undone by its rollback. It returns the
// mark to pass to commit or rollback.
func (v *View) begin() int {
	v.depth++
	return len(v.undo)
}

// touch saves node i before a change, while any transaction is open, and
// marks it changed.
func (v *View) touch(i int) {
	v.changed(i)
	if v.depth == 0 {
		return
	}
	s := saved{node: i, free: slices.Clone(v.free[i]), cpu: v.cpu[i], mem: v.mem[i], whole: v.whole[i]}
	if v.mig != nil && v.mig[i] != nil {
		s.mig = slices.Clone(v.mig[i])
	}
	v.undo = append(v.undo, s)
}

// commit keeps the transaction's changes (an enclosing transaction can
// still undo them).
func (v *View) commit(mark int) {
	v.depth--
	if v.depth == 0 {
		v.undo = v.undo[:0]
	}
	_ = mark
}

// rollback undoes every change since mark, newest first.
func (v *View) rollback(mark int) {
	for k := len(v.undo) - 1; k >= mark; k-- {
		s := v.undo[k]
		v.free[s.node], v.cpu[s.node], v.mem[s.node], v.whole[s.node] = s.free, s.cpu, s.mem, s.whole
		if s.mig != nil {
			v.mig[s.node] = s.mig
		}
		v.changed(s.node)
	}
	v.undo = v.undo[:mark]
	v.depth--
}

// take allocates a candidate for a replica needing cpu and mem (a MIG
// device whole, whatever c.Milli says). It panics if the capacity is not
// free: the engine only takes what it checked, so a
// failure here is a bug, never a placement outcome.
func (v *View) take(c Candidate, cpu, mem int64) {
	v.touch(c.Node)
	if v.cpu[c.Node] < cpu || v.mem[c.Node] < mem {
		panic("placement: take beyond free CPU or memory")
	}
	v.cpu[c.Node] -= cpu
	v.mem[c.Node] -= mem
	for _, g := range c.GPUs {
		if v.isMIG(c.Node, g) {
			if v.mig[c.Node][g] != migFree {
				panic("placement: MIG device double allocation")
			}
			v.mig[c.Node][g] = migUsed
			continue
		}
		f := v.free[c.Node][g]
		if f < c.Milli {
			panic("placement: GPU double allocation")
		}
		if f == Whole {
			v.whole[c.Node]--
		}
		v.free[c.Node][g] = f - c.Milli
	}
}

// give returns capacity (a preemption victim's, or a running job's that
// ends before a reservation); a MIG device is given back whole.
func (v *View) give(c Candidate, cpu, mem int64) {
	v.touch(c.Node)
	v.cpu[c.Node] += cpu
	v.mem[c.Node] += mem
	for _, g := range c.GPUs {
		if v.isMIG(c.Node, g) {
			if v.mig[c.Node][g] == migUsed {
				v.mig[c.Node][g] = migFree
			}
			continue
		}
		v.free[c.Node][g] = min(v.free[c.Node][g]+c.Milli, Whole)
		if v.free[c.Node][g] == Whole {
			v.whole[c.Node]++
		}
	}
}

// usable reports whether GPU g of node i may go to the job being placed
// (placing), ending at end: it is not reserved, reserved for that job, or
// the job ends before the reservation starts.
func (v *View) usable(i, g int, end time.Time) bool {
	s := v.resStart[i]
	return v.flakyOK(i, g) && (s == nil || s[g].IsZero() || (!end.IsZero() && !end.After(s[g])) ||
		(v.placing != "" && v.resJob[i][g] == v.placing))
}

func (v *View) reserve(i, g int, start time.Time, job string) {
	v.reserved = true
	v.changed(i)
	if v.resStart[i] == nil {
		v.resStart[i] = make([]time.Time, len(v.free[i]))
		v.resJob[i] = make([]string, len(v.free[i]))
	}
	if v.resStart[i][g].IsZero() || start.Before(v.resStart[i][g]) {
		v.resStart[i][g], v.resJob[i][g] = start, job
	}
}

// clearReservations drops every reservation: each Place call makes its
// own, for the jobs still blocked then.
func (v *View) clearReservations() {
	if !v.reserved {
		return
	}
	for i, s := range v.resStart {
		if s != nil {
			v.changed(i)
		}
	}
	clear(v.resStart)
	clear(v.resJob)
	v.reserved = false
}

// changed records that node i changed, for node classes and the model
// supply.
func (v *View) changed(i int) {
	if v.supplyOn {
		v.supply = append(v.supply, i)
	}
	if !v.isDirty[i] {
		v.isDirty[i] = true
		v.dirty = append(v.dirty, i)
	}
}
