package forecast

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gangwayhq/gangway"
)

// Job is what a runtime model knows of a job: who runs it, what it is
// called and what it declared.
type Job struct {
	ID      gangway.JobID
	Team    string
	Project string
	// Runtime is the declared expected runtime of the whole job
	// (estimatedRuntime; 0: none); MaxRuntime the limit of one run (0:
	// none).
	Runtime, MaxRuntime time.Duration
	// Kept is the run time earlier attempts kept, for an attempt that
	// resumed from a checkpoint: the job has run that long already, and
	// this attempt runs the rest.
	Kept time.Duration
}

// QueuedJob is a waiting job as the runtime model sees it.
func QueuedJob(e *gangway.QueueEntry) Job {
	return Job{ID: e.JobID, Team: e.Team, Project: e.Project, Runtime: declared(e.Runtime, e.Kept, e.MaxRuntime),
		MaxRuntime: e.MaxRuntime, Kept: e.Kept}
}

// RunningJob is a running allocation as the runtime model sees it.
func RunningJob(a *gangway.Assignment) Job {
	return Job{ID: a.JobID, Team: a.Team, Project: a.Project, Runtime: declared(a.Runtime, a.Kept, a.MaxRuntime),
		MaxRuntime: a.MaxRuntime, Kept: a.Kept}
}

// declared is the estimated runtime a job gave, from what the queue holds:
// the runtime left after what earlier attempts kept, plus that, is the
// job's; dispatch fills it with maxRuntime when the spec has no
// estimatedRuntime, which is no estimate at all.
func declared(runtime, kept, maxRuntime time.Duration) time.Duration {
	if kept > 0 {
		runtime += kept // a resumed attempt's entry holds what is left
	}
	if maxRuntime > 0 && runtime >= maxRuntime {
		return 0
	}
	return runtime
}

// requested is what the actual runtime is measured against: the
// estimated runtime, else the limit (0: neither).
func (j Job) requested() time.Duration {
	if j.Runtime > 0 {
		return j.Runtime
	}
	return j.MaxRuntime
}

// Forever is the remaining runtime of a job a model cannot bound (no
// estimate, no limit): it does not end within any forecast.
const Forever = 100 * 365 * 24 * time.Hour

// Runtimes predicts how long jobs run.
type Runtimes interface {
	// Remaining is the q-quantile (0 < q < 1) of how much longer j runs,
	// once it has run for elapsed (0: it has not started), at most
	// Forever.
	Remaining(j Job, elapsed time.Duration, q float64) time.Duration
}

// RuntimesFunc adapts a function to Runtimes.
type RuntimesFunc func(j Job, elapsed time.Duration, q float64) time.Duration

// Remaining implements Runtimes.
func (f RuntimesFunc) Remaining(j Job, elapsed time.Duration, q float64) time.Duration {
	return f(j, elapsed, q)
}

// Limits is the Slurm-style model (`squeue --start`): every job runs to
// its max runtime; one without a limit runs Forever.
type Limits struct{}

// Remaining implements Runtimes.
func (Limits) Remaining(j Job, elapsed time.Duration, _ float64) time.Duration {
	if j.MaxRuntime <= 0 {
		return Forever
	}
	return max(j.MaxRuntime-elapsed, 0)
}

// Learner is a runtime model that learns from runs that ended.
type Learner interface {
	Runtimes
	// Observe records that a run of j lasted actual.
	Observe(j Job, actual time.Duration)
}

// The ratio histograms: log2(actual ÷ requested) from ratioLo to ratioHi
// in bins of 1/binsPerOctave; ratios beyond count in the end bins.
const (
	ratioLo       = -12.0 // 1/4096 of the request
	ratioHi       = 4.0   // 16 times
	binsPerOctave = 8
	nBins         = int((ratioHi - ratioLo) * binsPerOctave)
)

// A ratio's basis, what a run's actual runtime is divided by: the job's
// max runtime when it declared no estimatedRuntime, else that estimate.
// The two are learned apart: jobs that declare only a limit typically
// run a small share of it, jobs that declare an estimate close to it, and
// one distribution of both would put each where neither is.
const (
	basisLimit = iota
	basisEstimate
	nBases
)

