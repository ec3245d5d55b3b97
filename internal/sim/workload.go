package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/gangwayhq/gangway/placement"
)

// Keep is a Mix target that leaves that aspect of the task list as it is.
const Keep = -1.0

// Mix is a workload variant of an openb task list, in the spirit of the
// FGD artifact's gpushare, multigpu, gpuspec and cpu variants of the
// default list (see GenerateMix for what each knob does). A knob set to
// Keep (any negative value) leaves its aspect as the source has it; the
// zero Mix asks for no sharing, no multi-GPU, no constrained and no
// CPU-only tasks — start from NoMix.
type Mix struct {
	// Share is the share of the GPU tasks' GPU demand (milli-GPU) that
	// GPU-sharing tasks (one GPU, below 1000 milli) carry, in [0, 1]. The
	// artifact's gpushare40 has 0.40; the default list 0.285.
	Share float64
	// Multi is the share of the GPU demand that multi-GPU tasks carry, in
	// [0, 1). The artifact's multigpu20 has 0.20; the default 0.073.
	Multi float64
	// Spec is the share of GPU tasks, by count, that carry a GPU-model
	// constraint, in [0, 1]. The artifact's gpuspec10 has 0.10; the
	// default none.
	Spec float64
	// CPU is the CPU-only tasks' total CPU demand as a multiple of the
	// source's, 0 or more (1: as the source).
	CPU float64
}

// NoMix is a Mix that changes nothing.
var NoMix = Mix{Share: Keep, Multi: Keep, Spec: Keep, CPU: Keep}

func (m Mix) String() string {
	var parts []string
	add := func(name string, x float64, scale float64, unit string) {
		if x >= 0 {
			parts = append(parts, fmt.Sprintf("%s=%g%s", name, math.Round(x*scale*100)/100, unit))
		}
	}
	add("share", m.Share, 100, "%")
	add("multi", m.Multi, 100, "%")
	add("spec", m.Spec, 100, "%")
	add("cpu", m.CPU, 100, "%")
	if len(parts) == 0 {
		return "default"
	}
	return strings.Join(parts, ",")
}

// Validate checks the targets; the errors name the knob as `gangway replay
// sweep` spells it.
func (m Mix) Validate() error {
	var errs []error
	check := func(name string, x, hi float64, open bool) {
		if math.IsNaN(x) || x > hi || (open && x == hi) {
			want := fmt.Sprintf("0-%g", hi)
			if open {
				want = fmt.Sprintf("0 to below %g", hi)
			}
			errs = append(errs, &InputError{name, fmt.Errorf("%g: want a share %s (or negative to keep the task list's)", x, want)})
		}
	}
	check("share", m.Share, 1, false)
	check("multi", m.Multi, 1, true)
	check("spec", m.Spec, 1, false)
	if math.IsNaN(m.CPU) || math.IsInf(m.CPU, 0) {
		errs = append(errs, &InputError{"cpu", fmt.Errorf("%g: want a multiple of the task list's CPU-only demand, 0 or more", m.CPU)})
	}
	if m.Share >= 0 && m.Multi >= 0 && m.Share+m.Multi > 1 {
		errs = append(errs, &InputError{"share", fmt.Errorf("share %g + multi %g: want at most 1 together", m.Share, m.Multi)})
	}
	return errors.Join(errs...)
}

// MixStats is what a task list's mix measures, in Mix's terms.
type MixStats struct {
	Tasks, GPUTasks, CPUOnly int
	Share, Multi, Spec       float64 // as Mix defines them
	CPUOnlyMilli             int64   // total CPU demand of CPU-only tasks
}

// MeasureMix measures tasks in Mix's terms.
func MeasureMix(tasks []Task) MixStats {
	s := MixStats{Tasks: len(tasks)}
	var gpu, share, multi int64
	spec := 0
	for i := range tasks {
		t := &tasks[i]
		switch {
		case t.NumGPU == 0:
			s.CPUOnly++
			s.CPUOnlyMilli += t.CPUMilli
			continue
		case isShare(t):
			share += t.GPUMilliTotal()
		case t.NumGPU > 1:
			multi += t.GPUMilliTotal()
		}
		s.GPUTasks++
		gpu += t.GPUMilliTotal()
		if len(t.Models) > 0 {
			spec++
		}
	}
	if gpu > 0 {
		s.Share, s.Multi = float64(share)/float64(gpu), float64(multi)/float64(gpu)
	}
	if s.GPUTasks > 0 {
		s.Spec = float64(spec) / float64(s.GPUTasks)
	}
	return s
}

