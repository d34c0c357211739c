package sim

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
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
		// A newer generation whose listing missed the shard (a split
		// UPDATING) owes it from its first record, as a child created
		// after it began: the older late start may skip records it owes,
		// so its coordinators start the row again (reopenMissedChildren).
		{"MissedByANewerGenerationOwesFromItsFirstRecord", []func(*checker){
			func(c *checker) { c.generation(gen(1, "timestamp:2000000", "B"), existed) },
			func(c *checker) { set(c, 1, "timestamp:2000000", false, true) },
			func(c *checker) { c.generation(gen(2, "horizon", "B"), existed) },
		}, 2, "from its first record"},
		{"OlderLateStartLandsAfterANewerGenerationMissedTheShard", []func(*checker){
			func(c *checker) { c.generation(gen(1, "timestamp:2000000", "B"), existed) },
			func(c *checker) { c.generation(gen(2, "horizon", "B"), existed) },
			func(c *checker) { set(c, 1, "timestamp:2000000", false, true) },
		}, 2, "from its first record"},
		{"MissedByANewerLateGenerationOwesFromItsStart", []func(*checker){
			func(c *checker) { c.generation(gen(1, "timestamp:4000000", "B"), existed) },
			func(c *checker) { set(c, 1, "timestamp:4000000", false, true) },
			func(c *checker) { c.generation(gen(2, "timestamp:3000000", "B"), existed) },
		}, 2, "created after its listing"},
		// An older start no later than where the newer generation opens a
		// new shard owes all the newer one owes: the row stays as it is.
		{"MissedByANewerGenerationAfterAnEarlierStart", []func(*checker){
			func(c *checker) { c.generation(gen(1, "timestamp:2000000", "B"), existed) },
			func(c *checker) { set(c, 1, "timestamp:2000000", false, true) },
			func(c *checker) { c.generation(gen(2, "timestamp:3000000", "B"), existed) },
		}, 1, "created after its listing"},
		// A coordinator of an older generation that read the record before
		// a newer one was written re-opens a shard its listing missed
		// (reopenMissedChildren) after the newer one, which listed the
		// shard, was recorded (world 1,000,396): the newer one governs the
		// shard, before its own start lands and after.
		{"OlderReopeningLandsAfterANewerOneListedTheShard", []func(*checker){
			func(c *checker) { c.generation(gen(1, "sequence:B:5", "B"), existed) },
			func(c *checker) { c.generation(gen(2, "timestamp:3000000", "A", "B"), existed) },
			func(c *checker) { set(c, 1, "horizon", true, false) },
		}, 2, ""},
		// A void start that lands after a newer generation that changes
		// the row was recorded leaves that one deciding, before its own
		// start lands and after (world 831, where the checker judged the
		// row by the void one's rule to the end).
		{"AVoidStartLandingAfterANewerOneWasRecorded", []func(*checker){
			horizon, keeps,
			func(c *checker) { c.generation(gen(3, "timestamp:3000000", "A", "B"), existed) },
			func(c *checker) { set(c, 1, "horizon", true, false) },
		}, 3, ""},
		{"TheNewerStartLandsAfterTheVoidOne", []func(*checker){
			horizon, keeps,
			func(c *checker) { c.generation(gen(3, "timestamp:3000000", "A", "B"), existed) },
			func(c *checker) { set(c, 1, "horizon", true, false) },
			func(c *checker) { set(c, 3, "timestamp:3000000", true, false) },
		}, 3, ""},
		{"NewerStartLandsAfterTheOlderReopening", []func(*checker){
			func(c *checker) { c.generation(gen(1, "sequence:B:5", "B"), existed) },
			func(c *checker) { c.generation(gen(2, "timestamp:3000000", "A", "B"), existed) },
			func(c *checker) { set(c, 1, "horizon", true, false) },
			func(c *checker) { set(c, 2, "timestamp:3000000", true, false) },
		}, 2, ""},
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

