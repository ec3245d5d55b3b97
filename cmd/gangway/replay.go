package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/gangwayhq/gangway/internal/sim"
	"github.com/gangwayhq/gangway/placement"
)

// Trace files, relative to the project root (or the working directory).
const (
	defaultOpenBNodes = "../shared/traces/openb/openb_node_list_gpu_node.csv"
	defaultOpenBTasks = "../shared/traces/openb/openb_pod_list_default.csv"
)

func newReplayCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "Replay public traces through the placement engine and compare policies",
		Long: `Replay public GPU cluster traces through Gangway's placement engine — the
same code the dispatch loop runs — and report scheduling quality per policy.

Protocols:
  fgd   the USENIX ATC 2023 "Beware of Fragmentation" protocol on the Alibaba
        openb trace: tasks tuned to 1.3 x GPU capacity, shuffled, placed one
        at a time with no departures; unallocated and fragmented GPU % at
        arrived workload = 100%, per policy, over seeds 42-51.`,
	}
	cmd.AddCommand(newReplayFGDCmd())
	return cmd
}

type replayFGDFlags struct {
	nodes, tasks string
	seeds        string
	policies     []string
	tune         float64
	workload     string
	csvDir       string
	plot         string
	output       string
	parallel     int
}

func newReplayFGDCmd() *cobra.Command {
	f := replayFGDFlags{seeds: "42-51", policies: sim.FGDPolicies, tune: sim.DefaultTuneRatio,
		workload: string(sim.WorkloadTypical), output: "text"}
	cmd := &cobra.Command{
		Use:   "fgd",
		Short: `The FGD paper's protocol on the openb trace: unallocated GPU % at 100% arrived workload`,
		Long: `Replay the protocol of Weng et al., "Beware of Fragmentation: Scheduling
GPU-Sharing Workloads with Fragmentation Gradient Descent" (USENIX ATC 2023),
as its artifact runs it, through Gangway's real placement engine.

For each seed: sort the tasks by name and shuffle them, tune the list to
--tune x the fleet's GPU capacity (drop random tasks, or add random copies),
permute the node order; then submit the tasks one at a time — each is placed
at once or fails for good, nothing departs. After every arrival the replay
records arrived workload, unallocated GPU and fragmented GPU (against the
typical workload), all as % of the cluster's GPU capacity.

The table shows, per policy, the value at arrived workload = 100% (mean ± sd
over the seeds), the tasks that failed, the ratio to the best baseline and the
paper's number where it has one (default trace, GPU node list).`,
		Example: `  gangway replay fgd
  gangway replay fgd --seeds 42 --policies fgd,gangway
  gangway replay fgd --tasks ../shared/traces/openb/openb_pod_list_gpushare40.csv --plot fgd.png
  gangway replay fgd --output json --csv out/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runReplayFGD(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.nodes, "nodes", defaultOpenBNodes, "openb node list (CSV: sn,cpu_milli,memory_mib,gpu,model)")
	fl.StringVar(&f.tasks, "tasks", defaultOpenBTasks, "openb pod list (CSV: name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,...])")
	fl.StringVar(&f.seeds, "seeds", f.seeds, "seeds: N, N-M or a comma-separated list")
	fl.StringSliceVar(&f.policies, "policies", f.policies, "policies to compare (valid: "+strings.Join(placement.ScorerNames(), ", ")+")")
	fl.Float64Var(&f.tune, "tune", f.tune, "tune the task list to this multiple of the fleet's GPU capacity")
	fl.StringVar(&f.workload, "workload", f.workload, `typical workload fragmentation is measured against: "typical" (the artifact's: top classes covering 95% of tasks, no memory) or "all" (every class, memory included)`)
	fl.StringVar(&f.csvDir, "csv", "", "write each run's per-arrival series to this directory")
	fl.StringVar(&f.plot, "plot", "", "draw unallocated GPU % vs arrived workload, one line per policy, to this file (.png, .svg, .pdf)")
	fl.StringVarP(&f.output, "output", "o", f.output, "report format: text or json (one object per policy per line)")
	fl.IntVar(&f.parallel, "parallel", 0, "runs in flight (0: GOMAXPROCS)")
	return cmd
}

func runReplayFGD(cmd *cobra.Command, f replayFGDFlags) error {
	if f.output != "text" && f.output != "json" {
		return fmt.Errorf("--output %q: want text or json", f.output)
	}
	seeds, err := sim.ParseSeeds(f.seeds)
	if err != nil {
		return fmt.Errorf("--seeds: %w", err)
	}
	if f.tune <= 0 {
		return fmt.Errorf("--tune %g: want a positive multiple of GPU capacity", f.tune)
	}
	if w := sim.WorkloadMode(f.workload); w != sim.WorkloadTypical && w != sim.WorkloadAll {
		return fmt.Errorf("--workload %q: want %q or %q", f.workload, sim.WorkloadTypical, sim.WorkloadAll)
	}
	if f.parallel < 0 {
		return fmt.Errorf("--parallel %d: want 0 (GOMAXPROCS) or more", f.parallel)
	}
	for _, p := range f.policies {
		if _, err := placement.ScorerByName(p); err != nil {
			return fmt.Errorf("--policies: %w", err)
		}
	}
	nodesFile := tracePath(f.nodes, !cmd.Flags().Changed("nodes"))
	tasksFile := tracePath(f.tasks, !cmd.Flags().Changed("tasks"))
	nodes, err := sim.LoadOpenBNodes(nodesFile)
	if err != nil {
		return fmt.Errorf("--nodes: %w", err)
	}
	tasks, err := sim.LoadOpenBTasks(tasksFile)
	if err != nil {
		return fmt.Errorf("--tasks: %w", err)
	}

	stderr := cmd.ErrOrStderr()
	start := time.Now()
	bar := newProgressBar(stderr, fmt.Sprintf("fgd: %d policies x %d seeds", len(f.policies), len(seeds)))
	res, err := sim.RunFGD(cmd.Context(), sim.FGDConfig{
		Nodes: nodes, Tasks: tasks, Policies: f.policies, Seeds: seeds, NewScorer: placement.ScorerByName,
		TuneRatio: f.tune, Workload: sim.WorkloadMode(f.workload), Parallel: f.parallel, Progress: bar.update,
	})
	bar.done()
	if err != nil {
		return err
	}
	res.NodesFile, res.TasksFile = nodesFile, tasksFile
	if f.tune == sim.DefaultTuneRatio && sim.WorkloadMode(f.workload) == sim.WorkloadTypical {
		res.SetReference(sim.PaperReference(nodesFile, tasksFile))
	}
	fmt.Fprintf(stderr, "fgd: %d runs in %s\n", len(f.policies)*len(seeds), time.Since(start).Round(time.Millisecond))

	out := cmd.OutOrStdout()
	if f.output == "json" {
		err = res.WriteJSON(out)
	} else {
		err = res.WriteText(out)
	}
	if err != nil {
		return err
	}
	if f.csvDir != "" {
		files, err := res.WriteCSV(f.csvDir)
		if err != nil {
			return fmt.Errorf("--csv: %w", err)
		}
		fmt.Fprintf(stderr, "fgd: wrote %d series to %s\n", len(files), f.csvDir)
	}
	if f.plot != "" {
		if err := res.WritePlot(f.plot); err != nil {
			return fmt.Errorf("--plot: %w", err)
		}
		fmt.Fprintf(stderr, "fgd: wrote %s\n", f.plot)
	}
	return nil
}

// tracePath resolves a default trace path: relative to the working
// directory if it exists there, else to the project root (the nearest
// directory up with a go.mod). Paths the user gave are used as given.
func tracePath(p string, isDefault bool) string {
	if !isDefault || filepath.IsAbs(p) {
		return p
	}
	if _, err := os.Stat(p); err == nil {
		return p
	}
	dir, err := os.Getwd()
	if err != nil {
		return p
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if c := filepath.Join(dir, p); fileExists(c) {
				return c
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return p
		}
		dir = parent
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// progressBar draws done/total on a terminal, redrawn in place at most
// every 100ms; elsewhere (a log, CI) it prints a line every 10%.
type progressBar struct {
	mu        sync.Mutex
	w         io.Writer
	label     string
	tty       bool
	start     time.Time
	last      time.Time
	lastTenth int
	drawn     bool
}

func newProgressBar(w io.Writer, label string) *progressBar {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil {
			tty = st.Mode()&os.ModeCharDevice != 0
		}
	}
	return &progressBar{w: w, label: label, tty: tty, start: time.Now(), lastTenth: -1}
}

func (b *progressBar) update(done, total int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if total <= 0 {
		return
	}
	frac := float64(done) / float64(total)
	elapsed := time.Since(b.start).Round(100 * time.Millisecond)
	if !b.tty {
		if tenth := int(frac * 10); tenth > b.lastTenth {
			b.lastTenth = tenth
			fmt.Fprintf(b.w, "%s: %3.0f%% (%d/%d arrivals, %s)\n", b.label, 100*frac, done, total, elapsed)
		}
		return
	}
	now := time.Now()
	if done < total && now.Sub(b.last) < 100*time.Millisecond {
		return
	}
	b.last = now
	const width = 30
	n := int(frac * width)
	fmt.Fprintf(b.w, "\r%s [%s%s] %3.0f%% %s", b.label, strings.Repeat("=", n), strings.Repeat(" ", width-n), 100*frac, elapsed)
	b.drawn = true
}

func (b *progressBar) done() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tty && b.drawn {
		fmt.Fprintln(b.w)
	}
}
