package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/gangwayhq/gangway/placement"
)

// SweepPolicies are the policies a sweep compares by default: Gangway's
// default, FGD and best-fit.
var SweepPolicies = []string{GangwayPolicy, "fgd", "best-fit"}

// SweepPoint is one workload of a sweep: a knob and its value (the other
// knobs keep the source's mix).
type SweepPoint struct {
	Knob  string  // "share", "multi", "spec", "cpu", or "default"
	Value float64 // the knob's target (a share, or for cpu a multiple)
}

// Mix is the point's workload variant.
func (p SweepPoint) Mix() Mix {
	m := NoMix
	switch p.Knob {
	case "share":
		m.Share = p.Value
	case "multi":
		m.Multi = p.Value
	case "spec":
		m.Spec = p.Value
	case "cpu":
		m.CPU = p.Value
	}
	return m
}

func (p SweepPoint) String() string {
	if p.Knob == "default" {
		return "default"
	}
	return fmt.Sprintf("%s=%g%%", p.Knob, math.Round(p.Value*1e4)/100)
}

// DefaultSweep is issue 16's sweep, one knob at a time around the default
// list: GPU-sharing 20-100% of GPU demand, multi-GPU 20-50%,
// model-constrained 5-33% of GPU tasks, CPU-only 0-300% of the default's
// CPU-only demand.
const DefaultSweep = "share=0.2,0.4,0.6,0.8,1;multi=0.2,0.3,0.4,0.5;spec=0.05,0.1,0.2,0.33;cpu=0,0.5,2,3"

// ParseSweep reads sweep points: "knob=v1,v2;knob=v3", knobs share, multi,
// spec (shares in [0, 1]) and cpu (a multiple, 0 or more), and "default"
// for the source list itself.
func ParseSweep(s string) ([]SweepPoint, error) {
	var out []SweepPoint
	for part := range strings.SplitSeq(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if part == "default" {
			out = append(out, SweepPoint{Knob: "default"})
			continue
		}
		knob, vals, ok := strings.Cut(part, "=")
		knob = strings.TrimSpace(knob)
		if !ok {
			return nil, fmt.Errorf("sweep %q: want knob=v1,v2 (knobs share, multi, spec, cpu) or default, got %q", s, part)
		}
		switch knob {
		case "share", "multi", "spec", "cpu":
		default:
			return nil, fmt.Errorf("sweep %q: unknown knob %q (want share, multi, spec or cpu)", s, knob)
		}
		for v := range strings.SplitSeq(vals, ",") {
			x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return nil, fmt.Errorf("sweep %q: %s: want a number, got %q", s, knob, v)
			}
			p := SweepPoint{Knob: knob, Value: x}
			if x < 0 {
				return nil, fmt.Errorf("sweep %q: %s=%g: want 0 or more", s, knob, x)
			}
			if err := p.Mix().Validate(); err != nil {
				return nil, fmt.Errorf("sweep %q: %w", s, err)
			}
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("sweep %q: no points", s)
	}
	return out, nil
}

// SweepConfig is the FGD protocol over generated workloads: for each
// point, GenerateMix(Tasks, Nodes, point, GenSeed), then the protocol's
// policies × seeds on it. Policies, NewScorer, Seeds, TuneRatio, Workload
// and Parallel are FGDConfig's.
type SweepConfig struct {
	FGDConfig
	Points  []SweepPoint
	GenSeed uint64
	// Pool is GenerateMix's model-constraint pool (nil: OpenBSpecPool).
	Pool []SpecPool
}

// SweepResult is a sweep: one FGD replay per point.
type SweepResult struct {
	NodesFile, TasksFile string
	GenSeed              uint64
	Points               []SweepPointResult
}

// SweepPointResult is one point: the mix generated and the replay on it.
type SweepPointResult struct {
	Point SweepPoint
	Mix   MixStats
	FGD   *FGDResult
}

