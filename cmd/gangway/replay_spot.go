package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

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
	// p3.2xlarge (one V100), the traces' instance: $3.06/h on-demand in
	// us-east-1; its spot price in the traces that carry one is 0.3 x that.
	f := replaySpotFlags{trace: defaultSpotTraces, duration: 48 * time.Hour, deadline: 72 * time.Hour, overhead: 12 * time.Minute,
		jobs: 300, seed: 1, policies: spotpolicy.Names(), onDemandPrice: 3.06, spotFraction: 0.3, output: "text"}
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
	fl.StringVar(&f.plot, "plot", "", "draw cost relative to on-demand per trace and policy to this file (.png, .svg, .pdf)")
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
	policies := make([]spotpolicy.Policy, 0, len(f.policies))
	for _, name := range f.policies {
		p, err := spotpolicy.ByName(name)
		if err != nil {
			return fmt.Errorf("--policies: %w", err)
		}
		if slices.ContainsFunc(policies, func(q spotpolicy.Policy) bool { return q.Name() == name }) {
			return fmt.Errorf("--policies: %q given twice", name)
		}
		policies = append(policies, p)
	}
	dir := tracePath(f.trace, !cmd.Flags().Changed("trace"))
	traces, err := loadSpotTraces(dir)
	if err != nil {
		return fmt.Errorf("--trace: %w", err)
	}

	start := time.Now()
	job := spotpolicy.Job{Work: f.duration, Deadline: f.deadline, Overhead: f.overhead}
	res, err := replaySpot(traces, job, policies, f.jobs, f.seed, f.onDemandPrice, f.spotFraction)
	if err != nil {
		return err
	}
	res.Dir = dir
	stderr := cmd.ErrOrStderr()
	fmt.Fprintf(stderr, "spot: %d traces x %d jobs x %d policies in %s\n", len(traces), f.jobs, len(policies),
		time.Since(start).Round(time.Millisecond))

	var out replayResult = res
	if output == "csv" {
		out, output = spotCSVText{res}, "text"
	}
	return writeResult(cmd.OutOrStdout(), stderr, "spot", out, output, f.csvDir, f.plot)
}

// loadSpotTraces reads root, a trace file or a directory searched
// recursively for .json traces, in path order; each is named by its path
// under the directory, without the extension.
func loadSpotTraces(root string) ([]*spotpolicy.Trace, error) {
	st, err := os.Stat(root)
	if err != nil {
		return nil, err
	}
	files := []string{root}
	if st.IsDir() {
		files = nil
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.EqualFold(filepath.Ext(p), ".json") {
				files = append(files, p)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("%s: no .json spot traces in it", root)
		}
	}
	traces := make([]*spotpolicy.Trace, 0, len(files))
	for _, file := range files {
		name := filepath.Base(file)
		if st.IsDir() {
			name, _ = filepath.Rel(root, file)
		}
		tr, err := spotpolicy.LoadTrace(file)
		if err != nil {
			if st.IsDir() {
				// Zones repeat across subdirectories: say which file.
				err = fmt.Errorf("%s: %w", name, err)
			}
			return nil, err
		}
		tr.Name = strings.TrimSuffix(filepath.ToSlash(name), filepath.Ext(name))
		traces = append(traces, tr)
	}
	return traces, nil
}

// spotReplay is a whole `gangway replay spot`: per trace and policy, and
// pooled over every job.
type spotReplay struct {
	Dir           string
	Job           spotpolicy.Job
	Jobs          int // per trace
	Seed          uint64
	OnDemandPrice float64
	SpotFraction  float64
	Policies      []string
	Traces        []spotTraceResult
	Mean          []spotStats // per policy, over every job of every trace
}

type spotTraceResult struct {
	Name         string
	Gap          time.Duration
	Ticks        int
	Availability float64 // share of ticks with spot
	Prices       bool    // the trace has its own spot prices
	Stats        []spotStats
	Runs         [][]spotpolicy.Run // per policy, per job
}

