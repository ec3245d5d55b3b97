package sim

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// maxPlotPoints bounds the points drawn per line: longer series are
// thinned to the last sample of each time bin (a step line).
const maxPlotPoints = 4000

// WritePlot draws two panels to path (.png, .svg or .pdf by extension):
// allocated GPU % over time, one step line per policy, and the CDF of
// queue waits per policy on a log time axis.
func (r *TraceResult) WritePlot(path string) (err error) {
	format := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	if format == "" {
		return fmt.Errorf("%s: want a .png, .svg or .pdf file name", path)
	}
	alloc, err := r.allocPlot()
	if err != nil {
		return err
	}
	cdf, err := r.waitCDFPlot()
	if err != nil {
		return err
	}
	w, h := 7*vg.Inch, 8*vg.Inch
	c, err := draw.NewFormattedCanvas(w, h, format)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadY: vg.Points(16),
		PadLeft: vg.Points(4), PadRight: vg.Points(8)}
	canvases := plot.Align([][]*plot.Plot{{alloc}, {cdf}}, tiles, dc)
	alloc.Draw(canvases[0][0])
	cdf.Draw(canvases[1][0])
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	_, err = c.WriteTo(f)
	return err
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
	p.Legend.Top = true
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
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1)
		if run.Policy == GangwayPolicy {
			l.Width = vg.Points(1.8)
		}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s (mean %.1f%%)", run.Policy, 100*run.AllocMean), l)
	}
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	return p, nil
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
	p.Legend.Top = true
	p.Legend.Left = false
	maxWait := 1.0
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
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1.2)
		if run.Policy == GangwayPolicy {
			l.Width = vg.Points(2)
		}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s (p99 %s)", run.Policy, FormatSeconds(run.WaitP99)), l)
	}
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
	return p, nil
}
