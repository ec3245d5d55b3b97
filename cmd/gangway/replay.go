package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gangwayhq/gangway/internal/sim"
	"github.com/gangwayhq/gangway/internal/spotpolicy"
	"github.com/gangwayhq/gangway/placement"
	"github.com/gangwayhq/gangway/placement/baselines"
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
        arrived workload = 100%, per policy, over seeds 42-51.
  trace dynamic replay with departures: jobs arrive at their submit times,
        wait in the queue, run for their durations; GPU allocation over
        time, queue waits, fragmentation, preemptions, per policy.
  scale the cost of one full placement cycle on synthetic fleets and
        queues, from 1,000 to 10,000 nodes and jobs.
  sweep the fgd protocol over generated workload mixes (more GPU sharing,
        multi-GPU, model-constrained or CPU-only tasks), per policy.
  spot  deadline jobs on spot against on-demand over spot availability
        traces: cost and deadlines met per spot policy.`,
	}
	cmd.AddCommand(newReplayFGDCmd(), newReplayTraceCmd(), newReplayScaleCmd(), newReplaySpotCmd(), newReplaySweepCmd())
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
	fl.StringSliceVar(&f.policies, "policies", f.policies, "policies to compare (valid: "+strings.Join(baselines.Names(), ", ")+")")
	fl.Float64Var(&f.tune, "tune", f.tune, "tune the task list to this multiple of the fleet's GPU capacity (0: the default)")
	fl.StringVar(&f.workload, "workload", f.workload, `typical workload fragmentation is measured against: "typical" (the artifact's: top classes covering 95% of tasks, no memory) or "all" (every class, memory included)`)
	fl.StringVar(&f.csvDir, "csv", "", "write each run's per-arrival series to this directory")
	fl.StringVar(&f.plot, "plot", "", "draw unallocated GPU % vs arrived workload, one line per policy, to this file (.png, .svg, .pdf)")
	fl.StringVarP(&f.output, "output", "o", f.output, "report format: text or json (one object per policy per line)")
	fl.IntVar(&f.parallel, "parallel", 0, "runs in flight (0: GOMAXPROCS)")
	return cmd
}

func runReplayFGD(cmd *cobra.Command, f replayFGDFlags) error {
	if err := sim.CheckFormat(f.output); err != nil {
		return err
	}
	seeds, err := sim.ParseSeeds(f.seeds)
	if err != nil {
		return fmt.Errorf("--seeds: %w", err)
	}
	cfg := sim.FGDConfig{Policies: f.policies, Seeds: seeds, NewScorer: baselines.ScorerByName,
		TuneRatio: f.tune, Workload: sim.WorkloadMode(f.workload), Parallel: f.parallel}
	if err := cfg.Validate(); err != nil {
		return sim.FlagErrors(err)
	}
	nodesFile := sim.FlagTracePath(f.nodes, !cmd.Flags().Changed("nodes"))
	tasksFile := sim.FlagTracePath(f.tasks, !cmd.Flags().Changed("tasks"))
	nodes, tasks, err := sim.LoadOpenB(nodesFile, tasksFile)
	if err != nil {
		return sim.FlagErrors(err)
	}

	stderr := cmd.ErrOrStderr()
	start := time.Now()
	bar := sim.NewProgressBar(stderr, fmt.Sprintf("fgd: %d policies x %d seeds", len(f.policies), len(seeds)), "arrivals")
	cfg.Nodes, cfg.Tasks, cfg.Progress = nodes, tasks, bar.Update
	res, err := sim.RunFGD(cmd.Context(), cfg)
	bar.Done()
	if err != nil {
		return err
	}
	res.NodesFile, res.TasksFile = nodesFile, tasksFile
	if f.tune == sim.DefaultTuneRatio && sim.WorkloadMode(f.workload) == sim.WorkloadTypical {
		res.SetReference(sim.PaperReference(nodesFile, tasksFile))
	}
	fmt.Fprintf(stderr, "fgd: %d runs in %s\n", len(f.policies)*len(seeds), time.Since(start).Round(time.Millisecond))

	return sim.Output{Format: f.output, CSVDir: f.csvDir, Plot: f.plot, Out: cmd.OutOrStdout(), Log: stderr}.Write("fgd", res)
}

