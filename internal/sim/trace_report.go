package sim

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gangwayhq/gangway/placement"
)

// TraceResult is a whole dynamic replay: one run per policy.
type TraceResult struct {
	// NodesFile and JobsFile label the report; the caller sets them, and
	// Timing where the jobs came from an openb pod list.
	NodesFile, JobsFile string
	// Mix names the variant of the pod list replayed ("" for the list).
	Mix         string
	Timing      *TimingSource
	Nodes, GPUs int
	Jobs        int
	// OfferedLoad and PeakLoad are the mean (over the arrival window) and
	// the peak of the GPU demand of the jobs that would be running if each
	// started on arrival, as a share of GPU capacity (can exceed 1).
	OfferedLoad, PeakLoad float64
	ArrivalWindow         time.Duration
	Speedup               float64
	Reservations          int
	Preempt               bool
	MinRuntime            time.Duration
	CheckpointEvery       time.Duration
	SampleNodes           int
	Seed                  uint64
	WorkloadClasses       int
	// LimitFactor is the largest limit ÷ work, with estimates measured
	// (TraceConfig.ETA); 0 without.
	LimitFactor float64
	// Defrag is the defragmentation the runs with Defrag set had; Burst
	// the cloud the runs with Burst set could rent (nil: none).
	Defrag           placement.Defrag
	Burst            *TraceBurst
	Runs             []TraceRun
	BestAllocPolicy  string // baseline with the highest mean GPU allocation
	BestWaitPolicy   string // baseline with the lowest mean queue wait
	AllocVsBest      []float64
	WaitVsBest       []float64
	WaitP99VsBestP99 []float64
}

func newTraceResult(cfg TraceConfig, jobs []TraceJob, runs []TraceRun) *TraceResult {
	res := &TraceResult{Nodes: len(cfg.Nodes), GPUs: int(GPUCapacityMilli(cfg.Nodes) / placement.Whole), Jobs: len(jobs),
		Speedup: max(cfg.Speedup, 1), Reservations: cfg.Options.Reservations, Preempt: cfg.Options.Preempt,
		MinRuntime: cfg.Options.MinRuntime, CheckpointEvery: cfg.CheckpointEvery, SampleNodes: cfg.Options.SampleNodes,
		Seed: cfg.Seed, WorkloadClasses: len(cfg.Options.Workload), Defrag: cfg.Defrag, Burst: cfg.Burst, Runs: runs}
	if cfg.Speedup > 0 {
		res.Speedup = cfg.Speedup
	}
	if cfg.ETA != nil {
		res.LimitFactor = cmpOr(cfg.ETA.MaxFactor, DefaultLimitFactor)
	}
	res.ArrivalWindow = jobs[len(jobs)-1].Submit - jobs[0].Submit
	res.OfferedLoad, res.PeakLoad = offeredLoad(jobs, float64(res.GPUs))
	bestAlloc, bestWait := math.Inf(-1), math.Inf(1)
	for i := range runs {
		r := &runs[i]
		if r.Policy == GangwayPolicy || r.Defrag || (r.Burst != "" && r.Burst != BurstDeclared) {
			continue
		}
		if r.AllocMean > bestAlloc {
			bestAlloc, res.BestAllocPolicy = r.AllocMean, r.Policy
		}
		if r.WaitMean < bestWait {
			bestWait, res.BestWaitPolicy = r.WaitMean, r.Policy
		}
	}
	for i := range runs {
		r := &runs[i]
		res.AllocVsBest = append(res.AllocVsBest, ratioOrNaN(r.AllocMean, bestAlloc))
		res.WaitVsBest = append(res.WaitVsBest, ratioOrNaN(r.WaitMean, bestWait))
	}
	return res
}

// Label names the run in reports: its policy, "+defrag" when it
// defragmented, "+burst/R" when it burst expecting the R runtimes.
func (r *TraceRun) Label() string {
	switch {
	case r.Defrag:
		return r.Policy + " +defrag"
	case r.Burst != "":
		return r.Policy + " +burst/" + r.Burst
	}
	return r.Policy
}

// fileLabel is Label as part of a file name.
func (r *TraceRun) fileLabel() string {
	switch {
	case r.Defrag:
		return r.Policy + "-defrag"
	case r.Burst != "":
		return r.Policy + "-burst-" + r.Burst
	}
	return r.Policy
}

