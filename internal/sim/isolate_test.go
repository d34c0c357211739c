package sim

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardloop/shardloop/pkg/reader"
)

// worldMark starts the lines a child process prints as each world starts
// and ends, so that the parent knows which worlds a panic may be from.
const worldMark = "sim-world"

// isolate runs TestSim's worlds first to first+n-1 in a child process of
// the test binary. A panic in the code under test (in any of its
// goroutines, which no recover reaches) ends the child: isolate then runs
// each world that had started and not ended alone, reports the one that
// panics as a failed world with its seed and replay command, and goes on
// with the worlds not run yet in a new child.
func isolate(t *testing.T, first uint64, n int) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	done := map[uint64]bool{}
	var sum summary
	began := time.Now()
	defer func() {
		fmt.Printf("sim: %d worlds (seeds %d to %d), %d violating (%d more by known bugs%s), %.1f simulated hours in %s: %.0f worlds a minute\n",
			sum.worlds, first, first+uint64(n)-1, sum.bad, sum.known, sum.bugs.String(), sum.hours, time.Since(began).Round(time.Millisecond),
			float64(sum.worlds)/time.Since(began).Minutes())
		if len(sum.failing) > 0 {
			// Named on a line of their own, so that a run that prints only
			// this summary (make bench) still says which worlds to replay.
			slices.Sort(sum.failing)
			fmt.Printf("sim: worlds that broke the promise: %s\n", strings.Trim(fmt.Sprint(sum.failing), "[]"))
		}
	}()
	show := func(out []byte) {
		sum.add(out)
		if i := bytes.Index(out, []byte("panic: ")); i >= 0 && panicked(out) {
			out = out[:i] // reported below, with its world
		}
		os.Stdout.Write(unmarked(out))
	}
	for {
		out, err := runChild(exe, first, n, done)
		started, ended := marks(out)
		show(out)
		for s := range ended {
			done[s] = true
		}
		switch {
		case err == nil:
			return
		case !panicked(out):
			t.Fail() // the worlds that failed said why, above
			return
		}
		var suspects []uint64
		for s := range started {
			if !ended[s] {
				suspects = append(suspects, s)
			}
		}
		slices.Sort(suspects)
		if len(suspects) == 0 {
			t.Fatalf("the worlds' process panicked outside any world:\n%s", panicText(out))
		}
		found := false
		for _, s := range suspects {
			done[s] = true
			o, err := runChild(exe, s, 1, nil)
			if err != nil && panicked(o) {
				found = true
				t.Errorf("world %d panicked in the code under test\n  replay: %s\n%s", s, replay(s, *flagShrink), panicText(o))
				continue
			}
			show(o)
			if err != nil {
				t.Fail()
			}
		}
		if !found {
			t.Errorf("one of worlds %v panicked, but none does alone\n  replay each: %s\n%s", suspects, replay(suspects[0], *flagShrink), panicText(out))
		}
		if len(done) >= n {
			return
		}
	}
}

// runChild runs TestSim over n worlds from first, but those in skip, in
// a child process with this process's flags.
func runChild(exe string, first uint64, n int, skip map[uint64]bool) ([]byte, error) {
	args := []string{"-test.run=^TestSim$", "-sim.child", fmt.Sprintf("-sim.first=%d", first), fmt.Sprintf("-sim.seeds=%d", n)}
	var sk []string
	for s := range skip {
		sk = append(sk, strconv.FormatUint(s, 10))
	}
	slices.Sort(sk)
	args = append(args, "-sim.skip="+strings.Join(sk, ","))
	flag.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "sim.first", "sim.seeds", "sim.skip", "sim.child", "sim.seed":
		case "test.v", "test.short", "test.parallel", "test.timeout":
			args = append(args, "-"+f.Name+"="+f.Value.String())
		default:
			if strings.HasPrefix(f.Name, "sim.") {
				args = append(args, "-"+f.Name+"="+f.Value.String())
			}
		}
	})
	return exec.Command(exe, args...).CombinedOutput()
}

// summary adds up the worlds that ended, from the children's marks
// (a child that panicked prints no summary of its own).
type summary struct {
	worlds, bad, known int
	hours              float64
	bugs               bugCounts
	failing            []uint64 // the seeds of the worlds that broke the promise
}

// add counts the worlds that ended in out.
func (s *summary) add(out []byte) {
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) != 5 || f[0] != worldMark || f[2] != "end" {
			continue
		}
		s.worlds++
		switch bug, known := strings.CutPrefix(f[3], "known:"); {
		case known:
			s.known++
			s.bugs.add(bug)
		case f[3] == "failed":
			s.bad++
			if seed, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				s.failing = append(s.failing, seed)
			}
		}
		ns, _ := strconv.ParseFloat(f[4], 64)
		s.hours += ns / float64(time.Hour)
	}
}

