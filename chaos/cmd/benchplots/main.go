// Command benchplots draws the figures of docs/benchmarks.md from the raw
// samples the chaos benchmarks save (make bench writes them to
// build/bench-data):
//
//	go run ./chaos/cmd/benchplots -data build/bench-data -out docs/img
//
// It draws the delivery latency distribution (latency.json), the failover
// timeline (failover.json), the child opening times (childopen.json), and
// the reader's pipelining (reader.json) and drains at factors 1 and 10
// (drain.json), each when its data is present, with nothing beyond the
// standard library.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image/color"
	"image/png"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
)

var (
	black  = color.RGBA{0, 0, 0, 255}
	grey   = color.RGBA{150, 150, 150, 255}
	light  = color.RGBA{225, 225, 225, 255}
	blue   = color.RGBA{60, 110, 190, 255}
	orange = color.RGBA{235, 140, 40, 255}
	green  = color.RGBA{60, 160, 80, 255}
	red    = color.RGBA{200, 40, 40, 255}
)

func main() {
	data := flag.String("data", "build/bench-data", "folder of the benchmarks' JSON samples")
	out := flag.String("out", "docs/img", "folder the PNGs are written to")
	flag.Parse()
	if err := run(*data, *out); err != nil {
		fmt.Fprintln(os.Stderr, "benchplots:", err)
		os.Exit(1)
	}
}

func run(data, out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	drew := 0
	var lat []float64
	if ok, err := load(filepath.Join(data, "latency.json"), &lat); err != nil {
		return err
	} else if ok {
		if err := save(filepath.Join(out, "deliver-latency.png"), latencyPlot(lat)); err != nil {
			return err
		}
		drew++
	}
	var fo []failover
	if ok, err := load(filepath.Join(data, "failover.json"), &fo); err != nil {
		return err
	} else if ok {
		if err := save(filepath.Join(out, "failover-timeline.png"), failoverPlot(fo)); err != nil {
			return err
		}
		drew++
	}
	var co []child
	if ok, err := load(filepath.Join(data, "childopen.json"), &co); err != nil {
		return err
	} else if ok {
		if err := save(filepath.Join(out, "child-open.png"), childPlot(co)); err != nil {
			return err
		}
		drew++
	}
	var rf readerFigures
	if ok, err := load(filepath.Join(data, "reader.json"), &rf); err != nil {
		return err
	} else if ok {
		if err := save(filepath.Join(out, "reader-pipelined.png"), readerPlot(rf)); err != nil {
			return err
		}
		drew++
	}
	var df drainFigures
	if ok, err := load(filepath.Join(data, "drain.json"), &df); err != nil {
		return err
	} else if ok {
		if err := save(filepath.Join(out, "drain.png"), drainPlot(df)); err != nil {
			return err
		}
		drew++
	}
	if drew == 0 {
		return fmt.Errorf("no samples in %s: run make bench first", data)
	}
	return nil
}

func load(path string, v any) (bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, json.Unmarshal(b, v)
}

func save(path string, c canvas) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, c); err != nil {
		f.Close()
		return err
	}
	fmt.Println("wrote", path)
	return f.Close()
}

func quantile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// frame is a plot area with linear axes.
type frame struct {
	c              canvas
	x0, y0, x1, y1 int // pixels: left, top, right, bottom
	xmax, ymax     float64
}

func (f frame) px(x float64) int { return f.x0 + int(x/f.xmax*float64(f.x1-f.x0)) }
func (f frame) py(y float64) int { return f.y1 - int(y/f.ymax*float64(f.y1-f.y0)) }

// axes draws the frame, x ticks every xstep (labelled with format) and the
// axis titles.
func (f frame) axes(xstep float64, xfmt, xtitle, ytitle string, ystep float64) {
	for x := 0.0; x <= f.xmax+1e-9; x += xstep {
		px := f.px(x)
		f.c.vline(px, f.y0, f.y1, light)
		f.c.vline(px, f.y1, f.y1+5, black)
		l := fmt.Sprintf(xfmt, x)
		f.c.text(px-textWidth(l, 1)/2, f.y1+9, l, black, 1)
	}
	if ystep > 0 {
		for y := 0.0; y <= f.ymax+1e-9; y += ystep {
			py := f.py(y)
			f.c.hline(f.x0, f.x1, py, light)
			l := fmt.Sprintf("%g", y)
			f.c.text(f.x0-8-textWidth(l, 1), py-3, l, black, 1)
		}
	}
	f.c.hline(f.x0, f.x1, f.y1, black)
	f.c.vline(f.x0, f.y0, f.y1, black)
	f.c.text((f.x0+f.x1-textWidth(xtitle, 2))/2, f.y1+24, xtitle, black, 2)
	f.c.text(8, f.y0-18, ytitle, black, 1)
}

