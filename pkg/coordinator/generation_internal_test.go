package coordinator

import (
	"testing"
	"time"

	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/shards"
)

// deployed stamps a generation record with a deploy time (seconds).
func deployed(g lease.Generation, secs int64) lease.Generation {
	g.DeployedAt = time.Unix(secs, 0)
	return g
}

// at stamps a subscription with a deploy time (seconds).
func at(s Subscription, secs int64) Subscription {
	s.DeployedAt = time.Unix(secs, 0)
	return s
}

func TestStepFor(t *testing.T) {
	horizon := Subscription{Stream: "s", Start: "horizon", Generation: "gh"}
	latest := Subscription{Stream: "s", Start: "latest", Generation: "gl"}
	none := Subscription{Stream: "s"}
	rec := func(id string, applied bool, inc int64, superseded ...string) lease.Generation {
		return lease.Generation{ID: id, Order: int64(len(superseded) + 1), Applied: applied, Incarnation: inc, Superseded: superseded}
	}
	cases := []struct {
		name  string
		rec   lease.Generation
		found bool
		sub   Subscription
		inc   int64
		want  genStep
	}{
		{"NoRecordWithAStartBegins", lease.Generation{}, false, horizon, 7, genBegin},
		{"NoRecordWithoutAStartBeginsTheDefault", lease.Generation{}, false, none, 7, genBegin},
		{"OwnRecordAppliedFollows", rec("gh", true, 7), true, horizon, 7, genFollow},
		{"OwnRecordNotAppliedIsFinished", rec("gh", false, 7), true, horizon, 7, genFinish},
		{"DefaultNotAppliedIsFinished", rec(lease.DefaultGeneration, false, 7), true, none, 7, genFinish},
		// A restart without --start never moves a checkpoint.
		{"WithoutAStartNeverBeginsOverARecord", rec("gh", true, 7), true, none, 7, genFollow},
		{"WithoutAStartFollowsEvenAnUnappliedRecord", rec("gh", false, 7), true, none, 7, genFollow},
		// A deploy changed horizon to latest: the old coordinator is stale.
		{"SupersededConfigurationIsStale", rec("gl", true, 7, "gh"), true, horizon, 7, genStale},
		{"UnseenConfigurationIsNewerAndBegins", rec("gh", true, 7), true, latest, 7, genBegin},
		{"NewerOverTheDefaultBegins", rec(lease.DefaultGeneration, true, 7), true, horizon, 7, genBegin},
		{"RecordOfAnEarlierIncarnationBeginsAgain", rec("gh", true, 5), true, horizon, 7, genBegin},
		{"RecordOfAnEarlierIncarnationBeginsTheDefault", rec("gh", true, 5), true, none, 7, genBegin},
		{"UnknownIncarnationTrustsTheRecord", rec("gh", true, 0), true, horizon, 7, genFollow},
		// An old deploy's coordinator still running when the stream is
		// created again must not begin it with its superseded start.
		{"SupersededConfigurationStaysStaleOnANewIncarnation", rec("gl", true, 5, "gh"), true, horizon, 7, genStale},
		{"SupersededDefaultStaysStaleOnANewIncarnation", rec("gh", true, 5, lease.DefaultGeneration), true, none, 7, genStale},
		{"CurrentConfigurationBeginsTheNewIncarnation", rec("gl", true, 5, "gh"), true, latest, 7, genBegin},
		// Deployed earlier than the record's configuration, though its
		// coordinator passed only now: older, whatever the table saw first.
		{"DeployedBeforeTheRecordIsStale", deployed(rec("gh", true, 7), 20), true, at(latest, 10), 7, genStale},
		{"DeployedAfterTheRecordBegins", deployed(rec("gh", true, 7), 20), true, at(latest, 30), 7, genBegin},
		{"UnknownDeployTimeIsNewerWhenUnseen", deployed(rec("gh", true, 7), 20), true, latest, 7, genBegin},
		{"ARecordWithoutADeployTimeIsOlderThanAnUnseenOne", rec("gh", true, 7), true, at(latest, 10), 7, genBegin},
		// Latest, then horizon, then latest again: the record supersedes
		// latest's id, but latest was deployed after it.
		{"DeployedAgainAfterTheRecordThatSupersededItBegins", deployed(rec("gh", true, 7, "gl"), 20), true, at(latest, 30), 7, genBegin},
		{"SupersededAndDeployedBeforeTheRecordIsStale", deployed(rec("gh", true, 7, "gl"), 20), true, at(latest, 10), 7, genStale},
		{"SupersededWithoutDeployTimesIsStale", rec("gh", false, 7, "gl"), true, latest, 7, genStale},
		{"WithoutAStartFollowsARecordDeployedBefore", deployed(rec("gh", true, 7), 20), true, at(none, 30), 7, genFollow},
		{"DeployedAfterARecordOfAnEarlierIncarnationThatSupersededItBegins", deployed(rec("gh", true, 5, "gl"), 20), true, at(latest, 30), 7, genBegin},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := stepFor(c.rec, c.found, c.sub, c.inc); got != c.want {
				t.Fatalf("stepFor = %v, want %v", got, c.want)
			}
		})
	}
}