// RunSweep runs the sweep, point after point (each point's runs in
// parallel). Progress, when set, is called per point with the point's
// index and the FGD progress.
func RunSweep(ctx context.Context, cfg SweepConfig, progress func(point int, done, total int)) (*SweepResult, error) {
	if len(cfg.Points) == 0 {
		return nil, errors.New("sweep: no points")
	}
	res := &SweepResult{GenSeed: cfg.GenSeed}
	for i, p := range cfg.Points {
		tasks, err := GenerateMix(cfg.Tasks, cfg.Nodes, p.Mix(), cfg.Pool, cfg.GenSeed)
		if err != nil {
			return nil, fmt.Errorf("sweep %s: %w", p, err)
		}
		fc := cfg.FGDConfig
		fc.Tasks = tasks
		if progress != nil {
			fc.Progress = func(done, total int) { progress(i, done, total) }
		}
		r, err := RunFGD(ctx, fc)
		if err != nil {
			return nil, fmt.Errorf("sweep %s: %w", p, err)
		}
		res.Points = append(res.Points, SweepPointResult{Point: p, Mix: MeasureMix(tasks), FGD: r})
	}
	return res, nil
}

func (pr *SweepPointResult) policy(name string) *PolicyResult {
	for i := range pr.FGD.Policies {
		if pr.FGD.Policies[i].Policy == name {
			return &pr.FGD.Policies[i]
		}
	}
	return nil
}

// Ratio is policy's unallocated GPU at 100% over base's at this point:
// the ratio of the means over seeds, and the worst per-seed ratio (NaN if
// either policy is missing).
func (pr *SweepPointResult) Ratio(policy, base string) (mean, worst float64) {
	p, b := pr.policy(policy), pr.policy(base)
	if p == nil || b == nil {
		return math.NaN(), math.NaN()
	}
	worst = math.Inf(-1)
	for s := range p.Runs {
		worst = math.Max(worst, p.Runs[s].UnallocatedAt100/b.Runs[s].UnallocatedAt100)
	}
	return p.Unallocated.Mean / b.Unallocated.Mean, worst
}

// Violation is a point and seed where a policy left more GPU unallocated
// at 100% than limit × the baseline did.
type Violation struct {
	Point        SweepPoint
	Seed         int64
	Policy, Base float64 // unallocated GPU % at 100%
}

func (v Violation) String() string {
	return fmt.Sprintf("%s seed %d: %.3f%% vs %.3f%% (%.3f x)", v.Point, v.Seed, v.Policy, v.Base, v.Policy/v.Base)
}

// Worse lists every point and seed where policy left more than limit ×
// base's unallocated GPU (limit 1: worse than base at all).
func (r *SweepResult) Worse(policy, base string, limit float64) []Violation {
	var out []Violation
	for i := range r.Points {
		pr := &r.Points[i]
		p, b := pr.policy(policy), pr.policy(base)
		if p == nil || b == nil {
			continue
		}
		for s := range p.Runs {
			if u, ub := p.Runs[s].UnallocatedAt100, b.Runs[s].UnallocatedAt100; !(u <= limit*ub) {
				out = append(out, Violation{Point: pr.Point, Seed: p.Runs[s].Seed, Policy: u, Base: ub})
			}
		}
	}
	return out
}

// Check is nil when Gangway's default leaves at most limit × FGD's
// unallocated GPU on every point and seed, else an error listing each run
// where it leaves more.
func (r *SweepResult) Check(limit float64) error {
	bad := r.Worse(GangwayPolicy, "fgd", limit)
	if len(bad) == 0 {
		return nil
	}
	lines := make([]string, len(bad))
	for i, v := range bad {
		lines[i] = "  " + v.String()
	}
	return fmt.Errorf("gangway above %g x fgd's unallocated GPU on %d run(s):\n%s", limit, len(bad), strings.Join(lines, "\n"))
}

// SweepProgress is a RunSweep progress function drawing one progress bar
// per point on w.
func SweepProgress(w io.Writer, cfg SweepConfig) (progress func(point, done, total int), finish func()) {
	var bar *ProgressBar
	at := -1
	finish = func() {
		if bar != nil {
			bar.Done()
		}
	}
	return func(i, done, total int) {
		if i != at {
			finish()
			bar = NewProgressBar(w, fmt.Sprintf("sweep %d/%d %s: %d policies x %d seeds", i+1, len(cfg.Points), cfg.Points[i],
				len(cfg.Policies), len(cfg.Seeds)), "arrivals")
			at = i
		}
		bar.Update(done, total)
	}, finish
}

