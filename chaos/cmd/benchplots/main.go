// Command benchplots draws the figures of docs/benchmarks.md from the raw
// samples the benchmarks save (make bench writes them to build/bench-data),
// with gonum.org/v1/plot:
//
//	make bench-plots
//	(cd chaos/cmd/benchplots && go run . -data ../../../build/bench-data -out ../../../docs/img)
//
// It draws the delivery latency distribution (latency.json), the failover
// timeline (failover.json), the child opening times (childopen.json), and
// the reader's pipelining (reader.json) and drains at factors 1 and 10
// (drain.json), each when its data is present. It is a module of its own, so
// that the plotting library stays out of the root module.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
)

func main() {
	data := flag.String("data", "build/bench-data", "folder of the benchmarks' JSON samples")
	out := flag.String("out", "docs/img", "folder the PNGs are written to")
	flag.Parse()
	if err := run(*data, *out, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchplots:", err)
		os.Exit(1)
	}
}

// figure is one PNG: the file it is written to, its samples and how it is
// drawn from them.
type figure struct {
	data, png string
	draw      func(path string) (*plot.Plot, vg.Length, vg.Length, error)
}

// from reads the samples at path into a T and draws them with draw.
func from[T any](draw func(T) (*plot.Plot, vg.Length, vg.Length, error)) func(string) (*plot.Plot, vg.Length, vg.Length, error) {
	return func(path string) (*plot.Plot, vg.Length, vg.Length, error) {
		var v T
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, 0, 0, err
		}
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, 0, 0, fmt.Errorf("%s: %w", path, err)
		}
		return draw(v)
	}
}

var figures = []figure{
	{"latency.json", "deliver-latency.png", from(latencyPlot)},
	{"failover.json", "failover-timeline.png", from(failoverPlot)},
	{"childopen.json", "child-open.png", from(childPlot)},
	{"reader.json", "reader-pipelined.png", from(readerPlot)},
	{"drain.json", "drain.png", from(drainPlot)},
}

// run draws each figure whose samples are in data into out; none is an
// error that says to run the benchmarks.
func run(data, out string, log interface{ Write([]byte) (int, error) }) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	drew := 0
	for _, f := range figures {
		path := filepath.Join(data, f.data)
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		p, w, h, err := f.draw(path)
		if err != nil {
			return err
		}
		dst := filepath.Join(out, f.png)
		if err := p.Save(w, h, dst); err != nil {
			return fmt.Errorf("%s: %w", dst, err)
		}
		fmt.Fprintln(log, "wrote", dst)
		drew++
	}
	if drew == 0 {
		return fmt.Errorf("no samples in %s: run make bench first", data)
	}
	return nil
}
