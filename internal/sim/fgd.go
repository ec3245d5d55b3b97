package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand" // v1 on purpose: the FGD artifact's seeded sequence, see Prepare
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/placement"
)

// DefaultTuneRatio is the paper's workload: tasks worth 1.3 × the fleet's
// GPU capacity.
const DefaultTuneRatio = 1.3

// TypicalPopularity is the share of tasks the artifact's typical workload
// covers: the most popular task classes up to 95% of all tasks.
const TypicalPopularity = placement.TypicalPopularity

// FGDPolicies are the policies of the FGD protocol: the paper's six and
// Gangway's default.
var FGDPolicies = []string{"random", "dot-product", "gpu-clustering", "gpu-packing", "best-fit", "fgd", "gangway"}

// DefaultSeeds are the paper's seeds, 42-51.
var DefaultSeeds = []int64{42, 43, 44, 45, 46, 47, 48, 49, 50, 51}

// WorkloadMode chooses the typical workload fragmentation is measured (and
// FGD scores) against.
type WorkloadMode string

const (
	// WorkloadTypical is the artifact's: classes keyed by CPU, GPUs, GPU
	// share and models (not memory) over the untuned task list, the most
	// popular ones covering 95% of tasks, renormalized.
	WorkloadTypical WorkloadMode = "typical"
	// WorkloadAll is placement.WorkloadFromJobs over the untuned task
	// list: every class, memory included.
	WorkloadAll WorkloadMode = "all"
)

// FGDConfig is one replay of the FGD protocol: every policy × every seed.
type FGDConfig struct {
	Nodes []placement.Node
	Tasks []Task
	// Policies by name; NewScorer makes a fresh scorer for each run (a
	// scorer may keep per-run caches).
	Policies  []string
	NewScorer func(policy string) (placement.Scorer, error)
	Seeds     []int64
	// TuneRatio is the workload, in multiples of the fleet's GPU capacity,
	// the task list is tuned to; 0 means DefaultTuneRatio.
	TuneRatio float64
	Workload  WorkloadMode // "" means WorkloadTypical
	// Parallel bounds the runs in flight; 0 means GOMAXPROCS.
	Parallel int
	// Progress, when set, is called as arrivals are placed, with the
	// arrivals done and to do over all runs. Calls are serialized.
	Progress func(done, total int)
}

// Trial is one seed's input: the node order and the arrival sequence.
type Trial struct {
	Seed  int64
	Nodes []placement.Node
	Tasks []Task
}

// Point is the fleet after one arrival.
type Point struct {
	ArrivedMilli int64   // GPU demand of every task arrived so far, placed or not
	FreeMilli    int64   // unallocated GPU milli
	FragMilli    float64 // fragmented GPU milli against the typical workload
	Failed       int32   // tasks not placed so far
	Placed       bool    // whether this arrival was placed
}

// Run is one policy on one trial.
type Run struct {
	Policy        string
	Seed          int64
	CapacityMilli int64
	Tasks         int
	Failed        int // over the whole run
	// FailedAt100 counts the tasks not placed while arrived workload was
	// at most 100% of capacity.
	FailedAt100 int
	// UnallocatedAt100 and FragAt100 are percentages of GPU capacity at
	// arrived workload = 100%, measured as the artifact does: the mean over
	// the arrivals whose arrived percentage rounds to 100.
	UnallocatedAt100, FragAt100 float64
	Points                      []Point
	Elapsed                     time.Duration
}

// GPUCapacityMilli is a fleet's GPU capacity in milli-GPU.
func GPUCapacityMilli(nodes []placement.Node) int64 {
	var c int64
	for i := range nodes {
		c += int64(len(nodes[i].GPUs)) * placement.Whole
	}
	return c
}

// DemandMilli is the GPU demand of tasks in milli-GPU.
func DemandMilli(tasks []Task) int64 {
	var d int64
	for i := range tasks {
		d += tasks[i].GPUMilliTotal()
	}
	return d
}