// basis is which ratios j's runtime is predicted from.
func (j Job) basis() int {
	if j.Runtime > 0 {
		return basisEstimate
	}
	return basisLimit
}

// Group levels, coarsest first: everyone, the team, the team's project,
// and the project's jobs with the same name prefix.
const (
	levelAll = iota
	levelTeam
	levelProject
	levelPrefix
	nLevels
)

// History learns each group's distribution of actual ÷ requested runtime
// from runs that ended — apart for the runs that declared an estimated
// runtime and those that declared only a limit (the basis) — and predicts
// a job's runtime from its finest group, shrunk towards the coarser ones:
// a group with n observations weighs n against PseudoCount for its
// parent's distribution (empirical Bayes with a histogram prior). The coarsest group (everyone's runs) is
// itself shrunk, with PseudoCount, towards what the job declared (its
// estimated runtime, else its max runtime: a ratio of 1), so that a
// history of a few runs — one `sleep 1` — does not outweigh every job's
// own declaration. A job's remaining time is conditioned on how long it
// has run: this attempt, plus what earlier ones kept (Job.Kept), which a
// run is learned with too. Without any history it falls back to the job's
// estimated runtime, then its max runtime, less what has run. Counts halve when
// a group passes MaxCount observations, so the model follows recent runs;
// the least recently updated groups are forgotten past MaxGroups per level
// (of each basis).
// Not safe for concurrent use.
type History struct {
	// PseudoCount is the parent's weight, in observations (default 8).
	PseudoCount float64
	// MaxCount bounds a group's weight before it decays (default 1000).
	MaxCount float64
	// MaxGroups bounds the groups kept per level of each basis (default
	// 4096).
	MaxGroups int

	groups [nBases][nLevels]map[string]*hist
	seq    int64
}

type hist struct {
	n    float64
	c    [nBins]float64
	used int64
}

// NewHistory returns an empty History with the defaults.
func NewHistory() *History { return &History{} }

var _ Learner = (*History)(nil)

// Keys of j's groups, coarsest first.
func groupKeys(j Job) [nLevels]string {
	return [nLevels]string{"", j.Team, j.Team + "\x00" + j.Project, j.Team + "\x00" + j.Project + "\x00" + NamePrefix(j.ID)}
}

// NamePrefix is a job name without its trailing counter: "resnet-sweep-17"
// and "resnet-sweep-18" are both "resnet-sweep". A name that is all
// counter is its own prefix.
func NamePrefix(name string) string {
	p := strings.TrimRight(name, "0123456789-_.")
	if p == "" {
		return name
	}
	return p
}

// Observe implements Learner: a run of j lasted actual (after what
// earlier attempts kept, Job.Kept: the job ran both). Runs with no
// requested runtime to compare with are ignored.
func (h *History) Observe(j Job, actual time.Duration) {
	req := j.requested()
	if req <= 0 || actual <= 0 {
		return
	}
	b := binOf(float64(j.Kept+actual) / float64(req))
	h.seq++
	maxCount := orFloat(h.MaxCount, 1000)
	for l, key := range groupKeys(j) {
		g := h.group(j.basis(), l, key)
		if g.n+1 > maxCount {
			for k := range g.c {
				g.c[k] /= 2
			}
			g.n /= 2
		}
		g.c[b]++
		g.n++
		g.used = h.seq
	}
}

// group is basis b's level l's group key, made if need be (making room
// first).
func (h *History) group(b, l int, key string) *hist {
	m := h.groups[b][l]
	if m == nil {
		m = map[string]*hist{}
		h.groups[b][l] = m
	}
	g := m[key]
	if g == nil {
		forgetOld(m, h.MaxGroups)
		g = &hist{}
		m[key] = g
	}
	return g
}

