package sim

import (
	"cmp"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// lineStyle is how one policy is drawn: the same in every chart, so a
// reader who learned gangway is the thick black line keeps it.
type lineStyle struct {
	Color  color.Color
	Dashes []vg.Length
	Width  vg.Length
}

// Okabe and Ito's palette, told apart with the common colour-vision
// deficiencies too; black is Gangway's.
var (
	okabeBlue      = color.RGBA{R: 0, G: 114, B: 178, A: 255}
	okabeVermilion = color.RGBA{R: 213, G: 94, B: 0, A: 255}
	okabeGreen     = color.RGBA{R: 0, G: 158, B: 115, A: 255}
	okabeOrange    = color.RGBA{R: 230, G: 159, B: 0, A: 255}
	okabePurple    = color.RGBA{R: 204, G: 121, B: 167, A: 255}
	okabeSky       = color.RGBA{R: 86, G: 180, B: 233, A: 255}
	grey           = color.Gray{Y: 110}
)

func pts(v ...float64) []vg.Length {
	out := make([]vg.Length, len(v))
	for i, x := range v {
		out[i] = vg.Points(x)
	}
	return out
}

// policyStyles fixes the style of every policy the replays know. The
// leading ones (gangway, fgd, best-fit) differ in colour, dash pattern
// and width at once.
var policyStyles = map[string]lineStyle{
	GangwayPolicy:      {Color: color.Black, Width: vg.Points(2.6)},
	"fgd":              {Color: okabeVermilion, Dashes: pts(7, 3), Width: vg.Points(1.8)},
	"best-fit":         {Color: okabeBlue, Dashes: pts(7, 2.5, 1.5, 2.5), Width: vg.Points(1.6)},
	"first-fit":        {Color: okabeGreen, Dashes: pts(1.5, 2.5), Width: vg.Points(2)},
	"gpu-packing":      {Color: okabeSky, Dashes: pts(3, 3), Width: vg.Points(1.4)},
	"gpu-clustering":   {Color: okabePurple, Dashes: pts(10, 2, 2, 2), Width: vg.Points(1.4)},
	"dot-product":      {Color: okabeOrange, Dashes: pts(4, 2), Width: vg.Points(1.4)},
	"random":           {Color: grey, Dashes: pts(1.2, 2), Width: vg.Points(1.6)},
	"on-demand":        {Color: grey, Width: vg.Points(1.4)},
	"greedy":           {Color: okabeOrange, Dashes: pts(4, 2), Width: vg.Points(1.4)},
	"uniform-progress": {Color: okabeBlue, Dashes: pts(7, 2.5, 1.5, 2.5), Width: vg.Points(1.6)},
}

// fallbackStyles serve policies policyStyles does not name, by position.
var fallbackStyles = []lineStyle{
	{Color: okabeGreen, Dashes: pts(5, 2), Width: vg.Points(1.4)},
	{Color: okabePurple, Dashes: pts(2, 2), Width: vg.Points(1.4)},
	{Color: okabeSky, Dashes: pts(8, 2, 2, 2), Width: vg.Points(1.4)},
	{Color: okabeOrange, Dashes: pts(1, 2), Width: vg.Points(1.4)},
}

// styleOf is policy's style; i is its position, for policies without one.
func styleOf(policy string, i int) lineStyle {
	if s, ok := policyStyles[policy]; ok {
		return s
	}
	return fallbackStyles[i%len(fallbackStyles)]
}

func (s lineStyle) apply(l *plotter.Line) {
	l.Color, l.Dashes, l.Width = s.Color, s.Dashes, s.Width
}

// addLines adds lines to p widest first, so that where curves coincide
// the thinner, dashed ones stay visible on top of the wide ones.
func addLines(p *plot.Plot, lines []*plotter.Line) {
	order := slices.Clone(lines)
	slices.SortStableFunc(order, func(a, b *plotter.Line) int { return cmp.Compare(b.Width, a.Width) })
	for _, l := range order {
		p.Add(l)
	}
}

// savePanels draws plots stacked top to bottom on a w × h canvas, their
// axes aligned, each with its legend in a column of its own to the right,
// so no legend covers a curve; it writes path (.png, .svg or .pdf).
func savePanels(path string, w, h, legendW vg.Length, plots ...*plot.Plot) (err error) {
	format := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	if format == "" {
		return fmt.Errorf("%s: want a .png, .svg or .pdf file name", path)
	}
	c, err := draw.NewFormattedCanvas(w, h, format)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	dc := draw.New(c)
	legends := make([]plot.Legend, len(plots))
	rows := make([][]*plot.Plot, len(plots))
	for i, p := range plots {
		legends[i] = p.Legend
		p.Legend = plot.NewLegend()
		rows[i] = []*plot.Plot{p}
	}
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadY: vg.Points(16),
		PadLeft: vg.Points(4), PadRight: vg.Points(8)}
	canvases := plot.Align(rows, tiles, draw.Crop(dc, 0, -legendW, 0, 0))
	for i, p := range plots {
		pc := canvases[i][0]
		p.Draw(pc)
		lc := pc
		lc.Rectangle = vg.Rectangle{Min: vg.Point{X: w - legendW, Y: pc.Min.Y}, Max: vg.Point{X: w - vg.Points(4), Y: pc.Max.Y}}
		// Below the panel's title, level with its plotting area.
		lc = draw.Crop(lc, 0, 0, 0, -p.Title.TextStyle.Height(p.Title.Text)-p.Title.Padding-vg.Points(6))
		l := legends[i]
		l.Top, l.Left = true, true
		l.Padding = vg.Points(2.5) // between entries
		l.Draw(lc)
	}
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
