package main

import (
	"fmt"
	"image/color"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

var (
	grey   = color.RGBA{150, 150, 150, 255}
	blue   = color.RGBA{60, 110, 190, 255}
	orange = color.RGBA{235, 140, 40, 255}
	green  = color.RGBA{60, 160, 80, 255}
	red    = color.RGBA{200, 40, 40, 255}
	black  = color.RGBA{0, 0, 0, 255}
)

// width of every figure; heights vary with what they show.
const width = 8.2 * vg.Inch

func quantile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p
}

// vmark adds a vertical line at x across the plot's Y range, with a legend
// entry; dashed when dashed.
func vmark(p *plot.Plot, x, y0, y1 float64, col color.Color, dashed bool, label string) error {
	l, err := plotter.NewLine(plotter.XYs{{X: x, Y: y0}, {X: x, Y: y1}})
	if err != nil {
		return err
	}
	l.Color, l.Width = col, vg.Points(1.5)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(5), vg.Points(4)}
	}
	p.Add(l)
	p.Legend.Add(label, l)
	return nil
}

func latencyPlot(lat []float64) (*plot.Plot, vg.Length, vg.Length, error) {
	if len(lat) == 0 {
		return nil, 0, 0, fmt.Errorf("latency: no samples")
	}
	const bin = 0.05
	xmax := math.Max(1.4, math.Ceil(quantile(lat, 1)*10)/10)
	p50, p99 := quantile(lat, 0.5), quantile(lat, 0.99)
	p := newPlot(fmt.Sprintf("put to delivery on idle shards\ndefault 1 s poll interval: p50 %.2f s, p99 %.2f s, n=%d records", p50, p99, len(lat)),
		"seconds from PutRecord to the target", "records")
	h, err := plotter.NewHist(plotter.Values(lat), int(math.Ceil(xmax/bin)))
	if err != nil {
		return nil, 0, 0, err
	}
	h.FillColor, h.LineStyle.Color = blue, color.White
	p.Add(h)
	ymax := 0.0
	for _, b := range h.Bins {
		ymax = math.Max(ymax, b.Weight)
	}
	for _, m := range []struct {
		x      float64
		col    color.Color
		dashed bool
		label  string
	}{
		{0.6, green, true, "goal p50 0.6 s"}, {1.1, green, true, "goal p99 1.1 s"},
		{p50, black, false, fmt.Sprintf("p50 %.2f s", p50)}, {p99, red, false, fmt.Sprintf("p99 %.2f s", p99)},
	} {
		if err := vmark(p, m.x, 0, ymax, m.col, m.dashed, m.label); err != nil {
			return nil, 0, 0, err
		}
	}
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, xmax, 0, ymax*1.4 // room for the legend above the bars
	return p, width, 4.4 * vg.Inch, nil
}

type failover struct {
	Shard string  `json:"shard"`
	Round int     `json:"round"`
	At    float64 `json:"at"`
	Lease float64 `json:"expiry"`
	Take  float64 `json:"take"`
	First float64 `json:"first"`
}

