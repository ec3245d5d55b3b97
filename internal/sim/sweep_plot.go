package sim

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// WritePlot draws, per sweep point, each policy's unallocated GPU at 100%
// over FGD's (ratio of the means over seeds, with the worst seed's ratio
// as a hollow mark), with FGD's 1 and 0.9 drawn across, and saves it as
// path (.png, .svg or .pdf by extension).
func (r *SweepResult) WritePlot(path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("FGD protocol over generated mixes, seeds %s", FormatSeeds(r.Points[0].FGD.Seeds))
	p.X.Label.Text = "sweep point"
	p.Y.Label.Text = "unallocated GPU at 100%, × FGD's"
	p.Add(plotter.NewGrid())
	var labels plot.ConstantTicks
	for i := range r.Points {
		labels = append(labels, plot.Tick{Value: float64(i), Label: r.Points[i].Point.String()})
	}
	p.X.Tick.Marker = labels
	p.X.Tick.Label.Rotation = 0.8
	p.X.Tick.Label.XAlign = draw.XRight
	p.X.Min, p.X.Max = -0.5, float64(len(r.Points))-0.5
	p.Legend.Top = true

	for k, lvl := range []float64{1, 0.9} {
		l, err := plotter.NewLine(plotter.XYs{{X: p.X.Min, Y: lvl}, {X: p.X.Max, Y: lvl}})
		if err != nil {
			return err
		}
		l.Color = color.Gray{Y: 120}
		if k == 1 {
			l.Dashes = []vg.Length{vg.Points(3), vg.Points(2)}
		}
		p.Add(l)
		p.Legend.Add(map[int]string{0: "fgd", 1: "0.9 × fgd"}[k], l)
	}
	for c, pr := range r.Points[0].FGD.Policies {
		if pr.Policy == "fgd" {
			continue
		}
		var mean, worst plotter.XYs
		for i := range r.Points {
			m, w := r.Points[i].Ratio(pr.Policy, "fgd")
			mean = append(mean, plotter.XY{X: float64(i), Y: m})
			worst = append(worst, plotter.XY{X: float64(i), Y: w})
		}
		l, s, err := plotter.NewLinePoints(mean)
		if err != nil {
			return err
		}
		l.Color, s.Color = plotutil.Color(c), plotutil.Color(c)
		s.Shape = draw.CircleGlyph{}
		w, err := plotter.NewScatter(worst)
		if err != nil {
			return err
		}
		w.Color, w.Shape = plotutil.Color(c), draw.RingGlyph{}
		p.Add(l, s, w)
		p.Legend.Add(pr.Policy+" (mean; ring: worst seed)", l, s)
	}
	return p.Save(9*vg.Inch, 5*vg.Inch, path)
}
