package sim

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shardloop/shardloop/pkg/lease"
)

// tracer keeps the world's event trace: who took what, who delivered
// what, when. Events are kept cheaply (no formatting) and printed only for
// a failing world. Owner ids (random) are printed as stable aliases:
// "<deployment>.<n>" for loops in order of first appearance, "/r<n>" for
// each of a loop's runs, so two replays of a seed print alike.
type tracer struct {
	began time.Time

	// budget, when set, is called with the number of events after each
	// add (Budgets.Events).
	budget func(n int)

	mu     sync.Mutex
	events []event
	alias  map[string]string
	nLoops map[string]int // per deployment
	nRuns  map[string]int // per loop alias
	owners map[string]string
}

// event is one line of the trace.
type event struct {
	at    time.Duration
	shard string // "" for the world's own events; "<inc>/<shard id>" otherwise
	who   string // a raw owner (aliased when printed) or an actor's name
	what  string
	args  []any
}

func newTracer(began time.Time) *tracer {
	return &tracer{began: began, alias: map[string]string{}, nLoops: map[string]int{}, nRuns: map[string]int{}, owners: map[string]string{}}
}

// add records an event now. who may be an owner id, run owner id or a
// name; args are formatted into what (fmt verbs) only when printed.
func (t *tracer) add(shard, who, what string, args ...any) {
	t.mu.Lock()
	t.events = append(t.events, event{at: time.Since(t.began), shard: shard, who: who, what: what, args: args})
	n := len(t.events)
	t.mu.Unlock()
	if t.budget != nil {
		t.budget(n)
	}
}

// owner notes the deployment of an owner (a loop's, or one of its runs')
// at its first take, and gives it its alias then.
func (t *tracer) owner(dep, owner string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	loop := lease.LoopOwner(owner)
	if _, ok := t.owners[loop]; !ok {
		t.owners[loop] = dep
	}
	t.name(loop)
	t.name(owner)
}

// name returns the alias of who (an owner or run owner), assigning one.
func (t *tracer) name(who string) string {
	if who == "" {
		return "-"
	}
	if a, ok := t.alias[who]; ok {
		return a
	}
	loop, run, isRun := strings.Cut(who, lease.RunSeparator)
	la, ok := t.alias[loop]
	if !ok {
		dep, known := t.owners[loop]
		if !known {
			t.alias[who] = who
			return who
		}
		t.nLoops[dep]++
		la = dep + "." + strconv.Itoa(t.nLoops[dep])
		t.alias[loop] = la
	}
	if !isRun {
		return la
	}
	_ = run
	t.nRuns[la]++
	a := la + "/r" + strconv.Itoa(t.nRuns[la])
	t.alias[who] = a
	return a
}

// lines formats the trace up to until; keep, when set, selects the events
// kept (the world's own events are always kept); at most limit lines, the
// last ones.
func (t *tracer) lines(keep func(shard string) bool, until time.Duration, limit int) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for _, e := range t.events {
		if e.at > until {
			break
		}
		if e.shard != "" && keep != nil && !keep(e.shard) {
			continue
		}
		what := e.what
		if len(e.args) > 0 {
			what = fmt.Sprintf(e.what, e.args...)
		}
		sh := e.shard
		if sh == "" {
			sh = "world"
		}
		out = append(out, fmt.Sprintf("%9s %-22s %-12s %s", fmtDur(e.at), sh, t.name(e.who), what))
	}
	if limit > 0 && len(out) > limit {
		skipped := len(out) - limit
		out = append([]string{fmt.Sprintf("… %d earlier events", skipped)}, out[skipped:]...)
	}
	return out
}

// fmtDur prints a duration into the world as m:ss.mmm.
func fmtDur(d time.Duration) string {
	ms := d.Milliseconds()
	return fmt.Sprintf("%d:%02d.%03d", ms/60000, ms/1000%60, ms%1000)
}

// known returns the alias of a loop owner already taken a row for, or ""
// (never its raw id, which differs from run to run).
func (t *tracer) known(owner string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.owners[lease.LoopOwner(owner)]; !ok {
		return ""
	}
	return t.name(owner)
}