// failoverPlot draws one row per kill: the dead owner's lease still live,
// the coordinator's watch, and the new owner opening the shard.
func failoverPlot(fo []failover) (*plot.Plot, vg.Length, vg.Length, error) {
	if len(fo) == 0 {
		return nil, 0, 0, fmt.Errorf("failover: no samples")
	}
	fo = slices.Clone(fo)
	slices.SortFunc(fo, func(a, b failover) int { return cmpF(a.First-a.At, b.First-b.At) })
	var totals []float64
	live, watch, open := make(plotter.Values, len(fo)), make(plotter.Values, len(fo)), make(plotter.Values, len(fo))
	for i, s := range fo {
		totals = append(totals, s.First-s.At)
		l := math.Max(0, s.Lease-s.At)
		live[i] = l
		watch[i] = math.Max(0, s.Take-s.At-l)
		open[i] = math.Max(0, s.First-s.Take)
	}
	p := newPlot(fmt.Sprintf("failover (event path), %d kills: p50 %.1f s, p99 %.1f s", len(fo), quantile(totals, 0.5), quantile(totals, 0.99)),
		"seconds from the kill", "kills, fastest first")
	row := vg.Points(10)
	var prev *plotter.BarChart
	for _, seg := range []struct {
		v     plotter.Values
		col   color.Color
		label string
	}{{live, grey, "dead owner's lease live"}, {watch, orange, "watch: 10 s of its own from the event"}, {open, green, "new owner opening the shard"}} {
		b, err := plotter.NewBarChart(seg.v, row)
		if err != nil {
			return nil, 0, 0, err
		}
		b.Horizontal, b.Color, b.LineStyle.Width = true, seg.col, 0
		if prev != nil {
			b.StackOn(prev)
		}
		p.Add(b)
		p.Legend.Add(seg.label, b)
		prev = b
	}
	if err := vmark(p, 11, -0.5, float64(len(fo))-0.5, red, true, "goal p99 11 s"); err != nil {
		return nil, 0, 0, err
	}
	p.X.Min, p.X.Max = 0, math.Max(22, math.Ceil(slices.Max(totals)/2)*2)
	p.Y.Tick.Marker = plot.ConstantTicks(nil)
	return p, width, 1.6*vg.Inch + vg.Length(len(fo))*row*1.3, nil
}

type child struct {
	Child    string  `json:"child"`
	Kind     string  `json:"kind"`
	ShardEnd float64 `json:"shardEnd"`
	First    float64 `json:"first"`
}

// childPlot draws each child's wait from its parent's SHARD_END to its
// first delivery, splits above merges.
func childPlot(co []child) (*plot.Plot, vg.Length, vg.Length, error) {
	if len(co) == 0 {
		return nil, 0, 0, fmt.Errorf("childopen: no samples")
	}
	var ds []float64
	var split, merge plotter.XYs
	for _, s := range co {
		d := s.First - s.ShardEnd
		ds = append(ds, d)
		if s.Kind == "merge" {
			merge = append(merge, plotter.XY{X: d, Y: 0.6})
		} else {
			split = append(split, plotter.XY{X: d, Y: 1.4})
		}
	}
	p := newPlot(fmt.Sprintf("child opening, parent's SHARD_END to the child's first delivery\np50 %.2f s, p99 %.2f s (n=%d)", quantile(ds, 0.5), quantile(ds, 0.99), len(ds)),
		"seconds from SHARD_END", "")
	for _, g := range []struct {
		xy    plotter.XYs
		col   color.Color
		shape draw.GlyphDrawer
		label string
	}{{split, blue, draw.CircleGlyph{}, "child of a split"}, {merge, orange, draw.BoxGlyph{}, "child of a merge"}} {
		if len(g.xy) == 0 {
			continue
		}
		s, err := plotter.NewScatter(g.xy)
		if err != nil {
			return nil, 0, 0, err
		}
		s.GlyphStyle.Color, s.GlyphStyle.Shape, s.GlyphStyle.Radius = g.col, g.shape, vg.Points(3)
		p.Add(s)
		p.Legend.Add(g.label, s)
	}
	if err := vmark(p, 2, 0, 2, red, true, "goal p99 2 s"); err != nil {
		return nil, 0, 0, err
	}
	p.X.Min, p.X.Max = 0, math.Max(2.5, math.Ceil(slices.Max(ds)*2)/2)
	p.Y.Min, p.Y.Max = 0, 2
	p.Y.Tick.Marker = plot.ConstantTicks(nil)
	return p, width, 3 * vg.Inch, nil
}

// The reader's figures (pkg/reader's benchmarks write reader.json and
// drain.json).

type readerFigures struct {
	Rate       float64 `json:"rate"`
	Sequential float64 `json:"sequential"`
	Pipelined  float64 `json:"pipelined"`
}

type drainRun struct {
	Rate      float64 `json:"rate"`
	Reads     int     `json:"reads"`
	Throttled int     `json:"throttled"`
	Seconds   float64 `json:"seconds"`
}

type drainFigures struct {
	PF1         drainRun `json:"pf1"`
	PF10        drainRun `json:"pf10"`
	ReadCap     drainRun `json:"readCap"`
	ReadCapRate float64  `json:"readCapRate"`
}

