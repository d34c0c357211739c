package main

import (
	"encoding/json"
	"image/png"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// samples writes benchmark samples of each kind, shaped like the
// benchmarks' own, into a folder.
func samples(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	var lat []float64
	for range 400 {
		lat = append(lat, 0.2+rng.Float64()*0.9)
	}
	var fo []failover
	for i := range 12 {
		at := float64(i * 30)
		fo = append(fo, failover{Shard: "s", Round: i, At: at, Lease: at + 3 + rng.Float64()*7, Take: at + 10.2 + rng.Float64(), First: at + 10.5 + rng.Float64()})
	}
	var co []child
	for i := range 10 {
		kind := "split"
		if i%3 == 0 {
			kind = "merge"
		}
		co = append(co, child{Child: "c", Kind: kind, ShardEnd: 1, First: 1.2 + rng.Float64()*1.3})
	}
	for name, v := range map[string]any{
		"latency": lat, "failover": fo, "childopen": co,
		"reader": readerFigures{Rate: 41000, Sequential: 18200, Pipelined: 45400},
		"drain": drainFigures{PF1: drainRun{Rate: 4900, Reads: 300}, PF10: drainRun{Rate: 46000, Reads: 120},
			ReadCap: drainRun{Rate: 1900, Reads: 500}, ReadCapRate: 2048},
	} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Each figure is drawn from its samples into a PNG of the documented name.
func TestRun_DrawsEachFigureFromItsSamples(t *testing.T) {
	out := filepath.Join(t.TempDir(), "img")
	if err := run(samples(t), out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, f := range figures {
		file, err := os.Open(filepath.Join(out, f.png))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(file)
		file.Close()
		if err != nil {
			t.Fatalf("%s: %v", f.png, err)
		}
		b := img.Bounds()
		if b.Dx() < 500 || b.Dy() < 150 {
			t.Errorf("%s is %v, want a figure", f.png, b)
		}
		colors := map[uint32]bool{}
		for y := b.Min.Y; y < b.Max.Y; y += 3 {
			for x := b.Min.X; x < b.Max.X; x += 3 {
				r, g, bl, _ := img.At(x, y).RGBA()
				colors[r>>8<<16|g>>8<<8|bl>>8] = true
			}
		}
		if len(colors) < 4 {
			t.Errorf("%s has %d colours: blank", f.png, len(colors))
		}
	}
}

func TestRun_WithoutSamplesSaysToRunTheBenchmarks(t *testing.T) {
	err := run(t.TempDir(), t.TempDir(), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "make bench") {
		t.Fatalf("err = %v, want one naming make bench", err)
	}
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "latency.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(bad, t.TempDir(), io.Discard); err == nil || !strings.Contains(err.Error(), "latency.json") {
		t.Fatalf("err = %v, want one naming the file", err)
	}
}
