package placement

import (
	"math"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"
	"pgregory.net/rapid"
)

// openbShares is the share sizes of openb's default pod list
// (openb_pod_list_default.csv, one GPU, gpu_milli < 1000) with their task
// counts.
var openbShares = map[int]float64{50: 7, 110: 24, 140: 1, 160: 74, 220: 62, 230: 140, 270: 4, 290: 1,
	320: 328, 330: 7, 350: 6, 370: 47, 440: 2, 460: 128, 470: 750, 480: 19, 550: 72, 590: 75, 650: 253, 810: 1078}

func shareMix(m map[int]float64) []WorkloadClass {
	var out []WorkloadClass
	for s, n := range m {
		out = append(out, WorkloadClass{GPUs: 1, Milli: s, Weight: n})
	}
	// Whole-GPU and CPU-only classes are not shares: the program ignores them.
	return append(out, WorkloadClass{GPUs: 1, Milli: Whole, Weight: 500}, WorkloadClass{GPUs: 0, Weight: 100},
		WorkloadClass{GPUs: 2, Milli: 500, Weight: 10})
}

// primalBins solves the cutting-stock program directly: every pattern of
// sizes that fits one GPU enumerated, the fewest GPUs (fractionally) that
// hold demand[s] tasks of each size s.
func primalBins(t interface{ Fatalf(string, ...any) }, demand map[int]float64) float64 {
	sizes := make([]int, 0, len(demand))
	for s := range demand {
		sizes = append(sizes, s)
	}
	slices.Sort(sizes)
	var patterns [][]int
	var rec func(i, room int, cur []int)
	rec = func(i, room int, cur []int) {
		if i == len(sizes) {
			if slices.ContainsFunc(cur, func(k int) bool { return k > 0 }) {
				patterns = append(patterns, slices.Clone(cur))
			}
			return
		}
		for k := 0; k*sizes[i] <= room; k++ {
			cur[i] = k
			rec(i+1, room-k*sizes[i], cur)
		}
		cur[i] = 0
	}
	rec(0, Whole, make([]int, len(sizes)))
	// min Σx s.t. Σ_p a_ps·x_p − surplus_s = n_s.
	m, n := len(sizes), len(patterns)
	A := mat.NewDense(m, n+m, nil)
	c := make([]float64, n+m)
	b := make([]float64, m)
	for j, p := range patterns {
		c[j] = 1
		for i, a := range p {
			A.Set(i, j, float64(a))
		}
	}
	for i, s := range sizes {
		A.Set(i, n+i, -1)
		b[i] = demand[s]
	}
	opt, _, err := lp.Simplex(c, A, b, 1e-10, nil)
	if err != nil {
		t.Fatalf("primal: %v", err)
	}
	return opt
}

// dualBins is the prices' worth of demand (task counts by size): the dual
// program's objective, in GPUs.
func dualBins(p *packPrices, demand map[int]float64) float64 {
	bins := 0.0
	for s, n := range demand {
		bins += n * p.price[s]
	}
	return bins
}

func TestPackPricesOpenB(t *testing.T) {
	p := packFor(nil, shareMix(openbShares))
	if p == nil {
		t.Fatal("no prices")
	}
	for s, want := range map[int]float64{810: 1, 650: 2.0 / 3, 590: 2.0 / 3, 470: 0.5, 460: 0.5, 320: 1.0 / 3, 230: 0.25, 160: 0, 50: 0} {
		if got := p.price[s]; math.Abs(got-want) > 1e-6 {
			t.Errorf("price of %d milli = %.4f, want %.4f", s, got, want)
		}
	}
	// Strong duality: the prices' worth of the mix is the fewest GPUs
	// that hold it. Per GPU of share demand that is 1.134 GPUs: holding
	// every one of these shares wastes at least 11.85% of the GPUs.
	var demand float64
	for s, n := range openbShares {
		demand += float64(s) * n / Whole
	}
	primal := primalBins(t, openbShares)
	if got := dualBins(p, openbShares); math.Abs(got-primal) > 1e-6*primal {
		t.Errorf("dual optimum %.4f GPUs, primal %.4f", got, primal)
	}
	if got := primal / demand; math.Abs(got-1.1344) > 1e-4 {
		t.Errorf("GPUs per GPU of demand = %.4f, want 1.1344", got)
	}
}