// spotStats sums one policy's runs.
type spotStats struct {
	Policy         string
	Jobs           int
	Met            int
	Cost           float64 // dollars, all jobs
	OnDemandCost   float64 // of the on-demand baseline on the same jobs
	Finish         time.Duration
	Spot, OnDemand time.Duration
	Changeovers    int
	Preemptions    int
}

func (s *spotStats) add(r spotpolicy.Run, onDemandCost float64) {
	s.Jobs++
	if r.MetDeadline {
		s.Met++
	}
	s.Cost += r.Cost
	s.OnDemandCost += onDemandCost
	s.Finish += r.FinishedAt
	s.Spot += r.SpotTime
	s.OnDemand += r.OnDemandTime
	s.Changeovers += r.Changeovers
	s.Preemptions += r.Preemptions
}

func (s *spotStats) merge(o spotStats) {
	s.Jobs += o.Jobs
	s.Met += o.Met
	s.Cost += o.Cost
	s.OnDemandCost += o.OnDemandCost
	s.Finish += o.Finish
	s.Spot += o.Spot
	s.OnDemand += o.OnDemand
	s.Changeovers += o.Changeovers
	s.Preemptions += o.Preemptions
}

// CostVsOnDemand is the policy's cost over the on-demand baseline's.
func (s *spotStats) CostVsOnDemand() float64 { return s.Cost / s.OnDemandCost }

// MetRatio is the share of deadlines met.
func (s *spotStats) MetRatio() float64 { return float64(s.Met) / float64(s.Jobs) }

func (s *spotStats) meanHours(d time.Duration) float64 { return d.Hours() / float64(s.Jobs) }

func (s *spotStats) perJob(n int) float64 { return float64(n) / float64(s.Jobs) }

// replaySpot runs every policy, and the on-demand baseline, on jobs
// jobs per trace.
func replaySpot(traces []*spotpolicy.Trace, job spotpolicy.Job, policies []spotpolicy.Policy, jobs int, seed uint64,
	onDemandPrice, spotFraction float64) (*spotReplay, error) {
	res := &spotReplay{Job: job, Jobs: jobs, Seed: seed, OnDemandPrice: onDemandPrice, SpotFraction: spotFraction}
	for _, p := range policies {
		res.Policies = append(res.Policies, p.Name())
		res.Mean = append(res.Mean, spotStats{Policy: p.Name()})
	}
	for _, tr := range traces {
		sim := &spotpolicy.Sim{Trace: tr, Job: job, OnDemandPrice: onDemandPrice, SpotFraction: spotFraction}
		if err := sim.Validate(); err != nil {
			return nil, fmt.Errorf("--trace: %w", err)
		}
		starts, err := sim.Starts(jobs, seed)
		if err != nil {
			return nil, fmt.Errorf("--trace: %w; shorten --deadline or drop the trace", err)
		}
		baseline := make([]float64, len(starts))
		for i, s := range starts {
			baseline[i] = sim.Simulate(spotpolicy.OnDemandOnly{}, s).Cost
		}
		tres := spotTraceResult{Name: tr.Name, Gap: tr.Gap, Ticks: len(tr.Available), Availability: tr.Availability(), Prices: tr.Prices != nil}
		for pi, p := range policies {
			st := spotStats{Policy: p.Name()}
			runs := make([]spotpolicy.Run, len(starts))
			for i, s := range starts {
				runs[i] = sim.Simulate(p, s)
				st.add(runs[i], baseline[i])
			}
			tres.Stats = append(tres.Stats, st)
			tres.Runs = append(tres.Runs, runs)
			res.Mean[pi].merge(st)
		}
		res.Traces = append(res.Traces, tres)
	}
	return res, nil
}

// stats returns the pooled stats of the named policy, if it ran.
func (r *spotReplay) stats(policy string) (*spotStats, bool) {
	i := slices.Index(r.Policies, policy)
	if i < 0 {
		return nil, false
	}
	return &r.Mean[i], true
}

