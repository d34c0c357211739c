// Package quiet tells a benchmark whether it had the machine to itself.
//
// A figure timed on the wall clock (a latency, a rate, a ratio of two timed
// loops) is comparable with a quiet run's only when no one else took the
// CPUs meanwhile. A Watch measures, from /proc, how much of the machine's
// CPU time went to processes outside this process's own tree while it ran:
// the emulators, runners and builds a benchmark starts are its own, a
// compiler or a busy loop beside it are not.
//
// Linux only: where /proc is missing a Report is not Known and a benchmark
// prints its figures as before.
package quiet

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// MaxOthers is the share of the machine's CPU time other processes may use
// while a wall-clock figure is measured. Above it the figure is not
// comparable with a quiet run's: one other busy process on a two-CPU
// machine uses half of it.
const MaxOthers = 0.20

// proc is one process in a snapshot.
type proc struct {
	ppid  int
	start uint64 // clock ticks after boot: a pid with another start is another process
	ticks uint64 // user + system time of the process and its reaped children
}

// snapshot is the machine's CPU counters and every process at one moment.
type snapshot struct {
	at         time.Time
	busy, all  uint64 // ticks over every CPU: busy (not idle, not waiting on I/O) and all
	procs      map[int]proc
	self       int
	unreadable error
}

// Watch measures from its Start until each Report.
type Watch struct{ start snapshot }

// Start begins a Watch.
func Start() *Watch { return &Watch{start: take()} }

// Report is what other processes used of the machine since the Watch began.
type Report struct {
	Known  bool          // false where /proc could not be read
	Others float64       // their share of the machine's CPU time, 0 to 1
	Over   time.Duration // how long the Watch has run
	Why    string        // why not Known
}

// Busy reports whether others used more than MaxOthers.
func (r Report) Busy() bool { return r.Known && r.Others > MaxOthers }

func (r Report) String() string {
	if !r.Known {
		return "machine load unknown: " + r.Why
	}
	return fmt.Sprintf("other processes used %.0f %% of the machine's CPU time over %s", 100*r.Others, r.Over.Round(100*time.Millisecond))
}

// Report measures since the Watch began.
func (w *Watch) Report() Report { return compare(w.start, take()) }

// Probe watches for d and reports.
func Probe(d time.Duration) Report {
	w := Start()
	time.Sleep(d)
	return w.Report()
}

// compare is what other processes used between two snapshots: the machine's
// busy ticks less those of this process's tree. A descendant present at both
// counts its growth; one that appeared counts all it used; one reaped in
// between is in its parent's children's time.
func compare(a, b snapshot) Report {
	over := b.at.Sub(a.at)
	if a.unreadable != nil || b.unreadable != nil {
		return Report{Over: over, Why: errors.Join(a.unreadable, b.unreadable).Error()}
	}
	all := b.all - a.all
	if all == 0 || b.busy < a.busy {
		return Report{Over: over, Why: "the machine's CPU counters did not advance"}
	}
	var own uint64
	for pid := range tree(b.procs, b.self) {
		p := b.procs[pid]
		if q, ok := a.procs[pid]; ok && q.start == p.start && p.ticks >= q.ticks {
			own += p.ticks - q.ticks
		} else if !ok || q.start != p.start {
			own += p.ticks
		}
	}
	busy := b.busy - a.busy
	others := 0.0
	if busy > own {
		others = float64(busy-own) / float64(all)
	}
	return Report{Known: true, Others: others, Over: over}
}

// tree is root and every process descended from it.
func tree(procs map[int]proc, root int) map[int]bool {
	children := map[int][]int{}
	for pid, p := range procs {
		children[p.ppid] = append(children[p.ppid], pid)
	}
	in := map[int]bool{}
	todo := []int{root}
	for len(todo) > 0 {
		pid := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if in[pid] {
			continue
		}
		if _, ok := procs[pid]; !ok {
			continue
		}
		in[pid] = true
		todo = append(todo, children[pid]...)
	}
	return in
}

func take() snapshot {
	s := snapshot{at: time.Now(), self: os.Getpid(), procs: map[int]proc{}}
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		s.unreadable = err
		return s
	}
	if s.busy, s.all, err = parseCPU(stat); err != nil {
		s.unreadable = err
		return s
	}
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range paths {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			continue // it ended meanwhile
		}
		if p, err := parseProc(b); err == nil {
			s.procs[pid] = p
		}
	}
	if _, ok := s.procs[s.self]; !ok {
		s.unreadable = fmt.Errorf("/proc has no entry for this process (%d)", s.self)
	}
	return s
}

// parseCPU reads the first ("cpu") line of /proc/stat: user nice system
// idle iowait irq softirq steal (guest time is already in user).
func parseCPU(stat []byte) (busy, all uint64, err error) {
	line, _, _ := bytes.Cut(stat, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 9 || string(f[0]) != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: first line %q is not the cpu totals", line)
	}
	for i := 1; i <= 8; i++ {
		n, err := strconv.ParseUint(string(f[i]), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: field %d: %w", i, err)
		}
		all += n
		if i != 4 && i != 5 { // idle, iowait
			busy += n
		}
	}
	return busy, all, nil
}

// parseProc reads /proc/<pid>/stat. The command name may hold spaces and
// parentheses, so fields are counted from its last ')'.
func parseProc(b []byte) (proc, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return proc{}, errors.New("no ')' in /proc/<pid>/stat")
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state): field n is f[n-3].
	if len(f) < 20 {
		return proc{}, fmt.Errorf("/proc/<pid>/stat: %d fields after the name", len(f))
	}
	num := func(n int) (uint64, error) { return strconv.ParseUint(string(f[n-3]), 10, 64) }
	var p proc
	ppid, err := num(4)
	if err != nil {
		return proc{}, err
	}
	p.ppid = int(ppid)
	for _, n := range []int{14, 15, 16, 17} { // utime stime cutime cstime
		t, err := num(n)
		if err != nil {
			return proc{}, err
		}
		p.ticks += t
	}
	if p.start, err = num(22); err != nil {
		return proc{}, err
	}
	return p, nil
}