// TestChecker_ARunTakenWhileAGenerationIsOnItsWay: a child created under
// generation 1 reads under 2 once 2's start reached its parent. When
// generation 3 is recorded, a run that takes the child before 3's start
// reaches it reads under 2 still: not under 1 (the one it was created
// under), and not under 3 when 3's start reached the parent first (world
// 1008896, where the checker judged such a run's deliveries older than
// the loop's earlier ones).
func TestChecker_ARunTakenWhileAGenerationIsOnItsWay(t *testing.T) {
	gen := func(order int64, start string, ids ...string) lease.Generation {
		return lease.Generation{ID: fmt.Sprintf("g%d", order), Start: start, Tip: "timestamp:1000000", Order: order, Shards: ids}
	}
	set := func(c *checker, id string, order int64, pos string) {
		c.setStart(id, lease.Start{Position: pos, Generation: fmt.Sprintf("g%d", order), Order: order, ClearCheckpoint: true}, true, lease.Lease{})
	}
	rows := map[string]rowAt{"P": {existed: true}, "C": {existed: true}}
	for _, tc := range []struct {
		name        string
		parentFirst bool // generation 3's start reached the parent before the take
		want        int64
	}{
		{"BeforeItReachedEither", false, 2},
		{"AfterItReachedTheParent", true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newChecker(newTracer(time.Now()))
			c.generation(gen(1, "horizon", "P"), rows)
			set(c, "P", 1, "horizon")
			c.shardShape(c.cur, "C", []string{"P"}, false)
			c.generation(gen(2, "timestamp:5000", "P"), rows)
			set(c, "P", 2, "timestamp:5000")
			c.took("run1", "loop/r1", lease.Lease{ShardID: "C"})
			if got := c.runs[runShard{"run1", shardKey{c.cur, "C"}}].order; got != 2 {
				t.Fatalf("before generation 3, a run of C reads under %d, want 2", got)
			}
			c.generation(gen(3, "timestamp:4000", "P", "C"), rows)
			if tc.parentFirst {
				set(c, "P", 3, "timestamp:4000")
			}
			c.took("run2", "loop/r2", lease.Lease{ShardID: "C"})
			if got := c.runs[runShard{"run2", shardKey{c.cur, "C"}}].order; got != tc.want {
				t.Fatalf("a run of C taken while generation 3 is on its way reads under %d, want %d", got, tc.want)
			}
			set(c, "C", 3, "timestamp:4000")
			c.took("run3", "loop/r3", lease.Lease{ShardID: "C"})
			if got := c.runs[runShard{"run3", shardKey{c.cur, "C"}}].order; got != 3 {
				t.Fatalf("once generation 3 reached C, a run reads under %d, want 3", got)
			}
		})
	}
}

