package shards

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
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
func heldBy(owner string, until time.Time) lease.Lease {
	return lease.Lease{Owner: owner, Expiry: until, Checkpoint: "500"}
}
func checkpointed(seq string) lease.Lease { return lease.Lease{Checkpoint: seq} }

func rows(kv ...any) map[string]lease.Lease {
	m := map[string]lease.Lease{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1].(lease.Lease)
	}
	return m
}

// atStartup returns the rows the coordinator records when a subscription
// starts at the tip: the start on every shard, nobody holding any.
func atStartup(shards []Shard) map[string]lease.Lease {
	m := map[string]lease.Lease{}
	for _, s := range shards {
		m[s.ID] = lease.Lease{ShardID: s.ID, Start: "latest", Generation: "g1"}
	}
	return m
}

func waiting(p string) Reason { return Reason{Kind: WaitingOnParent, Parent: p} }

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
		tip      bool
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
			name:     "TipStartClosedParentsRecordedAtStartupCountAsRead",
			shards:   splitMerge,
			leases:   atStartup(splitMerge),
			tip:      true,
			leasable: []string{"s0", "s1", "s2", "s3"},
			not:      map[string]Reason{},
		},
		{
			// Shards without a row were created after startup (a split of a
			// split): their records all count, tip or not.
			name:     "TipStartClosedParentsWithoutRowsWait",
			shards:   splitMerge,
			tip:      true,
			leasable: []string{"s0"},
			not:      map[string]Reason{"s1": waiting("s0"), "s2": waiting("s0"), "s3": waiting("s1")},
		},
		{
			name:     "TipStartParentRowRecordedAtStartupCountsAsRead",
			shards:   split,
			leases:   rows("s0", lease.Lease{Start: "latest", Generation: "g1"}),
			tip:      true,
			leasable: []string{"s0", "s1", "s2"},
			not:      map[string]Reason{},
		},
		{
			// A reader took it, maybe read records newer than the start,
			// and lost it before checkpointing: they must be read first.
			name:     "TipStartParentTakenThenReleasedWithoutCheckpointStillWaits",
			shards:   split,
			leases:   rows("s0", lease.Lease{Counter: 3, Start: "latest", Generation: "g1"}),
			tip:      true,
			leasable: []string{"s0"},
			not:      map[string]Reason{"s1": waiting("s0"), "s2": waiting("s0")},
		},
		{
			name:     "TipStartParentExpiredWithoutCheckpointStillWaits",
			shards:   split,
			leases:   rows("s0", lease.Lease{Counter: 1, Owner: "gone", Expiry: now.Add(-time.Second)}),
			tip:      true,
			leasable: []string{"s0"},
			not:      map[string]Reason{"s1": waiting("s0"), "s2": waiting("s0")},
		},
		{
			name:     "TipStartParentWithSequenceCheckpointStillWaits",
			shards:   split,
			leases:   rows("s0", checkpointed("700")),
			tip:      true,
			leasable: []string{"s0"},
			not:      map[string]Reason{"s1": waiting("s0"), "s2": waiting("s0")},
		},
		{
			name:   "TipStartHeldParentWithoutCheckpointStillWaits",
			shards: split,
			leases: rows("s0", lease.Lease{Owner: "reader-a", Expiry: later, Counter: 1}),
			tip:    true,
			not: map[string]Reason{
				"s0": held("reader-a", later), "s1": waiting("s0"), "s2": waiting("s0"),
			},
		},
		{
			name:     "TipStartOpenParentStillWaits",
			shards:   []Shard{open("s0"), open("s1", "s0")},
			tip:      true,
			leasable: []string{"s0"},
			not:      map[string]Reason{"s1": waiting("s0")},
		},
		{
			name:     "ExpiredLeaseIsLeasable",
			shards:   []Shard{open("a"), open("b"), open("c")},
			leases:   rows("a", heldBy("gone", now.Add(-time.Millisecond)), "b", heldBy("gone", now), "c", heldBy("live", later)),
			leasable: []string{"a", "b"},
			not:      map[string]Reason{"c": held("live", later)},
		},
		{
			name:     "ExpiredParentIsLeasableChildStillWaits",
			shards:   split,
			leases:   rows("s0", heldBy("gone", now.Add(-time.Second))),
			leasable: []string{"s0"},
			not:      map[string]Reason{"s1": waiting("s0"), "s2": waiting("s0")},
		},
		{
			name:   "FinishedShardNeverLeasable",
			shards: []Shard{closed("a"), open("b"), closed("c")},
			leases: rows(
				"a", finished(),
				"b", finished(), // open but finished: still never again
				"c", lease.Lease{Owner: "x", Expiry: later, Checkpoint: lease.ShardEnd},
			),
			tip:      true,
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
			d := Decide(Input{Shards: tc.shards, Leases: tc.leases, StartAtTip: tc.tip, Now: now})
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
	// Listed out of order; at the tip every closed parent counts as read, so
	// all are leasable and only the order is at stake.
	shards := []Shard{
		open("shardId-000000000004", "shardId-000000000003", "shardId-000000000001"),
		closed("shardId-000000000003", "shardId-000000000000"),
		open("shardId-000000000002", "shardId-000000000000"),
		closed("shardId-000000000001"),
		closed("shardId-000000000000"),
	}
	d := Decide(Input{Shards: shards, Leases: atStartup(shards), StartAtTip: true, Now: now})
	want := []string{
		"shardId-000000000000", "shardId-000000000001", // roots
		"shardId-000000000002", "shardId-000000000003", // children of 0
		"shardId-000000000004", // merge of 3 and 1
	}
	if got := ids(d.Leasable); !slices.Equal(got, want) {
		t.Errorf("Leasable = %v, want %v", got, want)
	}
}