func isShare(t *Task) bool { return t.NumGPU == 1 && t.GPUMilli < placement.Whole }
func isMulti(t *Task) bool { return t.NumGPU > 1 }

// SpecPool is a GPU-model constraint GenerateMix may give a task, with its
// weight.
type SpecPool struct {
	Models []string
	Weight float64
}

// OpenBSpecPool is the model constraints of the artifact's gpuspec10
// variant (openb_pod_list_gpuspec10.csv, 732 constrained tasks; the lists
// come from the Alibaba trace's gpu_spec column), with how many tasks
// carry each — duplicate models within a list removed. Constraints are not
// spread over the fleet by capacity: T4, about 14% of the GPU node list's
// GPUs, is asked for by almost half.
var OpenBSpecPool = []SpecPool{
	{[]string{"T4"}, 355}, {[]string{"G2"}, 120}, {[]string{"P100"}, 100},
	{[]string{"V100M16", "V100M32"}, 61}, {[]string{"P100", "V100M16", "V100M32"}, 26},
	{[]string{"G2", "P100", "T4", "V100M16", "V100M32"}, 20}, {[]string{"G3"}, 17},
	{[]string{"A10", "G2", "T4", "V100M16", "V100M32"}, 9}, {[]string{"P100", "V100M16"}, 6},
	{[]string{"P100", "T4", "V100M16", "V100M32"}, 5}, {[]string{"V100M16"}, 4}, {[]string{"V100M32"}, 4},
	{[]string{"A10", "G2", "P100", "T4", "V100M16", "V100M32"}, 3}, {[]string{"T4", "V100M16", "V100M32"}, 1},
	{[]string{"A10", "T4"}, 1},
}

// GenerateMix derives a variant of tasks (the source, e.g. the default
// openb pod list) for the fleet nodes, seeded, the way the FGD artifact's
// variants relate to its default list. Knobs apply in this order; each
// keeps what the earlier ones set except as noted:
//
//   - Share: the number of GPU tasks stays; random non-sharing GPU tasks
//     are replaced by copies of random sharing tasks of the source (or,
//     to lower it, sharing tasks by non-sharing ones) until sharing
//     tasks carry Share of the GPU demand. CPU-only tasks are untouched
//     (as in gpushare40, which keeps the default's CPU-only demand to
//     the milli-core).
//   - Multi: likewise with multi-GPU tasks against the other GPU tasks
//     (sharing ones among them, so raising Multi lowers sharing tasks'
//     count in proportion, not their share of the rest). The artifact's
//     multigpu20 appends multi-GPU copies instead; replacing keeps the
//     task count, which tuning to 1.3 × capacity changes anyway.
//   - Spec: random unconstrained GPU tasks get a model constraint drawn
//     by weight from pool (nil: OpenBSpecPool) among the lists naming a
//     model of the fleet, with models outside the fleet dropped, and only
//     among lists on whose models' nodes the task fits (a GPU-model
//     constraint no node can meet would fail under every policy), until
//     Spec of the GPU tasks are constrained; to lower it, random
//     constraints are removed. As in gpuspec10, nothing else changes.
//   - CPU: random CPU-only tasks are dropped, or copies of random CPU-only
//     tasks of the source appended, until their total CPU demand is CPU ×
//     the source's (the first copy past the target is kept, the first drop
//     below it made). GPU tasks are untouched.
//
// Copies are named "<source name>-mix-<n>"; a copy that replaces a task
// arrives at that task's creation time with its own run time (the FGD
// protocol reads no times; a dynamic replay does). The result is sorted by name,
// so that the protocol's Prepare sees the same list whatever the order of
// the source.
func GenerateMix(tasks []Task, nodes []placement.Node, m Mix, pool []SpecPool, seed uint64) ([]Task, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	if pool == nil {
		pool = OpenBSpecPool
	}
	src := sortedByName(tasks)
	out := slices.Clone(src)
	g := &mixGen{rnd: rand.New(rand.NewPCG(seed, 0x6d6978)), src: src}
	if m.Share >= 0 {
		if err := g.rebalance(&out, "share", m.Share, isShare); err != nil {
			return nil, err
		}
	}
	if m.Multi >= 0 {
		if err := g.rebalance(&out, "multi", m.Multi, isMulti); err != nil {
			return nil, err
		}
	}
	if m.Spec >= 0 {
		if err := g.constrain(out, nodes, m.Spec, pool); err != nil {
			return nil, err
		}
	}
	if m.CPU >= 0 {
		if err := g.cpuOnly(&out, m.CPU); err != nil {
			return nil, err
		}
	}
	return sortedByName(out), nil
}