// TestChecker_AMissedRowListedByANewerGenerationBeforeItsReopeningLanded:
// world 2141. Generation 2's listing missed a child a run had taken under
// generation 1, and re-opened its parent; the coordinator re-opens the
// child too (reopenMissedChildren), and until that start lands a run of the
// child reads under 1. Generation 3 then lists the child before generation
// 2's start reached it: until 3's start lands, a run still reads under 1,
// the row's, not under 2, which only its parent's row carries.
func TestChecker_AMissedRowListedByANewerGenerationBeforeItsReopeningLanded(t *testing.T) {
	gen := func(order int64, ids ...string) lease.Generation {
		return lease.Generation{ID: fmt.Sprintf("g%d", order), Start: "horizon", Tip: "timestamp:1000000", Order: order, Shards: ids}
	}
	set := func(c *checker, id string, order int64) {
		c.setStart(id, lease.Start{Position: "horizon", Generation: fmt.Sprintf("g%d", order), Order: order, ClearCheckpoint: true}, true, lease.Lease{})
	}
	orderOf := func(c *checker, run string) int64 {
		c.took(run, "loop/"+run, lease.Lease{ShardID: "C"})
		return c.runs[runShard{run, shardKey{c.cur, "C"}}].order
	}
	rows := map[string]rowAt{"P": {existed: true}, "C": {existed: true}}
	c := newChecker(newTracer(time.Now()))
	c.generation(gen(1, "P", "C"), rows)
	c.shardShape(c.cur, "C", []string{"P"}, false)
	set(c, "P", 1)
	set(c, "C", 1)
	if got := orderOf(c, "r1"); got != 1 {
		t.Fatalf("a run of the child under generation 1 reads under %d, want 1", got)
	}
	c.generation(gen(2, "P"), rows) // its listing missed the child
	set(c, "P", 2)
	if got := orderOf(c, "r2"); got != 1 {
		t.Fatalf("a run of the missed child before its re-opening reads under %d, want 1", got)
	}
	c.generation(gen(3, "P", "C"), rows)
	if got := orderOf(c, "r3"); got != 1 {
		t.Fatalf("a run of the child before generation 3's start reached it reads under %d, want 1 (its row's)", got)
	}
	set(c, "P", 3)
	set(c, "C", 3)
	if got := orderOf(c, "r4"); got != 3 {
		t.Fatalf("once generation 3 reached the child, a run reads under %d, want 3", got)
	}
}

// TestChecker_AKeptRowWhoseAncestorASupersededGenerationReopened: world
// 1,006,874. Generation 2 re-opens the parent and is superseded before it
// reaches the child by generation 3, which keeps rows as they are (a
// sequence start of another shard). The coordinator re-opens the child at
// the parent's start (reopenedParent); until that start lands, a run of the
// child reads on under what governed its row before generation 2.
func TestChecker_AKeptRowWhoseAncestorASupersededGenerationReopened(t *testing.T) {
	rows := map[string]rowAt{"G": {existed: true}, "P": {existed: true}, "C": {existed: true}}
	c := newChecker(newTracer(time.Now()))
	c.generation(keptGen(1, "horizon", "G", "P", "C"), rows)
	c.shardShape(c.cur, "P", []string{"G"}, true)
	c.shardShape(c.cur, "C", []string{"P"}, false)
	for _, id := range []string{"G", "P", "C"} {
		setHorizon(c, id, 1)
	}
	c.generation(keptGen(2, "horizon", "G", "P", "C"), rows)
	setHorizon(c, "G", 2) // the grandparent re-opened; generation 2 goes no further
	c.generation(keptGen(3, "sequence:X:49000000000000000000000000000000000000000000000000000001", "G", "P", "C"), rows)
	if got := runOrderOnC(c, "r1"); got != 1 {
		t.Fatalf("a run of the child before its re-opening reads under %d, want 1", got)
	}
	setHorizon(c, "P", 3)
	setHorizon(c, "C", 3) // reopenedParent, generation 3
	if got := runOrderOnC(c, "r2"); got != 3 {
		t.Fatalf("once re-opened, a run of the child reads under %d, want 3", got)
	}
}