// offeredLoad is the GPU demand of jobs started on arrival and never
// queued: its mean over the arrival window and its peak, over capacity.
func offeredLoad(jobs []TraceJob, capacity float64) (mean, peak float64) {
	type step struct {
		at time.Duration
		d  float64
	}
	first, last := jobs[0].Submit, jobs[len(jobs)-1].Submit
	steps := make([]step, 0, 2*len(jobs))
	work := 0.0
	for i := range jobs {
		g := gpuShare(&jobs[i].Job)
		start, end := jobs[i].Submit, jobs[i].Submit+jobs[i].Duration
		steps = append(steps, step{start, g}, step{end, -g})
		work += g * (min(end, last) - start).Seconds()
	}
	slices.SortFunc(steps, func(a, b step) int { return cmp.Or(compareDur(a.at, b.at), cmp.Compare(a.d, b.d)) })
	cur := 0.0
	for _, s := range steps {
		cur += s.d
		peak = max(peak, cur)
	}
	mean = math.NaN()
	if w := (last - first).Seconds(); w > 0 {
		mean = work / w / capacity
	}
	return mean, peak / capacity
}

func ratioOrNaN(a, b float64) float64 {
	if b == 0 || math.IsInf(b, 0) || math.IsNaN(b) || math.IsNaN(a) {
		return math.NaN()
	}
	return a / b
}

// WriteText writes the report table: one row per policy.
func (r *TraceResult) WriteText(w io.Writer) error {
	mix := ""
	if r.Mix != "" {
		mix = " (mix " + r.Mix + ")"
	}
	fmt.Fprintf(w, "Trace replay: %s%s on %s\n", filepath.Base(r.JobsFile), mix, filepath.Base(r.NodesFile))
	fmt.Fprintf(w, "%d nodes, %d GPUs; %d jobs", r.Nodes, r.GPUs, r.Jobs)
	if t := r.Timing; t != nil && (t.DrawnArrivals > 0 || t.DrawnDurations > 0) {
		fmt.Fprintf(w, " (%d with the trace's times; %d arrivals and %d durations drawn from the reference trace)",
			t.FromTrace, t.DrawnArrivals, t.DrawnDurations)
	}
	fmt.Fprintf(w, "\narrivals over %s (speedup %g); offered load (jobs started on arrival) %s%% of GPU capacity over that window, peak %.1f%%\n",
		FormatSpan(r.ArrivalWindow), r.Speedup, num(100*r.OfferedLoad, "%.1f"), 100*r.PeakLoad)
	fmt.Fprintf(w, "engine: %s; checkpoints %s; seed %d; workload %d classes\n\n", r.engineLine(), checkpointLine(r.CheckpointEvery),
		r.Seed, r.WorkloadClasses)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tGPU alloc %\tvs best\tpeak\twait mean\tp50\tp95\tp99\tvs best\tfrag % of free\tpreempted\tnever placed\tmakespan\tPlace calls\tmax queue\t")
	for i := range r.Runs {
		run := &r.Runs[i]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%d\t%d\t\n", run.Label(),
			num(100*run.AllocMean, "%.2f"), num(r.AllocVsBest[i], "%.3f"), num(100*run.AllocPeak, "%.2f"),
			FormatSeconds(run.WaitMean), FormatSeconds(run.WaitP50), FormatSeconds(run.WaitP95), FormatSeconds(run.WaitP99),
			num(r.WaitVsBest[i], "%.3f"), num(100*run.FragMean, "%.2f"), run.Preemptions, run.NeverPlaced,
			FormatSpan(run.Makespan), run.PlaceCalls, run.MaxQueue)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := r.writeETA(w); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "\nGPU alloc %% and frag %% are time-weighted means over the arrival window, peak the highest GPU alloc %% reached;\n"+
		"waits are per placed job, all attempts;\n"+
		"vs best: GPU alloc over the best baseline's (%s, higher is better), mean wait over the best baseline's (%s, lower is better)\n",
		orDash(r.BestAllocPolicy), orDash(r.BestWaitPolicy)); err != nil {
		return err
	}
	if err := r.writeDefrag(w); err != nil {
		return err
	}
	return r.writeBurst(w)
}

