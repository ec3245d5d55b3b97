package placement

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"
)

// Packing GPU shares against the job mix: the prices of the cutting-stock
// linear program.
//
// Share tasks (one GPU, less than Whole of it) are packed onto GPUs as
// items into bins of Whole milli. For the mix's share classes, with n_s
// tasks of size s, the fewest GPUs that hold them all is, relaxed to
// fractions, the linear program of Gilmore and Gomory (1961): a pattern
// is a multiset of sizes that fits one GPU, and the program picks how
// many GPUs to fill with each. Its dual gives each size a price y_s, the
// fraction of a GPU a task of that size is worth in the best packings —
// on openb's shares 810 milli costs a whole GPU (nothing but the few tasks
// of 50–160 fits beside it), 470 half, 320 a third, 160 nothing (it fits
// in an 810's leftover) — and every pattern is worth at most one GPU:
// Σ y ≤ 1.
//
// The value V(g) of g free milli on a GPU is the most the tasks that fit
// in g are worth at those prices (an unbounded knapsack). Placing a task
// of size s on a GPU with g free turns V(g) into y_s + V(g−s); the
// shortfall V(g) − y_s − V(g−s) ≥ 0 is the capacity, in GPUs, that the
// placement loses to the best packings — its reduced cost. It is 0 when
// the task completes a pattern of an optimal packing (an 810 on an empty
// GPU, a 160 in an 810's leftover) and grows as the placement leaves a
// gap the mix fills poorly (a 470 on a GPU with 810 free leaves 340,
// worth a third where the 810 it keeps out was worth a whole: a sixth of
// a GPU lost). Choosing the GPU with the least shortfall is the
// dual-price rule of online bin packing for a known item distribution;
// on openb's share sizes alone, packed in random order into a fixed
// fleet, it leaves about 11.8% unallocated where best fit leaves 12.9%,
// and no packing leaves less than 10.9% (docs/benchmarks.md, workload
// sweep).

// packMaxSizes bounds the program: with more distinct share sizes in the
// mix than this, the heaviest are kept (the largest always) and each other
// size counts as the next larger kept one, which takes at least its room.
// packMaxIter bounds the column generation's rounds.
const (
	packMaxSizes = 24
	packMaxIter  = 100
)

// packPrices holds the value of free share capacity against a mix.
type packPrices struct {
	price  map[int]float64 // y_s by share size (milli)
	value  []float64       // V(g) for g = 0..Whole
	demand map[int]float64 // the share demand solved for (shareDemand)
}

// isShareClass reports whether w is a class of GPU shares (one GPU, less
// than Whole of it) that the mix holds.
func isShareClass(w WorkloadClass) bool {
	return w.GPUs == 1 && classMilli(w) < Whole && w.Weight > 0
}

// shareDemand is the share classes' weight by size, normalised to sum 1;
// nil without shares.
func shareDemand(mix []WorkloadClass) map[int]float64 {
	demand, total := map[int]float64{}, 0.0
	for _, w := range mix {
		if isShareClass(w) {
			demand[w.Milli] += w.Weight
			total += w.Weight
		}
	}
	if total == 0 {
		return nil
	}
	for s := range demand {
		demand[s] /= total
	}
	return demand
}

// packReuse is how far, in total variation (half the L1 distance of the
// normalised weights), a mix may move from the one the prices were solved
// for and keep them: the dual of the program is piecewise constant in the
// demand, and the dispatch loop's mix, its queue, moves a little every
// cycle.
const packReuse = 0.05

// packFor returns prices for mix, reusing last when its mix has the same
// share sizes and weights within packReuse of mix's.
func packFor(last *packPrices, mix []WorkloadClass) *packPrices {
	demand := shareDemand(mix)
	if demand == nil {
		return nil
	}
	if last != nil && len(last.demand) == len(demand) {
		tv := 0.0
		for s, w := range demand {
			lw, ok := last.demand[s]
			if !ok {
				tv = math.Inf(1)
				break
			}
			tv += math.Abs(w-lw) / 2
		}
		if tv <= packReuse {
			return last
		}
	}
	return newPackPrices(demand)
}