// WriteText writes the sweep table: per point, the mix generated, each
// policy's unallocated GPU % at 100% (mean ± sd over seeds), and
// Gangway's ratio to FGD (of the means, and the worst seed's) with the
// seeds on which it did worse than FGD. markdown writes a Markdown table.
func (r *SweepResult) WriteText(w io.Writer, markdown bool) error {
	if len(r.Points) == 0 {
		return nil
	}
	first := r.Points[0].FGD
	var policies []string
	for _, p := range first.Policies {
		policies = append(policies, p.Policy)
	}
	cols := []string{"point", "share", "multi", "spec", "cpu-only tasks", "arrivals"}
	for _, p := range policies {
		cols = append(cols, p+" unalloc %")
	}
	cols = append(cols, "gangway/fgd", "worst seed", "seeds worse")
	var tw *tabwriter.Writer
	sep, end := "\t", "\t\n"
	out := w
	if markdown {
		sep, end = " | ", " |\n"
		fmt.Fprintf(w, "| %s |\n|---|", strings.Join(cols, " | "))
		fmt.Fprintf(w, "%s\n", strings.Repeat("---:|", len(cols)-1))
	} else {
		fmt.Fprintf(w, "Sweep of the FGD protocol over generated mixes of %s on %s: generator seed %d, %d nodes, %d GPUs, seeds %s\n\n",
			baseName(r.TasksFile), baseName(r.NodesFile), r.GenSeed, first.Nodes, first.GPUs, FormatSeeds(first.Seeds))
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		out = tw
		fmt.Fprint(out, strings.Join(cols, sep)+end)
	}
	for i := range r.Points {
		pr := &r.Points[i]
		row := []string{pr.Point.String(), pct(pr.Mix.Share), pct(pr.Mix.Multi), pct(pr.Mix.Spec),
			strconv.Itoa(pr.Mix.CPUOnly), fmt.Sprintf("%.0f", pr.FGD.TunedTasks.Mean)}
		for _, p := range policies {
			row = append(row, pm(pr.policy(p).Unallocated))
		}
		mean, worst := pr.Ratio(GangwayPolicy, "fgd")
		n := 0
		if p, b := pr.policy(GangwayPolicy), pr.policy("fgd"); p != nil && b != nil {
			for s := range p.Runs {
				if !(p.Runs[s].UnallocatedAt100 <= b.Runs[s].UnallocatedAt100) {
					n++
				}
			}
		}
		row = append(row, num(mean, "%.3f"), num(worst, "%.3f"), fmt.Sprintf("%d / %d", n, len(pr.FGD.Seeds)))
		if markdown {
			fmt.Fprint(out, "| ")
		}
		fmt.Fprint(out, strings.Join(row, sep)+end)
	}
	if tw != nil {
		if err := tw.Flush(); err != nil {
			return err
		}
		_, err := fmt.Fprintln(w, "\nunallocated GPU % of capacity at arrived workload = 100%, mean ± sd over seeds; share and multi: of GPU demand; spec: of GPU tasks")
		return err
	}
	return nil
}

func pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

func baseName(path string) string {
	if i := strings.LastIndexAny(path, `/\`); i >= 0 {
		return path[i+1:]
	}
	return path
}

// SweepNodes returns every k-th node of nodes sorted by ID (k >= 1): a
// smaller fleet with the same mix of node shapes, for quick sweeps.
func SweepNodes(nodes []placement.Node, k int) []placement.Node {
	if k <= 1 {
		return nodes
	}
	var out []placement.Node
	for i, n := range sortedNodes(nodes) {
		if i%k == 0 {
			out = append(out, n)
		}
	}
	return out
}

func sortedNodes(nodes []placement.Node) []placement.Node {
	out := slices.Clone(nodes)
	slices.SortFunc(out, func(a, b placement.Node) int { return strings.Compare(a.ID, b.ID) })
	return out
}