// forgetOld drops the least recently updated tenth of a level's groups m
// when it holds limit (0: 4096).
func forgetOld(m map[string]*hist, limit int) {
	if limit <= 0 {
		limit = 4096
	}
	if len(m) < limit {
		return
	}
	used := make([]int64, 0, len(m))
	for _, g := range m {
		used = append(used, g.used)
	}
	cut := nthSmallest(used, max(len(used)/10, 1))
	for k, g := range m {
		if g.used <= cut {
			delete(m, k)
		}
	}
}

func nthSmallest(xs []int64, n int) int64 {
	slices.Sort(xs)
	return xs[n-1]
}

func binOf(ratio float64) int {
	x := math.Log2(ratio)
	b := int(math.Floor((x - ratioLo) * binsPerOctave))
	return min(max(b, 0), nBins-1)
}

// Observations is how many runs the model has learned from (decayed).
func (h *History) Observations() float64 {
	n := 0.0
	for b := range h.groups {
		if g := h.groups[b][levelAll][""]; g != nil {
			n += g.n
		}
	}
	return n
}

// Remaining implements Runtimes.
func (h *History) Remaining(j Job, elapsed time.Duration, q float64) time.Duration {
	req := j.requested()
	if req <= 0 {
		return Forever
	}
	// The job has run what its earlier attempts kept, and elapsed of this
	// one; the limit holds for this attempt.
	ran := j.Kept + elapsed
	run := req // no history: the job's own estimate, else its limit
	var p [nBins]float64
	if h.blend(j, &p) {
		ratio, ok := conditionalQuantile(&p, float64(ran)/float64(req), q)
		if !ok {
			// It has outrun every run seen: it ends by its limit, if it
			// has one, spread evenly over what is left of it.
			if j.MaxRuntime > elapsed {
				return time.Duration(q * float64(j.MaxRuntime-elapsed))
			}
			return 0
		}
		run = time.Duration(ratio * float64(req))
	}
	if j.MaxRuntime > 0 {
		run = min(run, j.Kept+j.MaxRuntime)
	}
	return min(max(run-ran, 0), Forever)
}

// blend fills p with j's shrunk distribution over ratio bins (summing to
// 1), starting from the declaration (all mass at a ratio of 1); false when
// there is no history at all.
func (h *History) blend(j Job, p *[nBins]float64) bool {
	k := orFloat(h.PseudoCount, 8)
	*p = [nBins]float64{}
	p[binOf(1)] = 1
	have := false
	groups := &h.groups[j.basis()]
	for l, key := range groupKeys(j) {
		g := groups[l][key]
		if g == nil || g.n <= 0 {
			continue
		}
		have = true
		for b := range p {
			p[b] = (g.c[b] + k*p[b]) / (g.n + k)
		}
	}
	return have
}

// conditionalQuantile is the q-quantile of the ratio distribution p given
// that the ratio exceeds at (how far the run already got); within a bin
// the mass is spread evenly in log scale. False when p has no mass above
// at.
func conditionalQuantile(p *[nBins]float64, at, q float64) (float64, bool) {
	x0 := math.Inf(-1)
	if at > 0 {
		x0 = math.Log2(at)
	}
	lo := func(b int) float64 { return ratioLo + float64(b)/binsPerOctave }
	// Mass above x0, bin by bin.
	above := make([]float64, 0, nBins)
	total := 0.0
	first := -1
	for b := range p {
		m := p[b]
		l, u := lo(b), lo(b+1)
		switch {
		case u <= x0:
			m = 0
		case l < x0:
			m *= (u - x0) / (u - l)
		}
		if m > 0 && first < 0 {
			first = b
		}
		above = append(above, m)
		total += m
	}
	if total <= 1e-12 {
		return 0, false
	}
	want := q * total
	acc := 0.0
	for b := first; b < nBins; b++ {
		m := above[b]
		if m <= 0 {
			continue
		}
		if acc+m >= want {
			l, u := max(lo(b), x0), lo(b+1)
			x := l + (u-l)*(want-acc)/m
			return math.Exp2(x), true
		}
		acc += m
	}
	return math.Exp2(ratioHi), true
}

func orFloat(v, def float64) float64 {
	if v > 0 {
		return v
	}
	return def
}
