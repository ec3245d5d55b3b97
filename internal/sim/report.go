package sim

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/gangwayhq/gangway/placement"
)

// GangwayPolicy is Gangway's default policy; every other policy in a
// replay is a baseline it is compared with.
const GangwayPolicy = "gangway"

// Stat is a mean and sample standard deviation over seeds.
type Stat struct {
	Mean, SD float64
	N        int
}

func newStat(xs []float64) Stat {
	var s Stat
	for _, x := range xs {
		if !math.IsNaN(x) {
			s.Mean += x
			s.N++
		}
	}
	if s.N == 0 {
		return Stat{Mean: math.NaN(), SD: math.NaN()}
	}
	s.Mean /= float64(s.N)
	if s.N > 1 {
		for _, x := range xs {
			if !math.IsNaN(x) {
				s.SD += (x - s.Mean) * (x - s.Mean)
			}
		}
		s.SD = math.Sqrt(s.SD / float64(s.N-1))
	}
	return s
}

// PolicyResult is one policy over every seed.
type PolicyResult struct {
	Policy string
	Runs   []Run // in seed order
	// Unallocated and Frag are percentages of GPU capacity at arrived =
	// 100%; FailedAt100 and Failed count tasks not placed up to 100% and
	// over the whole run (to the tuned 130%).
	Unallocated, Frag, FailedAt100, Failed Stat
	// Paper is the FGD artifact's unallocated % for this policy and trace
	// (NaN when there is none).
	Paper float64
	// RatioToBest is Unallocated.Mean over the best baseline's (NaN
	// without baselines).
	RatioToBest float64
}

// FGDResult is a whole replay of the FGD protocol.
type FGDResult struct {
	// NodesFile and TasksFile label the report; the caller sets them.
	NodesFile, TasksFile string
	Nodes, GPUs          int
	Tasks                int  // in the task list, before tuning
	TunedTasks           Stat // arrivals per seed after tuning
	TuneRatio            float64
	Workload             WorkloadMode
	WorkloadClasses      int
	Seeds                []int64
	Policies             []PolicyResult
	// BestBaseline is the baseline policy with the least unallocated GPU
	// at 100% ("" without baselines).
	BestBaseline string
}

func newFGDResult(cfg FGDConfig, ratio float64, workload []placement.WorkloadClass, trials []Trial, runs [][]Run) *FGDResult {
	res := &FGDResult{Nodes: len(cfg.Nodes), GPUs: int(GPUCapacityMilli(cfg.Nodes) / placement.Whole),
		Tasks: len(cfg.Tasks), TuneRatio: ratio, Workload: cmpMode(cfg.Workload), WorkloadClasses: len(workload),
		Seeds: cfg.Seeds}
	tuned := make([]float64, len(trials))
	for i := range trials {
		tuned[i] = float64(len(trials[i].Tasks))
	}
	res.TunedTasks = newStat(tuned)
	best := math.Inf(1)
	for p, policy := range cfg.Policies {
		pr := PolicyResult{Policy: policy, Runs: runs[p], Paper: math.NaN(), RatioToBest: math.NaN()}
		var u, f, f100, fail []float64
		for _, r := range runs[p] {
			u, f = append(u, r.UnallocatedAt100), append(f, r.FragAt100)
			f100, fail = append(f100, float64(r.FailedAt100)), append(fail, float64(r.Failed))
		}
		pr.Unallocated, pr.Frag, pr.FailedAt100, pr.Failed = newStat(u), newStat(f), newStat(f100), newStat(fail)
		if policy != GangwayPolicy && pr.Unallocated.Mean < best {
			best, res.BestBaseline = pr.Unallocated.Mean, policy
		}
		res.Policies = append(res.Policies, pr)
	}
	if res.BestBaseline != "" {
		for i := range res.Policies {
			res.Policies[i].RatioToBest = res.Policies[i].Unallocated.Mean / best
		}
	}
	return res
}

func cmpMode(m WorkloadMode) WorkloadMode {
	if m == "" {
		return WorkloadTypical
	}
	return m
}

// SetReference records reference numbers (unallocated % at 100% by
// policy), as PaperReference gives them.
func (r *FGDResult) SetReference(ref map[string]float64) {
	for i := range r.Policies {
		if v, ok := ref[r.Policies[i].Policy]; ok {
			r.Policies[i].Paper = v
		} else {
			r.Policies[i].Paper = math.NaN()
		}
	}
}