// TestChecker_ARunTakenBeforeASupersededStartReachedAnAncestor: world 437
// (a Supersede whose newer start's passes wake just after the older
// one's). Generation 2 re-opens the parent and is superseded by 3, which
// keeps rows as they are, before either reaches a row. A run of the child
// taken then reads under 3; 2's start then reaches the parent after all,
// before 3's keep. From then on, until the coordinator re-opens the child
// (reopenedParent), the run's deliveries count as a run taken now would
// read: under generation 1, not under 3, which would owe the parent's
// records again before the child's.
func TestChecker_ARunTakenBeforeASupersededStartReachedAnAncestor(t *testing.T) {
	rows := map[string]rowAt{"P": {existed: true}, "C": {existed: true}}
	c := parentAndChild(t, "P", "P", "C")
	setHorizon(c, "C", 1)
	endShard(c, "P")
	c.generation(keptGen(2, "horizon", "P", "C"), rows)
	c.generation(keptGen(3, seqOfX, "P", "C"), rows)
	if got := runOrderOnC(c, "r1"); got != 3 {
		t.Fatalf("a run of the child taken before the superseded start landed reads under %d, want 3 (kept)", got)
	}
	take := c.runs[runShard{"r1", shardKey{c.cur, "C"}}]
	s := c.sh[shardKey{c.cur, "C"}]
	if o, reopening := c.deliveryOrder(s, take); o != 3 || reopening {
		t.Fatalf("before the parent is re-opened, the run delivers under %d (re-opening %v), want 3", o, reopening)
	}
	setHorizon(c, "P", 2) // the superseded start lands after all
	if o, reopening := c.deliveryOrder(s, take); o != 1 || !reopening {
		t.Fatalf("once the parent is re-opened, the run delivers under %d (re-opening %v), want 1 until the child is re-opened", o, reopening)
	}
}

// TestChecker_AKeptRowWhoseReopenedParentWasReadToItsEnd is world
// 1,004,160 of seeds 1,000,001–1,010,000 (2026-12-07, with late writes).
// Generation 2 re-opens the parent and is superseded before it reaches the
// child by generation 3, which keeps rows as they are. The coordinator
// re-opens the child only while the parent is still to be read
// (reopenedParent): once the parent is read to its end, a run of the
// child, kept, reads under generation 3.
func TestChecker_AKeptRowWhoseReopenedParentWasReadToItsEnd(t *testing.T) {
	rows := map[string]rowAt{"P": {existed: true}, "C": {existed: true}}
	c := parentAndChild(t, "P", "P", "C")
	setHorizon(c, "C", 1)
	c.generation(keptGen(2, "horizon", "P", "C"), rows)
	setHorizon(c, "P", 2) // the parent re-opened; generation 2 goes no further
	c.generation(keptGen(3, seqOfX, "P", "C"), rows)
	underTheOlderUntilTheParentEnds(t, c, "P")
}

// seqOfX is a sequence start naming a shard X the tests do not list.
const seqOfX = "sequence:X:49000000000000000000000000000000000000000000000000000001"

// parentAndChild is a checker with a closed shard parent and its child C,
// generation 1 (horizon) recorded over ids and landed on parent.
func parentAndChild(t *testing.T, parent string, ids ...string) *checker {
	t.Helper()
	c := newChecker(newTracer(time.Now()))
	rows := map[string]rowAt{}
	for _, id := range ids {
		rows[id] = rowAt{existed: true}
	}
	c.generation(keptGen(1, "horizon", ids...), rows)
	c.shardShape(c.cur, parent, nil, true)
	c.shardShape(c.cur, "C", []string{parent}, false)
	setHorizon(c, parent, 1)
	return c
}

// underTheOlderUntilTheParentEnds: a run of C, kept by generation 3 while
// a superseded generation re-opened parent, reads under generation 1 while
// parent is still to be read (its re-opening may come), under 3 once it
// was read to its end.
func underTheOlderUntilTheParentEnds(t *testing.T, c *checker, parent string) {
	t.Helper()
	if got := runOrderOnC(c, "r1"); got != 1 {
		t.Fatalf("a run of the child while its parent is read again reads under %d, want 1 (its re-opening may come)", got)
	}
	endShard(c, parent)
	if got := runOrderOnC(c, "r2"); got != 3 {
		t.Fatalf("a run of the child taken once its parent was read to its end reads under %d, want 3 (kept, no re-opening comes)", got)
	}
}

func endShard(c *checker, id string) {
	c.mu.Lock()
	c.shardEnd(c.sh[shardKey{c.cur, id}], "loop/"+id)
	c.mu.Unlock()
}