func TestNewGeneration_PinsTheTipOnceAndOrdersAfterThePrevious(t *testing.T) {
	server := time.UnixMilli(1_800_000_005_000)
	listing := []shards.Shard{{ID: "a"}, {ID: "b", EndingSequence: "9"}}
	first := newGeneration(lease.Generation{}, false, Subscription{Start: "latest", Generation: "gl"}, listing, 7, server, time.Time{}, "c1")
	if first.Order != 1 || first.Start != "timestamp:1800000004000" || first.Tip != first.Start || len(first.Shards) != 2 || first.Applied {
		t.Fatalf("first = %+v, want order 1 with the tip pinned a second before Kinesis's time", first)
	}
	next := newGeneration(first, true, Subscription{Start: "horizon", Generation: "gh"}, listing, 7, server.Add(time.Minute), time.Time{}, "c2")
	if next.Order != 2 || next.Start != "horizon" || !next.Supersedes("gl") || next.Supersedes("gh") {
		t.Fatalf("next = %+v, want order 2, horizon, superseding gl", next)
	}
	// Back to a superseded id (possible only after the record was lost):
	// it is no longer listed as superseded by itself.
	again := newGeneration(next, true, Subscription{Start: "latest", Generation: "gl"}, listing, 7, server, time.Time{}, "c3")
	if again.Supersedes("gl") || !again.Supersedes("gh") {
		t.Fatalf("again = %+v", again)
	}
}

