package quiet

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseCPU_BusyLeavesOutIdleAndIOWait(t *testing.T) {
	busy, all, err := parseCPU([]byte("cpu  10 1 5 100 7 2 3 4 0 0\ncpu0 5 0 2 50 3 1 1 2 0 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if busy != 10+1+5+2+3+4 || all != 10+1+5+100+7+2+3+4 {
		t.Fatalf("busy %d all %d", busy, all)
	}
	for _, bad := range []string{"", "intr 1 2 3\n", "cpu 1 2 x 4 5 6 7 8\n", "cpu 1 2 3\n"} {
		if _, _, err := parseCPU([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestParseProc_CountsFieldsFromTheNamesLastParenthesis(t *testing.T) {
	// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime prio nice threads itreal starttime
	line := "4242 (odd) (name) R 17 1 1 0 -1 0 0 0 0 0 30 12 5 3 20 0 1 0 987654 0 0\n"
	p, err := parseProc([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if p.ppid != 17 || p.ticks != 30+12+5+3 || p.start != 987654 {
		t.Fatalf("%+v", p)
	}
	if _, err := parseProc([]byte("4242 (x) R 17 1")); err == nil {
		t.Error("a short line: no error")
	}
}

func TestCompare_CountsOnlyProcessesOutsideThisTree(t *testing.T) {
	at := time.Unix(1000, 0)
	before := snapshot{at: at, self: 10, busy: 1000, all: 4000, procs: map[int]proc{
		1:  {ppid: 0, start: 1, ticks: 0},
		10: {ppid: 1, start: 50, ticks: 100},  // this process
		11: {ppid: 10, start: 60, ticks: 40},  // its emulator
		20: {ppid: 1, start: 70, ticks: 500},  // someone else's
		30: {ppid: 1, start: 80, ticks: 9000}, // someone else's, pid later reused by our child
	}}
	cases := []struct {
		name   string
		busy   uint64
		procs  map[int]proc
		others float64
	}{
		{"own process and emulator grew, nothing else ran", 1000 + 300, map[int]proc{
			10: {ppid: 1, start: 50, ticks: 300}, 11: {ppid: 10, start: 60, ticks: 140}, 20: {ppid: 1, start: 70, ticks: 500}}, 0},
		{"another process used 400 of 1000 ticks", 1000 + 600, map[int]proc{
			10: {ppid: 1, start: 50, ticks: 300}, 20: {ppid: 1, start: 70, ticks: 900}}, 0.4},
		{"a child started meanwhile (on a reused pid) is ours from its start", 1000 + 300, map[int]proc{
			10: {ppid: 1, start: 50, ticks: 200}, 30: {ppid: 10, start: 90, ticks: 200}}, 0},
		{"a grandchild is ours", 1000 + 250, map[int]proc{
			10: {ppid: 1, start: 50, ticks: 100}, 11: {ppid: 10, start: 60, ticks: 40}, 12: {ppid: 11, start: 95, ticks: 150}}, 0.1},
	}
	for _, c := range cases {
		c.procs[1] = proc{start: 1}
		after := snapshot{at: at.Add(10 * time.Second), self: 10, busy: c.busy, all: 5000, procs: c.procs}
		r := compare(before, after)
		if !r.Known || r.Over != 10*time.Second || abs(r.Others-c.others) > 1e-9 {
			t.Errorf("%s: %+v, want others %.2f", c.name, r, c.others)
		}
	}
	if r := compare(snapshot{unreadable: syscall.ENOENT}, before); r.Known || r.Busy() || !strings.Contains(r.String(), "unknown") {
		t.Errorf("unreadable: %+v %s", r, r)
	}
}

func abs(x float64) float64 { return max(x, -x) }

// A process outside this tree (its parent exits, so init adopts it) spinning
// beside the probe is seen. How much it gets depends on the machine, but
// whatever else runs only adds to what others used.
func TestProbe_SeesABusyProcessOutsideThisTree(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	spinOutside(t, 1)
	r := Probe(500 * time.Millisecond)
	if !r.Known {
		t.Fatal(r)
	}
	if floor := 0.25 / float64(runtime.NumCPU()); r.Others < floor {
		t.Fatalf("%s: want at least %.0f %% with a busy loop beside it", r, 100*floor)
	}
}

// spinOutside starts n busy loops that are not this process's descendants
// (their parent shell exits, so init adopts them) and kills them at the end.
func spinOutside(t *testing.T, n int) {
	t.Helper()
	for range n {
		out, err := exec.Command("sh", "-c", "sh -c 'while :; do :; done' >/dev/null 2>&1 & echo $!").Output()
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	}
}

// skipTB records a Skip instead of ending the goroutine.
type skipTB struct{ skipped string }

func (s *skipTB) Helper()             {}
func (s *skipTB) Skip(args ...any)    { s.skipped = fmt.Sprint(args...) }
func (s *skipTB) Logf(string, ...any) {}

func TestGuard_NamesEveryFigureItWithholdsWhenOthersTakeTheCPUs(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	var buf bytes.Buffer
	out = &buf
	t.Cleanup(func() { out = os.Stdout })

	g := Watching("a_s", "b_per_second")
	spinOutside(t, runtime.NumCPU()) // every CPU busy: far above MaxOthers
	time.Sleep(500 * time.Millisecond)
	tb := &skipTB{}
	g.Check(tb, "b_per_second")
	if !strings.HasPrefix(tb.skipped, "not measured: other processes used") {
		t.Fatalf("not skipped: %q", tb.skipped)
	}
	if got := buf.String(); !strings.HasPrefix(got, "bench b_per_second not measured: other processes used ") || strings.Count(got, "\n") != 1 {
		t.Fatalf("printed %q", got)
	}

	buf.Reset()
	tb = &skipTB{}
	Begin(tb, "a_s", "b_per_second")
	if tb.skipped == "" || strings.Count(buf.String(), " not measured: ") != 2 || !strings.Contains(buf.String(), "before it began") {
		t.Fatalf("Begin on a busy machine: skipped %q, printed %q", tb.skipped, buf.String())
	}
}