type mixGen struct {
	rnd    *rand.Rand
	src    []Task
	copies int
}

func (g *mixGen) copyOf(t Task) Task {
	t.Name = fmt.Sprintf("%s-mix-%d", t.Name, g.copies)
	t.Models = slices.Clone(t.Models)
	g.copies++
	return t
}

// arriveAt moves t's arrival (creation time) to creation, keeping its
// run time; when either time is missing only the creation time is set.
func (t *Task) arriveAt(creation int64) {
	if t.Creation != NoTime && creation != NoTime {
		d := creation - t.Creation
		if t.Scheduled != NoTime {
			t.Scheduled += d
		}
		if t.Deletion != NoTime {
			t.Deletion += d
		}
	}
	t.Creation = creation
}

// rebalance replaces GPU tasks until those in class carry target of the
// GPU demand, stopping at the first replacement that reaches or passes
// it. A copy arrives when the task it replaces did (arriveAt), so the
// variant keeps the source's arrival process for a dynamic replay.
func (g *mixGen) rebalance(out *[]Task, knob string, target float64, in func(*Task) bool) error {
	var class, other []Task // source pools
	for i := range g.src {
		if t := &g.src[i]; t.NumGPU > 0 {
			if in(t) {
				class = append(class, *t)
			} else {
				other = append(other, *t)
			}
		}
	}
	var cd, total int64
	var inIdx, outIdx []int // positions in *out of GPU tasks in and out of class
	for i := range *out {
		t := &(*out)[i]
		if t.NumGPU == 0 {
			continue
		}
		total += t.GPUMilliTotal()
		if in(t) {
			cd += t.GPUMilliTotal()
			inIdx = append(inIdx, i)
		} else {
			outIdx = append(outIdx, i)
		}
	}
	if total == 0 {
		return &InputError{knob, errors.New("the task list has no GPU tasks")}
	}
	share := func() float64 { return float64(cd) / float64(total) }
	raise := share() < target
	from, to := outIdx, class // replace tasks at from with copies from to
	if !raise {
		from, to = inIdx, other
	}
	if len(to) == 0 && share() != target {
		return &InputError{knob, fmt.Errorf("%g: the task list has no %s tasks to copy", target, map[bool]string{true: "such", false: "other GPU"}[raise])}
	}
	for len(from) > 0 && (raise && share() < target || !raise && share() > target) {
		k := g.rnd.IntN(len(from))
		i := from[k]
		from[k] = from[len(from)-1]
		from = from[:len(from)-1]
		old := (*out)[i].GPUMilliTotal()
		nt := g.copyOf(to[g.rnd.IntN(len(to))])
		nt.arriveAt((*out)[i].Creation)
		total += nt.GPUMilliTotal() - old
		if raise {
			cd += nt.GPUMilliTotal()
		} else {
			cd -= old
		}
		(*out)[i] = nt
	}
	return nil
}

// constrain sets model constraints on random GPU tasks (or clears them)
// until target of the GPU tasks carry one.
func (g *mixGen) constrain(out []Task, nodes []placement.Node, target float64, pool []SpecPool) error {
	fleet := map[string]bool{}
	for i := range nodes {
		if len(nodes[i].GPUs) > 0 {
			fleet[nodes[i].Model] = true
		}
	}
	var lists []SpecPool
	for _, p := range pool {
		var ms []string
		for _, m := range p.Models {
			if fleet[m] && !slices.Contains(ms, m) {
				ms = append(ms, m)
			}
		}
		if len(ms) > 0 && p.Weight > 0 {
			lists = append(lists, SpecPool{ms, p.Weight})
		}
	}
	var with, without []int
	for i := range out {
		if out[i].NumGPU == 0 {
			continue
		}
		if len(out[i].Models) > 0 {
			with = append(with, i)
		} else {
			without = append(without, i)
		}
	}
	gpuTasks := len(with) + len(without)
	if gpuTasks == 0 {
		return &InputError{"spec", errors.New("the task list has no GPU tasks")}
	}
	want := int(math.Round(target * float64(gpuTasks)))
	for len(with) > want {
		k := g.rnd.IntN(len(with))
		out[with[k]].Models = nil
		with[k] = with[len(with)-1]
		with = with[:len(with)-1]
	}
	if len(with) < want && len(lists) == 0 {
		return &InputError{"spec", fmt.Errorf("%g: no model constraint of the pool names a model of the fleet", target)}
	}
	fits := newFitIndex(nodes)
	weights := make([]float64, len(lists))
	for len(with) < want && len(without) > 0 {
		k := g.rnd.IntN(len(without))
		i := without[k]
		without[k] = without[len(without)-1]
		without = without[:len(without)-1]
		sum := 0.0
		for x, l := range lists {
			weights[x] = 0
			if fits.any(&out[i], l.Models) {
				weights[x] = l.Weight
				sum += l.Weight
			}
		}
		if sum == 0 {
			continue // no constraint this task could meet
		}
		r := g.rnd.Float64() * sum
		x := 0
		for ; x < len(lists)-1 && r >= weights[x]; x++ {
			r -= weights[x]
		}
		for weights[x] == 0 { // float rounding at the end
			x--
		}
		out[i].Models = slices.Clone(lists[x].Models)
		with = append(with, i)
	}
	return nil
}

