package sim

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// maxPlotPoints bounds the points drawn per line: longer series are
// thinned to the last sample of each time bin (a step line).
const maxPlotPoints = 4000

// WritePlot draws two panels to path (.png, .svg or .pdf by extension):
// allocated GPU % over time, one step line per policy, and the CDF of
// queue waits per policy on a log time axis.
func (r *TraceResult) WritePlot(path string) error {
	alloc, err := r.allocPlot()
	if err != nil {
		return err
	}
	cdf, err := r.waitCDFPlot()
	if err != nil {
		return err
	}
	return savePanels(path, 8.8*vg.Inch, 8*vg.Inch, 2.1*vg.Inch, alloc, cdf)
}

// timeUnit picks hours or days for a span.
func timeUnit(span time.Duration) (time.Duration, string) {
	if span > 72*time.Hour {
		return 24 * time.Hour, "days"
	}
	if span > 3*time.Hour {
		return time.Hour, "hours"
	}
	return time.Minute, "minutes"
}

func (r *TraceResult) allocPlot() (*plot.Plot, error) {
	p := plot.New()
	horizon := r.plotHorizon()
	unit, label := timeUnit(horizon)
	p.Title.Text = fmt.Sprintf("Trace replay: %s, speedup %g", filepath.Base(r.JobsFile), r.Speedup)
	p.X.Label.Text = "time since the first arrival (" + label + ")"
	p.Y.Label.Text = "allocated GPU (% of capacity)"
	p.Y.Min, p.Y.Max = 0, 100
	p.X.Min, p.X.Max = 0, float64(horizon)/float64(unit)
	p.Add(plotter.NewGrid())
	var lines []*plotter.Line
	for i := range r.Runs {
		run := &r.Runs[i]
		xy := thin(run, unit, horizon)
		if len(xy) == 0 {
			continue
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return nil, err
		}
		l.StepStyle = plotter.PostStep
		styleOf(run.Label(), i).apply(l)
		lines = append(lines, l)
		p.Legend.Add(fmt.Sprintf("%s (mean %.1f%%)", run.Label(), windowMean(run, horizon)), l)
	}
	addLines(p, lines)
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	p.Legend.ThumbnailWidth = vg.Points(30)
	return p, nil
}

// windowMean is a run's time-weighted mean allocated GPU % over the window
// the allocation panel shows (the first horizon after the first arrival):
// what the legend reports, since over a whole run every policy that
// places every job ends with the same mean.
func windowMean(run *TraceRun, horizon time.Duration) float64 {
	first, end := run.FirstSubmit, run.FirstSubmit+horizon
	var area float64
	for k, s := range run.Series {
		if s.At >= end {
			break
		}
		next := end
		if k+1 < len(run.Series) {
			next = min(run.Series[k+1].At, end)
		}
		from := max(s.At, first)
		if next > from {
			area += float64(s.AllocMilli) * float64(next-from)
		}
	}
	return 100 * area / (float64(run.CapacityMilli) * float64(horizon))
}

// plotHorizon is how much of the runs the allocation panel shows, from the
// first arrival: the arrival window and the time until every queue last
// emptied, plus a quarter, or to the end of the runs if that is sooner. A
// trace's long tail (jobs that run for weeks after the last arrival) would
// otherwise squash what happens while jobs arrive and wait.
func (r *TraceResult) plotHorizon() time.Duration {
	var busy, end time.Duration
	for i := range r.Runs {
		run := &r.Runs[i]
		end = max(end, run.End-run.FirstSubmit)
		busy = max(busy, run.LastSubmit-run.FirstSubmit)
		for k := len(run.Series) - 1; k >= 0; k-- {
			if run.Series[k].Queue > 0 {
				// The queue emptied at the next sample.
				if k+1 < len(run.Series) {
					k++
				}
				busy = max(busy, run.Series[k].At-run.FirstSubmit)
				break
			}
		}
	}
	return max(min(busy+busy/4, end), time.Second)
}

// thin is a run's allocated GPU % against time in unit, up to horizon
// from the first arrival, at most maxPlotPoints points: the last sample of
// each bin.
func thin(run *TraceRun, unit, horizon time.Duration) plotter.XYs {
	if len(run.Series) == 0 {
		return nil
	}
	first := run.FirstSubmit
	bin := horizon / maxPlotPoints
	c := float64(run.CapacityMilli)
	var xy plotter.XYs
	for k, s := range run.Series {
		if s.At-first > horizon {
			if len(xy) > 0 { // hold the last value to the edge of the panel
				xy = append(xy, plotter.XY{X: float64(horizon) / float64(unit), Y: xy[len(xy)-1].Y})
			}
			break
		}
		if bin > 0 && k+1 < len(run.Series) && (run.Series[k+1].At-first)/bin == (s.At-first)/bin {
			continue
		}
		xy = append(xy, plotter.XY{X: float64(s.At-first) / float64(unit), Y: 100 * float64(s.AllocMilli) / c})
	}
	return xy
}

func (r *TraceResult) waitCDFPlot() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Queue wait CDF (waits under 1 s drawn at 1 s)"
	p.X.Label.Text = "queue wait (seconds, log scale)"
	p.Y.Label.Text = "share of placed jobs (%)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min, p.Y.Max = 0, 100
	p.Add(plotter.NewGrid())
	maxWait := 1.0
	var lines []*plotter.Line
	for i := range r.Runs {
		if w := r.Runs[i].Waits; len(w) > 0 {
			maxWait = max(maxWait, w[len(w)-1])
		}
	}
	for i := range r.Runs {
		run := &r.Runs[i]
		if len(run.Waits) == 0 {
			continue
		}
		n := float64(len(run.Waits))
		step := max(1, len(run.Waits)/maxPlotPoints)
		xy := plotter.XYs{{X: 1, Y: 0}}
		for k := 0; k < len(run.Waits); k += step {
			// The share of jobs that waited at most this long: the last of
			// equal waits.
			e := k
			for e+1 < len(run.Waits) && run.Waits[e+1] == run.Waits[k] {
				e++
			}
			xy = append(xy, plotter.XY{X: math.Max(run.Waits[k], 1), Y: 100 * float64(e+1) / n})
			k = e - e%step
		}
		xy = append(xy, plotter.XY{X: maxWait * 1.5, Y: 100})
		l, err := plotter.NewLine(xy)
		if err != nil {
			return nil, err
		}
		l.StepStyle = plotter.PostStep
		styleOf(run.Label(), i).apply(l)
		lines = append(lines, l)
		p.Legend.Add(fmt.Sprintf("%s (p99 %s)", run.Label(), FormatSeconds(run.WaitP99)), l)
	}
	addLines(p, lines)
	p.X.Min, p.X.Max = 1, maxWait*1.5
	// Most jobs may wait under a second: start the y axis below the
	// lowest such share so the tails are visible.
	low := 100.0
	for i := range r.Runs {
		if w := r.Runs[i].Waits; len(w) > 0 {
			k, _ := slices.BinarySearch(w, 1.0000001)
			low = min(low, 100*float64(k)/float64(len(w)))
		}
	}
	p.Y.Min = max(0, math.Floor(low/10)*10-10)
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	p.Legend.ThumbnailWidth = vg.Points(30)
	return p, nil
}