// headline compares Gangway's policy with uniform progress, when both ran.
func (r *spotReplay) headline() string {
	g, ok1 := r.stats(spotpolicy.NameGangway)
	u, ok2 := r.stats(spotpolicy.NameUniformProgress)
	if !ok1 || !ok2 {
		return ""
	}
	saving := 1 - g.Cost/u.Cost
	than := "less"
	if saving < 0 {
		saving, than = -saving, "more"
	}
	return fmt.Sprintf("gangway costs %.1f%% %s than uniform-progress (%.3f vs %.3f of on-demand) and meets %d of %d deadlines (uniform-progress %d)",
		100*saving, than, g.CostVsOnDemand(), u.CostVsOnDemand(), g.Met, g.Jobs, u.Met)
}

// WriteText writes one row per trace with a column per policy (cost
// relative to on-demand, deadlines met), the mean row over all jobs, then
// the pooled details per policy.
func (r *spotReplay) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "Spot replay: %d traces in %s, %d jobs each (seed %d)\n", len(r.Traces), r.Dir, r.Jobs, r.Seed)
	fmt.Fprintf(w, "job: %s of work, deadline %s, changeover %s; on-demand $%.3f/h, spot at the trace's price or %.2f x on-demand\n",
		fmtDur(r.Job.Work), fmtDur(r.Job.Deadline), fmtDur(r.Job.Overhead), r.OnDemandPrice, r.SpotFraction)
	fmt.Fprintln(w, "per policy: cost relative to on-demand on the same jobs, and the share of deadlines met")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "trace\tspot\t"+strings.Join(r.Policies, "\t"))
	row := func(name, avail string, stats []spotStats) {
		line := name + "\t" + avail
		for i := range stats {
			line += fmt.Sprintf("\t%.3f %4s", stats[i].CostVsOnDemand(), fmtPct(stats[i].MetRatio()))
		}
		fmt.Fprintln(tw, line)
	}
	for _, t := range r.Traces {
		row(t.Name, fmtPct(t.Availability), t.Stats)
	}
	row("mean", "", r.Mean)
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tcost\tdeadlines met\tfinish (mean)\tspot h\ton-demand h\tchangeovers\tpreemptions\t")
	for i := range r.Mean {
		s := &r.Mean[i]
		fmt.Fprintf(tw, "%s\t%.3f\t%d/%d\t%.1fh\t%.1f\t%.1f\t%.1f\t%.1f\t\n", s.Policy, s.CostVsOnDemand(), s.Met, s.Jobs,
			s.meanHours(s.Finish), s.meanHours(s.Spot), s.meanHours(s.OnDemand), s.perJob(s.Changeovers), s.perJob(s.Preemptions))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if h := r.headline(); h != "" {
		fmt.Fprintln(w)
		fmt.Fprintln(w, h)
	}
	return nil
}

func fmtPct(x float64) string { return strconv.FormatFloat(100*x, 'f', 0, 64) + "%" }

// fmtDur prints a duration short: "72h", "12m", "1h30m", else as
// time.Duration does.
func fmtDur(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute != 0:
		return d.String()
	case d < time.Hour:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return fmt.Sprintf("%dh%dm", d/time.Hour, d%time.Hour/time.Minute)
}

// spotJSON is one policy's line of --output json.
type spotJSON struct {
	Policy            string          `json:"policy"`
	CostVsOnDemand    float64         `json:"cost_vs_on_demand"`
	DeadlinesMetRatio float64         `json:"deadlines_met_ratio"`
	DeadlinesMet      int             `json:"deadlines_met"`
	Jobs              int             `json:"jobs"`
	MeanCost          float64         `json:"mean_cost_dollars"`
	MeanFinishHours   float64         `json:"mean_finish_hours"`
	SpotHours         float64         `json:"mean_spot_hours"`
	OnDemandHours     float64         `json:"mean_on_demand_hours"`
	Changeovers       float64         `json:"mean_changeovers"`
	Preemptions       float64         `json:"mean_preemptions"`
	DurationHours     float64         `json:"duration_hours"`
	DeadlineHours     float64         `json:"deadline_hours"`
	OverheadHours     float64         `json:"overhead_hours"`
	Seed              uint64          `json:"seed"`
	Traces            []spotTraceJSON `json:"traces"`
}