// WriteText writes the report table: one row per policy.
func (r *FGDResult) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "FGD protocol (USENIX ATC'23 \"Beware of Fragmentation\"): %s on %s\n",
		filepath.Base(r.TasksFile), filepath.Base(r.NodesFile))
	fmt.Fprintf(w, "%d nodes, %d GPUs; %d tasks tuned to %.2g x GPU capacity (%.0f arrivals per seed); seeds %s; workload %s (%d classes)\n\n",
		r.Nodes, r.GPUs, r.Tasks, r.TuneRatio, r.TunedTasks.Mean, FormatSeeds(r.Seeds), r.Workload, r.WorkloadClasses)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tunalloc GPU % @100\tfrag GPU % @100\tfailed @100\tfailed @130\tvs best baseline\tpaper unalloc %\t")
	for _, p := range r.Policies {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%.0f\t%s\t%s\t\n", p.Policy, pm(p.Unallocated), pm(p.Frag),
			p.FailedAt100.Mean, p.Failed.Mean, num(p.RatioToBest, "%.3f"), num(p.Paper, "%.2f"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.BestBaseline != "" {
		_, err := fmt.Fprintf(w, "\nbest baseline: %s; mean ± sd over %d seed(s); GPU %% of cluster capacity at arrived workload = 100%%\n",
			r.BestBaseline, len(r.Seeds))
		return err
	}
	return nil
}

func pm(s Stat) string {
	if math.IsNaN(s.Mean) {
		return "n/a"
	}
	if s.N < 2 {
		return fmt.Sprintf("%.2f", s.Mean)
	}
	return fmt.Sprintf("%.2f ± %.2f", s.Mean, s.SD)
}

func num(x float64, format string) string {
	if math.IsNaN(x) {
		return "-"
	}
	return fmt.Sprintf(format, x)
}

// PolicyJSON is one policy's line of `--output json`.
type PolicyJSON struct {
	Policy                  string     `json:"policy"`
	UnallocatedGPUPctAt100  *float64   `json:"unallocated_gpu_pct_at_100"`
	FragGPUPctAt100         *float64   `json:"frag_gpu_pct_at_100"`
	UnallocatedGPUPctSD     *float64   `json:"unallocated_gpu_pct_sd,omitempty"`
	FragGPUPctSD            *float64   `json:"frag_gpu_pct_sd,omitempty"`
	FailedTasksAt100        float64    `json:"failed_tasks_at_100"`
	FailedTasks             float64    `json:"failed_tasks"`
	RatioToBestBaseline     *float64   `json:"ratio_to_best_baseline,omitempty"`
	PaperUnallocatedGPUPct  *float64   `json:"paper_unallocated_gpu_pct,omitempty"`
	Seeds                   []int64    `json:"seeds"`
	Tasks                   string     `json:"tasks"`
	Nodes                   string     `json:"nodes"`
	UnallocatedGPUPctBySeed []*float64 `json:"unallocated_gpu_pct_by_seed"`
}

// WriteJSON writes one JSON object per policy, one per line; the values
// are means over the seeds.
func (r *FGDResult) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	for _, p := range r.Policies {
		o := PolicyJSON{Policy: p.Policy, UnallocatedGPUPctAt100: ptr(p.Unallocated.Mean), FragGPUPctAt100: ptr(p.Frag.Mean),
			FailedTasksAt100: p.FailedAt100.Mean, FailedTasks: p.Failed.Mean, RatioToBestBaseline: ptr(p.RatioToBest),
			PaperUnallocatedGPUPct: ptr(p.Paper), Seeds: r.Seeds, Tasks: filepath.Base(r.TasksFile), Nodes: filepath.Base(r.NodesFile)}
		if p.Unallocated.N > 1 {
			o.UnallocatedGPUPctSD, o.FragGPUPctSD = ptr(p.Unallocated.SD), ptr(p.Frag.SD)
		}
		for _, run := range p.Runs {
			o.UnallocatedGPUPctBySeed = append(o.UnallocatedGPUPctBySeed, ptr(run.UnallocatedAt100))
		}
		if err := enc.Encode(o); err != nil {
			return err
		}
	}
	return nil
}

func ptr(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	x = math.Round(x*1e4) / 1e4
	return &x
}

// WriteCSV writes each run's per-arrival series to dir as
// fgd-<policy>-seed<seed>.csv and returns the files written.
func (r *FGDResult) WriteCSV(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	for _, p := range r.Policies {
		for _, run := range p.Runs {
			name := filepath.Join(dir, fmt.Sprintf("fgd-%s-seed%d.csv", p.Policy, run.Seed))
			if err := writeSeries(name, &run); err != nil {
				return files, err
			}
			files = append(files, name)
		}
	}
	return files, nil
}

func writeSeries(name string, run *Run) error {
	return WriteCSVFile(name, func(w *csv.Writer) {
		_ = w.Write([]string{"arrival", "placed", "failed", "arrived_gpu_milli", "arrived_pct", "unallocated_gpu_pct", "frag_gpu_pct"})
		c := float64(run.CapacityMilli)
		ff := func(x float64) string { return strconv.FormatFloat(x, 'f', 4, 64) }
		for i, p := range run.Points {
			placed := "0"
			if p.Placed {
				placed = "1"
			}
			_ = w.Write([]string{strconv.Itoa(i + 1), placed, strconv.Itoa(int(p.Failed)), strconv.FormatInt(p.ArrivedMilli, 10),
				ff(100 * float64(p.ArrivedMilli) / c), ff(100 * float64(p.FreeMilli) / c), ff(100 * p.FragMilli / c)})
		}
	})
}

// FormatSeeds writes seeds compactly: "42-51", "42,45".
func FormatSeeds(seeds []int64) string {
	var parts []string
	for i := 0; i < len(seeds); {
		j := i
		for j+1 < len(seeds) && seeds[j+1] == seeds[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", seeds[i], seeds[j]))
		} else {
			parts = append(parts, strconv.FormatInt(seeds[i], 10))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// ParseSeeds reads "42-51", "42" or "42,45" (and mixes: "42-44,50").
func ParseSeeds(s string) ([]int64, error) {
	var out []int64
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseInt(strings.TrimSpace(lo), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("seeds %q: want N, N-M or a comma-separated list, got %q", s, part)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseInt(strings.TrimSpace(hi), 10, 64); err != nil || b < a {
				return nil, fmt.Errorf("seeds %q: want a range N-M with N <= M, got %q", s, part)
			}
			if b-a >= 10000 {
				return nil, fmt.Errorf("seeds %q: range %q has more than 10000 seeds", s, part)
			}
		}
		for x := a; x <= b; x++ {
			out = append(out, x)
		}
	}
	return out, nil
}
