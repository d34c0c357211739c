package sim

import (
	"flag"
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

var (
	flagSeed   = flag.Uint64("sim.seed", 0, "run only the world of this seed (with -sim.shrink, a shrunk one)")
	flagSeeds  = flag.Int("sim.seeds", 0, "how many worlds TestSim runs (default 300; 40 under -race, where make test runs 120 more without it; 30 with -short)")
	flagFirst  = flag.Uint64("sim.first", 1, "the first seed TestSim runs")
	flagShrink = flag.Uint64("sim.shrink", 0, "apply these reductions (a bit mask, see Reductions) to the world")
	flagTrace  = flag.Int("sim.trace", 150, "trace lines printed for a failing world")
	flagNoShr  = flag.Bool("sim.noshrink", false, "do not shrink failing worlds")
	flagQuiet  = flag.Bool("sim.quiet", false, "print only the summary line (for the benchmark)")
	flagStrict = flag.Bool("sim.strict", false, "fail worlds that break the promise by a known bug too")
	flagTwice  = flag.Bool("sim.twice", false, "run every world twice and count those whose two traces differ (how close replay gets)")
	flagChild  = flag.Bool("sim.child", false, "run TestSim's worlds in this process (otherwise they run in a child process of the test binary, so that a world whose code panics fails alone)")
	flagSkip   = flag.String("sim.skip", "", "seeds TestSim skips, comma-separated")
	flagPanic  = flag.Uint64("sim.panicseed", 0, "make the world of this seed panic in a reader's goroutine (to test that it fails alone)")
	flagHang   = flag.Uint64("sim.hangseed", 0, "make the world of this seed hang in its target (to test that it fails alone, past its virtual-time budget)")
	flagEvents = flag.Int("sim.eventbudget", 0, "the most trace events a world may hold (0: sim.DefaultBudgets)")
)

// runWorld runs one world in a synctest bubble of its own.
func runWorld(t *testing.T, cfg Config) *Result {
	var res *Result
	synctest.Test(t, func(*testing.T) { res = Run(cfg) })
	return res
}

// replay is the command that runs one world again.
func replay(seed, mask uint64) string {
	cmd := fmt.Sprintf("go test ./internal/sim -run 'TestSim$' -sim.seed=%d", seed)
	if mask != 0 {
		cmd += fmt.Sprintf(" -sim.shrink=%#x", mask)
	}
	return cmd + " -v"
}

// TestSim runs worlds drawn from consecutive seeds and checks the promise
// in each: every record owed settled, per-key order, one owner at a time,
// checkpoints that never go back or pass an unsettled record, SHARD_END
// only when everything before it settled, children after their parents.
func TestSim(t *testing.T) {
	first, n := *flagFirst, *flagSeeds
	if *flagSeed != 0 {
		first, n = *flagSeed, 1
	}
	if n == 0 {
		switch {
		case testing.Short():
			n = 30
		case raceEnabled:
			n = 40
		default:
			n = 300
		}
	}
	if !*flagChild && *flagSeed == 0 {
		isolate(t, first, n)
		return
	}
	skip := map[uint64]bool{}
	for _, f := range strings.Split(*flagSkip, ",") {
		if v, err := strconv.ParseUint(f, 10, 64); err == nil {
			skip[v] = true
		}
	}
	// A world allocates some 30 MB and keeps little: collect less often.
	defer debug.SetGCPercent(debug.SetGCPercent(800))
	var worlds, failed, known, simulated, differ atomic.Int64
	var byBug bugCounts
	began := time.Now()
	t.Run("worlds", func(t *testing.T) {
		for seed := first; seed < first+uint64(n); seed++ {
			if skip[seed] {
				continue
			}
			t.Run(fmt.Sprint(seed), func(t *testing.T) {
				t.Parallel()
				cfg := Shrunk(seed, *flagShrink)
				if seed == *flagPanic {
					cfg.ReaderHook = plantPanic
				}
				if seed == *flagHang {
					cfg.ReaderHook = plantHang
				}
				cfg.Budgets.Events = *flagEvents
				status := "ok"
				var res *Result
				if *flagChild {
					fmt.Printf("%s %d start\n", worldMark, seed)
					defer func() { fmt.Printf("%s %d end %s %d\n", worldMark, seed, status, res.Simulated) }()
				}
				res = runWorld(t, cfg)
				if *flagTwice {
					again := runWorld(t, cfg)
					if a, b := canonical(res.trace.lines(nil, 1<<62, 0)), canonical(again.trace.lines(nil, 1<<62, 0)); a != b {
						differ.Add(1)
						t.Logf("world %d: the second run's trace differs from the first's from line %d", seed, firstDiff(a, b))
					}
				}
				worlds.Add(1)
				simulated.Add(int64(res.Simulated))
				switch {
				case len(res.Unknown()) > 0 || (*flagStrict && res.Failed()):
					failed.Add(1)
					status = "failed"
					report(t, seed, *flagShrink, res)
				case res.Failed():
					known.Add(1)
					status = "known:" + res.Violations[0].Bug
					byBug.add(res.Violations[0].Bug)
					if !*flagQuiet {
						t.Logf("world %d: known bug %s (%d violations; -sim.strict fails it): %s", seed, res.Violations[0].Bug, len(res.Violations), res.Violations[0])
					}
				case !*flagQuiet && *flagSeed != 0:
					t.Logf("seed %d: %s", seed, cfg.Summary())
					t.Logf("%+v, %s simulated", res.Stats, res.Simulated.Round(time.Second))
				}
			})
		}
	})
	el := time.Since(began)
	if *flagTwice {
		fmt.Printf("sim: %d of %d worlds ran twice with the same trace\n", worlds.Load()-differ.Load(), worlds.Load())
	}
	fmt.Printf("sim: %d worlds (seeds %d to %d), %d violating (%d more by known bugs%s), %.1f simulated hours in %s: %.0f worlds a minute\n",
		worlds.Load(), first, first+uint64(n)-1, failed.Load(), known.Load(), byBug.String(), time.Duration(simulated.Load()).Hours(), el.Round(time.Millisecond),
		float64(worlds.Load())/el.Minutes())
}

// report prints a failing world: its seed, the replay command, the
// violations, the trace; then it shrinks it.
func report(t *testing.T, seed, mask uint64, res *Result) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "world %d broke the promise (%d violations)\n  replay: %s\n  world: %s\n", seed, len(res.Violations), replay(seed, mask), res.Config.Summary())
	if mask != 0 {
		fmt.Fprintf(&b, "  shrunk: %s\n", MaskNames(mask))
	}
	for i, v := range res.Violations {
		if i == 10 {
			fmt.Fprintf(&b, "  … %d more\n", len(res.Violations)-i)
			break
		}
		fmt.Fprintf(&b, "  ! %s\n", v)
	}
	if *flagTrace > 0 {
		fmt.Fprintf(&b, "  trace (the first violation's shard and its parents, and the world's events):\n")
		for _, l := range res.Trace(*flagTrace) {
			fmt.Fprintf(&b, "    %s\n", l)
		}
	}
	t.Error(b.String())
	if *flagNoShr || mask != 0 {
		return
	}
	m := shrink(t, seed)
	if m != 0 {
		t.Errorf("world %d still fails shrunk to: %s\n  replay: %s", seed, MaskNames(m), replay(seed, m))
	}
}