// marks reads the worlds started and ended from a child's output.
func marks(out []byte) (started, ended map[uint64]bool) {
	started, ended = map[uint64]bool{}, map[uint64]bool{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != worldMark {
			continue
		}
		s, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			continue
		}
		if f[2] == "start" {
			started[s] = true
		} else {
			ended[s] = true
		}
	}
	return started, ended
}

// unmarked is out without the world marks.
func unmarked(out []byte) []byte {
	var b bytes.Buffer
	for line := range strings.Lines(string(out)) {
		if !strings.HasPrefix(line, worldMark+" ") && summaryLine.FindString(line) == "" {
			b.WriteString(line)
		}
	}
	return b.Bytes()
}

func panicked(out []byte) bool {
	return bytes.Contains(out, []byte("\npanic: ")) || bytes.HasPrefix(out, []byte("panic: ")) || bytes.Contains(out, []byte("fatal error: "))
}

// panicText is the panic's message and the first frames of its goroutine.
func panicText(out []byte) string {
	s := string(out)
	i := strings.Index(s, "panic: ")
	if j := strings.Index(s, "fatal error: "); i < 0 || (j >= 0 && j < i) {
		i = j
	}
	if i < 0 {
		return tail(s, 2000)
	}
	s = s[i:]
	if len(s) > 2500 {
		s = s[:2500] + "\n…"
	}
	return "  " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n  ")
}

// plantPanic makes a world's target panic on its third delivery, in the
// reader's goroutine that delivers (for -sim.panicseed).
func plantPanic(_ string, o *reader.Options) {
	o.Target = thirdDelivery{Target: o.Target, n: new(atomic.Int64), do: func() { panic("sim: planted panic (-sim.panicseed)") }}
}

// plantHang makes a world's target block for good on its third delivery,
// whatever its context says (for -sim.hangseed): the world cannot stop.
func plantHang(_ string, o *reader.Options) {
	o.Target = thirdDelivery{Target: o.Target, n: new(atomic.Int64), do: func() { select {} }}
}

// thirdDelivery runs do on a target's third delivery, before it.
type thirdDelivery struct {
	reader.Target
	n  *atomic.Int64
	do func()
}

func (t thirdDelivery) Deliver(ctx context.Context, b reader.Batch) (int, error) {
	if t.n.Add(1) == 3 {
		t.do()
	}
	return t.Target.Deliver(ctx, b)
}

// A world past its budgets fails alone, with its seed and replay command:
// one whose code hangs (its virtual-time budget), and worlds whose traces
// grow past their memory budget (a tiny one here, which every world
// passes).
func TestSim_AWorldPastItsBudgetFailsAlone(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		flags []string
		want  []string
		ran   string // worlds that ended
	}{
		{"hang", []string{"-sim.hangseed=2"}, []string{"world 2 panicked in the code under test", "replay: " + replay(2, 0), "world 2 ran past its virtual-time budget"}, "2"},
		{"events", []string{"-sim.eventbudget=20"}, []string{"world 1 panicked", "world 1 ran past its memory budget", "world 2 ran past its memory budget"}, "0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"-test.run=^TestSim$", "-sim.first=1", "-sim.seeds=3", "-sim.noshrink", "-sim.trace=0"}, c.flags...)
			out, err := exec.Command(exe, args...).CombinedOutput()
			s := string(out)
			if err == nil {
				t.Fatalf("TestSim passed with a world past its budget:\n%s", tail(s, 3000))
			}
			for _, want := range c.want {
				if !strings.Contains(s, want) {
					t.Errorf("TestSim's output lacks %q:\n%s", want, tail(s, 3000))
				}
			}
			if m := summaryLine.FindStringSubmatch(s); m == nil || m[1] != c.ran {
				t.Errorf("want %s worlds run to their end, got summary %q", c.ran, m)
			}
		})
	}
}

// A world whose code panics fails alone, with its seed and replay
// command; the other worlds of the range run and pass.
func TestSim_APanicFailsOneWorld(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(exe, "-test.run=^TestSim$", "-sim.first=1", "-sim.seeds=4", "-sim.panicseed=2", "-sim.noshrink", "-sim.trace=0").CombinedOutput()
	s := string(out)
	if err == nil {
		t.Fatalf("TestSim passed with a world that panics:\n%s", tail(s, 3000))
	}
	for _, want := range []string{"world 2 panicked in the code under test", "replay: " + replay(2, 0), "planted panic", "seeds 1 to 4"} {
		if !strings.Contains(s, want) {
			t.Errorf("TestSim's output lacks %q:\n%s", want, tail(s, 3000))
		}
	}
	if m := summaryLine.FindStringSubmatch(s); m == nil || m[1] != "3" || m[2] != "0" {
		t.Errorf("want the other 3 worlds run and passing, got summary %q", m)
	}
}
