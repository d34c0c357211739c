package shards

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shardloop/shardloop/pkg/lease"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// open and closed build listed shards; closed ones have an ending sequence.
func open(id string, parents ...string) Shard {
	s := Shard{ID: id, StartingSequence: "100"}
	if len(parents) > 0 {
		s.ParentID = parents[0]
	}
	if len(parents) > 1 {
		s.AdjacentParentID = parents[1]
	}
	return s
}

func closed(id string, parents ...string) Shard {
	s := open(id, parents...)
	s.EndingSequence = "999"
	return s
}

// Lease rows.
func finished() lease.Lease { return lease.Lease{Checkpoint: lease.ShardEnd} }

// heldBy is a row whose owner an observer saw renewing: its lease lapses
// at until unless renewed. lapsed is a row whose counter stood still.
func heldBy(owner string, until time.Time) lease.Lease {
	return lease.Lease{Owner: owner, Expiry: until, Checkpoint: "500", Counter: until.UnixMilli()}
}
func lapsed(owner string) lease.Lease {
	return lease.Lease{Owner: owner, Checkpoint: "500", Counter: -1}
}

// verdicts judges the rows as the coordinator's observer would: rows made
// by lapsed() have lapsed, others lapse at the time heldBy recorded.
func verdicts(rows map[string]lease.Lease) map[string]lease.Verdict {
	v := map[string]lease.Verdict{}
	for id, r := range rows {
		switch {
		case r.Owner == "" && r.Fence == 0:
			v[id] = lease.Verdict{Free: true}
		case r.Counter == -1:
			v[id] = lease.Verdict{Lapsed: true, Counter: -1}
		default:
			v[id] = lease.Verdict{Counter: r.Counter, LapsesAt: time.UnixMilli(r.Counter).UTC()}
		}
	}
	return v
}

// reopened is a closed shard's row after a new start re-opened it: its
// checkpoint cleared, the start recorded, nobody holding it.
func reopened() lease.Lease {
	return lease.Lease{Start: "horizon", Generation: "g2", GenerationOrder: 2, Counter: 7}
}

// revoked is a row whose holder a new start revoked; it lapses at until.
// lapsedRevoked is one whose counter stood still since.
func revoked(owner string, until time.Time) lease.Lease {
	r := heldBy(owner, until)
	r.Revoked, r.Start, r.Checkpoint = true, "horizon", ""
	return r
}
func lapsedRevoked(owner string) lease.Lease {
	r := lapsed(owner)
	r.Revoked, r.Start, r.Checkpoint = true, "horizon", ""
	return r
}

func waitingBelow(desc, owner string, until time.Time) Reason {
	return Reason{Kind: WaitingOnDescendant, Descendant: desc, Owner: owner, Until: until}
}

func checkpointed(seq string) lease.Lease { return lease.Lease{Checkpoint: seq} }

func rows(kv ...any) map[string]lease.Lease {
	m := map[string]lease.Lease{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1].(lease.Lease)
	}
	return m
}

// atTipStart returns the rows the coordinator records when a generation
// starts at the tip: closed shards read to their end, open ones with the
// pinned start, nobody holding any.
func atTipStart(shards []Shard) map[string]lease.Lease {
	m := map[string]lease.Lease{}
	for _, s := range shards {
		l := lease.Lease{ShardID: s.ID, Start: "timestamp:1", Generation: "g1", GenerationOrder: 1}
		if s.Closed() {
			l.Checkpoint, l.StartApplied = lease.ShardEnd, true
		}
		m[s.ID] = l
	}
	return m
}

func waiting(p string) Reason { return Reason{Kind: WaitingOnParent, Parent: p} }

// waitingUntil: waiting for a parent read to its end whose fence passes at
// until.
func waitingUntil(p string, until time.Time) Reason {
	return Reason{Kind: WaitingOnParent, Parent: p, Until: until}
}

var fin = Reason{Kind: Finished}

func held(owner string, until time.Time) Reason {
	return Reason{Kind: Held, Owner: owner, Until: until}
}

