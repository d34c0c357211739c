package main

import (
	"fmt"
	"image/color"
	"math"
)

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

// bars draws one horizontal bar per value, each with its label, against
// marks (dashed lines with their labels).
type bar struct {
	label string
	value float64
	col   color.RGBA
	note  string
}

type mark struct {
	value float64
	label string
}

func barPlot(title, subtitle, unit string, bs []bar, marks []mark) canvas {
	const w, rowH = 820, 46
	h := 130 + len(bs)*rowH
	c := newCanvas(w, h)
	xmax := 0.0
	for _, b := range bs {
		xmax = math.Max(xmax, b.value)
	}
	for _, m := range marks {
		xmax = math.Max(xmax, m.value)
	}
	step := math.Pow(10, math.Floor(math.Log10(xmax)))
	for xmax/step > 8 {
		step *= 2
	}
	xmax = math.Ceil(xmax*1.1/step) * step
	f := frame{c: c, x0: 180, y0: 70, x1: w - 30, y1: h - 50, xmax: xmax, ymax: 1}
	c.text(20, 10, title, black, 2)
	c.text(20, 34, subtitle, black, 1)
	f.axes(step, "%.0f", unit, "", 0)
	for i, b := range bs {
		y := f.y0 + 10 + i*rowH
		c.text(20, y+8, b.label, black, 1)
		c.rect(f.x0+1, y, f.px(b.value), y+rowH-20, b.col)
		c.text(f.px(b.value)+6, y+8, b.note, black, 1)
	}
	for i, m := range marks {
		c.dashedV(f.px(m.value), f.y0, f.y1, red)
		c.text(f.px(m.value)-textWidth(m.label, 1)/2, f.y0-12-12*(i%2), m.label, red, 1)
	}
	return c
}

func readerPlot(r readerFigures) canvas {
	return barPlot("one lane, pipelined: records/s",
		fmt.Sprintf("getrecords 20 ms, target 30 ms, checkpoint 5 ms a batch of 1,000: %.2f x the sequential ideal (goal 1.5)", r.Rate/r.Sequential),
		"records per second", []bar{
			{"sequential ideal", r.Sequential, grey, fmt.Sprintf("%.0f", r.Sequential)},
			{"the reader", r.Rate, blue, fmt.Sprintf("%.0f", r.Rate)},
		}, []mark{{r.Pipelined, fmt.Sprintf("pipelined ideal %.0f", r.Pipelined)}, {1.5 * r.Sequential, "goal 1.5 x"}})
}

func drainPlot(d drainFigures) canvas {
	return barPlot("draining a 100,000-record backlog of one shard: records/s",
		fmt.Sprintf("factor 10 over factor 1: %.2f x (goal 8), 1 kb records at factor 10: %.3f of the 2 mb/s read limit (goal 0.9), 0 throttled reads", d.PF10.Rate/d.PF1.Rate, d.ReadCap.Rate/d.ReadCapRate),
		"records per second (steady, 10% to 90% of the backlog)", []bar{
			{"factor 1, 200 ms target", d.PF1.Rate, grey, fmt.Sprintf("%.0f (%d reads)", d.PF1.Rate, d.PF1.Reads)},
			{"factor 10, 200 ms target", d.PF10.Rate, blue, fmt.Sprintf("%.0f (%d reads)", d.PF10.Rate, d.PF10.Reads)},
			{"factor 10, 5 ms, 1 kb", d.ReadCap.Rate, green, fmt.Sprintf("%.0f (%d reads)", d.ReadCap.Rate, d.ReadCap.Reads)},
		}, []mark{{d.ReadCapRate, "2 mb/s of 1 kb records"}, {10 * d.PF1.Rate, "10 x factor 1"}})
}