// fitIndex answers whether a task fits an empty node of some model.
type fitIndex map[string][]placement.Node

func newFitIndex(nodes []placement.Node) fitIndex {
	f := fitIndex{}
	for _, n := range nodes {
		f[n.Model] = append(f[n.Model], n)
	}
	return f
}

func (f fitIndex) any(t *Task, models []string) bool {
	for _, m := range models {
		for i := range f[m] {
			n := &f[m][i]
			if len(n.GPUs) >= t.NumGPU && n.CPUMilli >= t.CPUMilli && n.MemMiB >= t.MemMiB {
				return true
			}
		}
	}
	return false
}

// cpuOnly scales the CPU-only tasks' total CPU demand to factor × the
// source's.
func (g *mixGen) cpuOnly(out *[]Task, factor float64) error {
	var pool []Task
	var base int64
	for _, t := range g.src {
		if t.NumGPU == 0 {
			pool = append(pool, t)
			base += t.CPUMilli
		}
	}
	target := factor * float64(base)
	var cur int64
	for _, t := range *out {
		if t.NumGPU == 0 {
			cur += t.CPUMilli
		}
	}
	if factor > 0 && len(pool) == 0 {
		return &InputError{"cpu", fmt.Errorf("%g: the task list has no CPU-only tasks to copy", factor)}
	}
	if float64(cur) < target {
		for float64(cur) < target {
			t := g.copyOf(pool[g.rnd.IntN(len(pool))])
			cur += t.CPUMilli
			*out = append(*out, t)
		}
		return nil
	}
	if float64(cur) > target {
		var idx []int
		for i, t := range *out {
			if t.NumGPU == 0 {
				idx = append(idx, i)
			}
		}
		drop := map[int]bool{}
		for float64(cur) > target && len(idx) > 0 {
			k := g.rnd.IntN(len(idx))
			drop[idx[k]] = true
			cur -= (*out)[idx[k]].CPUMilli
			idx[k] = idx[len(idx)-1]
			idx = idx[:len(idx)-1]
		}
		kept := (*out)[:0]
		for i, t := range *out {
			if !drop[i] {
				kept = append(kept, t)
			}
		}
		*out = kept
	}
	return nil
}

// ParseMix reads a mix: comma-separated knob=value, the knobs of Mix as
// `gangway replay sweep` names them (share, multi, spec: shares in
// [0, 1]; cpu: a multiple); knobs not named keep the task list's.
func ParseMix(s string) (Mix, error) {
	m := NoMix
	for part := range strings.SplitSeq(s, ",") {
		knob, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		x, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if !ok || err != nil || x < 0 {
			return Mix{}, fmt.Errorf("mix %q: want knob=value[,knob=value] (knobs share, multi, spec, cpu; values 0 or more), got %q", s, part)
		}
		switch strings.TrimSpace(knob) {
		case "share":
			m.Share = x
		case "multi":
			m.Multi = x
		case "spec":
			m.Spec = x
		case "cpu":
			m.CPU = x
		default:
			return Mix{}, fmt.Errorf("mix %q: unknown knob %q (want share, multi, spec or cpu)", s, knob)
		}
	}
	if err := m.Validate(); err != nil {
		return Mix{}, fmt.Errorf("mix %q: %w", s, err)
	}
	return m, nil
}
