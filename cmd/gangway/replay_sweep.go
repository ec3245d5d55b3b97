package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gangwayhq/gangway/internal/sim"
	"github.com/gangwayhq/gangway/placement/baselines"
)

type replaySweepFlags struct {
	nodes, tasks, seeds, points string
	policies                    []string
	genSeed                     uint64
	everyNode                   int
	check                       float64
	markdown                    bool
	plot                        string
	parallel                    int
}

func newReplaySweepCmd() *cobra.Command {
	f := replaySweepFlags{seeds: "42-51", points: sim.DefaultSweep, policies: sim.SweepPolicies, everyNode: 1}
	cmd := &cobra.Command{
		Use:   "sweep",
		Short: "The FGD protocol over generated workload mixes: Gangway's default against FGD and best-fit at every point",
		Long: `Generate workload variants of an openb pod list, one knob at a time, the way
the FGD artifact derived its gpushare, multigpu, gpuspec and cpu variants from
the default list, and run the FGD protocol (see 'gangway replay fgd') on each.

Knobs (--points "knob=v1,v2;knob=v3"; "default" is the list itself):
  share  share of the GPU demand carried by GPU-sharing tasks (0-1): random
         GPU tasks are replaced by copies of the other kind; the number of
         GPU tasks and the CPU-only tasks stay
  multi  share of the GPU demand carried by multi-GPU tasks (0 to below 1),
         likewise
  spec   share of GPU tasks with a GPU-model constraint (0-1), drawn from
         the model lists of the artifact's gpuspec10 variant among those of
         the fleet's models the task fits on; nothing else changes
  cpu    CPU-only tasks' total CPU demand, as a multiple of the list's
         (random copies added or tasks dropped); GPU tasks stay

Every point is generated with --gen-seed, then replayed over --seeds. The
table shows each policy's unallocated GPU % at arrived workload = 100% and
Gangway's ratio to FGD. --check L exits with an error, listing them, if
Gangway leaves more than L x FGD's unallocated GPU on any point and seed.`,
		Example: `  gangway replay sweep
  gangway replay sweep --points "spec=0.2,0.33" --seeds 52-61 --gen-seed 7
  gangway replay sweep --markdown --plot docs/sweep.png --check 1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runReplaySweep(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.nodes, "nodes", defaultOpenBNodes, "openb node list (CSV: sn,cpu_milli,memory_mib,gpu,model)")
	fl.StringVar(&f.tasks, "tasks", defaultOpenBTasks, "openb pod list the mixes are generated from")
	fl.StringVar(&f.seeds, "seeds", f.seeds, "replay seeds: N, N-M or a comma-separated list")
	fl.StringVar(&f.points, "points", f.points, `sweep points: "knob=v1,v2;knob=v3" (knobs share, multi, spec, cpu; "default")`)
	fl.StringSliceVar(&f.policies, "policies", f.policies, "policies to compare (valid: "+strings.Join(baselines.Names(), ", ")+")")
	fl.Uint64Var(&f.genSeed, "gen-seed", 0, "seed of the workload generator")
	fl.IntVar(&f.everyNode, "every-node", f.everyNode, "keep every k-th node (by name) of the node list: a smaller fleet for quick sweeps")
	fl.Float64Var(&f.check, "check", 0, "fail if gangway leaves more than this multiple of fgd's unallocated GPU on any point and seed (0: no check)")
	fl.BoolVar(&f.markdown, "markdown", false, "write the table as Markdown")
	fl.StringVar(&f.plot, "plot", "", "draw each policy's unallocated GPU % over FGD's per point to this file (.png, .svg, .pdf)")
	fl.IntVar(&f.parallel, "parallel", 0, "runs in flight (0: GOMAXPROCS)")
	return cmd
}

func runReplaySweep(cmd *cobra.Command, f replaySweepFlags) error {
	seeds, err := sim.ParseSeeds(f.seeds)
	if err != nil {
		return fmt.Errorf("--seeds: %w", err)
	}
	points, err := sim.ParseSweep(f.points)
	if err != nil {
		return fmt.Errorf("--points: %w", err)
	}
	if f.everyNode < 1 {
		return fmt.Errorf("--every-node: %d: want 1 or more", f.everyNode)
	}
	if f.check < 0 {
		return fmt.Errorf("--check: %g: want 0 (no check) or a positive multiple", f.check)
	}
	cfg := sim.SweepConfig{FGDConfig: sim.FGDConfig{Policies: f.policies, Seeds: seeds, NewScorer: baselines.ScorerByName,
		Parallel: f.parallel}, Points: points, GenSeed: f.genSeed}
	if err := cfg.Validate(); err != nil {
		return sim.FlagErrors(err)
	}
	nodesFile := sim.FlagTracePath(f.nodes, !cmd.Flags().Changed("nodes"))
	tasksFile := sim.FlagTracePath(f.tasks, !cmd.Flags().Changed("tasks"))
	nodes, tasks, err := sim.LoadOpenB(nodesFile, tasksFile)
	if err != nil {
		return sim.FlagErrors(err)
	}
	cfg.Tasks = tasks
	cfg.Nodes = sim.SweepNodes(nodes, f.everyNode)

	stderr := cmd.ErrOrStderr()
	start := time.Now()
	progress, finish := sim.SweepProgress(stderr, cfg)
	res, err := sim.RunSweep(cmd.Context(), cfg, progress)
	finish()
	if err != nil {
		return err
	}
	res.NodesFile, res.TasksFile = nodesFile, tasksFile
	fmt.Fprintf(stderr, "sweep: %d points in %s\n", len(points), time.Since(start).Round(time.Second))
	if err := res.WriteText(cmd.OutOrStdout(), f.markdown); err != nil {
		return err
	}
	if f.plot != "" {
		if err := res.WritePlot(f.plot); err != nil {
			return fmt.Errorf("--plot: %w", err)
		}
		fmt.Fprintf(stderr, "sweep: wrote %s\n", f.plot)
	}
	if f.check > 0 {
		if err := res.Check(f.check); err != nil {
			return fmt.Errorf("--check %g: %w", f.check, err)
		}
		fmt.Fprintf(stderr, "sweep: gangway within %g x fgd on every point and seed\n", f.check)
	}
	return nil
}