type spotTraceJSON struct {
	Trace             string  `json:"trace"`
	SpotAvailability  float64 `json:"spot_availability"`
	CostVsOnDemand    float64 `json:"cost_vs_on_demand"`
	DeadlinesMetRatio float64 `json:"deadlines_met_ratio"`
	MeanCost          float64 `json:"mean_cost_dollars"`
	MeanFinishHours   float64 `json:"mean_finish_hours"`
	Changeovers       float64 `json:"mean_changeovers"`
	Preemptions       float64 `json:"mean_preemptions"`
}

// WriteJSON writes one object per policy per line: the pooled numbers,
// the replay's settings, and the per-trace numbers under "traces".
func (r *spotReplay) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	for i := range r.Mean {
		s := &r.Mean[i]
		o := spotJSON{Policy: s.Policy, CostVsOnDemand: round6(s.CostVsOnDemand()), DeadlinesMetRatio: round6(s.MetRatio()),
			DeadlinesMet: s.Met, Jobs: s.Jobs, MeanCost: round6(s.Cost / float64(s.Jobs)), MeanFinishHours: round6(s.meanHours(s.Finish)),
			SpotHours: round6(s.meanHours(s.Spot)), OnDemandHours: round6(s.meanHours(s.OnDemand)),
			Changeovers: round6(s.perJob(s.Changeovers)), Preemptions: round6(s.perJob(s.Preemptions)),
			DurationHours: r.Job.Work.Hours(), DeadlineHours: r.Job.Deadline.Hours(), OverheadHours: r.Job.Overhead.Hours(), Seed: r.Seed}
		for _, t := range r.Traces {
			ts := &t.Stats[i]
			o.Traces = append(o.Traces, spotTraceJSON{Trace: t.Name, SpotAvailability: round6(t.Availability),
				CostVsOnDemand: round6(ts.CostVsOnDemand()), DeadlinesMetRatio: round6(ts.MetRatio()),
				MeanCost: round6(ts.Cost / float64(ts.Jobs)), MeanFinishHours: round6(ts.meanHours(ts.Finish)),
				Changeovers: round6(ts.perJob(ts.Changeovers)), Preemptions: round6(ts.perJob(ts.Preemptions))})
		}
		if err := enc.Encode(o); err != nil {
			return err
		}
	}
	return nil
}

func round6(x float64) float64 { return math.Round(x*1e6) / 1e6 }

var spotCSVHeader = []string{"trace", "spot_availability", "policy", "jobs", "cost_vs_on_demand", "deadlines_met", "deadlines_met_ratio",
	"mean_cost_dollars", "mean_finish_hours", "mean_spot_hours", "mean_on_demand_hours", "mean_changeovers", "mean_preemptions"}

// writeSummaryCSV writes one row per trace and policy, then the mean rows
// (trace "mean").
func (r *spotReplay) writeSummaryCSV(cw *csv.Writer) {
	_ = cw.Write(spotCSVHeader)
	ff := func(x float64) string { return strconv.FormatFloat(x, 'f', 6, 64) }
	row := func(trace, avail string, s *spotStats) {
		_ = cw.Write([]string{trace, avail, s.Policy, strconv.Itoa(s.Jobs), ff(s.CostVsOnDemand()), strconv.Itoa(s.Met), ff(s.MetRatio()),
			ff(s.Cost / float64(s.Jobs)), ff(s.meanHours(s.Finish)), ff(s.meanHours(s.Spot)), ff(s.meanHours(s.OnDemand)),
			ff(s.perJob(s.Changeovers)), ff(s.perJob(s.Preemptions))})
	}
	for _, t := range r.Traces {
		for i := range t.Stats {
			row(t.Name, ff(t.Availability), &t.Stats[i])
		}
	}
	for i := range r.Mean {
		row("mean", "", &r.Mean[i])
	}
}

