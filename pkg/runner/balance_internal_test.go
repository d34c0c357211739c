package runner

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/shards"
)

func TestFairShare_DividesEvenlyWithTheFirstRunnersByIDTakingTheRest(t *testing.T) {
	live := []string{"a", "b", "c", "d", "e"}
	cases := []struct {
		n    int
		live []string
		want []int // per runner of live
	}{
		{12, live[:4], []int{3, 3, 3, 3}},
		{12, live[:3], []int{4, 4, 4}},
		{12, live[:2], []int{6, 6}},
		{12, live, []int{3, 3, 2, 2, 2}},
		{3, live, []int{1, 1, 1, 0, 0}},
		{0, live[:2], []int{0, 0}},
		{7, live[:1], []int{7}},
	}
	for _, c := range cases {
		var got []int
		sum := 0
		for _, id := range c.live {
			s := fairShare(id, c.live, c.n)
			got = append(got, s)
			sum += s
		}
		if !slices.Equal(got, c.want) || sum != c.n {
			t.Errorf("%d shards over %v: shares %v (sum %d), want %v", c.n, c.live, got, sum, c.want)
		}
	}
	if got := fairShare("z", live, 12); got != 0 {
		t.Errorf("a runner not among the live ones: share %d, want 0", got)
	}
	if got := fairShare("a", nil, 5); got != 5 {
		t.Errorf("no view of the others: share %d, want all 5", got)
	}
}

func held(owner string) shards.Reason { return shards.Reason{Kind: shards.Held, Owner: owner} }

func owner(runner string) string { return lease.RunnerOwner("s-1234", runner) + "/run" }

func decision(leasable []string, notLeasable map[string]shards.Reason) shards.Decision {
	d := shards.Decision{NotLeasable: notLeasable}
	for _, id := range leasable {
		d.Leasable = append(d.Leasable, shards.Shard{ID: id})
	}
	return d
}

func ids(ss []shards.Shard) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.ID)
	}
	return out
}

func TestClaim_TakesUpToTheShareAndWhatWaitedPastTheGrace(t *testing.T) {
	t0 := time.UnixMilli(1_800_000_000_000)
	const grace = 5 * time.Second
	live := []string{"a", "b", "c"}
	gone := map[string]time.Time{"gone": t0}
	cases := []struct {
		name  string
		self  string
		d     shards.Decision
		gone  map[string]time.Time
		since map[string]time.Time
		now   time.Time
		want  []string
	}{
		{"AloneTakesEverything", "a", decision([]string{"s1", "s2", "s3"}, nil), nil, nil, t0, []string{"s1", "s2", "s3"}},
		{"ThreeRunnersFromNothingTakeAThirdEachDealtByRank", "b",
			decision([]string{"s1", "s2", "s3", "s4", "s5", "s6"}, nil), nil, nil, t0, []string{"s3", "s4"}},
		{"TheLastRunnerByRankTakesTheLastThird", "c",
			decision([]string{"s1", "s2", "s3", "s4", "s5", "s6"}, nil), nil, nil, t0, []string{"s5", "s6"}},
		{"ARunnerAtItsShareTakesNoPartOfTheDeal", "b",
			decision([]string{"s4", "s5", "s6"}, map[string]shards.Reason{"s1": held(owner("a")), "s2": held(owner("a")), "s3": held(owner("b")), "s7": held(owner("b"))}),
			nil, nil, t0, nil},
		{"TheDealSkipsWhatTheRunnersBeforeHaveRoomFor", "c",
			decision([]string{"s4", "s5", "s6"}, map[string]shards.Reason{"s1": held(owner("a")), "s2": held(owner("a")), "s3": held(owner("b")), "s7": held(owner("b"))}),
			nil, nil, t0, []string{"s5", "s6"}}, // 7 in play: a 3 (room 1), b 2 (room 0), c 2
		{"AtItsShareDeclines", "a",
			decision([]string{"s5"}, map[string]shards.Reason{"s1": held(owner("a")), "s2": held(owner("a")), "s3": held(owner("b")), "s4": held(owner("c")), "s6": held(owner("c"))}),
			nil, nil, t0, nil},
		{"BelowItsShareTakesWhatWasReleased", "b",
			decision([]string{"s5"}, map[string]shards.Reason{"s1": held(owner("a")), "s2": held(owner("a")), "s3": held(owner("b")), "s4": held(owner("c")), "s6": held(owner("c"))}),
			nil, nil, t0, []string{"s5"}},
		{"ShardsOfARunnerNeverSeenAreOutOfPlay", "b",
			decision([]string{"s5", "s6"}, map[string]shards.Reason{"s1": held(owner("a")), "s2": held(owner("gone")), "s3": held(owner("gone")), "s4": held("a-lambda-loop")}),
			nil, nil, t0, []string{"s5"}},
		// a and b share 6 shards: the gone runner's 2 are in play, a holds
		// 1, so a's share is 3 and it takes its 2 of the leasable ones.
		{"ShardsOfARunnerGoneAreInPlayForTheSurvivors", "a",
			decision([]string{"s5", "s6"}, map[string]shards.Reason{"s1": held(owner("a")), "s2": held(owner("gone")), "s3": held(owner("gone")), "s4": held("a-lambda-loop")}),
			gone, nil, t0, []string{"s5", "s6"}},
		{"DeclinedPastTheGraceIsTakenAnyway", "a",
			decision([]string{"s5"}, map[string]shards.Reason{"s1": held(owner("a")), "s2": held(owner("a")), "s3": held(owner("b")), "s4": held(owner("c")), "s6": held(owner("c"))}),
			nil, map[string]time.Time{"s5": t0}, t0.Add(grace), []string{"s5"}},
		{"DeclinedWithinTheGraceWaits", "a",
			decision([]string{"s5"}, map[string]shards.Reason{"s1": held(owner("a")), "s2": held(owner("a")), "s3": held(owner("b")), "s4": held(owner("c")), "s6": held(owner("c"))}),
			nil, map[string]time.Time{"s5": t0}, t0.Add(grace - time.Millisecond), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			since := c.since
			if since == nil {
				since = map[string]time.Time{}
			}
			l := live
			switch c.name {
			case "AloneTakesEverything":
				l = []string{"a"}
			case "ShardsOfARunnerGoneAreInPlayForTheSurvivors":
				l = []string{"a", "b"}
			}
			got := ids(claim(c.self, l, c.gone, c.d, since, c.now, grace))
			if !slices.Equal(got, c.want) {
				t.Fatalf("claim = %v, want %v", got, c.want)
			}
			for _, id := range got {
				if _, ok := since[id]; ok {
					t.Errorf("%s taken but still recorded as declined", id)
				}
			}
			for _, s := range c.d.Leasable {
				if !slices.Contains(got, s.ID) {
					if _, ok := since[s.ID]; !ok {
						t.Errorf("%s declined without its time recorded", s.ID)
					}
				}
			}
		})
	}
}