// newPackPrices solves the program for demand, the share classes' weight
// by size (shareDemand); nil when the program fails.
func newPackPrices(demand map[int]float64) *packPrices {
	solvedFor := demand
	sizes := make([]int, 0, len(demand))
	for s := range demand {
		sizes = append(sizes, s)
	}
	slices.Sort(sizes)
	if len(sizes) > packMaxSizes {
		sizes, demand = mergeSizes(sizes, demand)
	}
	y, ok := cuttingStockDual(sizes, demand)
	if !ok {
		return nil
	}
	p := &packPrices{price: make(map[int]float64, len(sizes)), demand: solvedFor}
	for k, s := range sizes {
		p.price[s] = y[k]
	}
	p.value, _ = knapsack(sizes, y)
	return p
}

// mergeSizes keeps the packMaxSizes heaviest of sizes (ascending), the
// largest among them, and moves every other size's weight to the next
// larger kept size.
func mergeSizes(sizes []int, demand map[int]float64) ([]int, map[int]float64) {
	byWeight := slices.Clone(sizes[:len(sizes)-1])
	slices.SortStableFunc(byWeight, func(a, b int) int { return cmp.Compare(demand[b], demand[a]) })
	kept := append(byWeight[:packMaxSizes-1:packMaxSizes-1], sizes[len(sizes)-1])
	slices.Sort(kept)
	merged := make(map[int]float64, len(kept))
	for _, s := range sizes {
		i, _ := slices.BinarySearch(kept, s)
		merged[kept[i]] += demand[s]
	}
	return kept, merged
}

// shortfall is what placing a share of s milli on a GPU with free milli
// free loses, in GPUs, against the mix's best packings (≥ 0).
func (p *packPrices) shortfall(free, s int) float64 {
	if p == nil || s <= 0 || s >= Whole || free < s || free > Whole {
		return 0
	}
	y, ok := p.price[s]
	if !ok {
		// A size the program did not see: price it as what it blocks,
		// the best the mix's tasks could make of those milli.
		y = p.value[s]
	}
	if d := p.value[free] - y - p.value[free-s]; d > 1e-9 {
		return d
	}
	return 0 // rounding in the prices' sums
}

// nodeShortfall is what a placement on a node whose GPUs have free milli
// free loses, in GPUs, against the mix's best packings once a partly used
// GPU is worth its value only to the share tasks that can still get the
// node's CPU. fitBefore and fitAfter are the shares of the mix's share
// tasks that fit in the node's free CPU before and after the placement
// (shareCPU.fit); own is the GPU a share of s milli lands on, -1 for any
// other placement. It is shortfall on own, plus what the CPU fit changes:
//
//   - the gap own is left with counts only for fitAfter of the share
//     tasks (+V(free−s)·(1−fitAfter)), and the gap own had, if it was
//     partly used, was already worth only fitBefore of its value
//     (−V(free)·(1−fitBefore): filling a gap that had lost value that way
//     costs less, even gains);
//   - every other partly used GPU of the node loses V(free)·(fitBefore −
//     fitAfter): what its gap was worth to the share tasks whose CPU the
//     placement takes.
//
// A wholly free GPU keeps its full value whatever the CPU: whole-GPU tasks
// can use it too, and the stranded-capacity term prices CPU against whole
// GPUs.
func (p *packPrices) nodeShortfall(free []int, own, s int, fitBefore, fitAfter float64) float64 {
	if p == nil {
		return 0
	}
	loss := 0.0
	if own >= 0 && s > 0 && s < Whole && free[own] >= s && free[own] <= Whole {
		f := free[own]
		loss += p.shortfall(f, s) + p.value[f-s]*(1-fitAfter)
		if f < Whole {
			loss -= p.value[f] * (1 - fitBefore)
		}
	}
	if lost := fitBefore - fitAfter; lost > 0 {
		for g, f := range free {
			if g != own && f > 0 && f < Whole {
				loss += p.value[f] * lost
			}
		}
	}
	if math.Abs(loss) < 1e-9 {
		return 0 // rounding in the prices' sums
	}
	return loss
}

// shareCPU is the CPU the mix's share tasks ask, as the share of them (by
// weight) that fit in a given amount of free CPU. Memory is not counted:
// on openb it runs out long after CPU.
type shareCPU struct {
	cpu []int64   // distinct asks (milli), ascending
	cum []float64 // share of the share tasks asking at most cpu[k] (fit reads all but the last: 1)
}