func TestPackShortfall(t *testing.T) {
	p := packFor(nil, shareMix(openbShares))
	for _, tc := range []struct {
		name        string
		free, share int
		zero        bool
	}{
		{"810 on an empty GPU", 1000, 810, true},
		{"160 in an 810's leftover", 190, 160, true},
		{"470 beside a 470", 530, 470, true},
		{"320 beside a 650", 350, 320, true},
		{"160 on an empty GPU: an 810 still fits", 1000, 160, true},
		{"470 in a gap an 810 would fill", 810, 470, false},
		{"160 beside a 470", 530, 160, false},
		{"a size the mix lacks, beside a 470", 530, 123, false},
	} {
		got := p.shortfall(tc.free, tc.share)
		if got < 0 || (got == 0) != tc.zero {
			t.Errorf("%s: shortfall(%d, %d) = %.4f, want zero=%v", tc.name, tc.free, tc.share, got, tc.zero)
		}
	}
	// What does not apply is 0.
	for _, c := range [][2]int{{100, 160}, {1000, 1000}, {1000, 0}, {1200, 500}} {
		if got := p.shortfall(c[0], c[1]); got != 0 {
			t.Errorf("shortfall(%d, %d) = %v, want 0", c[0], c[1], got)
		}
	}
	var none *packPrices
	if got := none.shortfall(1000, 500); got != 0 {
		t.Errorf("nil prices: shortfall %v", got)
	}
}

func TestShareCPUFit(t *testing.T) {
	sc := newShareCPU([]WorkloadClass{
		{GPUs: 1, Milli: 470, CPUMilli: 3000, Weight: 2},
		{GPUs: 1, Milli: 810, CPUMilli: 8000, Weight: 1},
		{GPUs: 1, Milli: 160, CPUMilli: 8000, Weight: 1},
		// Not shares: not counted.
		{GPUs: 1, Milli: Whole, CPUMilli: 1000, Weight: 50},
		{GPUs: 0, CPUMilli: 500, Weight: 50},
	})
	for _, tc := range []struct {
		cpu  int64
		want float64
	}{{-1, 0}, {0, 0}, {2999, 0}, {3000, 0.5}, {7999, 0.5}, {8000, 1}, {math.MaxInt64, 1}} {
		if got := sc.fit(tc.cpu); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("fit(%d) = %v, want %v", tc.cpu, got, tc.want)
		}
	}
	if got := sc.most(); got != 8000 {
		t.Errorf("most = %d, want 8000", got)
	}
	none := newShareCPU([]WorkloadClass{{GPUs: 2, Milli: Whole, CPUMilli: 9000, Weight: 1}})
	if got := none.fit(0); got != 1 {
		t.Errorf("no shares: fit(0) = %v, want 1", got)
	}
}

func TestPackNodeShortfall(t *testing.T) {
	p := packFor(nil, shareMix(openbShares))
	gap := p.value[530] // what a 470's leftover is worth: another 470
	if math.Abs(gap-0.5) > 1e-6 {
		t.Fatalf("V(530) = %v, want 0.5", gap)
	}
	for _, tc := range []struct {
		name          string
		free          []int
		own, share    int
		before, after float64
		want          float64
	}{
		{"no share, CPU for every share class after", []int{530, 1000}, -1, 0, 1, 1, 0},
		{"no share, takes the CPU every share class needs", []int{530, 530, 1000}, -1, 0, 1, 0, 2 * gap},
		{"no share, takes the CPU half of them need", []int{530, 0}, -1, 0, 1, 0.5, gap / 2},
		{"no gaps: whole GPUs keep their value", []int{1000, 1000, 0}, -1, 0, 1, 0, 0},
		{"470 on an empty GPU, CPU for all after", []int{1000}, 0, 470, 1, 1, 0},
		{"470 on an empty GPU, CPU for none after: its gap is lost", []int{1000}, 0, 470, 1, 0, gap},
		{"810 fills a gap only half the share tasks could have used", []int{810}, 0, 810, 0.5, 0.5, -0.5},
		{"470 beside a 470 beside another gap, CPU for none after", []int{530, 530}, 0, 470, 1, 0, gap},
	} {
		got := p.nodeShortfall(tc.free, tc.own, tc.share, tc.before, tc.after)
		if math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: nodeShortfall = %.4f, want %.4f", tc.name, got, tc.want)
		}
	}
	var none *packPrices
	if got := none.nodeShortfall([]int{530}, 0, 470, 1, 0); got != 0 {
		t.Errorf("nil prices: %v", got)
	}
}