func TestStartFor(t *testing.T) {
	g := lease.Generation{ID: "g", Start: "horizon", Tip: "timestamp:5", Order: 3, Incarnation: 7}
	open, closed := shards.Shard{ID: "a"}, shards.Shard{ID: "b", EndingSequence: "9"}
	cases := []struct {
		name  string
		start string
		s     shards.Shard
		want  lease.Start
	}{
		{"DefaultOpenShardAtTheTipIfAbsent", "", open, lease.Start{Position: "timestamp:5", IfAbsent: true}},
		{"DefaultClosedShardFromTheTipIfAbsent", "", closed, lease.Start{Position: "timestamp:5", IfAbsent: true}},
		{"LatestOpenShardOverridesItsCheckpoint", "latest", open, lease.Start{Position: "horizon"}},
		// A shard closed between the tip and the listing holds newer records.
		{"LatestClosedShardIsReadFromTheTip", "latest", closed, lease.Start{Position: "horizon"}},
		{"HorizonReadsClosedShardsAgain", "horizon", closed, lease.Start{Position: "horizon", ClearCheckpoint: true}},
		{"TimestampReadsClosedShardsAgain", "timestamp:1", closed, lease.Start{Position: "horizon", ClearCheckpoint: true}},
		{"SequenceOnItsShard", "sequence:a:42", open, lease.Start{Position: "horizon"}},
		{"SequenceLeavesOtherShardsAtTheTipIfAbsent", "sequence:a:42", closed, lease.Start{Position: "timestamp:5", IfAbsent: true}},
	}
	stale, err := startFor(g, Subscription{Start: "latest"}, open, lease.Lease{Incarnation: 6, Checkpoint: "9"}, true)
	if err != nil || !stale.Fresh {
		t.Fatalf("start over a row of an earlier incarnation = %+v, %v, want Fresh", stale, err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := startFor(g, Subscription{Start: c.start}, c.s, lease.Lease{Incarnation: 7}, true)
			if err != nil {
				t.Fatal(err)
			}
			// The position comes from the record (its Start or Tip); the
			// table's "horizon" stands for the record's Start.
			c.want.Generation, c.want.Order, c.want.Incarnation = "g", 3, 7
			if got != c.want {
				t.Fatalf("startFor = %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestStartFor_LatestOverAShardReadToItsEndUnderALaterStart: world 300.
// A latest generation's tip falls before the start of the generation it
// supersedes, a start in the future when that one was deployed. The shard
// was read to its end under the older start before the latest one reached
// its row (its pass listed the shards, then took long to apply): the
// records between the tip and the older start were skipped, and the
// latest start owes them, so it reads the shard again from the tip. It
// does so over a row not yet read to its end as well: the pass decides on
// the row as it read it, and it may be read to its end before the write
// lands. A row read under an earlier start keeps its checkpoint.
func TestStartFor_LatestOverAShardReadToItsEndUnderALaterStart(t *testing.T) {
	g := lease.Generation{ID: "g", Start: "timestamp:5000", Tip: "timestamp:5000", Order: 3, Incarnation: 7}
	closed := shards.Shard{ID: "b", EndingSequence: "9"}
	for _, c := range []struct {
		name  string
		row   lease.Lease
		clear bool
	}{
		{"ReadToItsEndUnderALaterStart", lease.Lease{Start: "timestamp:9000", Checkpoint: lease.ShardEnd}, true},
		{"ReadToItsEndUnderAnEarlierStart", lease.Lease{Start: "timestamp:1000", Checkpoint: lease.ShardEnd}, false},
		{"ReadToItsEndUnderTheHorizon", lease.Lease{Start: "horizon", Checkpoint: lease.ShardEnd}, false},
		{"ReadToItsEndWithNoStart", lease.Lease{Checkpoint: lease.ShardEnd}, false},
		{"NotReadToItsEndYet", lease.Lease{Start: "timestamp:9000", Checkpoint: "42"}, true},
		{"NothingReadYet", lease.Lease{Start: "timestamp:9000"}, true},
		{"ReadUnderAnEarlierStart", lease.Lease{Start: "timestamp:1000", Checkpoint: "42"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.row.Incarnation = 7
			got, err := startFor(g, Subscription{Start: "latest"}, closed, c.row, true)
			if err != nil {
				t.Fatal(err)
			}
			if got.ClearCheckpoint != c.clear || got.Position != g.Tip {
				t.Fatalf("startFor = %+v, want the tip with ClearCheckpoint %v", got, c.clear)
			}
		})
	}
}

// A shard without a row when the pass read it (a child the listing holds
// and no start has reached yet) may get one before the latest start lands:
// an older generation's start later than the tip (a future start the older
// coordinator records on children created after its listing), under which
// the shard is read to its end. The latest start then clears the checkpoint,
// as over a row read with that start (world 1809 of the simulator). Over a
// row that stays absent, or that a child's reader created reading from its
// first record, clearing costs at most what follows the tip, read again.
func TestStartFor_LatestOverAShardWithoutARowClearsWhatLandsMeanwhile(t *testing.T) {
	g := lease.Generation{ID: "g", Start: "timestamp:5000", Tip: "timestamp:5000", Order: 3, Incarnation: 7}
	for _, s := range []shards.Shard{{ID: "open"}, {ID: "closed", EndingSequence: "9"}} {
		got, err := startFor(g, Subscription{Start: "latest"}, s, lease.Lease{}, false)
		if err != nil {
			t.Fatal(err)
		}
		if !got.ClearCheckpoint || got.Position != g.Tip || got.IfAbsent {
			t.Fatalf("%s: startFor = %+v, want the tip with ClearCheckpoint", s.ID, got)
		}
	}
}

func TestReopenedParent(t *testing.T) {
	child := shards.Shard{ID: "c", ParentID: "p", AdjacentParentID: "q"}
	reopenedAt := func(order int64) lease.Lease {
		return lease.Lease{Start: "horizon", GenerationOrder: order, Incarnation: 7}
	}
	finished := lease.Lease{Checkpoint: lease.ShardEnd, Start: "horizon", GenerationOrder: 3, Incarnation: 7}
	reading := lease.Lease{Owner: "o", Checkpoint: "5", GenerationOrder: 2, Incarnation: 7}
	cases := []struct {
		name   string
		row    lease.Lease
		rows   map[string]lease.Lease
		wrote  map[string]lease.Start
		want   string
		reopen bool
	}{
		{"ParentReadToItsEnd", reading, map[string]lease.Lease{"p": finished}, nil, "", false},
		{"ParentReopenedByANewerGeneration", reading, map[string]lease.Lease{"p": reopenedAt(3)}, nil, "horizon", true},
		{"AdjacentParentReopened", reading, map[string]lease.Lease{"p": finished, "q": reopenedAt(3)}, nil, "horizon", true},
		{"ChildReadToItsEndToo", lease.Lease{Checkpoint: lease.ShardEnd, GenerationOrder: 2}, map[string]lease.Lease{"p": reopenedAt(3)}, nil, "horizon", true},
		// The parent's start is the child's generation's own: a child and
		// its parent opened together, or an operator's reset of the parent.
		{"ParentUnderTheChildsGeneration", reading, map[string]lease.Lease{"p": reopenedAt(2)}, nil, "", false},
		{"ChildThatNeverWentOn", lease.Lease{Start: "timestamp:5", GenerationOrder: 1}, map[string]lease.Lease{"p": reopenedAt(3)}, nil, "", false},
		{"ParentOfAnotherIncarnation", reading, map[string]lease.Lease{"p": {Start: "horizon", GenerationOrder: 3, Incarnation: 6}}, nil, "", false},
		{"ParentReopenedThisPass", reading, map[string]lease.Lease{"p": finished}, map[string]lease.Start{"p": {Position: "timestamp:9", ClearCheckpoint: true}}, "timestamp:9", true},
		{"ParentsStartMovedThisPass", reading, map[string]lease.Lease{"p": reopenedAt(3)}, map[string]lease.Start{"p": {Position: "timestamp:9"}}, "timestamp:9", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			at, ok := reopenedParent(child, c.row, c.rows, c.wrote)
			if at != c.want || ok != c.reopen {
				t.Fatalf("reopenedParent = %q, %v; want %q, %v", at, ok, c.want, c.reopen)
			}
		})
	}
}
