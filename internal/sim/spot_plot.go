package sim

import (
	"fmt"
	"math"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// WritePlot draws cost relative to on-demand, one bar per policy for
// each trace and for the mean, to file (.png, .svg or .pdf by extension).
func (r *SpotResult) WritePlot(file string) error {
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