// Prepare makes one seed's trial exactly as the artifact's simulator does
// with the same math/rand (v1) source, so a seed gives the paper's arrival
// sequence: one draw (the artifact logs rand.Int() after seeding), tasks
// sorted by name and shuffled, the list tuned to ratio × GPU capacity
// (Tune), then the nodes sorted by name and put in the order of a random
// permutation (the artifact renames node i to "%04d-name" with perm[i]).
func Prepare(nodes []placement.Node, tasks []Task, seed int64, ratio float64) Trial {
	rnd := rand.New(rand.NewSource(seed))
	_ = rnd.Int()
	shuffled := Shuffle(tasks, rnd)
	tuned := Tune(shuffled, tasks, GPUCapacityMilli(nodes), ratio, rnd)

	byName := slices.Clone(nodes)
	slices.SortFunc(byName, func(a, b placement.Node) int { return strings.Compare(a.ID, b.ID) })
	perm := rnd.Perm(len(byName))
	ordered := make([]placement.Node, len(byName))
	for i, p := range perm {
		ordered[p] = byName[i]
	}
	return Trial{Seed: seed, Nodes: ordered, Tasks: tuned}
}

// Shuffle returns tasks sorted by name, then shuffled with rnd.
func Shuffle(tasks []Task, rnd *rand.Rand) []Task {
	out := sortedByName(tasks)
	rnd.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func sortedByName(tasks []Task) []Task {
	out := slices.Clone(tasks)
	slices.SortStableFunc(out, func(a, b Task) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Tune brings the GPU demand of tasks to ratio × capacityMilli as the
// artifact does (TunePodsByNodeTotalResource): while above, drop a random
// task; while below, append a copy of a random task of source (taken in
// name order), named "<name>-tuned-<i>", and stop at the first copy that
// would overshoot. That check is the artifact's to the letter: it adds the
// copy's GPU milli per GPU, not its total, so a last multi-GPU copy can
// take the list up to 7 GPUs past the target (at ~130% arrived, far from
// the 100% the protocol reads). A ratio <= 0 leaves tasks as they are, and
// so does a source with no GPU demand, whose copies could never reach the
// target (RunFGD rejects such a task list).
func Tune(tasks, source []Task, capacityMilli int64, ratio float64, rnd *rand.Rand) []Task {
	target := ratio * float64(capacityMilli)
	total := DemandMilli(tasks)
	out := slices.Clone(tasks)
	switch {
	case ratio <= 0 || float64(total) == target:
	case float64(total) > target:
		for float64(total) > target && len(out) > 0 {
			i := rnd.Intn(len(out))
			total -= out[i].GPUMilliTotal()
			out = slices.Delete(out, i, i+1)
		}
	default:
		src := sortedByName(source)
		if DemandMilli(src) == 0 {
			break // copies of CPU-only tasks would be added for ever
		}
		for n := 0; ; n++ {
			t := src[rnd.Intn(len(src))]
			if float64(total+int64(t.perGPUMilli())) > target {
				break
			}
			t.Name = fmt.Sprintf("%s-tuned-%d", t.Name, n)
			total += t.GPUMilliTotal()
			out = append(out, t)
		}
	}
	return out
}

// TypicalWorkload is the artifact's typical workload: the untuned tasks'
// classes keyed by CPU, GPUs, GPU share and allowed models (memory is not
// part of a class), sorted by popularity, the most popular ones covering
// popularity (0.95) of all tasks, weights renormalized to sum to 1.
func TypicalWorkload(tasks []Task, popularity float64) []placement.WorkloadClass {
	jobs := make([]gangway.QueueEntry, len(tasks))
	for i := range tasks {
		jobs[i] = tasks[i].Job()
		jobs[i].MemMiB = 0
	}
	return placement.Typical(placement.WorkloadFromJobs(jobs), popularity)
}

// WorkloadFor is the typical workload of mode over the untuned tasks.
func WorkloadFor(mode WorkloadMode, tasks []Task) ([]placement.WorkloadClass, error) {
	switch mode {
	case WorkloadTypical, "":
		return TypicalWorkload(tasks, TypicalPopularity), nil
	case WorkloadAll:
		jobs := make([]gangway.QueueEntry, len(tasks))
		for i := range tasks {
			jobs[i] = tasks[i].Job()
		}
		return placement.WorkloadFromJobs(jobs), nil
	}
	return nil, fmt.Errorf("workload %q: want %q or %q", mode, WorkloadTypical, WorkloadAll)
}

// RunFGD replays the protocol for every policy and seed, runs in parallel,
// and returns the runs grouped by policy (in cfg.Policies order), seeds in
// cfg.Seeds order. It stops early when ctx is done.
func RunFGD(ctx context.Context, cfg FGDConfig) (*FGDResult, error) {
	if len(cfg.Nodes) == 0 || len(cfg.Tasks) == 0 {
		return nil, errors.New("fgd: no nodes or no tasks")
	}
	if len(cfg.Seeds) == 0 {
		return nil, errors.New("fgd: no seeds")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("fgd: %w", err)
	}
	if GPUCapacityMilli(cfg.Nodes) == 0 {
		return nil, errors.New("fgd: the node list has no GPUs")
	}
	if DemandMilli(cfg.Tasks) == 0 {
		return nil, fmt.Errorf("fgd: none of the %d tasks needs a GPU; the protocol tunes the tasks' GPU demand to a share of GPU capacity", len(cfg.Tasks))
	}
	ratio := cmp.Or(cfg.TuneRatio, DefaultTuneRatio)
	workload, err := WorkloadFor(cfg.Workload, cfg.Tasks)
	if err != nil {
		return nil, err
	}
	// The policies measure fragmentation against the typical workload;
	// the demand the model-scarcity term reads is the whole task list's.
	demand, _ := WorkloadFor(WorkloadAll, cfg.Tasks)

	trials := make([]Trial, len(cfg.Seeds))
	total := 0
	for i, s := range cfg.Seeds {
		trials[i] = Prepare(cfg.Nodes, cfg.Tasks, s, ratio)
		total += len(trials[i].Tasks) * len(cfg.Policies)
	}
	prog := newProgress(cfg.Progress, total)

	type job struct{ p, s int }
	jobs := make(chan job)
	runs := make([][]Run, len(cfg.Policies))
	for p := range runs {
		runs[p] = make([]Run, len(cfg.Seeds))
	}
	errs := make([]error, len(cfg.Policies)*len(cfg.Seeds))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range cmp.Or(cfg.Parallel, runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			for j := range jobs {
				r, err := runTrial(ctx, &cfg, trials[j.s], cfg.Policies[j.p], workload, demand, prog)
				if err != nil {
					errs[j.p*len(cfg.Seeds)+j.s] = err
					cancel()
					continue
				}
				runs[j.p][j.s] = r
			}
		})
	}
feed:
	for p := range cfg.Policies {
		for s := range cfg.Seeds {
			select {
			case jobs <- job{p, s}:
			case <-ctx.Done():
				break feed
			}
		}
	}
	close(jobs)
	wg.Wait()
	// A failed run cancels the others: report what failed, not the
	// cancellations it caused.
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	prog.finish()
	return newFGDResult(cfg, ratio, workload, trials, runs), nil
}

// runTrial places one trial's tasks one at a time, with no departures,
// through a placement session with policy's scorer.
func runTrial(ctx context.Context, cfg *FGDConfig, tr Trial, policy string, workload, demand []placement.WorkloadClass, prog *progress) (Run, error) {
	start := time.Now()
	sc, err := cfg.NewScorer(policy)
	if err != nil {
		return Run{}, err
	}
	sess := placement.NewSession(placement.Snapshot{Nodes: tr.Nodes},
		placement.Options{Scorer: sc, Seed: uint64(tr.Seed), Workload: workload, Demand: demand})
	m := newMeter(sess.View())
	r := Run{Policy: policy, Seed: tr.Seed, CapacityMilli: GPUCapacityMilli(tr.Nodes), Tasks: len(tr.Tasks),
		Points: make([]Point, 0, len(tr.Tasks))}
	var arrived int64
	var failed int32
	for k := range tr.Tasks {
		if k%256 == 0 {
			if err := ctx.Err(); err != nil {
				return Run{}, err
			}
			if k > 0 {
				prog.add(256)
			}
		}
		t := &tr.Tasks[k]
		plan := sess.Place([]gangway.QueueEntry{t.Job()})
		arrived += t.GPUMilliTotal()
		placed := len(plan.Assignments) == 1
		if placed {
			for _, mb := range plan.Assignments[0].Members {
				m.update(mb.NodeID)
			}
		} else {
			failed++
		}
		r.Points = append(r.Points, Point{ArrivedMilli: arrived, FreeMilli: m.free, FragMilli: m.frag,
			Failed: failed, Placed: placed})
	}
	prog.add(len(tr.Tasks) - (len(tr.Tasks)-1)/256*256)
	r.Failed = int(failed)
	r.UnallocatedAt100, r.FragAt100, r.FailedAt100 = at100(r.Points, r.CapacityMilli)
	r.Elapsed = time.Since(start)
	return r, nil
}

// at100 reads a run's curve at arrived = 100% as the artifact's analysis
// does: arrivals whose arrived percentage rounds to 100 (or, if none, to
// 99-101), the mean of their unallocated and fragmented percentages; NaN
// if the workload never got there.
func at100(pts []Point, capacity int64) (unalloc, frag float64, failed int) {
	pct := func(p *Point) float64 { return 100 * float64(p.ArrivedMilli) / float64(capacity) }
	mean := func(lo, hi float64) (u, f float64, n int) {
		for i := range pts {
			p := &pts[i]
			if x := pct(p); x >= lo && x <= hi {
				u += 100 * float64(p.FreeMilli) / float64(capacity)
				f += 100 * p.FragMilli / float64(capacity)
				n++
			}
		}
		if n > 0 {
			u, f = u/float64(n), f/float64(n)
		}
		return u, f, n
	}
	unalloc, frag, n := mean(99.5, 100.5)
	if n == 0 {
		unalloc, frag, n = mean(98.5, 101.5)
	}
	if n == 0 { // the workload never reached 100%
		unalloc, frag = math.NaN(), math.NaN()
	}
	for i := range pts {
		if pct(&pts[i]) > 100 {
			break
		}
		failed = int(pts[i].Failed)
	}
	return unalloc, frag, failed
}

// meter keeps the fleet's free and fragmented GPU milli up to date by
// re-measuring only the nodes an assignment touched. Fragmentation is
// placement's own (placement.FragMeter, as NodeFragmentation) against the
// session's workload.
type meter struct {
	v        *placement.View
	fm       placement.FragMeter
	index    map[string]int
	free     int64
	frag     float64
	nodeFree []int64
	fragOf   []float64
}

func newMeter(v *placement.View) *meter {
	nodes := v.Nodes()
	m := &meter{v: v, index: make(map[string]int, len(nodes)),
		nodeFree: make([]int64, len(nodes)), fragOf: make([]float64, len(nodes))}
	for i := range nodes {
		m.index[nodes[i].ID] = i
		m.nodeFree[i] = int64(v.FreeMilli(i))
		m.free += m.nodeFree[i]
		m.fragOf[i] = m.fm.Node(v, i)
		m.frag += m.fragOf[i]
	}
	return m
}

func (m *meter) update(nodeID string) {
	i, ok := m.index[nodeID]
	if !ok {
		return
	}
	f := int64(m.v.FreeMilli(i))
	m.free += f - m.nodeFree[i]
	m.nodeFree[i] = f
	fr := m.fm.Node(m.v, i)
	m.frag += fr - m.fragOf[i]
	m.fragOf[i] = fr
}

// progress reports arrivals done over all runs, serialized.
type progress struct {
	mu    sync.Mutex
	fn    func(done, total int)
	done  int
	total int
}

func newProgress(fn func(int, int), total int) *progress {
	p := &progress{fn: fn, total: total}
	if fn != nil {
		fn(0, total)
	}
	return p
}

func (p *progress) add(n int) {
	if p.fn == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = min(p.done+n, p.total)
	p.fn(p.done, p.total)
}

func (p *progress) finish() {
	if p.fn == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = p.total
	p.fn(p.done, p.total)
}