type replayTraceFlags struct {
	nodes, tasks, jobs, timesFrom string
	policies                      []string
	seed                          uint64
	preempt                       bool
	minRuntime, checkpoint        time.Duration
	reservations, sampleNodes     int
	speedup                       float64
	limit                         int
	exactRuntimes, eta            bool
	limitFactor, fleetShare       float64
	csvDir, plot, output          string
	parallel                      int
	mix                           string
	gangHeavy                     int
	defrag                        bool
	workload                      string
	defragMoves                   int
	defragLost                    float64
	defragRestart                 time.Duration
	burstPrice                    float64
	burstAfter, burstBoot         time.Duration
}

func newReplayTraceCmd() *cobra.Command {
	// The engine's options default to the server's (gangway dev and the
	// default config): 4 reservations, preemption after 10 minutes.
	f := replayTraceFlags{policies: sim.TracePolicies, seed: 42, preempt: true, reservations: 4, minRuntime: 10 * time.Minute,
		checkpoint: sim.DefaultCheckpointEvery, speedup: 1, output: "text", defragMoves: 12, defragLost: 7200,
		defragRestart: 30 * time.Second, burstAfter: 10 * time.Minute, burstBoot: spotpolicy.DefaultRestartOverhead}
	cmd := &cobra.Command{
		Use:   "trace",
		Short: "Dynamic replay with departures: GPU allocation, queue waits, fragmentation and preemptions per policy",
		Long: `Replay a trace in virtual time through Gangway's dispatch loop and placement
engine — the server's dispatch.Loop per policy on a virtual clock, against an
in-memory view and workflows, one loop cycle per instant at which something
changed.

Jobs arrive at their submit times and wait in the queue until the engine
places them (its queue order, fair share, reservations and backfill,
preemption); they then run for their durations and release their GPUs. The
engine's options default to the server's: --reservations 4, --preempt,
--min-runtime 10m (--reservations 0 --preempt=false compares placement alone).
Jobs declare their remaining run time rounded up to a power of two of minutes
as their max runtime (--exact-runtimes: the exact one); only backfill reads it. A preempted job stops at once and is requeued, as a new attempt, with the
work it had left plus the work lost since its last checkpoint (--checkpoint).

Inputs:
  --tasks FILE  an openb pod list: arrival at creation_time, duration
                deletion_time - scheduled_time; qos LS/Guaranteed -> priority
                100, Burstable -> 50, BE -> 0 and preemptible. Tasks without
                times (multigpu20; pods that were still pending) get an
                inter-arrival gap and a duration drawn, seeded, from the
                --times-from trace.
  --jobs FILE   a gang-job CSV with a header line:
                  submit_time,team,replicas,gpus_per_replica,gpu_model,duration,priority
                times in seconds; gpu_model "" for any (or "A|B"); optional
                columns id, preemptible (true/false), cpu_milli, memory_mib
                (per replica).
  --nodes       an openb node list, or NxG for a synthetic fleet (see
                'gangway replay scale').

The openb trace loads its own fleet lightly (its tasks demand about 1% of the
GPU node list at any time): --speedup K divides every arrival time by K
(durations stay) to raise the load.

Reported per policy: time-weighted mean allocated GPU share over the arrival
window, queue wait mean/p50/p95/p99 (all attempts of every placed job),
fragmented share of free GPU capacity over time (FGD's measure, against the
trace's typical workload), preemptions, jobs never placed, makespan, Place
calls and the longest queue one saw; ratios to the best baseline (every
policy but gangway) measured in the same run.

--defrag replays every policy twice in the same command, without and with
planned defragmentation (server.placement.defrag: the fewest moves of
preemptible, checkpointing jobs whose newest checkpoint is recent, so that a
fragmented job fits), and adds a table: mean and p99 wait of the jobs of 8 or
more GPUs, GPU allocation, the moves and the GPU-seconds they cost (work since
the last checkpoint, and restarts). --mix replays a variant of the pod list
made as 'gangway replay sweep' makes its points (e.g. multi=0.4: multi-GPU
tasks carry 40% of the GPU demand; a copy arrives when the task it replaces
did); --gang-heavy N replays N jobs of a synthetic gang-heavy mix on --nodes
instead (small preemptible jobs; 8-GPU jobs and gangs of 2 and 4 x 8 GPUs
carrying most of the GPU demand; arrivals that offer the fleet its capacity,
raised by --speedup; see docs/benchmarks.md).

--burst-price P, with --eta, lets every job rent on-demand cloud GPUs at $P
per GPU-hour (instances of 1, 2, 4 and 8 of each GPU model in the fleet), as
gangway server's burst decision sends them: once the wait so far plus the
expected on-prem wait (the job's start-time estimate once it has one)
passes --burst-after; the instances start the job --burst-boot later and
it runs its work there. Every policy is replayed three times, the decision
and the estimates it reads expecting the runtimes the jobs declare (their
limits), the runtimes the start-time estimator learns, and the true ones,
and a table adds the bursts, the cloud GPU-hours and dollars, the cost per
useful GPU-hour and the waits.`,
		Example: `  gangway replay trace --limit 2000
  gangway replay trace --speedup 10000 --plot trace.png --csv out/
  gangway replay trace --tasks ../shared/traces/openb/openb_pod_list_multigpu20.csv
  gangway replay trace --jobs cluster.csv --nodes 100x8 --preempt --reservations 4 --output json
  gangway replay trace --gang-heavy 2000 --nodes 64x8 --speedup 1.1 --defrag
  gangway replay trace --eta --limit 1000 --policies gangway --burst-price 4`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runReplayTrace(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.nodes, "nodes", defaultOpenBNodes, "openb node list (CSV: sn,cpu_milli,memory_mib,gpu,model), or NxG for a synthetic fleet")
	fl.StringVar(&f.tasks, "tasks", defaultOpenBTasks, "openb pod list to replay")
	fl.StringVar(&f.jobs, "jobs", "", "gang-job CSV to replay instead of --tasks (submit_time,team,replicas,gpus_per_replica,gpu_model,duration,priority)")
	fl.StringVar(&f.timesFrom, "times-from", defaultOpenBTasks, "openb pod list whose arrival gaps and durations are drawn for tasks without times")
	fl.StringSliceVar(&f.policies, "policies", f.policies, "policies to compare (valid: "+strings.Join(baselines.Names(), ", ")+")")
	fl.Uint64Var(&f.seed, "seed", f.seed, "seed: the engine's random source, drawn times, synthetic fleets")
	fl.BoolVar(&f.preempt, "preempt", f.preempt, "let higher-priority jobs preempt lower-priority preemptible ones (--preempt=false: off)")
	fl.DurationVar(&f.minRuntime, "min-runtime", f.minRuntime, "with --preempt: jobs younger than this are not preempted")
	fl.DurationVar(&f.checkpoint, "checkpoint", f.checkpoint, "checkpoint interval: a preempted job loses the work since its last checkpoint (0: all of it)")
	fl.IntVar(&f.reservations, "reservations", f.reservations, "blocked jobs that get GPUs reserved, with backfill around them (0: off)")
	fl.IntVar(&f.sampleNodes, "sample-nodes", 0, "score at most this many feasible nodes per replica (0: all)")
	fl.Float64Var(&f.speedup, "speedup", f.speedup, "divide arrival times by this factor (durations stay) to raise the load (0: 1)")
	fl.BoolVar(&f.eta, "eta", false, "measure start-time estimates: each waiting job's P50/P90 made at submit against its real start; defaults to --speedup 10 and a --fleet-share that loads the fleet (see docs/benchmarks.md)")
	fl.Float64Var(&f.fleetShare, "fleet-share", 0, "keep this share of the nodes, evenly spaced in list order (0-1]; 0: all, or with --eta the largest share at which 30% of jobs wait")
	fl.Float64Var(&f.limitFactor, "limit-factor", sim.DefaultLimitFactor, "with --eta: jobs declare limits of their work x a seeded factor from 1 to this")
	fl.BoolVar(&f.exactRuntimes, "exact-runtimes", false, "declare each job's exact remaining run time as its max runtime (default: rounded up to a power of two of minutes); only backfill reads it")
	fl.IntVar(&f.limit, "limit", 0, "replay only the first N tasks (in file order) or jobs (in submit order) (0: all)")
	fl.StringVar(&f.csvDir, "csv", "", "write each policy's per-instant series and sorted waits to this directory")
	fl.StringVar(&f.plot, "plot", "", "draw GPU allocation over time and the wait CDF per policy to this file (.png, .svg, .pdf)")
	fl.StringVarP(&f.output, "output", "o", f.output, "report format: text or json (one object per policy per line)")
	fl.IntVar(&f.parallel, "parallel", 0, "policies replayed at once (0: GOMAXPROCS)")
	fl.StringVar(&f.mix, "mix", "", `replay a variant of the pod list: knob=value[,...] as 'replay sweep' (share, multi, spec, cpu), e.g. "multi=0.4"`)
	fl.IntVar(&f.gangHeavy, "gang-heavy", 0, "replay this many jobs of the synthetic gang-heavy mix (docs/benchmarks.md) instead of a trace file")
	fl.BoolVar(&f.defrag, "defrag", false, "replay each policy also with planned defragmentation, and compare")
	fl.StringVar(&f.workload, "workload", "typical", `what placement measures fragmentation against: "typical" (the trace's typical workload, as the FGD protocol does) or "arrivals" (the jobs arrived so far, as gangway server does); fragmentation figures are against the typical workload either way`)
	fl.IntVar(&f.defragMoves, "defrag-moves", f.defragMoves, "with --defrag: moves allowed an hour")
	fl.Float64Var(&f.defragLost, "defrag-lost", f.defragLost, "with --defrag: GPU-seconds the moves may lose an hour")
	fl.DurationVar(&f.defragRestart, "defrag-restart", f.defragRestart, "with --defrag: what a restart costs a moved job (per GPU)")
	fl.Float64Var(&f.burstPrice, "burst-price", 0, "with --eta: let every job burst to on-demand cloud GPUs at this many dollars per GPU-hour, and compare the burst decision on declared, learned and true runtimes (0: no cloud)")
	fl.DurationVar(&f.burstAfter, "burst-after", f.burstAfter, "with --burst-price: the wait (so far plus expected on-prem) from which a job bursts (the server's cloud.burstAfter)")
	fl.DurationVar(&f.burstBoot, "burst-boot", f.burstBoot, "with --burst-price: how long a burst job's instances take to start it")
	return cmd
}

func runReplayTrace(cmd *cobra.Command, f replayTraceFlags) error {
	if err := sim.CheckFormat(f.output); err != nil {
		return err
	}
	if f.jobs != "" && cmd.Flags().Changed("tasks") {
		return fmt.Errorf("--jobs and --tasks: give one trace, not both")
	}
	switch f.workload {
	case "typical", "arrivals":
	default:
		return fmt.Errorf("--workload: want typical or arrivals, got %q", f.workload)
	}
	cfg := sim.TraceConfig{Policies: f.policies, NewScorer: baselines.ScorerByName, Seed: f.seed, LearnWorkload: f.workload == "arrivals",
		Options:         placement.Options{Reservations: f.reservations, Preempt: f.preempt, MinRuntime: f.minRuntime, SampleNodes: f.sampleNodes},
		CheckpointEvery: f.checkpoint, ExactRuntimes: f.exactRuntimes, Speedup: f.speedup, Parallel: f.parallel,
		Defrag: placement.Defrag{Enabled: f.defrag, MaxMovesPerHour: f.defragMoves, MaxLostGPUSecondsPerHour: f.defragLost,
			RestartOverhead: f.defragRestart}}
	if cmd.Flags().Changed("burst-price") {
		cfg.Burst = &sim.TraceBurst{PricePerGPUHour: f.burstPrice, After: f.burstAfter, Boot: f.burstBoot}
	}
	if f.eta {
		cfg.ETA = &sim.ETAConfig{MaxFactor: f.limitFactor}
		if !cmd.Flags().Changed("speedup") {
			cfg.Speedup = sim.ETASpeedup
		}
	}
	var mix *sim.Mix
	if f.mix != "" {
		m, err := sim.ParseMix(f.mix)
		if err != nil {
			return fmt.Errorf("--mix: %w", err)
		}
		mix = &m
	}
	if err := cfg.Validate(); err != nil {
		return sim.FlagErrors(err)
	}
	stderr := cmd.ErrOrStderr()
	start := time.Now()
	nodesFile := sim.FlagTracePath(f.nodes, !cmd.Flags().Changed("nodes"))
	in, err := sim.PrepareTrace(cmd.Context(), &cfg, sim.TraceSetup{Nodes: nodesFile, FleetShare: f.fleetShare,
		Input: sim.TraceInput{Jobs: f.jobs, Tasks: sim.FlagTracePath(f.tasks, !cmd.Flags().Changed("tasks")),
			TimesFrom: sim.FlagTracePath(f.timesFrom, !cmd.Flags().Changed("times-from")), Limit: f.limit, Seed: f.seed,
			Mix: mix, GangHeavy: f.gangHeavy},
		Probe: func(share float64, nodes int, waited, median float64) {
			fmt.Fprintf(stderr, "trace: fleet share %.4f (%d nodes): %.0f%% of jobs wait, median %s\n", share, nodes, 100*waited,
				sim.FormatSeconds(median))
		}})
	if err != nil {
		return sim.FlagErrors(err)
	}
	runs := len(f.policies)
	switch {
	case f.defrag:
		runs *= 2
	case cfg.Burst != nil:
		runs *= len(sim.BurstRuntimes)
	}
	bar := sim.NewProgressBar(stderr, fmt.Sprintf("trace: %d runs x %d jobs", runs, len(in.Jobs)), "arrivals and departures")
	cfg.Progress = bar.Update
	res, err := sim.RunTrace(cmd.Context(), cfg)
	bar.Done()
	if err != nil {
		return err
	}
	res.NodesFile, res.JobsFile, res.Timing, res.Mix = nodesFile, in.File, in.Timing, in.Mix
	fmt.Fprintf(stderr, "trace: %d runs in %s\n", len(res.Runs), time.Since(start).Round(time.Millisecond))

	return sim.Output{Format: f.output, CSVDir: f.csvDir, Plot: f.plot, Out: cmd.OutOrStdout(), Log: stderr}.Write("trace", res)
}

type replayScaleFlags struct {
	nodes, jobs  string
	policies     []string
	seed         uint64
	busy         float64
	repeat       int
	preempt      bool
	reservations int
	sampleNodes  int
	minRuntime   time.Duration
	output       string
}

func newReplayScaleCmd() *cobra.Command {
	f := replayScaleFlags{nodes: "1000x8,2000x8,5000x8,10000x8", jobs: "1000,5000,10000", policies: sim.TracePolicies,
		seed: 1, busy: 0.3, repeat: 1, preempt: true, reservations: 4, minRuntime: 10 * time.Minute, output: "text"}
	cmd := &cobra.Command{
		Use:   "scale",
		Short: "Time one full placement cycle on synthetic fleets and queues of growing size",
		Long: `Measure how the cost of one placement cycle grows with the fleet and the queue:
for every fleet size x queue size x policy, one placement.Place call — what the
dispatch loop runs each cycle: the session's view and scorer caches built from
the snapshot, every queued job placed or explained — timed on one core.

Fleets are synthetic (NxG: N nodes of G GPUs, seeded): racks of 9 nodes, a
tenth of them GB200 racks forming rack-scale NVLink domains (72 GPUs with 8
GPUs a node), the rest H100 and A100 nodes (one NVLink domain each) and L4
nodes (PCIe); --busy of the GPUs already held by running jobs. Queues are
synthetic too: GPU shares, 1-8 GPU jobs, CPU-only jobs and gangs of up to
32 x 8 GPUs (some required within one NVLink domain or rack), half pinned to a
model, three priorities, ten teams.

The engine runs with the server's defaults (--reservations 4, --preempt,
--min-runtime 10m); the table reports ms per cycle, placements/s and jobs/s,
and fits ms/cycle ~ nodes^a x queue^b per policy.`,
		Example: `  gangway replay scale
  gangway replay scale --nodes 10000x8 --jobs 10000 --policies gangway --sample-nodes 256
  gangway replay scale --nodes 1000x8,10000x8 --jobs 1000,10000 --output json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runReplayScale(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.nodes, "nodes", f.nodes, "fleet sizes, NxG (N nodes of G GPUs), comma-separated")
	fl.StringVar(&f.jobs, "jobs", f.jobs, "queue sizes, comma-separated (10k = 10000)")
	fl.StringSliceVar(&f.policies, "policies", f.policies, "policies to time (valid: "+strings.Join(baselines.Names(), ", ")+")")
	fl.Uint64Var(&f.seed, "seed", f.seed, "seed for the synthetic fleets, queues and the engine")
	fl.Float64Var(&f.busy, "busy", f.busy, "share of GPUs already held by running jobs, 0 to <1")
	fl.IntVar(&f.repeat, "repeat", f.repeat, "time each cycle this many times and keep the fastest (0: 1)")
	fl.BoolVar(&f.preempt, "preempt", f.preempt, "let blocked higher-priority jobs look for victims (--preempt=false: off)")
	fl.IntVar(&f.reservations, "reservations", f.reservations, "blocked jobs that get GPUs reserved (0: off)")
	fl.IntVar(&f.sampleNodes, "sample-nodes", 0, "score at most this many feasible nodes per replica (0: all)")
	fl.DurationVar(&f.minRuntime, "min-runtime", f.minRuntime, "with --preempt: jobs younger than this are not preempted")
	fl.StringVarP(&f.output, "output", "o", f.output, "report format: text or json (one object per cell per line)")
	return cmd
}

func runReplayScale(cmd *cobra.Command, f replayScaleFlags) error {
	if err := sim.CheckFormat(f.output); err != nil {
		return err
	}
	fleets, err := sim.ParseFleetSpecs(f.nodes)
	if err != nil {
		return fmt.Errorf("--nodes: %w", err)
	}
	counts, err := sim.ParseCounts(f.jobs)
	if err != nil {
		return fmt.Errorf("--jobs: %w", err)
	}
	cfg := sim.ScaleConfig{Fleets: fleets, Jobs: counts, Policies: f.policies, NewScorer: baselines.ScorerByName, Busy: f.busy,
		Seed: f.seed, Repeat: f.repeat,
		Options: placement.Options{Reservations: f.reservations, Preempt: f.preempt, MinRuntime: f.minRuntime, SampleNodes: f.sampleNodes}}
	if err := cfg.Validate(); err != nil {
		return sim.FlagErrors(err)
	}
	stderr := cmd.ErrOrStderr()
	start := time.Now()
	bar := sim.NewProgressBar(stderr, fmt.Sprintf("scale: %d fleets x %d queues x %d policies", len(fleets), len(counts), len(f.policies)), "cycles")
	cfg.Progress = bar.Update
	res, err := sim.RunScale(cmd.Context(), cfg)
	bar.Done()
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "scale: %d cycles in %s\n", len(res.Cells)*f.repeat, time.Since(start).Round(time.Millisecond))
	if f.output == "json" {
		return res.WriteJSON(cmd.OutOrStdout())
	}
	return res.WriteText(cmd.OutOrStdout())
}