func TestDecide(t *testing.T) {
	later := now.Add(7 * time.Second)
	split := []Shard{closed("s0"), open("s1", "s0"), open("s2", "s0")}
	merge := []Shard{closed("m1"), closed("m2"), open("m3", "m1", "m2")}
	// s0 splits into s1 and s2, which merge into s3.
	splitMerge := []Shard{closed("s0"), closed("s1", "s0"), closed("s2", "s0"), open("s3", "s1", "s2")}

	tests := []struct {
		name     string
		shards   []Shard
		leases   map[string]lease.Lease
		inc      int64
		leasable []string
		not      map[string]Reason
	}{
		{
			name:     "SplitParentNeverReadChildrenWait",
			shards:   split,
			leasable: []string{"s0"},
			not:      map[string]Reason{"s1": waiting("s0"), "s2": waiting("s0")},
		},
		{
			name:     "SplitParentCheckpointedMidwayChildrenWait",
			shards:   split,
			leases:   rows("s0", checkpointed("700")),
			leasable: []string{"s0"},
			not:      map[string]Reason{"s1": waiting("s0"), "s2": waiting("s0")},
		},
		{
			name:     "SplitParentFinishedOpenChildrenLeasable",
			shards:   split,
			leases:   rows("s0", finished()),
			leasable: []string{"s1", "s2"},
			not:      map[string]Reason{"s0": fin},
		},
		{
			name:     "ReleasedWithAFenceWaitsTillItPasses",
			shards:   []Shard{open("f0"), open("f1")},
			leases:   rows("f0", lease.Lease{Checkpoint: "500", Fence: 3 * time.Second, Counter: later.UnixMilli()}, "f1", lease.Lease{Checkpoint: "500", Fence: 3 * time.Second, Counter: -1}),
			leasable: []string{"f1"},
			not:      map[string]Reason{"f0": {Kind: Fenced, Until: later}},
		},
		{
			// A parent read to its end whose holder gave up on an
			// invocation that may still run (the function runs on) hands
			// its row back with a fence: its children carry its keys, so
			// they wait for the fence as a taker of the parent would.
			name:     "ChildrenWaitForAFinishedParentsFence",
			shards:   split,
			leases:   rows("s0", lease.Lease{Checkpoint: lease.ShardEnd, Fence: 3 * time.Second, Counter: later.UnixMilli()}),
			leasable: nil,
			not:      map[string]Reason{"s0": fin, "s1": waitingUntil("s0", later), "s2": waitingUntil("s0", later)},
		},
		{
			name:     "ChildrenTakenOnceAFinishedParentsFencePassed",
			shards:   split,
			leases:   rows("s0", lease.Lease{Checkpoint: lease.ShardEnd, Fence: 3 * time.Second, Counter: -1}),
			leasable: []string{"s1", "s2"},
			not:      map[string]Reason{"s0": fin},
		},
		{
			// Held at SHARD_END (its release not yet written) with a fence
			// on the row: its invocations may run on until the lease and
			// the fence have passed, or its release says otherwise.
			name:     "ChildrenWaitForAFinishedParentStillHeldWithAFence",
			shards:   split,
			leases:   rows("s0", lease.Lease{Owner: "reader-a", Checkpoint: lease.ShardEnd, Fence: 3 * time.Second, Counter: later.UnixMilli()}),
			leasable: nil,
			not:      map[string]Reason{"s0": fin, "s1": waitingUntil("s0", later), "s2": waitingUntil("s0", later)},
		},
		{
			// Held at SHARD_END without a fence: the renewal before the end
			// recorded none, as its lease then covered every invocation
			// (given up on, the function running on). Until the release
			// is written (or, when it failed, the lease lapses), the lease
			// still covers them.
			name:     "ChildrenWaitForAFinishedParentStillHeld",
			shards:   split,
			leases:   rows("s0", lease.Lease{Owner: "reader-a", Checkpoint: lease.ShardEnd, Counter: later.UnixMilli()}),
			leasable: nil,
			not:      map[string]Reason{"s0": fin, "s1": waitingUntil("s0", later), "s2": waitingUntil("s0", later)},
		},
		{
			name:     "ChildrenTakenOnceAFinishedParentsHolderLapsed",
			shards:   split,
			leases:   rows("s0", lease.Lease{Owner: "reader-a", Checkpoint: lease.ShardEnd, Counter: -1}),
			leasable: []string{"s1", "s2"},
			not:      map[string]Reason{"s0": fin},
		},
		{
			name:     "SplitParentHeldByAnotherOwner",
			shards:   split,
			leases:   rows("s0", heldBy("reader-b", later)),
			leasable: nil,
			not:      map[string]Reason{"s0": held("reader-b", later), "s1": waiting("s0"), "s2": waiting("s0")},
		},
		{
			name:     "MergeChildWaitsForSecondParent",
			shards:   merge,
			leases:   rows("m1", finished(), "m2", heldBy("reader-b", later)),
			leasable: nil,
			not:      map[string]Reason{"m1": fin, "m2": held("reader-b", later), "m3": waiting("m2")},
		},
		{
			name:     "MergeChildWaitsForFirstParent",
			shards:   merge,
			leases:   rows("m2", finished(), "m1", checkpointed("600")),
			leasable: []string{"m1"},
			not:      map[string]Reason{"m2": fin, "m3": waiting("m1")},
		},
		{
			name:     "MergeBothParentsFinishedChildLeasable",
			shards:   merge,
			leases:   rows("m1", finished(), "m2", finished()),
			leasable: []string{"m3"},
			not:      map[string]Reason{"m1": fin, "m2": fin},
		},
		{
			name:     "SplitThenMergeGrandchildWaitsForSecondGeneration",
			shards:   splitMerge,
			leases:   rows("s0", finished(), "s1", finished()),
			leasable: []string{"s2"},
			not:      map[string]Reason{"s0": fin, "s1": fin, "s3": waiting("s2")},
		},
		{
			name:     "SplitThenMergeAllParentsFinished",
			shards:   splitMerge,
			leases:   rows("s0", finished(), "s1", finished(), "s2", finished()),
			leasable: []string{"s3"},
			not:      map[string]Reason{"s0": fin, "s1": fin, "s2": fin},
		},
		{
			name:     "SplitThenMergeNothingReadOnlyRootLeasable",
			shards:   splitMerge,
			leasable: []string{"s0"},
			not:      map[string]Reason{"s1": waiting("s0"), "s2": waiting("s0"), "s3": waiting("s1")},
		},
		{
			name:     "TrimmedParentCountsAsRead",
			shards:   []Shard{open("s1", "s0"), open("s2", "s0")},
			leasable: []string{"s1", "s2"},
			not:      map[string]Reason{},
		},
		{
			name:     "MergeOneParentTrimmedOtherUnread",
			shards:   []Shard{closed("m2"), open("m3", "m1", "m2")},
			leasable: []string{"m2"},
			not:      map[string]Reason{"m3": waiting("m2")},
		},
		{
			name:     "TrimmedParentWithStaleRowCountsAsRead",
			shards:   []Shard{open("s1", "s0")},
			leases:   rows("s0", checkpointed("700")),
			leasable: []string{"s1"},
			not:      map[string]Reason{},
		},
		{
			name:     "TipStartClosedShardsRecordedFinishedLetLeavesOpen",
			shards:   splitMerge,
			leases:   atTipStart(splitMerge),
			leasable: []string{"s3"},
			not:      map[string]Reason{"s0": fin, "s1": fin, "s2": fin},
		},
		{
			// A closed shard whose start is recorded but not yet read (its
			// take failed, then it was split) is not inferred read: its
			// records since the start come before its children's.
			name:     "ParentWithARecordedStartNotYetReadKeepsChildrenWaiting",
			shards:   split,
			leases:   rows("s0", lease.Lease{Start: "timestamp:1", Generation: "g1", GenerationOrder: 1}),
			leasable: []string{"s0"},
			not:      map[string]Reason{"s1": waiting("s0"), "s2": waiting("s0")},
		},
		{
			name:     "ParentTakenThenReleasedWithoutCheckpointStillWaits",
			shards:   split,
			leases:   rows("s0", lease.Lease{Counter: 3, Start: "timestamp:1", Generation: "g1"}),
			leasable: []string{"s0"},
			not:      map[string]Reason{"s1": waiting("s0"), "s2": waiting("s0")},
		},
		{
			name:     "OpenParentKeepsItsChildWaiting",
			shards:   []Shard{open("s0"), open("s1", "s0")},
			leasable: []string{"s0"},
			not:      map[string]Reason{"s1": waiting("s0")},
		},
		{
			name:     "RowOfAnEarlierIncarnationIsStale",
			shards:   []Shard{open("a"), open("b"), open("c")},
			leases:   rows("a", lease.Lease{Incarnation: 100, Checkpoint: lease.ShardEnd}, "b", lease.Lease{Incarnation: 200}, "c", lease.Lease{Checkpoint: "5"}),
			inc:      200,
			leasable: []string{"b", "c"},
			not:      map[string]Reason{"a": {Kind: Stale}},
		},
		{
			// A re-created stream's shard 0 has the old incarnation's
			// SHARD_END on its row: that must not let its children open.
			name:     "StaleFinishedParentDoesNotCountAsRead",
			shards:   split,
			leases:   rows("s0", lease.Lease{Incarnation: 100, Checkpoint: lease.ShardEnd}),
			inc:      200,
			leasable: nil,
			not:      map[string]Reason{"s0": {Kind: Stale}, "s1": waiting("s0"), "s2": waiting("s0")},
		},
		{
			name:     "IncarnationNotCheckedWhenUnknown",
			shards:   []Shard{open("a")},
			leases:   rows("a", lease.Lease{Incarnation: 100}),
			leasable: []string{"a"},
			not:      map[string]Reason{},
		},
		{
			// The expiry a holder's clock wrote means nothing: only the
			// taker's verdict does.
			name:     "LapsedLeaseIsLeasableWhateverTheExpiryWritten",
			shards:   []Shard{open("a"), open("b"), open("c")},
			leases:   rows("a", lapsed("gone"), "b", heldBy("live", now.Add(-time.Hour)), "c", heldBy("live", later)),
			leasable: []string{"a"},
			not:      map[string]Reason{"b": held("live", now.Add(-time.Hour)), "c": held("live", later)},
		},
		{
			name:     "LapsedParentIsLeasableChildStillWaits",
			shards:   split,
			leases:   rows("s0", lapsed("gone")),
			leasable: []string{"s0"},
			not:      map[string]Reason{"s1": waiting("s0"), "s2": waiting("s0")},
		},
		{
			name:     "ReleasedRowIsLeasable",
			shards:   []Shard{open("a")},
			leases:   rows("a", lease.Lease{Counter: 9, Checkpoint: "5"}),
			leasable: []string{"a"},
			not:      map[string]Reason{},
		},
		{
			name:   "FinishedShardNeverLeasable",
			shards: []Shard{closed("a"), open("b"), closed("c")},
			leases: rows(
				"a", finished(),
				"b", finished(), // open but finished: still never again
				"c", lease.Lease{Owner: "x", Expiry: later, Checkpoint: lease.ShardEnd},
			),
			leasable: nil,
			not:      map[string]Reason{"a": fin, "b": fin, "c": fin},
		},
		{
			name:     "ParentPresentWithoutRowChildWaits",
			shards:   []Shard{closed("p"), open("c", "p")},
			leases:   rows("c", lease.Lease{}), // the child's own row does not matter
			leasable: []string{"p"},
			not:      map[string]Reason{"c": waiting("p")},
		},
		{
			name:     "HeldChildReportedHeldWhateverItsParents",
			shards:   split,
			leases:   rows("s1", heldBy("early", later)),
			leasable: []string{"s0"},
			not:      map[string]Reason{"s1": held("early", later), "s2": waiting("s0")},
		},
		{
			// A new start re-opened s0 and revoked s1's holder, whose
			// invocations may still run: s0, whose keys s1 carries, waits.
			name:     "ReopenedParentWaitsForChildsRevokedHolder",
			shards:   split,
			leases:   rows("s0", reopened(), "s1", revoked("old", later), "s2", reopened()),
			leasable: nil,
			not:      map[string]Reason{"s0": waitingBelow("s1", "old", later), "s1": held("old", later), "s2": waiting("s0")},
		},
		{
			name:     "ReopenedParentTakenOnceChildsRevokedLeaseLapsed",
			shards:   split,
			leases:   rows("s0", reopened(), "s1", lapsedRevoked("old"), "s2", reopened()),
			leasable: []string{"s0"},
			not:      map[string]Reason{"s1": waiting("s0"), "s2": waiting("s0")},
		},
		{
			// The revoked holder stopped and released with a fence: its
			// last invocations may still run until the fence passes.
			name:     "ReopenedParentWaitsForChildsFence",
			shards:   split,
			leases:   rows("s0", reopened(), "s1", lease.Lease{Fence: 3 * time.Second, Counter: later.UnixMilli()}, "s2", reopened()),
			leasable: nil,
			not:      map[string]Reason{"s0": {Kind: WaitingOnDescendant, Descendant: "s1", Until: later}, "s1": {Kind: Fenced, Until: later}, "s2": waiting("s0")},
		},
		{
			name:     "ReopenedParentTakenOnceChildsFencePassed",
			shards:   split,
			leases:   rows("s0", reopened(), "s1", lease.Lease{Fence: 3 * time.Second, Counter: -1}, "s2", reopened()),
			leasable: []string{"s0"},
			not:      map[string]Reason{"s1": waiting("s0"), "s2": waiting("s0")},
		},
		{
			// A grandchild carries the root's keys too: the whole lineage
			// above it waits, each ancestor naming the first blocker by id.
			name:     "ReopenedLineageWaitsForGrandchildsRevokedHolder",
			shards:   splitMerge,
			leases:   rows("s0", reopened(), "s1", reopened(), "s2", reopened(), "s3", revoked("old", later)),
			leasable: nil,
			not: map[string]Reason{"s0": waitingBelow("s3", "old", later), "s1": waiting("s0"), "s2": waiting("s0"),
				"s3": held("old", later)},
		},
		{
			name:     "ReopenedParentOfAMergeWaitsForTheMergedChild",
			shards:   merge,
			leases:   rows("m1", reopened(), "m2", finished(), "m3", revoked("old", later)),
			leasable: nil,
			not:      map[string]Reason{"m1": waitingBelow("m3", "old", later), "m2": fin, "m3": held("old", later)},
		},
		{
			name:   "ReopenedParentNamesTheFirstRevokedChildByID",
			shards: split,
			leases: rows("s0", reopened(), "s1", revoked("old-1", later.Add(time.Second)), "s2", revoked("old-2", later)),
			not: map[string]Reason{"s0": waitingBelow("s1", "old-1", later.Add(time.Second)),
				"s1": held("old-1", later.Add(time.Second)), "s2": held("old-2", later)},
		},
		{
			// Only a revoked holder stops: one that is not would keep its
			// ancestors waiting for ever (an operator's reset of a parent).
			name:     "ChildHeldUnrevokedDoesNotHoldBackItsParent",
			shards:   split,
			leases:   rows("s0", reopened(), "s1", heldBy("live", later)),
			leasable: []string{"s0"},
			not:      map[string]Reason{"s1": held("live", later), "s2": waiting("s0")},
		},
		{
			name:     "RevokedChildOfAFinishedParentKeepsNothingWaiting",
			shards:   split,
			leases:   rows("s0", finished(), "s1", revoked("old", later)),
			leasable: []string{"s2"},
			not:      map[string]Reason{"s0": fin, "s1": held("old", later)},
		},
		{
			name:     "RowsOfUnlistedShardsIgnored",
			shards:   []Shard{open("a")},
			leases:   rows("zz", heldBy("x", later)),
			leasable: []string{"a"},
			not:      map[string]Reason{},
		},
		{
			name:     "ClosedShardNeverReadIsLeasable",
			shards:   []Shard{closed("a")},
			leasable: []string{"a"},
			not:      map[string]Reason{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(Input{Shards: tc.shards, Leases: tc.leases, Verdicts: verdicts(tc.leases), Incarnation: tc.inc})
			if got := ids(d.Leasable); !slices.Equal(got, tc.leasable) {
				t.Errorf("Leasable = %v, want %v", got, tc.leasable)
			}
			if !maps.Equal(d.NotLeasable, tc.not) {
				t.Errorf("NotLeasable = %v, want %v", d.NotLeasable, tc.not)
			}
			checkPartition(t, tc.shards, d)
		})
	}
}