func TestDecide_LeasableOrderByDepthEvenWhenIDsSortOtherwise(t *testing.T) {
	// Kinesis numbers children after their parents, but the order must not
	// depend on that.
	shards := []Shard{open("a", "y", "z"), closed("y", "x"), closed("z"), closed("x")}
	d := Decide(Input{Shards: shards, Leases: atStartup(shards), StartAtTip: true, Now: now})
	want := []string{"x", "z", "y", "a"}
	if got := ids(d.Leasable); !slices.Equal(got, want) {
		t.Errorf("Leasable = %v, want %v", got, want)
	}
}

func TestDecide_RepeatedShardJudgedOnce(t *testing.T) {
	d := Decide(Input{Shards: []Shard{open("a"), open("a")}, Now: now})
	if got := ids(d.Leasable); !slices.Equal(got, []string{"a"}) {
		t.Errorf("Leasable = %v, want [a]", got)
	}
}

func TestDecide_DoesNotModifyInput(t *testing.T) {
	shards := []Shard{open("c", "b"), closed("b"), open("a")}
	before := slices.Clone(shards)
	Decide(Input{Shards: shards, StartAtTip: true, Now: now})
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
	d := Decide(Input{Shards: shards, Leases: atStartup(shards), StartAtTip: true, Now: now})
	if len(d.Leasable) != len(shards) {
		t.Fatalf("%d leasable, want all %d", len(d.Leasable), len(shards))
	}
	pos := map[string]int{}
	for i, s := range d.Leasable {
		pos[s.ID] = i
	}
	for _, s := range d.Leasable {
		for _, p := range s.Parents() {
			if pos[p] >= pos[s.ID] {
				t.Fatalf("parent %s at %d after child %s at %d", p, pos[p], s.ID, pos[s.ID])
			}
		}
	}

	// Not at the tip, with the first two levels finished: exactly the third
	// level is leasable, and every deeper shard waits on its own parent.
	leases := rows("r", finished(), "r0", finished(), "r1", finished())
	d = Decide(Input{Shards: shards, Leases: leases, Now: now})
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
		b.Run(fmt.Sprintf("shards=%d", len(shards)), func(b *testing.B) {
			for b.Loop() {
				Decide(Input{Shards: shards, Leases: leases, Now: now})
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
		{fin, "finished"},
		{waiting("shardId-000000000001"), "waiting on parent shardId-000000000001"},
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
