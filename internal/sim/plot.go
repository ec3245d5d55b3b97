package sim

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Curve is a run's unallocated GPU % by arrived workload, in whole
// percent of capacity: Y[x] is the mean over the arrivals whose arrived
// percentage rounds to x (NaN where none did), as the artifact bins it.
type Curve struct {
	Y []float64
}

// UnallocatedCurve bins a run's points by arrived percentage.
func UnallocatedCurve(r *Run) Curve {
	c := float64(r.CapacityMilli)
	var sum []float64
	var n []int
	for _, p := range r.Points {
		x := int(math.RoundToEven(100 * float64(p.ArrivedMilli) / c))
		for len(sum) <= x {
			sum, n = append(sum, 0), append(n, 0)
		}
		sum[x] += 100 * float64(p.FreeMilli) / c
		n[x]++
	}
	out := Curve{Y: make([]float64, len(sum))}
	for x := range sum {
		out.Y[x] = math.NaN()
		if n[x] > 0 {
			out.Y[x] = sum[x] / float64(n[x])
		}
	}
	return out
}

// MeanCurve is the mean over a policy's seeds of UnallocatedCurve.
func MeanCurve(p *PolicyResult) plotter.XYs {
	var sum []float64
	var n []int
	for i := range p.Runs {
		c := UnallocatedCurve(&p.Runs[i])
		for x, y := range c.Y {
			for len(sum) <= x {
				sum, n = append(sum, 0), append(n, 0)
			}
			if !math.IsNaN(y) {
				sum[x] += y
				n[x]++
			}
		}
	}
	var xy plotter.XYs
	for x := range sum {
		if n[x] > 0 {
			xy = append(xy, plotter.XY{X: float64(x), Y: sum[x] / float64(n[x])})
		}
	}
	return xy
}

// WritePlot draws unallocated GPU % against arrived workload, one line per
// policy (mean over seeds), zoomed on 75-130% as the paper's Fig. 9, with
// the legend beside the chart, and saves it as path (.png, .svg or .pdf by
// extension).
func (r *FGDResult) WritePlot(path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("FGD protocol: %s, seeds %s", filepath.Base(r.TasksFile), FormatSeeds(r.Seeds))
	p.X.Label.Text = "arrived workload (% of cluster GPU capacity)"
	p.Y.Label.Text = "unallocated GPU (%)"
	p.X.Min, p.X.Max = 75, 130
	p.Y.Min, p.Y.Max = 0, 30
	p.X.Tick.Marker = ticks(75, 130, 5)
	p.Y.Tick.Marker = ticks(0, 30, 5)
	p.Add(plotter.NewGrid())

	ideal, err := plotter.NewLine(plotter.XYs{{X: 75, Y: 25}, {X: 100, Y: 0}, {X: 130, Y: 0}})
	if err != nil {
		return err
	}
	ideal.Color = color.Gray{Y: 175}
	ideal.Width = vg.Points(1.2)
	p.Add(ideal)
	p.Legend.Add("ideal", ideal)

	var lines []*plotter.Line
	for i := range r.Policies {
		pr := &r.Policies[i]
		xy := clip(MeanCurve(pr), p.X.Min, p.X.Max)
		if len(xy) == 0 {
			continue
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		styleOf(pr.Policy, i).apply(l)
		lines = append(lines, l)
		p.Legend.Add(fmt.Sprintf("%s (%.2f%%)", pr.Policy, pr.Unallocated.Mean), l)
	}
	addLines(p, lines)
	p.Legend.ThumbnailWidth = vg.Points(30)
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	return savePanels(path, 8.8*vg.Inch, 4.5*vg.Inch, 1.9*vg.Inch, p)
}

// ticks labels every step from lo to hi with whole numbers.
func ticks(lo, hi, step float64) plot.ConstantTicks {
	var t plot.ConstantTicks
	for x := lo; x <= hi; x += step {
		t = append(t, plot.Tick{Value: x, Label: fmt.Sprintf("%.0f", x)})
	}
	return t
}

func clip(xy plotter.XYs, lo, hi float64) plotter.XYs {
	var out plotter.XYs
	for _, p := range xy {
		if p.X >= lo && p.X <= hi {
			out = append(out, p)
		}
	}
	return out
}