// writeBurst writes the bursting table, when the runs rented cloud
// capacity: per run, whose runtimes the burst decision expected, the jobs
// it sent to the cloud, what they rented and paid, and the waits.
func (r *TraceResult) writeBurst(w io.Writer) error {
	b := r.Burst
	if b == nil {
		return nil
	}
	fmt.Fprintf(w, "\nBursting: every job may rent on-demand GPUs at $%.2f/GPU-h (instances of 1, 2, 4, 8) once its expected on-prem wait passes %s; instances start it %s later\n",
		b.PricePerGPUHour, b.After, b.Boot)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tbursts\tcloud GPU-h\tcloud $\t$/useful GPU-h\twait mean\tp50\tp95\tGPU alloc %\tpreempted\t")
	for i := range r.Runs {
		run := &r.Runs[i]
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.2f\t%s\t%s\t%s\t%s\t%s\t%d\t\n", run.Label(), run.Bursts, run.CloudGPUSeconds/3600,
			run.CloudCost, num(run.CostPerUsefulGPUHour(), "%.2f"), FormatSeconds(run.WaitMean), FormatSeconds(run.WaitP50),
			FormatSeconds(run.WaitP95), num(100*run.AllocMean, "%.2f"), run.Preemptions)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "burst/R: the burst decision expects R runtimes: %s (the limits jobs declare), %s (the start-time estimator's model), %s (the truth)\n",
		BurstDeclared, BurstLearned, BurstExact)
	return err
}

// writeDefrag writes the defragmentation table, when the runs compare it:
// per run, the waits of the jobs of LargeJobGPUs or more, GPU allocation,
// and the moves with what they cost.
func (r *TraceResult) writeDefrag(w io.Writer) error {
	if !slices.ContainsFunc(r.Runs, func(run TraceRun) bool { return run.Defrag }) {
		return nil
	}
	d := r.Defrag
	windows := "at any time"
	if len(d.Windows) > 0 {
		var ws []string
		for _, x := range d.Windows {
			ws = append(ws, x.String())
		}
		windows = "in " + strings.Join(ws, ", ")
	}
	fmt.Fprintf(w, "\nDefragmentation: at most %d moves and %.0f GPU-seconds lost an hour, %s; jobs whose newest checkpoint is at most %s old; %s per restart\n",
		d.MaxMovesPerHour, d.MaxLostGPUSecondsPerHour, windows, cmp.Or(d.MaxCheckpointAge, placement.DefaultMaxCheckpointAge), d.RestartOverhead)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "run\t%d+ GPU jobs\twait mean\tp99\tall jobs' wait mean\tGPU alloc %%\tmoves\tGPU-s lost\tGPU-s restarts\tpreempted\t\n", LargeJobGPUs)
	for i := range r.Runs {
		run := &r.Runs[i]
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%d\t%.0f\t%.0f\t%d\t\n", run.Label(), run.LargeJobs,
			FormatSeconds(run.LargeWaitMean), FormatSeconds(run.LargeWaitP99), FormatSeconds(run.WaitMean),
			num(100*run.AllocMean, "%.2f"), run.Moves, run.MoveLostGPUSeconds, run.MoveRestartGPUSeconds, run.Preemptions)
	}
	return tw.Flush()
}

func (r *TraceResult) engineLine() string {
	s := fmt.Sprintf("reservations %d", r.Reservations)
	if r.Preempt {
		s += fmt.Sprintf(", preemption on (min runtime %s)", r.MinRuntime)
	} else {
		s += ", preemption off"
	}
	if r.SampleNodes > 0 {
		s += fmt.Sprintf(", %d nodes sampled", r.SampleNodes)
	}
	return s
}

