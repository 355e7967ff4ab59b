package main

import (
	"fmt"
	"image/color"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// writeChart draws the compiled-over-eager speedup of every workload as a
// horizontal bar chart, with a line at 1x, and saves it as a PNG.
func writeChart(path string, res *Result) error {
	rows := slices.Clone(res.Rows)
	slices.Reverse(rows) // the first workload at the top
	vals := make(plotter.Values, len(rows))
	names := make([]string, len(rows))
	labels := plotter.XYLabels{XYs: make(plotter.XYs, len(rows)), Labels: make([]string, len(rows))}
	top := 1.0
	for i, r := range rows {
		vals[i], names[i] = r.Speedup, r.Name
		top = max(top, r.Speedup)
		labels.XYs[i] = plotter.XY{X: r.Speedup, Y: float64(i)}
		labels.Labels[i] = fmt.Sprintf(" %.2fx", r.Speedup)
	}

	p := plot.New()
	p.Title.Text = fmt.Sprintf("gocompile: inductor vs eager on %s", res.Device)
	p.X.Label.Text = "speedup (eager time / compiled time)"
	p.X.Min, p.X.Max = 0, top*1.2
	bars, err := plotter.NewBarChart(vals, vg.Points(14))
	if err != nil {
		return err
	}
	bars.Horizontal = true
	bars.Color = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	bars.LineStyle.Width = 0
	one, err := plotter.NewLine(plotter.XYs{{X: 1, Y: -0.5}, {X: 1, Y: float64(len(rows)) - 0.5}})
	if err != nil {
		return err
	}
	one.Color = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	one.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	text, err := plotter.NewLabels(labels)
	if err != nil {
		return err
	}
	for i := range text.TextStyle {
		text.TextStyle[i].YAlign = -0.5 // centred on the bar
	}
	p.Add(bars, one, text, plotter.NewGrid())
	p.NominalY(names...)
	return p.Save(8*vg.Inch, vg.Length(1.2+0.4*float64(len(rows)))*vg.Inch, path)
}