// keptGen, setHorizon and runOrderOnC build the kept-row tests below:
// generation order's record over ids, a horizon start of generation order
// landing on id, and the generation a run of shard C taken now reads under.
func keptGen(order int64, start string, ids ...string) lease.Generation {
	return lease.Generation{ID: fmt.Sprintf("g%d", order), Start: start, Tip: "timestamp:1000000", Order: order, Shards: ids}
}

func setHorizon(c *checker, id string, order int64) {
	c.setStart(id, lease.Start{Position: "horizon", Generation: fmt.Sprintf("g%d", order), Order: order, ClearCheckpoint: true}, true, lease.Lease{})
}

func runOrderOnC(c *checker, run string) int64 {
	c.took(run, "loop/"+run, lease.Lease{ShardID: "C"})
	return c.runs[runShard{run, shardKey{c.cur, "C"}}].order
}

// TestChecker_CarriesEnd: a poisoned end (Faults.PoisonEnd) breaks the
// calls that carry a closed shard's last record, and no others: not the
// last record of a shard still open, nor an earlier record of a closed one.
func TestChecker_CarriesEnd(t *testing.T) {
	c := newChecker(newTracer(time.Now()))
	for i, seq := range []string{"1", "2", "3"} {
		c.produced(c.cur, 0, i, "P", seq, time.Now(), types.PutRecordsRequestEntry{})
	}
	if c.carriesEnd("P", []string{"2", "3"}) {
		t.Fatal("an open shard's last record counts as its end")
	}
	c.shardShape(c.cur, "P", nil, true)
	for _, tc := range []struct {
		seqs []string
		want bool
	}{{[]string{"2", "3"}, true}, {[]string{"3"}, true}, {[]string{"1", "2"}, false}, {nil, false}} {
		if got := c.carriesEnd("P", tc.seqs); got != tc.want {
			t.Errorf("carriesEnd(P, %v) = %v, want %v", tc.seqs, got, tc.want)
		}
	}
	if c.carriesEnd("Q", []string{"3"}) {
		t.Error("a shard the checker never saw has an end")
	}
}

// Generation 1 re-opens every shard and is superseded, before its start
// reaches C, by generation 2, a sequence start naming another shard, which
// opens C at its tip only where C has no row. Generation 1's start lands
// on C after all: generation 2's write then finds the row and keeps it as
// that start made it, so a run of C reads under generation 2, owing what
// generation 1's start owes (world 1625).
func TestChecker_AnOlderStartLandingBeforeANewerIfAbsentOpeningIsKept(t *testing.T) {
	absent := map[string]rowAt{}
	c := newChecker(newTracer(time.Now()))
	c.shardShape(c.cur, "C", nil, false)
	c.generation(keptGen(1, "horizon", "C"), absent)
	c.generation(keptGen(2, "sequence:X:49000000000000000000000000000000000000000000000000000001", "C"), absent)
	setHorizon(c, "C", 1)
	if got := runOrderOnC(c, "r1"); got != 2 {
		t.Fatalf("a run of C reads under %d, want 2 (it keeps generation 1's start)", got)
	}
	if r := c.sh[shardKey{c.cur, "C"}].cfg; r == nil || r.kind != owesAll {
		t.Fatalf("C owes %+v, want every record (generation 1's horizon start, kept)", r)
	}
}

// Generation 2 re-opens A, whose child C its listing missed while a run
// held C; generation 3 supersedes it before it re-opened C, and lists C
// and keeps it. Its coordinators re-open C while A is still to be read
// (reopenedParent), so a run of C taken meanwhile reads under what
// governed C when generation 2 was recorded; once A is read to its end,
// under generation 3 (world 1,000,840).
func TestChecker_AMissedRowANewerGenerationKeepsReadsUnderTheOlderUntilItsReopening(t *testing.T) {
	rows := map[string]rowAt{"A": {existed: true}, "C": {existed: true}}
	c := parentAndChild(t, "A", "A")
	if got := runOrderOnC(c, "r0"); got != 1 {
		t.Fatalf("a run of C before generation 2 reads under %d, want 1", got)
	}
	c.generation(keptGen(2, "horizon", "A"), rows) // its listing misses C
	setHorizon(c, "A", 2)
	c.generation(keptGen(3, seqOfX, "A", "C"), rows)
	underTheOlderUntilTheParentEnds(t, c, "A")
}