func ids(ss []Shard) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.ID)
	}
	return out
}

// checkPartition: every listed shard is in exactly one of the two sets.
func checkPartition(t *testing.T, listed []Shard, d Decision) {
	t.Helper()
	in := map[string]int{}
	for _, s := range d.Leasable {
		in[s.ID]++
	}
	for id := range d.NotLeasable {
		in[id]++
	}
	for _, s := range listed {
		if in[s.ID] != 1 {
			t.Errorf("shard %s appears %d times in the decision", s.ID, in[s.ID])
		}
	}
	if len(in) != len(listed) {
		t.Errorf("decision covers %d shards, listing has %d", len(in), len(listed))
	}
}

func TestDecide_LeasableOrderParentsBeforeChildrenThenID(t *testing.T) {
	// Listed out of order; 0 is read, so 1 (a root) and 2 and 3 (children
	// of 0) may open; 4 (the merge of 3 and 1) waits.
	shards := []Shard{
		open("shardId-000000000004", "shardId-000000000003", "shardId-000000000001"),
		closed("shardId-000000000003", "shardId-000000000000"),
		open("shardId-000000000002", "shardId-000000000000"),
		closed("shardId-000000000001"),
		closed("shardId-000000000000"),
	}
	d := Decide(Input{Shards: shards, Leases: rows("shardId-000000000000", finished())})
	want := []string{
		"shardId-000000000001",                         // a root
		"shardId-000000000002", "shardId-000000000003", // children of 0
	}
	if got := ids(d.Leasable); !slices.Equal(got, want) {
		t.Errorf("Leasable = %v, want %v", got, want)
	}
}

