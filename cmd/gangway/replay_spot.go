package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gangwayhq/gangway/internal/sim"
	"github.com/gangwayhq/gangway/internal/spotpolicy"
)

// defaultSpotTraces is the directory of spot availability traces,
// relative to the working directory (or the project root).
const defaultSpotTraces = "../shared/traces/spot"

type replaySpotFlags struct {
	trace                        string
	duration, deadline, overhead time.Duration
	jobs                         int
	seed                         uint64
	policies                     []string
	onDemandPrice, spotFraction  float64
	csvDir, plot, output         string
}

func newReplaySpotCmd() *cobra.Command {
	job := sim.DefaultSpotJob
	f := replaySpotFlags{trace: defaultSpotTraces, duration: job.Work, deadline: job.Deadline, overhead: job.Overhead,
		jobs: sim.DefaultSpotJobs, seed: 1, policies: spotpolicy.Names(), onDemandPrice: sim.DefaultOnDemandPrice,
		spotFraction: sim.DefaultSpotFraction, output: "text"}
	cmd := &cobra.Command{
		Use:   "spot",
		Short: "Deadline jobs on spot vs on-demand over spot availability traces: cost and deadlines met per policy",
		Long: `Replay the setting of Wu et al., "Can't Be Late: Optimizing Spot Instance
Savings under Deadlines" (NSDI 2024) over spot availability traces: a job
needs --duration of work on one instance before --deadline; spot is there
when the trace says so and is preempted when it drops to zero; on-demand
is always there at --on-demand-price; every new instance costs --overhead
(boot, restore, work since the last checkpoint) before it makes progress.
The replay steps tick by tick (the trace's gap_seconds) and charges every
tick an instance is held, at the trace's spot price where it has one and
--spot-fraction x the on-demand price where it does not.

Each trace (a JSON file; a directory is searched recursively) gets --jobs
jobs starting at seeded random offsets, each with its whole deadline inside
the trace. Policies:
  on-demand         always on-demand (the baseline)
  greedy            spot when there is any, else wait; on-demand to the end
                    once waiting longer would leave too little slack
  uniform-progress  the paper's policy: keep progress on the straight line
                    to the deadline, on-demand when behind, spot whenever
                    available, hysteresis of two changeovers
  gangway           uniform progress with sticky on-demand: leave on-demand
                    only for spot, as soon as progress is within two
                    changeovers of the line

Reported per trace and policy, and over all jobs: cost relative to the
on-demand baseline on the same jobs, the share of deadlines met, mean
finish time, hours on spot and on-demand, changeovers and preemptions.`,
		Example: `  gangway replay spot
  gangway replay spot --deadline 52h --overhead 3m --jobs 100
  gangway replay spot --trace ../shared/traces/spot/preemption --output json
  gangway replay spot --output csv --csv out/ --plot spot.png`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runReplaySpot(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.trace, "trace", f.trace, "a spot trace (JSON: {\"metadata\":{\"gap_seconds\":N},\"data\":[...],\"prices\":[...]}) or a directory searched for them")
	fl.DurationVar(&f.duration, "duration", f.duration, "work each job needs, uninterrupted")
	fl.DurationVar(&f.deadline, "deadline", f.deadline, "time from each job's start to its deadline")
	fl.DurationVar(&f.overhead, "overhead", f.overhead, "changeover delay of every new instance (boot, restore, lost work)")
	fl.IntVar(&f.jobs, "jobs", f.jobs, "jobs per trace, at seeded random start offsets")
	fl.Uint64Var(&f.seed, "seed", f.seed, "seed for the start offsets")
	fl.StringSliceVar(&f.policies, "policies", f.policies, "policies to compare (valid: "+strings.Join(spotpolicy.Names(), ", ")+")")
	fl.Float64Var(&f.onDemandPrice, "on-demand-price", f.onDemandPrice, "on-demand price per instance-hour")
	fl.Float64Var(&f.spotFraction, "spot-fraction", f.spotFraction, "spot price as a share of on-demand, for traces without prices")
	fl.StringVar(&f.csvDir, "csv", "", "write the per-trace table and every job's run to this directory")
	fl.StringVar(&f.plot, "plot", "", "draw cost relative to on-demand and deadlines met, per trace and policy, to this file (.png, .svg, .pdf)")
	fl.StringVarP(&f.output, "output", "o", f.output, "report format: text (or table), csv, or json (one object per policy per line)")
	return cmd
}

func runReplaySpot(cmd *cobra.Command, f replaySpotFlags) error {
	output := f.output
	switch output {
	case "table":
		output = "text"
	case "csv":
	default:
		if err := checkOutput(output); err != nil {
			return fmt.Errorf("%w (or csv, table)", err)
		}
	}
	switch {
	case f.duration <= 0:
		return fmt.Errorf("--duration %v: want a positive duration", f.duration)
	case f.overhead < 0:
		return fmt.Errorf("--overhead %v: want 0 or more", f.overhead)
	case f.deadline < f.duration+f.overhead:
		return fmt.Errorf("--deadline %v: shorter than --duration %v plus one --overhead %v, so no policy can meet it", f.deadline, f.duration, f.overhead)
	case f.jobs < 1:
		return fmt.Errorf("--jobs %d: want 1 or more", f.jobs)
	case !(f.onDemandPrice > 0):
		return fmt.Errorf("--on-demand-price %g: want a positive price", f.onDemandPrice)
	case !(f.spotFraction > 0):
		return fmt.Errorf("--spot-fraction %g: want a positive share of the on-demand price", f.spotFraction)
	}
	policies, err := spotpolicy.ByNames(f.policies)
	if err != nil {
		return fmt.Errorf("--policies: %w", err)
	}
	dir := sim.FlagTracePath(f.trace, !cmd.Flags().Changed("trace"))
	traces, err := sim.LoadSpotTraces(dir)
	if err != nil {
		return fmt.Errorf("--trace: %w", err)
	}

	start := time.Now()
	cfg := sim.SpotConfig{Source: dir, Traces: traces, Job: spotpolicy.Job{Work: f.duration, Deadline: f.deadline, Overhead: f.overhead},
		Policies: policies, Jobs: f.jobs, Seed: f.seed, OnDemandPrice: f.onDemandPrice, SpotFraction: f.spotFraction}
	res, err := sim.RunSpot(cfg)
	var short *spotpolicy.ShortTraceError
	switch {
	case errors.As(err, &short):
		return fmt.Errorf("--trace: %w; shorten --deadline or drop the trace", err)
	case err != nil:
		return fmt.Errorf("--trace: %w", err)
	}
	stderr := cmd.ErrOrStderr()
	fmt.Fprintf(stderr, "spot: %d traces x %d jobs x %d policies in %s\n", len(traces), f.jobs, len(policies),
		time.Since(start).Round(time.Millisecond))

	var out replayResult = res
	if output == "csv" {
		out, output = spotCSVText{res}, "text"
	}
	return writeResult(cmd.OutOrStdout(), stderr, "spot", out, output, f.csvDir, f.plot)
}

// spotCSVText makes --output csv print the per-trace CSV where the other
// formats print text.
type spotCSVText struct{ *sim.SpotResult }

func (c spotCSVText) WriteText(w io.Writer) error { return c.WriteSummaryCSV(w) }