// TestPackNodeShortfallProperties: with CPU for every share class before
// and after, the node's shortfall is the GPU's; taking more CPU never
// costs less.
func TestPackNodeShortfallProperties(t *testing.T) {
	p := packFor(nil, shareMix(openbShares))
	rapid.Check(t, func(t *rapid.T) {
		free := rapid.SliceOfN(rapid.IntRange(0, Whole), 1, 8).Draw(t, "free")
		own := rapid.IntRange(-1, len(free)-1).Draw(t, "own")
		share := 0
		if own >= 0 {
			if free[own] == 0 {
				free[own] = Whole
			}
			share = rapid.IntRange(1, min(free[own], Whole-1)).Draw(t, "share")
		}
		after := rapid.Float64Range(0, 1).Draw(t, "after")
		before := rapid.Float64Range(after, 1).Draw(t, "before")
		ample := p.nodeShortfall(free, own, share, 1, 1)
		if own < 0 && ample != 0 {
			t.Fatalf("no share, ample CPU: %v, want 0", ample)
		}
		if own >= 0 && math.Abs(ample-p.shortfall(free[own], share)) > 1e-9 {
			t.Fatalf("ample CPU: %v, want shortfall %v", ample, p.shortfall(free[own], share))
		}
		less := rapid.Float64Range(0, after).Draw(t, "less")
		if a, b := p.nodeShortfall(free, own, share, before, after), p.nodeShortfall(free, own, share, before, less); b < a-1e-9 {
			t.Fatalf("fit after %v costs %v, after %v (less CPU left) %v", after, a, less, b)
		}
	})
}

func TestPackPricesProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 5).Draw(t, "sizes")
		demand := map[int]float64{}
		for len(demand) < n {
			s := 10 * rapid.IntRange(10, 99).Draw(t, "size")
			demand[s] = float64(rapid.IntRange(1, 100).Draw(t, "count"))
		}
		mix := shareMix(demand)[:n]
		p := packFor(nil, mix)
		if p == nil {
			t.Fatal("no prices")
		}
		if got, want := dualBins(p, demand), primalBins(t, demand); math.Abs(got-want) > 1e-6*want {
			t.Fatalf("dual optimum %.6f GPUs, primal %.6f", got, want)
		}
		if p.value[Whole] > 1+1e-9 {
			t.Fatalf("a GPU is worth %v > 1", p.value[Whole])
		}
		for g := 1; g <= Whole; g++ {
			if p.value[g] < p.value[g-1] {
				t.Fatalf("V(%d) = %v < V(%d) = %v", g, p.value[g], g-1, p.value[g-1])
			}
		}
		free := rapid.IntRange(1, Whole).Draw(t, "free")
		share := rapid.IntRange(1, free).Draw(t, "share")
		if got := p.shortfall(free, share); got < 0 {
			t.Fatalf("shortfall(%d, %d) = %v < 0", free, share, got)
		}
	})
}

func TestPackForReuses(t *testing.T) {
	mix := shareMix(map[int]float64{470: 50, 810: 50})[:2]
	p := packFor(nil, mix)
	near := shareMix(map[int]float64{470: 52, 810: 48})[:2]
	if got := packFor(p, near); got != p {
		t.Error("a mix within packReuse was solved again")
	}
	far := shareMix(map[int]float64{470: 70, 810: 30})[:2]
	if got := packFor(p, far); got == p {
		t.Error("a mix beyond packReuse kept the old prices")
	}
	other := shareMix(map[int]float64{470: 50, 800: 50})[:2]
	if got := packFor(p, other); got == p {
		t.Error("a mix of other sizes kept the old prices")
	}
	if got := packFor(p, []WorkloadClass{{GPUs: 1, Milli: Whole, Weight: 1}}); got != nil {
		t.Error("a mix without shares has prices")
	}
}

func TestPackPricesManySizes(t *testing.T) {
	demand := map[int]float64{}
	for s := 7; s < Whole; s += 9 {
		demand[s] = float64(s%13 + 1)
	}
	p := packFor(nil, shareMix(demand)[:len(demand)])
	if p == nil || len(p.price) != packMaxSizes {
		t.Fatalf("prices %+v, want %d sizes", p, packMaxSizes)
	}
	if got := p.shortfall(1000, 7); got < 0 {
		t.Errorf("shortfall %v", got)
	}
}

func BenchmarkPackPrices(b *testing.B) {
	demand := shareDemand(shareMix(openbShares))
	for b.Loop() {
		newPackPrices(demand)
	}
}