// bar is one horizontal bar of a barPlot; mark a dashed line across them.
type bar struct {
	label string
	value float64
	col   color.Color
	note  string
}

type mark struct {
	value float64
	label string
}

// barPlot draws one labelled horizontal bar per value, the first at the
// top, against marks.
func barPlot(title, unit string, bs []bar, marks []mark) (*plot.Plot, vg.Length, vg.Length, error) {
	p := newPlot(title, unit, "")
	names := make([]string, len(bs))
	xmax := 0.0
	for i, b := range bs {
		y := float64(len(bs) - 1 - i)
		names[len(bs)-1-i] = b.label
		c, err := plotter.NewBarChart(plotter.Values{b.value}, vg.Points(22))
		if err != nil {
			return nil, 0, 0, err
		}
		c.Horizontal, c.Color, c.LineStyle.Width, c.XMin = true, b.col, 0, y
		p.Add(c)
		l, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: b.value, Y: y}}, Labels: []string{"  " + b.note}})
		if err != nil {
			return nil, 0, 0, err
		}
		l.Offset = vg.Point{Y: -vg.Points(4)}
		p.Add(l)
		xmax = math.Max(xmax, b.value)
	}
	for i, m := range marks {
		col := red
		if i%2 == 1 {
			col = black
		}
		if err := vmark(p, m.value, -0.5, float64(len(bs))-0.5, col, true, m.label); err != nil {
			return nil, 0, 0, err
		}
		xmax = math.Max(xmax, m.value)
	}
	p.NominalY(names...)
	p.X.Min, p.X.Max = 0, xmax*1.5 // room for the notes and the legend
	return p, width, 1.9*vg.Inch + vg.Length(len(bs))*0.55*vg.Inch, nil
}

func readerPlot(r readerFigures) (*plot.Plot, vg.Length, vg.Length, error) {
	if r.Sequential <= 0 {
		return nil, 0, 0, fmt.Errorf("reader: no sequential rate")
	}
	return barPlot(fmt.Sprintf("one lane, pipelined: records/s\nGetRecords 20 ms, target 30 ms, checkpoint 5 ms a batch of 1,000\n%.2f × the sequential ideal (goal 1.5)", r.Rate/r.Sequential),
		"records per second", []bar{
			{"sequential ideal", r.Sequential, grey, fmt.Sprintf("%.0f", r.Sequential)},
			{"the reader", r.Rate, blue, fmt.Sprintf("%.0f", r.Rate)},
		}, []mark{{r.Pipelined, fmt.Sprintf("pipelined ideal %.0f", r.Pipelined)}, {1.5 * r.Sequential, "goal 1.5 ×"}})
}

func drainPlot(d drainFigures) (*plot.Plot, vg.Length, vg.Length, error) {
	if d.PF1.Rate <= 0 || d.ReadCapRate <= 0 {
		return nil, 0, 0, fmt.Errorf("drain: no rates")
	}
	return barPlot(fmt.Sprintf("draining a 100,000-record backlog of one shard: records/s\nfactor 10 over factor 1: %.2f × (goal 8)\n1 KB records at factor 10: %.3f of the 2 MB/s read limit (goal 0.9); %d throttled reads",
		d.PF10.Rate/d.PF1.Rate, d.ReadCap.Rate/d.ReadCapRate, d.PF1.Throttled+d.PF10.Throttled+d.ReadCap.Throttled),
		"records per second (steady, 10% to 90% of the backlog)", []bar{
			{"factor 1, 200 ms target", d.PF1.Rate, grey, fmt.Sprintf("%.0f (%d reads)", d.PF1.Rate, d.PF1.Reads)},
			{"factor 10, 200 ms target", d.PF10.Rate, blue, fmt.Sprintf("%.0f (%d reads)", d.PF10.Rate, d.PF10.Reads)},
			{"factor 10, 5 ms, 1 KB", d.ReadCap.Rate, green, fmt.Sprintf("%.0f (%d reads)", d.ReadCap.Rate, d.ReadCap.Reads)},
		}, []mark{{d.ReadCapRate, "2 MB/s of 1 KB records"}, {10 * d.PF1.Rate, "10 × factor 1"}})
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
