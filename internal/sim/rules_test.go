package sim

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shardloop/shardloop/pkg/lease"
)

// TestChecker_WhichGenerationARowReadsUnder: the checker judges each
// shard by the rule of the generation its row reads under. A generation
// that keeps a row as it is (a sequence start of another shard) leaves it
// under the one that last changed it; one superseded that way before its
// start reached the row is void for it, unless its start lands after all;
// a keeping generation that re-opens the row (its parent re-opened) puts
// it under the start written; a future timestamp start recorded on a shard
// its listing did not hold puts that shard under it.
func TestChecker_WhichGenerationARowReadsUnder(t *testing.T) {
	gen := func(order int64, start string, ids ...string) lease.Generation {
		return lease.Generation{ID: fmt.Sprintf("g%d", order), Start: start, Tip: "timestamp:1000000", Order: order, Shards: ids}
	}
	existed := map[string]rowAt{"A": {existed: true}, "B": {existed: true}}
	set := func(c *checker, order int64, pos string, clear, ifAbsent bool) {
		c.setStart("A", lease.Start{Position: pos, Generation: fmt.Sprintf("g%d", order), Order: order, ClearCheckpoint: clear, IfAbsent: ifAbsent}, true, lease.Lease{})
	}
	horizon := func(c *checker) { c.generation(gen(1, "horizon", "A", "B"), existed) }
	keeps := func(c *checker) { c.generation(gen(2, "sequence:B:5", "A", "B"), existed) }
	for _, tc := range []struct {
		name  string
		steps []func(*checker)
		order int64  // of the rule A reads under; 0: none (every record)
		desc  string // in the rule's description
	}{
		{"AppliedGeneration", []func(*checker){horizon, func(c *checker) { set(c, 1, "horizon", true, false) }}, 1, "horizon"},
		{"KeptByANewerOneReadsUnderTheOneThatChangedIt", []func(*checker){horizon, func(c *checker) { set(c, 1, "horizon", true, false) }, keeps}, 1, "horizon"},
		{"SupersededBeforeItReachedTheRowIsVoid", []func(*checker){horizon, keeps}, 0, ""},
		{"AVoidStartThatLandsAfterAllCounts", []func(*checker){horizon, keeps, func(c *checker) { set(c, 1, "horizon", true, false) }}, 1, "horizon"},
		{"ReopenedByAKeepingGeneration", []func(*checker){horizon, keeps, func(c *checker) { set(c, 2, "horizon", true, false) }}, 2, "re-opened"},
		{"ReopenedAtATimestamp", []func(*checker){horizon, keeps, func(c *checker) { set(c, 2, "timestamp:5000", true, false) }}, 2, "re-opened, its parent re-opened, at timestamp:5000"},
		{"LateShardOfAFutureStart", []func(*checker){
			func(c *checker) { c.generation(gen(1, "timestamp:2000000", "B"), existed) },
			func(c *checker) { set(c, 1, "timestamp:2000000", false, true) },
		}, 1, "created after its listing"},
		// A coordinator that read the record before a newer one was
		// written records the older one's late start after it: the newer
		// generation, which listed the shard, still governs it.
		{"LateStartOfAnOlderGenerationAfterANewerOne", []func(*checker){
			func(c *checker) { c.generation(gen(1, "timestamp:2000000", "B"), existed) },
			func(c *checker) { c.generation(gen(2, "horizon", "A", "B"), existed) },
			func(c *checker) { set(c, 1, "timestamp:2000000", false, true) },
		}, 2, "horizon"},
		{"NewerStartLandsAfterTheOlderLateOne", []func(*checker){
			func(c *checker) { c.generation(gen(1, "timestamp:2000000", "B"), existed) },
			func(c *checker) { c.generation(gen(2, "horizon", "A", "B"), existed) },
			func(c *checker) { set(c, 1, "timestamp:2000000", false, true) },
			func(c *checker) { set(c, 2, "horizon", true, false) },
		}, 2, "horizon"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newChecker(newTracer(time.Now()))
			for _, step := range tc.steps {
				step(c)
			}
			r := cfgRule(c.shard(shardKey{c.cur, "A"}))
			switch {
			case tc.order == 0 && r != nil:
				t.Fatalf("A reads under %+v, want no generation's rule (every record)", *r)
			case tc.order != 0 && (r == nil || r.order != tc.order || !strings.Contains(r.desc, tc.desc)):
				t.Fatalf("A reads under %+v, want generation %d's rule (%q)", r, tc.order, tc.desc)
			}
		})
	}
}