// shrink tries each reduction in turn, keeping those after which the world
// still fails; it returns the mask of the smallest world that failed.
func shrink(t *testing.T, seed uint64) uint64 {
	var mask uint64
	for i := range Reductions {
		try := mask | 1<<i
		if res := runWorld(t, Shrunk(seed, try)); len(res.Unknown()) > 0 || (*flagStrict && res.Failed()) {
			mask = try
		}
	}
	return mask
}

// firstDiff is the line number where two traces first differ.
func firstDiff(a, b string) int {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}

// canonical joins trace lines with those of one instant sorted: what
// happens at the same virtual instant on different goroutines may be
// traced in either order.
func canonical(lines []string) string {
	out := slices.Clone(lines)
	for i := 0; i < len(out); {
		j := i + 1
		for j < len(out) && strings.Fields(out[j])[0] == strings.Fields(out[i])[0] {
			j++
		}
		slices.Sort(out[i:j])
		i = j
	}
	return strings.Join(out, "\n")
}

// bugCounts counts worlds by the known bug of their first violation.
type bugCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (b *bugCounts) add(bug string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n == nil {
		b.n = map[string]int{}
	}
	b.n[bug]++
}

// String is ": B1 12, B3 2", or "" when none.
func (b *bugCounts) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(b.n)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, b.n[k]))
	}
	if len(parts) == 0 {
		return ""
	}
	return ": " + strings.Join(parts, ", ")
}