func latencyPlot(lat []float64) canvas {
	const w, h, bin = 820, 440, 0.05
	c := newCanvas(w, h)
	xmax := math.Max(1.4, math.Ceil(quantile(lat, 1)*10)/10)
	counts := make([]int, int(math.Ceil(xmax/bin)))
	for _, v := range lat {
		i := min(int(v/bin), len(counts)-1)
		counts[i]++
	}
	ymax := float64(slices.Max(counts))
	ystep := math.Max(1, math.Ceil(ymax/5))
	f := frame{c: c, x0: 60, y0: 70, x1: w - 20, y1: h - 60, xmax: xmax, ymax: math.Ceil(ymax/ystep) * ystep}
	p50, p99 := quantile(lat, 0.5), quantile(lat, 0.99)
	c.text(20, 10, "put to delivery on idle shards", black, 2)
	c.text(20, 34, fmt.Sprintf("default 1 s poll interval: p50 %.2f s, p99 %.2f s, n=%d records", p50, p99, len(lat)), black, 1)
	f.axes(0.1, "%.1f", "seconds from putrecord to the target", "records", ystep)
	for i, n := range counts {
		if n == 0 {
			continue
		}
		c.rect(f.px(float64(i)*bin)+1, f.py(float64(n)), f.px(float64(i+1)*bin), f.y1, blue)
	}
	mark := func(x float64, col color.RGBA, label string, row int) {
		c.dashedV(f.px(x), f.y0, f.y1, col)
		c.text(f.px(x)+4, f.y0+4+row*12, label, col, 1)
	}
	mark(0.6, green, "goal p50 0.6", 0)
	mark(1.1, green, "goal p99 1.1", 0)
	mark(p50, black, fmt.Sprintf("p50 %.2f", p50), 1)
	mark(p99, red, fmt.Sprintf("p99 %.2f", p99), 1)
	return c
}

type failover struct {
	Shard string  `json:"shard"`
	Round int     `json:"round"`
	At    float64 `json:"at"`
	Lease float64 `json:"expiry"`
	Take  float64 `json:"take"`
	First float64 `json:"first"`
}

func failoverPlot(fo []failover) canvas {
	slices.SortFunc(fo, func(a, b failover) int { return cmpF(a.First-a.At, b.First-b.At) })
	const rowH = 14
	w, h := 820, 150+len(fo)*rowH
	c := newCanvas(w, h)
	var totals []float64
	for _, s := range fo {
		totals = append(totals, s.First-s.At)
	}
	xmax := math.Max(22, math.Ceil(slices.Max(totals)/2)*2)
	f := frame{c: c, x0: 40, y0: 80, x1: w - 20, y1: h - 60, xmax: xmax, ymax: float64(len(fo))}
	c.text(20, 12, fmt.Sprintf("failover (event path), %d kills: p50 %.1f s, p99 %.1f s", len(fo), quantile(totals, 0.5), quantile(totals, 0.99)), black, 2)
	legend := []struct {
		col   color.RGBA
		label string
	}{{grey, "dead owner's lease live"}, {orange, "watch: 10 s of its own from the event"}, {green, "new owner opening the shard"}}
	x := 20
	for _, l := range legend {
		c.rect(x, 38, x+12, 48, l.col)
		c.text(x+16, 40, l.label, black, 1)
		x += 16 + textWidth(l.label, 1) + 24
	}
	f.axes(2, "%.0f", "seconds from the kill", "", 0)
	for i, s := range fo {
		y := f.y0 + i*rowH + 2
		seg := func(from, to float64, col color.RGBA) {
			if to > from {
				c.rect(f.px(from), y, f.px(to), y+rowH-4, col)
			}
		}
		seg(0, s.Lease-s.At, grey)
		seg(math.Max(0, s.Lease-s.At), s.Take-s.At, orange)
		seg(s.Take-s.At, s.First-s.At, green)
	}
	c.dashedV(f.px(11), f.y0, f.y1, red)
	c.text(f.px(11)+4, f.y0-12, "goal p99 11 s", red, 1)
	return c
}

type child struct {
	Child    string  `json:"child"`
	Kind     string  `json:"kind"`
	ShardEnd float64 `json:"shardEnd"`
	First    float64 `json:"first"`
}

func childPlot(co []child) canvas {
	slices.SortFunc(co, func(a, b child) int { return cmpF(a.First-a.ShardEnd, b.First-b.ShardEnd) })
	const w, h = 820, 300
	c := newCanvas(w, h)
	var ds []float64
	for _, s := range co {
		ds = append(ds, s.First-s.ShardEnd)
	}
	xmax := math.Max(2.5, math.Ceil(slices.Max(ds)*2)/2)
	f := frame{c: c, x0: 40, y0: 80, x1: w - 20, y1: h - 60, xmax: xmax, ymax: 2}
	c.text(20, 12, fmt.Sprintf("child opening, parent's shard_end to child's first delivery: p50 %.2f s, p99 %.2f s (n=%d)", quantile(ds, 0.5), quantile(ds, 0.99), len(ds)), black, 1)
	c.rect(20, 38, 32, 48, blue)
	c.text(36, 40, "child of a split (upper row)", black, 1)
	c.rect(260, 38, 272, 48, orange)
	c.text(276, 40, "child of a merge (lower row)", black, 1)
	f.axes(0.5, "%.1f", "seconds from shard_end", "", 0)
	for _, s := range co {
		d := s.First - s.ShardEnd
		y, col := f.py(1.4), blue
		if s.Kind == "merge" {
			y, col = f.py(0.6), orange
		}
		c.rect(f.px(d)-3, y-3, f.px(d)+3, y+3, col)
	}
	c.dashedV(f.px(2), f.y0, f.y1, red)
	c.text(f.px(2)+4, f.y0+4, "goal p99 2 s", red, 1)
	return c
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