// writeRunsCSV writes every job's run under every policy.
func (r *spotReplay) writeRunsCSV(cw *csv.Writer) {
	_ = cw.Write([]string{"trace", "start_hours", "policy", "cost_dollars", "met_deadline", "finished", "finish_hours",
		"spot_hours", "on_demand_hours", "changeovers", "preemptions"})
	ff := func(x float64) string { return strconv.FormatFloat(x, 'f', 6, 64) }
	for _, t := range r.Traces {
		for pi, runs := range t.Runs {
			for _, run := range runs {
				_ = cw.Write([]string{t.Name, ff(run.Start.Hours()), r.Policies[pi], ff(run.Cost), strconv.FormatBool(run.MetDeadline),
					strconv.FormatBool(run.Finished), ff(run.FinishedAt.Hours()), ff(run.SpotTime.Hours()), ff(run.OnDemandTime.Hours()),
					strconv.Itoa(run.Changeovers), strconv.Itoa(run.Preemptions)})
			}
		}
	}
}

// WriteCSV writes spot.csv (the per-trace table, as --output csv prints
// it) and spot-runs.csv (every job under every policy) to dir.
func (r *spotReplay) WriteCSV(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	for _, f := range []struct {
		name string
		fill func(*csv.Writer)
	}{{"spot.csv", r.writeSummaryCSV}, {"spot-runs.csv", r.writeRunsCSV}} {
		name := filepath.Join(dir, f.name)
		if err := sim.WriteCSVFile(name, f.fill); err != nil {
			return files, err
		}
		files = append(files, name)
	}
	return files, nil
}

// WritePlot draws cost relative to on-demand, one bar per policy for
// each trace and for the mean, to path (.png, .svg or .pdf).
func (r *spotReplay) WritePlot(file string) error {
	if filepath.Ext(file) == "" {
		return fmt.Errorf("%s: want a .png, .svg or .pdf file name", file)
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Spot replay: %s job, %s deadline, %s changeover, %d jobs per trace",
		fmtDur(r.Job.Work), fmtDur(r.Job.Deadline), fmtDur(r.Job.Overhead), r.Jobs)
	p.Y.Label.Text = "cost relative to on-demand"
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	names := make([]string, 0, len(r.Traces)+1)
	for _, t := range r.Traces {
		// The top directory (availability, preemption) and the file.
		name := path.Base(t.Name)
		if top, _, ok := strings.Cut(t.Name, "/"); ok {
			name = top + "/" + name
		}
		names = append(names, fmt.Sprintf("%s (%s)", name, fmtPct(t.Availability)))
	}
	names = append(names, "mean")
	highest := 1.0
	width := vg.Points(60 / float64(max(len(r.Policies), 1)))
	for i, policy := range r.Policies {
		vals := make(plotter.Values, 0, len(names))
		for _, t := range r.Traces {
			vals = append(vals, t.Stats[i].CostVsOnDemand())
		}
		vals = append(vals, r.Mean[i].CostVsOnDemand())
		highest = max(highest, slices.Max(vals))
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return err
		}
		bars.LineStyle.Width = 0
		bars.Color = plotutil.Color(i)
		bars.Offset = width * vg.Length(float64(i)-float64(len(r.Policies)-1)/2)
		p.Add(bars)
		p.Legend.Add(policy, bars)
	}
	p.Y.Max = 1.3 * highest // room for the legend
	p.NominalX(names...)
	p.X.Tick.Label.Rotation = math.Pi / 4
	p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XRight, draw.YCenter
	if err := p.Save(vg.Length(max(7, len(names)))*vg.Inch, 6*vg.Inch, file); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}

// spotCSVText makes --output csv print the per-trace CSV where the other
// formats print text.
type spotCSVText struct{ *spotReplay }

func (c spotCSVText) WriteText(w io.Writer) error {
	cw := csv.NewWriter(w)
	c.writeSummaryCSV(cw)
	cw.Flush()
	return cw.Error()
}
