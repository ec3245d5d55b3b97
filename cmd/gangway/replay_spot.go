package main

import (
	"errors"
	"fmt"
	"log/slog"
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
	jobs, instances              int
	seed                         uint64
	policies, zonePolicies       []string
	zoneMove                     time.Duration
	onDemandPrice, spotFraction  float64
	csvDir, plot, output         string
}

func newReplaySpotCmd() *cobra.Command {
	job := sim.DefaultSpotJob
	f := replaySpotFlags{trace: defaultSpotTraces, duration: job.Work, deadline: job.Deadline, overhead: job.Overhead,
		jobs: sim.DefaultSpotJobs, seed: 1, policies: spotpolicy.Names(), zonePolicies: spotpolicy.ZoneNames(), zoneMove: sim.DefaultZoneMove, onDemandPrice: sim.DefaultOnDemandPrice,
		spotFraction: sim.DefaultSpotFraction, output: "text"}
	cmd := &cobra.Command{
		Use:   "spot",
		Short: "Deadline jobs on spot vs on-demand over spot availability traces: cost and deadlines met per policy",
		Long: `Replay the setting of Wu et al., "Can't Be Late: Optimizing Spot Instance
Savings under Deadlines" (NSDI 2024) over spot availability traces: a job
needs --duration of work on --instances instances at once before
--deadline; spot is there while the trace has that many available and is
preempted when it has fewer; on-demand is always there; every new instance
costs --overhead (boot, restore, work since the last checkpoint) before it
makes progress. The replay steps tick by tick (the trace's gap_seconds) and
charges every tick an instance is held, per instance: spot at the trace's
price where it has prices and at --spot-fraction x on-demand where it does
not; on-demand at the list price of the trace's instance type, from its
metadata ("on_demand_price", "price_info") or the table in
internal/spotpolicy/prices.go (AWS us-east-1 list prices), the type named
by the metadata or the file name (<zone>_<device>.json: us-east-1a_v100_1
is a p3.2xlarge); --on-demand-price prices the types neither knows.
--instances 0 (the default) sizes each trace's job to its pool: the
<N>-node directory the trace lies in, metadata "nodes", or else the most
instances any of its ticks had.

Each trace (a JSON file; a directory is searched recursively) gets --jobs
jobs starting at seeded random offsets, each with its whole deadline inside
the trace; a trace shorter than the deadline is skipped with a warning.
Policies:
  on-demand         always on-demand (the baseline)
  greedy            spot when there is any, else wait; on-demand to the end
                    once waiting longer would leave too little slack
  uniform-progress  the paper's policy: keep progress on the straight line
                    to the deadline, on-demand when behind, spot whenever
                    available, hysteresis of two changeovers
  gangway           uniform progress with sticky on-demand: leave on-demand
                    only for spot, as soon as progress is within two
                    changeovers of the line

Zone sets: the traces of one directory recorded for one device and pool
size, two or more of them, are zones of one market. Each set gets --jobs jobs run in each zone alone
under the policies above (pooled over the zones), and across the zones
under --zone-policies, a move to another zone adding --zone-move to the
changeover:
  uniform-progress-rr  uniform progress; after a preemption, the next zone
                       in order that has spot (the multi-region baseline)
  gangway-multizone    gangway; stays in its zone while it has spot, else
                       the cheapest zone with spot, the longest up first

Reported per trace and policy, per zone set, and over all jobs: cost
relative to the on-demand baseline on the same jobs, the share of
deadlines met, mean finish time, hours on spot and on-demand,
changeovers, moves and preemptions.`,
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
	fl.IntVar(&f.instances, "instances", 0, "instances each job needs at once (0: each trace's pool size)")
	fl.StringSliceVar(&f.zonePolicies, "zone-policies", f.zonePolicies, "multi-zone policies to run over each zone set, or none (valid: "+strings.Join(spotpolicy.ZoneNames(), ", ")+")")
	fl.DurationVar(&f.zoneMove, "zone-move", f.zoneMove, "delay a move to another zone adds to the changeover (the checkpoint follows)")
	fl.Uint64Var(&f.seed, "seed", f.seed, "seed for the start offsets")
	fl.StringSliceVar(&f.policies, "policies", f.policies, "policies to compare (valid: "+strings.Join(spotpolicy.Names(), ", ")+")")
	fl.Float64Var(&f.onDemandPrice, "on-demand-price", f.onDemandPrice, "on-demand price per instance-hour of instance types with no known list price")
	fl.Float64Var(&f.spotFraction, "spot-fraction", f.spotFraction, "spot price as a share of on-demand, for traces without prices")
	fl.StringVar(&f.csvDir, "csv", "", "write the per-trace table and every job's run to this directory")
	fl.StringVar(&f.plot, "plot", "", "draw cost relative to on-demand and deadlines met, per trace and policy, to this file (.png, .svg, .pdf)")
	fl.StringVarP(&f.output, "output", "o", f.output, "report format: text (or table), csv, or json (one object per policy per line, then one per zone set and policy)")
	return cmd
}

func runReplaySpot(cmd *cobra.Command, f replaySpotFlags) error {
	output := f.output
	switch output {
	case "table":
		output = "text"
	case "csv":
	default:
		if err := sim.CheckFormat(output); err != nil {
			return fmt.Errorf("%w (or csv, table)", err)
		}
	}
	policies, err := spotpolicy.ByNames(f.policies)
	if err != nil {
		return fmt.Errorf("--policies: %w", err)
	}
	zonePolicies, err := spotpolicy.ZonesByNames(f.zonePolicies)
	if err != nil {
		return fmt.Errorf("--zone-policies: %w", err)
	}
	stderr := cmd.ErrOrStderr()
	cfg := sim.SpotConfig{
		Job:      spotpolicy.Job{Work: f.duration, Deadline: f.deadline, Overhead: f.overhead, Instances: f.instances},
		Policies: policies, ZonePolicies: zonePolicies, ZoneMove: f.zoneMove, Jobs: f.jobs, Seed: f.seed,
		OnDemandPrice: f.onDemandPrice, SpotFraction: f.spotFraction, Log: slog.New(slog.NewTextHandler(stderr, nil))}
	if err := cfg.Validate(); err != nil {
		return sim.FlagErrors(err)
	}
	dir := sim.FlagTracePath(f.trace, !cmd.Flags().Changed("trace"))
	traces, err := sim.LoadSpotTraces(dir)
	if err != nil {
		return fmt.Errorf("--trace: %w", err)
	}

	start := time.Now()
	cfg.Source, cfg.Traces = dir, traces
	res, err := sim.RunSpot(cfg)
	var short *spotpolicy.ShortTraceError
	switch {
	case errors.As(err, &short):
		return fmt.Errorf("--trace: every trace is shorter than the deadline (%w); shorten --deadline", err)
	case err != nil:
		return fmt.Errorf("--trace: %w", err)
	}
	fmt.Fprintf(stderr, "spot: %d traces x %d jobs x %d policies in %s\n", len(traces), f.jobs, len(policies),
		time.Since(start).Round(time.Millisecond))

	var rep sim.Report = res
	if output == "csv" {
		rep, output = res.SummaryCSV(), "text"
	}
	return sim.Output{Format: output, CSVDir: f.csvDir, Plot: f.plot, Out: cmd.OutOrStdout(), Log: stderr}.Write("spot", rep)
}