// newShareCPU reads the share classes of mix.
func newShareCPU(mix []WorkloadClass) shareCPU {
	type ask struct {
		cpu    int64
		weight float64
	}
	var asks []ask
	total := 0.0
	for _, w := range mix {
		if isShareClass(w) {
			asks = append(asks, ask{max(w.CPUMilli, 0), w.Weight})
			total += w.Weight
		}
	}
	slices.SortFunc(asks, func(a, b ask) int { return cmp.Compare(a.cpu, b.cpu) })
	var sc shareCPU
	acc := 0.0
	for _, a := range asks {
		acc += a.weight / total
		if n := len(sc.cpu); n > 0 && sc.cpu[n-1] == a.cpu {
			sc.cum[n-1] = acc
			continue
		}
		sc.cpu = append(sc.cpu, a.cpu)
		sc.cum = append(sc.cum, acc)
	}
	return sc
}

// fit is the share of the share tasks asking at most cpu milli; 1 when the
// mix has none.
func (sc shareCPU) fit(cpu int64) float64 {
	if len(sc.cpu) == 0 || cpu >= sc.most() {
		return 1
	}
	k, _ := slices.BinarySearch(sc.cpu, cpu+1) // first ask above cpu
	if k == 0 {
		return 0
	}
	return sc.cum[k-1]
}

// most is the largest ask: with at least that free, fit is 1.
func (sc shareCPU) most() int64 {
	if len(sc.cpu) == 0 {
		return 0
	}
	return sc.cpu[len(sc.cpu)-1]
}

// knapsack is the unbounded knapsack of sizes at prices y over one GPU:
// v[g], for g = 0..Whole, the largest Σ y of a multiset of sizes whose
// sum is at most g, and last[g] the index of a size in such a multiset
// that sums to exactly g, or -1 when it sums to less (take g−1's).
func knapsack(sizes []int, y []float64) (v []float64, last []int) {
	v, last = make([]float64, Whole+1), make([]int, Whole+1)
	last[0] = -1
	for g := 1; g <= Whole; g++ {
		v[g], last[g] = v[g-1], -1
		for k, s := range sizes {
			if s <= g && v[g-s]+y[k] > v[g]+1e-12 {
				v[g], last[g] = v[g-s]+y[k], k
			}
		}
	}
	return v, last
}

// pricedPatterns are the patterns worth more than one GPU at prices y, at
// most one per size: for each size, the best pattern holding one task of
// it (the task and the best fill of the rest of the GPU).
func pricedPatterns(sizes []int, y []float64) [][]int {
	v, last := knapsack(sizes, y)
	var out [][]int
	seen := map[string]bool{}
	for i, s := range sizes {
		if y[i]+v[Whole-s] <= 1+1e-9 {
			continue
		}
		counts := make([]int, len(sizes))
		counts[i]++
		for g := Whole - s; g > 0; {
			if k := last[g]; k >= 0 {
				counts[k]++
				g -= sizes[k]
			} else {
				g--
			}
		}
		if key := fmt.Sprint(counts); !seen[key] {
			seen[key] = true
			out = append(out, counts)
		}
	}
	return out
}

// cuttingStockDual solves the cutting-stock program's dual by column
// generation: maximise Σ n_s·y_s subject to Σ_s a_ps·y_s ≤ 1 for every
// pattern p, y ≥ 0. It starts from the patterns of one size and adds the
// patterns worth more than one GPU at the current prices
// (pricedPatterns) until there are none.
func cuttingStockDual(sizes []int, demand map[int]float64) ([]float64, bool) {
	k := len(sizes)
	var patterns [][]int
	for i, s := range sizes {
		p := make([]int, k)
		p[i] = Whole / s
		patterns = append(patterns, p)
	}
	c := make([]float64, k)
	for i, s := range sizes {
		c[i] = -demand[s]
	}
	for range packMaxIter {
		m := len(patterns)
		// Standard form: variables y (k) then one slack per pattern;
		// a_p·y + slack_p = 1.
		A := mat.NewDense(m, k+m, nil)
		b := make([]float64, m)
		for r, p := range patterns {
			for i, a := range p {
				A.Set(r, i, float64(a))
			}
			A.Set(r, k+r, 1)
			b[r] = 1
		}
		cost := make([]float64, k+m)
		copy(cost, c)
		_, x, err := lp.Simplex(cost, A, b, 1e-10, nil)
		if err != nil {
			return nil, false
		}
		y := x[:k:k]
		more := pricedPatterns(sizes, y)
		if len(more) == 0 {
			for i := range y {
				y[i] = min(max(y[i], 0), 1)
			}
			return y, true
		}
		patterns = append(patterns, more...)
	}
	return nil, false
}