func checkpointLine(d time.Duration) string {
	if d <= 0 {
		return "none (a preempted job starts over)"
	}
	return "every " + d.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// FormatSeconds writes a duration in seconds compactly: "0.00s", "4.2s",
// "42s", "12.5m", "1.5h", "3.2d".
func FormatSeconds(s float64) string {
	switch {
	case math.IsNaN(s):
		return "-"
	case s < 1:
		return strconv.FormatFloat(s, 'f', 2, 64) + "s"
	case s < 10:
		return strconv.FormatFloat(s, 'f', 1, 64) + "s"
	case s < 600:
		return strconv.FormatFloat(s, 'f', 0, 64) + "s"
	case s < 3*3600:
		return strconv.FormatFloat(s/60, 'f', 1, 64) + "m"
	case s < 3*86400:
		return strconv.FormatFloat(s/3600, 'f', 1, 64) + "h"
	}
	return strconv.FormatFloat(s/86400, 'f', 1, 64) + "d"
}

// FormatSpan writes a span of virtual time compactly.
func FormatSpan(d time.Duration) string { return FormatSeconds(d.Seconds()) }

// TraceJSON is one policy's line of `gangway replay trace --output json`.
type TraceJSON struct {
	Policy               string   `json:"policy"`
	GPUAllocRatioMean    *float64 `json:"gpu_alloc_ratio_mean"`
	GPUAllocRatioMeanAll *float64 `json:"gpu_alloc_ratio_mean_to_end"`
	GPUAllocRatioQueued  *float64 `json:"gpu_alloc_ratio_when_queued"`
	GPUAllocRatioPeak    float64  `json:"gpu_alloc_ratio_peak"`
	QueuedSeconds        float64  `json:"queued_seconds"`
	WaitSecondsMean      *float64 `json:"wait_seconds_mean"`
	WaitSecondsP50       *float64 `json:"wait_seconds_p50"`
	WaitSecondsP95       *float64 `json:"wait_seconds_p95"`
	WaitSecondsP99       *float64 `json:"wait_seconds_p99"`
	Preemptions          int      `json:"preemptions"`
	LostGPUSeconds       float64  `json:"lost_gpu_seconds"`
	Defrag               bool     `json:"defrag"`
	Moves                int      `json:"defrag_moves"`
	MoveLostGPUSeconds   float64  `json:"defrag_lost_gpu_seconds"`
	MoveRestartSeconds   float64  `json:"defrag_restart_gpu_seconds"`
	// Burst: whose runtimes the burst decision expected (with
	// --burst-price), and what the jobs it sent to the cloud rented.
	Burst           string   `json:"burst_runtimes,omitempty"`
	Bursts          int      `json:"bursts,omitempty"`
	CloudGPUHours   float64  `json:"cloud_gpu_hours,omitempty"`
	CloudCost       float64  `json:"cloud_cost,omitempty"`
	CloudUsefulCost *float64 `json:"cloud_cost_per_useful_gpu_hour,omitempty"`
	LargeJobs       int      `json:"large_jobs"`
	LargeWaitMean   *float64 `json:"large_wait_seconds_mean"`
	LargeWaitP99    *float64 `json:"large_wait_seconds_p99"`
	FragRatioMean   *float64 `json:"frag_ratio_of_free_mean"`
	Jobs            int      `json:"jobs"`
	Placed          int      `json:"placed"`
	NeverPlaced     int      `json:"never_placed"`
	Unplaceable     int      `json:"unplaceable"`
	Unfinished      int      `json:"unfinished"`
	MakespanSeconds float64  `json:"makespan_seconds"`
	PlaceCalls      int      `json:"place_calls"`
	MaxQueue        int      `json:"max_queue"`
	AllocVsBest     *float64 `json:"gpu_alloc_vs_best_baseline,omitempty"`
	WaitVsBest      *float64 `json:"wait_mean_vs_best_baseline,omitempty"`
	Speedup         float64  `json:"speedup"`
	// ETA and ETAExact are the start-time estimates' calibration, with
	// --eta: jobs declaring only limits, and every runtime known.
	ETA            *ETAJSON `json:"eta,omitempty"`
	ETAExact       *ETAJSON `json:"eta_exact,omitempty"`
	JobsFile       string   `json:"jobs_file"`
	Nodes          string   `json:"nodes"`
	ElapsedSeconds float64  `json:"elapsed_seconds"`
}

// WriteJSON writes one JSON object per policy, one per line.
func (r *TraceResult) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	for i := range r.Runs {
		run := &r.Runs[i]
		o := TraceJSON{Policy: run.Policy, GPUAllocRatioMean: ptr(run.AllocMean), GPUAllocRatioMeanAll: ptr(run.AllocMeanAll),
			GPUAllocRatioQueued: ptr(run.AllocQueued), GPUAllocRatioPeak: math.Round(run.AllocPeak*1e4) / 1e4, QueuedSeconds: math.Round(run.QueuedTime.Seconds()),
			WaitSecondsMean: ptr(run.WaitMean), WaitSecondsP50: ptr(run.WaitP50), WaitSecondsP95: ptr(run.WaitP95),
			WaitSecondsP99: ptr(run.WaitP99), Preemptions: run.Preemptions, LostGPUSeconds: math.Round(run.LostGPUSeconds),
			Defrag: run.Defrag, Moves: run.Moves, MoveLostGPUSeconds: math.Round(run.MoveLostGPUSeconds),
			MoveRestartSeconds: math.Round(run.MoveRestartGPUSeconds), LargeJobs: run.LargeJobs,
			LargeWaitMean: ptr(run.LargeWaitMean), LargeWaitP99: ptr(run.LargeWaitP99),
			FragRatioMean: ptr(run.FragMean), Jobs: run.Jobs, Placed: run.Placed, NeverPlaced: run.NeverPlaced,
			Unplaceable: run.Unplaceable, Unfinished: run.Unfinished, MakespanSeconds: run.Makespan.Seconds(),
			PlaceCalls: run.PlaceCalls, MaxQueue: run.MaxQueue, AllocVsBest: ptr(r.AllocVsBest[i]), WaitVsBest: ptr(r.WaitVsBest[i]),
			Speedup: r.Speedup, JobsFile: filepath.Base(r.JobsFile), Nodes: filepath.Base(r.NodesFile),
			ElapsedSeconds: math.Round(run.Elapsed.Seconds()*1000) / 1000}
		if e := run.ETA; e != nil {
			o.ETA, o.ETAExact = e.json(e.Learned, e.WarmLearned), e.json(e.Exact, e.WarmExact)
		}
		if run.Burst != "" {
			o.Burst, o.Bursts, o.CloudGPUHours = run.Burst, run.Bursts, math.Round(run.CloudGPUSeconds/36)/100
			o.CloudCost, o.CloudUsefulCost = math.Round(run.CloudCost*100)/100, ptr(run.CostPerUsefulGPUHour())
		}
		if err := enc.Encode(o); err != nil {
			return err
		}
	}
	return nil
}