func TestClaim_ForgetsDeclinedShardsNoLongerLeasable(t *testing.T) {
	since := map[string]time.Time{"s1": time.Unix(1, 0), "s9": time.Unix(1, 0)}
	d := decision([]string{"s1"}, map[string]shards.Reason{"s2": held(owner("a"))})
	claim("a", []string{"a"}, nil, d, since, time.Unix(2, 0), time.Hour)
	if _, ok := since["s9"]; ok || len(since) != 0 {
		t.Fatalf("since = %v, want s1 taken and s9 forgotten", since)
	}
}

func TestToGive_HandsOverTheExcess(t *testing.T) {
	cases := []struct {
		held  []string
		share int
		want  []string
	}{
		{[]string{"s3", "s1", "s2", "s4"}, 3, []string{"s4"}},
		{[]string{"s1", "s2"}, 3, nil},
		{[]string{"s1", "s2"}, 2, nil},
		{[]string{"s1", "s2", "s3"}, 0, []string{"s1", "s2", "s3"}},
	}
	for _, c := range cases {
		if got := toGive(c.held, c.share); !slices.Equal(got, c.want) {
			t.Errorf("toGive(%v, %d) = %v, want %v", c.held, c.share, got, c.want)
		}
	}
}

func TestHandoffDue_WhenAnotherRunnerReportsMoreThanItsShare(t *testing.T) {
	live := []string{"a", "b", "c", "d"}
	for _, c := range []struct {
		leases map[string]int
		want   bool
	}{
		{map[string]int{"a": 4, "b": 4, "c": 4, "d": 0}, true}, // d just joined
		{map[string]int{"a": 3, "b": 3, "c": 3, "d": 3}, false},
		{map[string]int{"a": 3, "b": 3, "c": 3}, false}, // d's own count is not looked at
		{map[string]int{"a": 6, "b": 6}, true},
	} {
		if got := handoffDue("d", live, c.leases, 12); got != c.want {
			t.Errorf("handoffDue with %v = %v, want %v", c.leases, got, c.want)
		}
	}
}

func TestNewRunnerID_IsAValidIDFromAnyHost(t *testing.T) {
	for _, host := range []string{"web-3.example.com", "", "host with spaces/and@signs", fmt.Sprint(make([]byte, 100))} {
		id := NewRunnerID(host, 4242)
		if err := lease.CheckRunnerID(id); err != nil {
			t.Errorf("NewRunnerID(%q) = %q: %v", host, id, err)
		}
	}
	if a, b := NewRunnerID("h", 1), NewRunnerID("h", 1); a == b {
		t.Errorf("two ids for one host and pid are both %q", a)
	}
}