// Generation 3, a sequence start naming P, is recorded while P is read to
// its end, so it keeps P; generation 2, which it superseded, re-opens P
// late, and the pass applying generation 3 reads P re-opened and writes
// its start there: P reads from the named record, not from generation 2's
// start (world 1,001,350).
func TestChecker_ASequenceStartLandingOnARowReopenedSinceItsRecordReadsFromItsRecord(t *testing.T) {
	c := newChecker(newTracer(time.Now()))
	c.shardShape(c.cur, "P", nil, true)
	c.generation(keptGen(1, "horizon", "P"), map[string]rowAt{"P": {existed: true}})
	setHorizon(c, "P", 1)
	endShard(c, "P")
	c.generation(keptGen(2, "horizon", "P"), map[string]rowAt{"P": {existed: true, finished: true}})
	seq := "sequence:P:49000000000000000000000000000000000000000000000000000001"
	c.generation(keptGen(3, seq, "P"), map[string]rowAt{"P": {existed: true, finished: true}})
	setHorizon(c, "P", 2) // generation 2's start lands late
	c.setStart("P", lease.Start{Position: seq, Generation: "g3", Order: 3, IfFrom: true, From: 2}, true, lease.Lease{})
	if r := c.sh[shardKey{c.cur, "P"}].cfg; r == nil || r.order != 3 || r.kind != owesFromSeq {
		t.Fatalf("P owes %+v, want generation 3's, from its record", r)
	}
}

// TestChecker_AKeptChildWithNoCheckpointIsReadFromItsStartAgain: world 31
// (a Supersede whose newer start's passes wake just after the older
// one's). A run of the child delivers its record, its checkpoint is lost,
// and it lets the row go. Generation 3, which keeps rows as they are,
// re-opens the parent at the start of generation 2, which it superseded
// (reopenedParent), and keeps the child, which has no checkpoint and no
// holder: the child is read from its start again once the parent is read
// again. The function sees the child's record, then the parent's again,
// then the child's again, a replay in order; the first deliveries that
// count for the write order are those after the keep.
func TestChecker_AKeptChildWithNoCheckpointIsReadFromItsStartAgain(t *testing.T) {
	rows := map[string]rowAt{"P": {existed: true}, "C": {existed: true}}
	c := parentAndChild(t, "P", "P", "C")
	setHorizon(c, "C", 1)
	at := time.Now()
	c.produced(c.cur, 7, 0, "P", "1", at, types.PutRecordsRequestEntry{})
	c.produced(c.cur, 7, 1, "C", "2", at, types.PutRecordsRequestEntry{})
	deliver := func(run, id, seq string) {
		c.took(run, "loop/"+run, lease.Lease{ShardID: id})
		c.delivery("d", "loop/"+run, run, id, []string{seq}, time.Now(), 1)
	}
	deliver("r1", "P", "1")
	endShard(c, "P")
	deliver("r2", "C", "2") // its checkpoint lost; the run lets the row go
	c.generation(keptGen(2, "horizon", "P", "C"), rows)
	c.generation(keptGen(3, seqOfX, "P", "C"), rows)
	c.setStart("P", lease.Start{Position: "horizon", Generation: "g3", Order: 3, ClearCheckpoint: true}, true, lease.Lease{ShardID: "P"})
	c.setStart("C", lease.Start{Position: seqOfX, Generation: "g3", Order: 3, Keep: true}, true, lease.Lease{ShardID: "C"})
	deliver("r3", "P", "1")
	endShard(c, "P")
	deliver("r4", "C", "2")
	c.finish()
	for _, v := range c.violations {
		t.Errorf("violation: %s", v.What)
	}
}

