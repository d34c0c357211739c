package reader

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// A plan's script: what each delivery does, and the steps the plan takes.
// Each event is one of
//
//	ok        the delivery settled the whole span
//	part:K    it settled its first K units, then failed
//	fail      it settled nothing
//	old:K     (before a step) the span's first K units are older than MaximumRecordAge
//
// and each step is written kind[lo,hi)#attempts, with the failure that
// followed: "split", "retry wait=F" (F is the backoff's exponent) or
// "spent".
func TestPlan_FailurePolicyAsSteps(t *testing.T) {
	errT := errors.New("target failed")
	cases := []struct {
		name    string
		n       int
		bisect  bool
		limit   int
		carried map[int]int // attempts carried for a single-unit span (or any span without bisect) starting here
		spans   []span      // nil: one span of the batch
		events  []string
		want    string
	}{
		{name: "every delivery succeeds", n: 4, limit: -1,
			events: []string{"ok"}, want: "deliver[0,4)#0 done"},
		{name: "retries count attempts and give up past the limit", n: 4, limit: 2,
			events: []string{"fail", "fail", "fail"},
			want:   "deliver[0,4)#0 retry wait=1 deliver[0,4)#1 retry wait=2 deliver[0,4)#2 spent giveup-retries[0,4)#3 done"},
		{name: "no retries at all: the first failure gives up", n: 2, limit: 0,
			events: []string{"fail"}, want: "deliver[0,2)#0 spent giveup-retries[0,2)#1 done"},
		{name: "unlimited retries never give up", n: 1, limit: -1,
			events: []string{"fail", "fail", "fail", "fail", "ok"},
			want:   "deliver[0,1)#0 retry wait=1 deliver[0,1)#1 retry wait=2 deliver[0,1)#2 retry wait=3 deliver[0,1)#3 retry wait=4 deliver[0,1)#4 done"},
		{name: "progress resets the backoff but not the attempts", n: 4, limit: 5,
			events: []string{"fail", "part:2", "fail", "ok"},
			want:   "deliver[0,4)#0 retry wait=1 deliver[0,4)#1 retry wait=1 deliver[2,4)#2 retry wait=2 deliver[2,4)#3 done"},
		{name: "bisect halves a failed span without counting an attempt", n: 4, bisect: true, limit: 1,
			events: []string{"fail", "ok", "fail", "ok", "ok"},
			want:   "deliver[0,4)#0 split deliver[0,2)#0 deliver[2,4)#0 split deliver[2,3)#0 deliver[3,4)#0 done"},
		{name: "bisect down to the failing unit, which alone counts attempts", n: 4, bisect: true, limit: 1,
			events: []string{"fail", "fail", "ok", "fail", "fail", "ok"},
			want:   "deliver[0,4)#0 split deliver[0,2)#0 split deliver[0,1)#0 deliver[1,2)#0 retry wait=1 deliver[1,2)#1 spent giveup-retries[1,2)#2 deliver[2,4)#0 done"},
		{name: "bisect after partial progress halves the rest", n: 5, bisect: true, limit: -1,
			events: []string{"part:1", "ok", "ok"},
			want:   "deliver[0,5)#0 split deliver[1,3)#0 deliver[3,5)#0 done"},
		{name: "a carried count past the limit gives up before any delivery", n: 3, limit: 2, carried: map[int]int{0: 3},
			events: nil, want: "giveup-retries[0,3)#3 done"},
		{name: "a carried count goes on counting", n: 3, limit: 2, carried: map[int]int{0: 2},
			events: []string{"fail"}, want: "deliver[0,3)#2 spent giveup-retries[0,3)#3 done"},
		{name: "carried counts apply to single units only when bisecting", n: 2, bisect: true, limit: 0, carried: map[int]int{0: 1},
			events: []string{"fail", "ok"}, want: "deliver[0,2)#0 split giveup-retries[0,1)#1 deliver[1,2)#0 done"},
		{name: "the carried span first, what was read after it next", n: 4, limit: 3, carried: map[int]int{0: 1},
			spans:  []span{{0, 2}, {2, 4}},
			events: []string{"ok", "ok"}, want: "deliver[0,2)#1 deliver[2,4)#0 done"},
		{name: "old units are given up before a delivery, and the rest delivered", n: 4, limit: -1,
			events: []string{"old:2", "ok"}, want: "giveup-age[0,2)#0 deliver[2,4)#0 done"},
		{name: "an old span past a failure is given up with its attempts", n: 3, limit: -1,
			events: []string{"fail", "old:3"}, want: "deliver[0,3)#0 retry wait=1 giveup-age[0,3)#1 done"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			carried := func(s span) (int, error) {
				if c.bisect && s.hi-s.lo > 1 {
					return 0, nil
				}
				if n := c.carried[s.lo]; n > 0 {
					return n, errT
				}
				return 0, nil
			}
			spans := c.spans
			if spans == nil {
				spans = []span{{0, c.n}}
			}
			p := newPlan(c.bisect, c.limit, carried, spans...)
			events := c.events
			var got []string
			for steps := 0; ; steps++ {
				if steps > 50 {
					t.Fatalf("no end: %s", strings.Join(got, " "))
				}
				old := 0
				if len(events) > 0 && strings.HasPrefix(events[0], "old:") {
					fmt.Sscanf(events[0], "old:%d", &old)
					events = events[1:]
				}
				st := p.next(func(s span) int { return min(old, s.hi-s.lo) })
				name := map[stepKind]string{stepDone: "done", stepDeliver: "deliver", stepGiveUpAge: "giveup-age", stepGiveUpRetries: "giveup-retries"}[st.kind]
				if st.kind == stepDone {
					got = append(got, name)
					break
				}
				got = append(got, fmt.Sprintf("%s[%d,%d)#%d", name, st.span.lo, st.span.hi, st.attempts))
				if st.attempts > 0 && st.lastErr == nil {
					t.Errorf("%s: attempts without their last error", got[len(got)-1])
				}
				if st.kind != stepDeliver {
					p.gaveUp(st.span.hi - st.span.lo)
					continue
				}
				if len(events) == 0 {
					t.Fatalf("no event left for %s (so far: %s)", got[len(got)-1], strings.Join(got, " "))
				}
				ev := events[0]
				events = events[1:]
				k := 0
				switch {
				case ev == "ok":
					k = st.span.hi - st.span.lo
				case ev == "fail":
				case strings.HasPrefix(ev, "part:"):
					fmt.Sscanf(ev, "part:%d", &k)
				default:
					t.Fatalf("event %q", ev)
				}
				p.delivered(k)
				if k == st.span.hi-st.span.lo {
					continue
				}
				f := p.failed(errT)
				switch {
				case f.split:
					got = append(got, "split")
				case f.spent:
					got = append(got, "spent")
				default:
					got = append(got, fmt.Sprintf("retry wait=%d", f.fails))
				}
			}
			if g := strings.Join(got, " "); g != c.want {
				t.Errorf("\n got %s\nwant %s", g, c.want)
			}
			if len(events) > 0 {
				t.Errorf("events left over: %v", events)
			}
		})
	}
}

func TestPlan_TroubledFromTheFirstFailureUntilTheCarryingSpanSettles(t *testing.T) {
	p := newPlan(true, -1, func(span) (int, error) { return 0, nil }, span{0, 4})
	none := func(span) int { return 0 }
	p.next(none)
	if p.troubled() {
		t.Fatal("troubled before any failure")
	}
	p.failed(errors.New("x")) // split: [0,2) in hand, [2,4) waiting
	if !p.troubled() {
		t.Fatal("not troubled after a split")
	}
	p.next(none)
	p.delivered(2)
	if !p.troubled() {
		t.Fatal("not troubled with a half still waiting")
	}
	p.next(none)
	p.delivered(2)
	if st := p.next(none); st.kind != stepDone || p.troubled() {
		t.Fatalf("after every unit settled: %+v, troubled %v", st, p.troubled())
	}
}
