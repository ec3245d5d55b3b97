package placement

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/gangwayhq/gangway"
)

// WorkloadFromJobs is the typical workload of a set of jobs: one class per
// distinct replica shape (GPUs, share, CPU, memory, allowed models),
// weighted by how many replicas have it. Fragmentation is measured against
// it, as FGD measures it against the trace's task mix. Jobs on MIG devices
// are left out: they never use the whole GPUs fragmentation is about.
func WorkloadFromJobs(jobs []gangway.QueueEntry) []WorkloadClass {
	var h WorkloadHistory
	for i := range jobs {
		h.add(&jobs[i], 1)
	}
	return h.Classes()
}

// WorkloadOr is w, or the queue's mix (WorkloadFromJobs) when w is empty:
// the workload Place measures fragmentation against when it is given
// none, and so the one to measure a fleet against beside it.
func WorkloadOr(w []WorkloadClass, queue []gangway.QueueEntry) []WorkloadClass {
	if len(w) > 0 {
		return w
	}
	return WorkloadFromJobs(queue)
}

// classKey is one class of replica shape.
type classKey struct {
	gpus, milli int
	cpu, mem    int64
	models      string
}

// WorkloadHistory is the typical workload of the jobs that have arrived,
// the recent ones weighing more: each arrival's weight halves every
// HalfLife arrivals after it. A server has no trace to measure
// fragmentation against, and the queue alone — often empty, often one
// kind of job — is a poor picture of what will come; the arrivals so far
// are the picture FGD's typical workload is, learned as it goes. The zero
// value is empty, with DefaultHalfLife. Not safe for concurrent use.
type WorkloadHistory struct {
	// HalfLife is in arrivals; 0 means DefaultHalfLife.
	HalfLife int

	// classes in the order they first arrived, count in units of scale;
	// index finds a key's.
	classes []historyClass
	index   map[classKey]int
	// scale is what the next arrival adds: it grows by 2^(1/HalfLife) an
	// arrival, so that older counts shrink relative to it without being
	// touched; renormalize brings it back before it overflows.
	scale float64
}

// historyClass is one class of a WorkloadHistory.
type historyClass struct {
	key    classKey
	models []string // key.models, as a list
	count  float64
}

// DefaultHalfLife is WorkloadHistory's half-life: about the last thousand
// arrivals make the picture.
const DefaultHalfLife = 500

// Add counts one job's replicas as an arrival.
func (h *WorkloadHistory) Add(j *gangway.QueueEntry) {
	if h.scale == 0 {
		h.scale = 1
	}
	h.add(j, h.scale)
	hl := h.HalfLife
	if hl <= 0 {
		hl = DefaultHalfLife
	}
	h.scale *= math.Exp2(1 / float64(hl))
	if h.scale > 1e100 {
		h.renormalize()
	}
}

func (h *WorkloadHistory) add(j *gangway.QueueEntry, w float64) {
	if j.MIG() {
		return
	}
	milli := j.MilliEachGPU()
	if j.GPUsPerReplica == 0 {
		milli = 0
	}
	h.addClass(j.GPUsPerReplica, milli, j.CPUMilli, j.MemMiB, j.GPUModels, w*float64(max(j.Replicas, 1)))
}

// addClass adds w to the class of one replica shape.
func (h *WorkloadHistory) addClass(gpus, milli int, cpu, mem int64, allowed []string, w float64) {
	k := classKey{gpus: gpus, milli: milli, cpu: cpu, mem: mem}
	var models []string
	if len(allowed) > 0 {
		models = slices.Clone(allowed)
		slices.Sort(models)
		k.models = strings.Join(models, "|")
	}
	i, seen := h.index[k]
	if !seen {
		if h.index == nil {
			h.index = map[classKey]int{}
		}
		i = len(h.classes)
		h.index[k] = i
		h.classes = append(h.classes, historyClass{key: k, models: models})
	}
	h.classes[i].count += w
}