func TestDecide_LeasableOrderByDepthEvenWhenIDsSortOtherwise(t *testing.T) {
	// x is read; y (its child, closed) and z (a root) may both open now: z
	// first, though "y" sorts before "z". a waits on y.
	shards := []Shard{open("a", "y", "z"), closed("y", "x"), open("z"), closed("x")}
	d := Decide(Input{Shards: shards, Leases: rows("x", finished())})
	want := []string{"z", "y"}
	if got := ids(d.Leasable); !slices.Equal(got, want) {
		t.Errorf("Leasable = %v, want %v", got, want)
	}
}

func TestDecide_RepeatedShardJudgedOnce(t *testing.T) {
	d := Decide(Input{Shards: []Shard{open("a"), open("a")}})
	if got := ids(d.Leasable); !slices.Equal(got, []string{"a"}) {
		t.Errorf("Leasable = %v, want [a]", got)
	}
}

func TestDecide_DoesNotModifyInput(t *testing.T) {
	shards := []Shard{open("c", "b"), closed("b"), open("a")}
	before := slices.Clone(shards)
	Decide(Input{Shards: shards})
	if !slices.Equal(shards, before) {
		t.Errorf("input reordered: %v", ids(shards))
	}
}

// splitTree lists a stream whose one root shard was split depth times over:
// 2^(depth+1)-1 shards, every inner one closed, listed in a shuffled order.
func splitTree(depth int, seed uint64) []Shard {
	var out []Shard
	var grow func(id string, parent string, level int)
	grow = func(id, parent string, level int) {
		var parents []string
		if parent != "" {
			parents = []string{parent}
		}
		if level == depth {
			out = append(out, open(id, parents...))
			return
		}
		out = append(out, closed(id, parents...))
		grow(id+"0", id, level+1)
		grow(id+"1", id, level+1)
	}
	grow("r", "", 0)
	rand.New(rand.NewPCG(seed, seed)).Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func TestDecide_ThousandsOfShardsParentsFirst(t *testing.T) {
	shards := splitTree(11, 1) // 4,095 shards
	// A tip generation records every closed shard finished: exactly the
	// 2,048 open leaves may open, in id order.
	d := Decide(Input{Shards: shards, Leases: atTipStart(shards)})
	if len(d.Leasable) != 2048 || !slices.IsSortedFunc(d.Leasable, func(a, b Shard) int { return strings.Compare(a.ID, b.ID) }) {
		t.Fatalf("%d leasable, want the 2048 leaves sorted", len(d.Leasable))
	}

	// Not at the tip, with the first two levels finished: exactly the third
	// level is leasable, and every deeper shard waits on its own parent.
	leases := rows("r", finished(), "r0", finished(), "r1", finished())
	d = Decide(Input{Shards: shards, Leases: leases})
	want := []string{"r00", "r01", "r10", "r11"}
	if got := ids(d.Leasable); !slices.Equal(got, want) {
		t.Errorf("Leasable = %v, want %v", got, want)
	}
	for id, r := range d.NotLeasable {
		if len(id) > 3 && r != waiting(id[:len(id)-1]) {
			t.Errorf("%s: %v, want waiting on parent %s", id, r, id[:len(id)-1])
		}
	}
}

func BenchmarkDecide(b *testing.B) {
	for _, depth := range []int{9, 13} { // 1,023 and 16,383 shards
		shards := splitTree(depth, 2)
		leases := map[string]lease.Lease{}
		for i, s := range shards {
			switch {
			case s.Closed() && i%3 != 0:
				leases[s.ID] = finished()
			case i%5 == 0:
				leases[s.ID] = heldBy("x", now.Add(time.Second))
			}
		}
		v := verdicts(leases)
		b.Run(fmt.Sprintf("shards=%d", len(shards)), func(b *testing.B) {
			for b.Loop() {
				Decide(Input{Shards: shards, Leases: leases, Verdicts: v})
			}
		})
	}
}

func TestReasonString(t *testing.T) {
	until := time.Date(2026, 3, 1, 12, 0, 10, 0, time.FixedZone("X", 3600))
	for _, tc := range []struct {
		r    Reason
		want string
	}{
		{held("reader-7", until), "held by reader-7 until 2026-03-01T11:00:10Z"},
		{held("reader-7", time.Time{}), "held by reader-7"},
		{Reason{Kind: Stale}, "row of an earlier incarnation of the stream"},
		{fin, "finished"},
		{waiting("shardId-000000000001"), "waiting on parent shardId-000000000001"},
		{waitingBelow("c", "old", until), "waiting on descendant c's revoked holder old until 2026-03-01T11:00:10Z"},
		{Reason{Kind: WaitingOnDescendant, Descendant: "c"}, "waiting on descendant c's fence"},
		{Reason{}, "ReasonKind(0)"},
	} {
		if got := tc.r.String(); got != tc.want {
			t.Errorf("%#v.String() = %q, want %q", tc.r, got, tc.want)
		}
	}
}

func TestShardClosedAndParents(t *testing.T) {
	if open("a").Closed() || !closed("a").Closed() {
		t.Error("Closed: want false for open, true with an ending sequence")
	}
	for _, tc := range []struct {
		s    Shard
		want []string
	}{
		{open("a"), nil},
		{open("b", "a"), []string{"a"}},
		{open("c", "a", "b"), []string{"a", "b"}},
		{Shard{ID: "d", AdjacentParentID: "b"}, []string{"b"}},
	} {
		if got := tc.s.Parents(); !slices.Equal(got, tc.want) {
			t.Errorf("%s.Parents() = %v, want %v", tc.s.ID, got, tc.want)
		}
	}
}
