package quiet

import (
	"fmt"
	"io"
	"os"
	"time"
)

// TB is what a Guard needs of a benchmark (a *testing.B has it).
type TB interface {
	Helper()
	Skip(args ...any)
	Logf(format string, args ...any)
}

// out is where the `bench … not measured` lines go: make bench reads them.
var out io.Writer = os.Stdout

// ProbeFor is how long Begin watches the machine before a benchmark starts.
const ProbeFor = time.Second

// Guard watches one benchmark whose figures are timed on the wall clock.
type Guard struct {
	w       *Watch
	figures []string
}

// Begin probes the machine for ProbeFor. When other processes are using
// it, it prints `bench <figure> not measured: …` for each figure named and
// skips the benchmark at once rather than time it; otherwise it starts the
// watch that Check reads.
func Begin(b TB, figures ...string) *Guard {
	b.Helper()
	if r := Probe(ProbeFor); r.Busy() {
		skip(b, r, "before it began", figures)
	}
	return Watching(figures...)
}

// Watching is Begin without the probe, for a benchmark that also prints
// counts, which a busy machine does not distort: it runs, prints them, and
// Check withholds only its timed figures.
func Watching(figures ...string) *Guard { return &Guard{w: Start(), figures: figures} }

// Check is called just before the benchmark prints its wall-clock figures:
// when other processes used more than MaxOthers of the machine since Begin,
// it prints why for each figure (those named, or else Begin's) and skips the
// benchmark, so no figure from a run known to be distorted is printed.
// Figures that are counts (requests, records lost) can be printed before it.
func (g *Guard) Check(b TB, figures ...string) {
	b.Helper()
	if len(figures) == 0 {
		figures = g.figures
	}
	if r := g.w.Report(); r.Busy() {
		skip(b, r, "while it ran", figures)
	} else if !r.Known {
		b.Logf("quiet: %s; figures printed without knowing", r)
	}
}

func skip(b TB, r Report, when string, figures []string) {
	b.Helper()
	why := fmt.Sprintf("%s %s (a wall-clock figure allows %.0f %%: run it on a quiet machine)", r, when, 100*MaxOthers)
	for _, f := range figures {
		fmt.Fprintf(out, "bench %s not measured: %s\n", f, why)
	}
	b.Skip("not measured: " + why)
}