// Weight is how many arriving replicas the history holds, each counted
// at its weight now (the latest about 1): it grows by one a replica and, as the
// weights halve, levels off near HalfLife ÷ ln 2. With Classes it is what
// Restore carries a history on from.
func (h *WorkloadHistory) Weight() float64 {
	if h.scale == 0 {
		return 0
	}
	total := 0.0
	for _, c := range h.classes {
		total += c.count
	}
	return total / h.scale
}

// Restore adds a history saved as its Classes and Weight — another
// server's, before this one took over — so that a new dispatch leader
// goes on from the picture the last one had instead of from nothing. It
// is meant for an empty history: added to one that holds arrivals, the
// restored ones weigh as much as its latest.
func (h *WorkloadHistory) Restore(classes []WorkloadClass, weight float64) {
	if weight <= 0 {
		return
	}
	if h.scale == 0 {
		h.scale = 1
	}
	for _, c := range classes {
		if c.Weight > 0 {
			h.addClass(c.GPUs, c.Milli, c.CPUMilli, c.MemMiB, c.Models, c.Weight*weight*h.scale)
		}
	}
}

// renormalize divides every count by scale, dropping the classes that
// have faded to nothing, so that the history stays as large as the
// classes that still matter.
func (h *WorkloadHistory) renormalize() {
	kept := h.classes[:0]
	clear(h.index)
	for _, c := range h.classes {
		if c.count /= h.scale; c.count > 1e-9 {
			h.index[c.key] = len(kept)
			kept = append(kept, c)
		}
	}
	h.classes, h.scale = kept, 1
}

// Classes is the history as a workload, weights summing to 1, classes in
// the order they first arrived; nil before any arrival.
func (h *WorkloadHistory) Classes() []WorkloadClass {
	total := 0.0
	for _, c := range h.classes {
		total += c.count
	}
	if total == 0 {
		return nil
	}
	out := make([]WorkloadClass, 0, len(h.classes))
	for _, c := range h.classes {
		out = append(out, WorkloadClass{GPUs: c.key.gpus, Milli: c.key.milli, CPUMilli: c.key.cpu, MemMiB: c.key.mem,
			Models: c.models, Weight: c.count / total})
	}
	return out
}

// TypicalPopularity is the share of the weight the FGD protocol's typical
// workload covers: the most popular classes up to 95%.
const TypicalPopularity = 0.95

// Typical is the most popular of the classes, covering popularity
// (TypicalPopularity in the FGD protocol) of the weight, most popular first — ties as the FGD
// artifact breaks them: larger CPU, share, GPU count, then model list
// first — with their weights renormalized to sum to 1; nil for none. It
// is how the protocol cuts its typical workload, and so how the dispatch
// loop cuts the arrivals' (the whole mix goes to Options.Demand).
func Typical(classes []WorkloadClass, popularity float64) []WorkloadClass {
	cls := slices.Clone(classes)
	slices.SortStableFunc(cls, func(a, b WorkloadClass) int {
		return cmp.Or(cmp.Compare(b.Weight, a.Weight), cmp.Compare(b.CPUMilli, a.CPUMilli),
			cmp.Compare(b.Milli, a.Milli), cmp.Compare(b.GPUs, a.GPUs),
			strings.Compare(strings.Join(b.Models, "|"), strings.Join(a.Models, "|")))
	})
	cum, n := 0.0, 0
	for n < len(cls) && cum < popularity-1e-12 {
		cum += cls[n].Weight
		n++
	}
	if n == 0 {
		return nil
	}
	out := cls[:n:n]
	for i := range out {
		out[i].Weight /= cum
	}
	return out
}

func (w WorkloadClass) String() string {
	return fmt.Sprintf("%dx%dm cpu=%dm mem=%dMiB models=%v w=%.3f", w.GPUs, w.Milli, w.CPUMilli, w.MemMiB, w.Models, w.Weight)
}