// WriteCSV writes each policy's per-instant series to dir as
// trace-<policy>.csv and its sorted queue waits as
// trace-<policy>-waits.csv, and returns the files written.
func (r *TraceResult) WriteCSV(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	for i := range r.Runs {
		run := &r.Runs[i]
		name := filepath.Join(dir, fmt.Sprintf("trace-%s.csv", run.fileLabel()))
		if err := WriteCSVFile(name, func(w *csv.Writer) { writeTraceSeries(w, run) }); err != nil {
			return files, err
		}
		files = append(files, name)
		name = filepath.Join(dir, fmt.Sprintf("trace-%s-waits.csv", run.fileLabel()))
		if err := WriteCSVFile(name, func(w *csv.Writer) {
			_ = w.Write([]string{"rank", "wait_seconds"})
			for k, x := range run.Waits {
				_ = w.Write([]string{strconv.Itoa(k + 1), strconv.FormatFloat(x, 'f', 3, 64)})
			}
		}); err != nil {
			return files, err
		}
		files = append(files, name)
	}
	return files, nil
}

func writeTraceSeries(w *csv.Writer, run *TraceRun) {
	_ = w.Write([]string{"time_seconds", "alloc_gpu_pct", "frag_gpu_pct", "frag_pct_of_free", "queue", "running"})
	c := float64(run.CapacityMilli)
	ff := func(x float64) string { return strconv.FormatFloat(x, 'f', 4, 64) }
	for _, s := range run.Series {
		free := c - float64(s.AllocMilli)
		rate := 0.0
		if free > 0 {
			rate = 100 * s.FragMilli / free
		}
		_ = w.Write([]string{strconv.FormatFloat(s.At.Seconds(), 'f', 3, 64), ff(100 * float64(s.AllocMilli) / c),
			ff(100 * s.FragMilli / c), ff(rate), strconv.Itoa(int(s.Queue)), strconv.Itoa(int(s.Running))})
	}
}

// WriteCSVFile creates name and writes the CSV fill produces to it; a
// write or close error is returned.
func WriteCSVFile(name string, fill func(*csv.Writer)) (err error) {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	w := csv.NewWriter(f)
	fill(w)
	w.Flush()
	return w.Error()
}
