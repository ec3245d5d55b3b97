package sim

import (
	"fmt"
	"image/color"
	"math"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// WritePlot draws two panels to file (.png, .svg or .pdf by extension),
// one bar per policy for each trace and for the mean: the cost relative to
// on-demand, and the share of jobs that met their deadline.
func (r *SpotResult) WritePlot(file string) error {
	if filepath.Ext(file) == "" {
		return fmt.Errorf("%s: want a .png, .svg or .pdf file name", file)
	}
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
	cost := r.barPlot(names, func(s SpotStats) float64 { return s.CostVsOnDemand() })
	cost.Title.Text = fmt.Sprintf("Spot replay: %s job, %s deadline, %s changeover, %d jobs per trace",
		fmtDur(r.Job.Work), fmtDur(r.Job.Deadline), fmtDur(r.Job.Overhead), r.Jobs)
	cost.Y.Label.Text = "cost relative to on-demand"
	if err := refLine(cost, len(names), 1, "on-demand cost"); err != nil {
		return err
	}
	met := r.barPlot(names, func(s SpotStats) float64 { return 100 * float64(s.Met) / float64(max(s.Jobs, 1)) })
	met.Title.Text = fmt.Sprintf("Jobs that finished by their %s deadline", fmtDur(r.Job.Deadline))
	met.Y.Label.Text = "deadlines met (% of jobs)"
	met.Y.Min, met.Y.Max = 0, 105
	met.Y.Tick.Marker = ticks(0, 100, 20)
	if err := refLine(met, len(names), 100, "every deadline met"); err != nil {
		return err
	}
	// Trace names are on the lower panel's axis only.
	cost.X.Tick.Label.Font.Size = 0
	cost.X.Label.Text = ""
	met.X.Label.Text = "spot trace (spot availability)"
	w := vg.Length(max(7, len(names))) * vg.Inch
	if err := savePanels(file, w+1.8*vg.Inch, 9*vg.Inch, 1.8*vg.Inch, cost, met); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}

// barPlot has a group of bars per name, one per policy, of value(stats).
func (r *SpotResult) barPlot(names []string, value func(SpotStats) float64) *plot.Plot {
	p := plot.New()
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	highest := 1.0
	width := vg.Points(60 / float64(max(len(r.Policies), 1)))
	for i, policy := range r.Policies {
		vals := make(plotter.Values, 0, len(names))
		for _, t := range r.Traces {
			vals = append(vals, value(t.Stats[i]))
		}
		vals = append(vals, value(r.Mean[i]))
		highest = max(highest, slices.Max(vals))
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			continue // no bars: values are never negative or NaN here
		}
		bars.LineStyle.Width = 0
		bars.Color = styleOf(policy, i).Color
		bars.Offset = width * vg.Length(float64(i)-float64(len(r.Policies)-1)/2)
		p.Add(bars)
		p.Legend.Add(policy, bars)
	}
	p.Y.Max = 1.1 * highest
	p.NominalX(names...)
	p.X.Tick.Label.Rotation = math.Pi / 4
	p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XRight, draw.YCenter
	return p
}

// refLine draws a dashed horizontal line at y across n groups of bars.
func refLine(p *plot.Plot, n int, y float64, name string) error {
	l, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: y}, {X: float64(n) - 0.5, Y: y}})
	if err != nil {
		return err
	}
	l.Color, l.Dashes, l.Width = color.Gray{Y: 90}, pts(4, 3), vg.Points(1)
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}