// TestChecker_ALatestStartOverAShardReadToItsEndUnderALaterStart: world
// 300. A shard is read to its end under generation 1's start, a time after
// generation 2's tip; generation 2, a latest start (its tip as a
// timestamp), lands on the row after that, keeping its checkpoint. The
// records between the tip and generation 1's start were skipped and stay
// owed: left so, they are lost. Read to its end under an earlier start,
// the shard owes nothing more.
func TestChecker_ALatestStartOverAShardReadToItsEndUnderALaterStart(t *testing.T) {
	for _, tc := range []struct {
		name, older string
		lost        bool
	}{
		{"UnderALaterStart", "timestamp:3000000", true},
		{"UnderAnEarlierStart", "timestamp:1500000", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows := map[string]rowAt{"P": {existed: true}}
			c := newChecker(newTracer(time.Now()))
			c.shardShape(c.cur, "P", nil, true)
			c.generation(keptGen(1, tc.older, "P"), rows)
			c.setStart("P", lease.Start{Position: tc.older, Generation: "g1", Order: 1, ClearCheckpoint: true}, true, lease.Lease{ShardID: "P"})
			c.produced(c.cur, 7, 0, "P", "1", time.UnixMilli(2500000), types.PutRecordsRequestEntry{})
			if !tc.lost { // read under the earlier start, it was delivered
				c.took("r1", "loop/r1", lease.Lease{ShardID: "P"})
				c.delivery("d", "loop/r1", "r1", "P", []string{"1"}, time.Now(), 1)
			}
			endShard(c, "P")
			latest := lease.Generation{ID: "g2", Start: "timestamp:2000000", Tip: "timestamp:2000000", Order: 2, Shards: []string{"P"}}
			c.generation(latest, map[string]rowAt{"P": {existed: true, finished: true}})
			c.setStart("P", lease.Start{Position: latest.Start, Generation: "g2", Order: 2}, true, lease.Lease{ShardID: "P", Checkpoint: lease.ShardEnd})
			c.finish()
			if lost := len(c.violations) > 0; lost != tc.lost {
				t.Fatalf("violations %v, want the skipped record found lost: %v", c.violations, tc.lost)
			}
		})
	}
}

// A tip is pinned on Kinesis's clock, a second before its answer: one later
// than the moment its generation is recorded, or its pin written, was read
// from a clock that runs ahead, and a latest start (or a shard opening at
// its tip) would skip what arrives in between. The checker cannot see those
// records as owed, since it takes what is owed from the tip itself, so it
// judges the tip.
func TestChecker_ATipLaterThanTheMomentItIsRecordedIsFound(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ahead time.Duration
		found bool
	}{
		{"ASecondBefore", -time.Second, false},
		{"ThirtySecondsAhead", 30 * time.Second, true},
	} {
		tip := fmt.Sprintf("timestamp:%d", time.Now().Add(tc.ahead).UnixMilli())
		t.Run("Generation"+tc.name, func(t *testing.T) {
			c := newChecker(newTracer(time.Now()))
			c.shardShape(c.cur, "P", nil, false)
			c.generation(lease.Generation{ID: "g1", Start: tip, Tip: tip, Order: 1, Shards: []string{"P"}}, map[string]rowAt{})
			if found := len(c.violations) > 0; found != tc.found {
				t.Fatalf("violations %v, want the tip found ahead: %v", c.violations, tc.found)
			}
		})
		t.Run("Pin"+tc.name, func(t *testing.T) {
			c := newChecker(newTracer(time.Now()))
			c.shardShape(c.cur, "P", nil, false)
			c.pinned(lease.Lease{ShardID: "P"}, tip)
			if found := len(c.violations) > 0; found != tc.found {
				t.Fatalf("violations %v, want the pin found ahead: %v", c.violations, tc.found)
			}
		})
	}
}
