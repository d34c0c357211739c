package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/shardloop/shardloop/internal/kinesismem"
	"github.com/shardloop/shardloop/internal/testaws"
	"github.com/shardloop/shardloop/pkg/coordinator"
	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/shards"
)

func sub(stream, start string) coordinator.Config {
	return coordinator.Config{Subscriptions: []coordinator.Subscription{{Stream: stream, Start: start}}}
}

func pass(t *testing.T, c *coordinator.Coordinator) coordinator.StreamResult {
	t.Helper()
	res, err := c.Pass(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return res.Streams[0]
}

// settle checkpoints seq on every loop's row as its reader would.
func settle(t *testing.T, store lease.Store, loops []coordinator.Loop, seq string) {
	t.Helper()
	for _, l := range loops {
		if _, err := store.Checkpoint(t.Context(), l.Stream, l.ShardID, l.Owner, seq); err != nil {
			t.Fatal(err)
		}
	}
}

func rowsOf(t *testing.T, store lease.Store, stream string) map[string]lease.Lease {
	t.Helper()
	rows, err := store.List(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]lease.Lease{}
	for _, r := range rows {
		m[r.ShardID] = r
	}
	return m
}

// TestPass_RestartWithoutAStartKeepsEveryCheckpoint is the bug of a restart
// without --start (or a deployment whose StartPosition prop was removed):
// the default "latest" was recorded as a new generation over every
// checkpoint, and what was written while the consumer was down was lost.
func TestPass_RestartWithoutAStartKeepsEveryCheckpoint(t *testing.T) {
	kc := testaws.Kinesis(t)
	stream := newStream(t, kc, 2)
	store := memStore(t)
	first := pass(t, newCoordinator(t, sub(stream, "horizon"), store, kc, &recorder{}))
	settle(t, store, first.Started, "5")
	for _, l := range first.Started {
		if err := store.Release(t.Context(), stream, l.ShardID, l.Owner, lease.Handover{}); err != nil {
			t.Fatal(err)
		}
	}

	again := pass(t, newCoordinator(t, sub(stream, ""), store, kc, &recorder{}))
	if again.StartRecorded || again.Step != "follow" || len(again.Started) != 2 {
		t.Fatalf("pass without a start = %+v, want the shards taken, nothing recorded", again)
	}
	for id, r := range rowsOf(t, store, stream) {
		if r.Checkpoint != "5" || !r.StartApplied || r.Start != "horizon" {
			t.Fatalf("row %s after a restart without a start = %+v, want the checkpoint to decide", id, r)
		}
	}
}

// TestPass_OlderConfigurationChangesNothing is the bug of two coordinators
// with different starts on one table (a deploy in progress, blue/green
// stacks): each pass re-recorded its own generation over the other's,
// cleared the owners and re-pinned "latest" to a new now. Generations are
// ordered now: the older configuration stands down, and the tip is pinned
// once.
func TestPass_OlderConfigurationChangesNothing(t *testing.T) {
	kc := testaws.Kinesis(t)
	stream := newStream(t, kc, 2)
	store := dynStore(t)
	blue := newCoordinator(t, sub(stream, "latest"), store, kc, &recorder{})
	green := newCoordinator(t, sub(stream, "horizon"), store, kc, &recorder{})

	b1 := pass(t, blue)
	pinned := rowsOf(t, store, stream)["shardId-000000000000"].Start
	if b1.Step != "begin" || !strings.HasPrefix(pinned, "timestamp:") {
		t.Fatalf("blue's first pass = %+v, pinned %q", b1, pinned)
	}
	g1 := pass(t, green) // the newer configuration: applied once
	if g1.Step != "begin" || !g1.StartRecorded || g1.Generation.Order != 2 {
		t.Fatalf("green's first pass = %+v, want a new generation of order 2", g1)
	}
	settle(t, store, g1.Started, "7")
	before := rowsOf(t, store, stream)

	for range 3 {
		time.Sleep(50 * time.Millisecond)
		b := pass(t, blue)
		if !b.StaleConfiguration || b.Step != "stale" || b.StartRecorded || len(b.Started) != 0 {
			t.Fatalf("blue's pass after green's generation = %+v, want it stale and changing nothing", b)
		}
		if g := pass(t, green); g.Step != "follow" || g.StartRecorded || len(g.Started) != 0 {
			t.Fatalf("green's later pass = %+v, want it to follow its own record", g)
		}
	}
	if after := rowsOf(t, store, stream); !equalRows(before, after) {
		t.Fatalf("rows changed under a stale coordinator:\nbefore %+v\nafter  %+v", before, after)
	}
	rec, err := store.GetGeneration(t.Context(), stream)
	if err != nil || rec.Start != "horizon" || !rec.Supersedes(b1.Generation.ID) {
		t.Fatalf("record = %+v, %v", rec, err)
	}
}

func equalRows(a, b map[string]lease.Lease) bool {
	if len(a) != len(b) {
		return false
	}
	for id, r := range a {
		o := b[id]
		if r.Owner != o.Owner || r.Checkpoint != o.Checkpoint || r.Start != o.Start || r.Generation != o.Generation || r.StartApplied != o.StartApplied {
			return false
		}
	}
	return true
}

// TestPass_BlueGreenStartingTogetherConverges: two deployments with
// different starts make their first passes at the same time, again and
// again: one generation wins, each start is recorded at most once on each
// row, and nothing flips afterwards.
func TestPass_BlueGreenStartingTogetherConverges(t *testing.T) {
	kc := testaws.Kinesis(t)
	stream := newStream(t, kc, 2)
	store := dynStore(t)
	cs := []*coordinator.Coordinator{
		newCoordinator(t, sub(stream, "timestamp:1700000000000"), store, kc, &recorder{}),
		newCoordinator(t, sub(stream, "horizon"), store, kc, &recorder{}),
	}
	var mu sync.Mutex
	recorded := 0
	for range 4 {
		var wg sync.WaitGroup
		for _, c := range cs {
			wg.Go(func() {
				res, err := c.Pass(t.Context())
				if err != nil {
					t.Error(err)
					return
				}
				if res.Streams[0].StartRecorded {
					mu.Lock()
					recorded++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	if recorded < 1 || recorded > 2 {
		t.Fatalf("%d passes recorded a start, want one per configuration at most", recorded)
	}
	rec, _ := store.GetGeneration(t.Context(), stream)
	for id, r := range rowsOf(t, store, stream) {
		if r.Generation != rec.ID || r.GenerationOrder != rec.Order {
			t.Fatalf("row %s of generation %s/%d, record %s/%d: not converged", id, r.Generation, r.GenerationOrder, rec.ID, rec.Order)
		}
	}
}

// TestPass_ShardClosedWhenATipGenerationStartsIsReadFromTheTip: a parent
// closed when a "latest" generation starts may have taken records after
// the tip (pinned a second before Kinesis's time, before the listing), so
// it opens at the tip like the open shards, and its children wait for it.
func TestPass_ShardClosedWhenATipGenerationStartsIsReadFromTheTip(t *testing.T) {
	kc := testaws.Kinesis(t)
	stream := newStream(t, kc, 1)
	splitShard(t, kc, stream, "shardId-000000000000")
	store := memStore(t)
	res := pass(t, newCoordinator(t, sub(stream, "latest"), store, kc, &recorder{}))
	if got := shardsOf(res.Started); !slices.Equal(got, []string{"shardId-000000000000"}) {
		t.Fatalf("started %v, want the closed parent alone", got)
	}
	p := rowsOf(t, store, stream)["shardId-000000000000"]
	if p.Finished() || p.Start != res.Generation.Tip || p.StartApplied {
		t.Fatalf("closed parent row = %+v, want it to open at the tip %s", p, res.Generation.Tip)
	}
}

// TestPass_FutureTimestampStartCoversChildrenOfALaterSplit is world
// 777000137 of docs/benchmarks.md: a timestamp start later than the tip is
// recorded over the shards listed then, and a split follows before the
// start. The children hold records from before the start, which the
// generation does not owe (as on their parent, which the start covers); they
// opened at their beginning and delivered some of those records while the
// parent's, earlier and of the same keys, were skipped.
func TestPass_FutureTimestampStartCoversChildrenOfALaterSplit(t *testing.T) {
	kc := testaws.Kinesis(t)
	stream := newStream(t, kc, 1)
	store := memStore(t)
	start := "timestamp:" + strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	c := newCoordinator(t, sub(stream, start), store, kc, &recorder{})
	readParentThenSplit(t, c, kc, store, stream)
	res := pass(t, c)
	if got := shardsOf(res.Started); !slices.Equal(got, []string{"shardId-000000000001", "shardId-000000000002"}) {
		t.Fatalf("started %v, want the children", got)
	}
	for _, id := range []string{"shardId-000000000001", "shardId-000000000002"} {
		r := rowsOf(t, store, stream)[id]
		if r.Start != start || r.StartApplied || r.Generation != res.Generation.ID || r.GenerationOrder != res.Generation.Order {
			t.Fatalf("child %s = %+v, want it to open at the generation's start %s", id, r, start)
		}
	}

	// A start at or before the tip writes nothing for later shards: they
	// were all created after it.
	later := newStream(t, kc, 1)
	c2 := newCoordinator(t, sub(later, "timestamp:"+strconv.FormatInt(time.Now().Add(-time.Hour).UnixMilli(), 10)), store, kc, &recorder{})
	readParentThenSplit(t, c2, kc, store, later)
	pass(t, c2)
	if r := rowsOf(t, store, later)["shardId-000000000001"]; r.Start != "" {
		t.Fatalf("child under a past start = %+v, want no start of its own", r)
	}
}

// TestPass_RowsReadWhileAnotherCoordinatorAppliesAGenerationAreReadAgain is
// world 888000224 of docs/benchmarks.md: coordinator X read the rows while Y
// applied a new horizon generation row by row (the closed parent re-opened,
// its child's holder not yet revoked), then read the generation record as
// applied, and took the parent while the child's holder delivered the same
// keys. X now reads the rows again when the record changed while it read
// them, and the parent waits for the child's revoked holder.
func TestPass_RowsReadWhileAnotherCoordinatorAppliesAGenerationAreReadAgain(t *testing.T) {
	kc := testaws.Kinesis(t)
	stream := newStream(t, kc, 1)
	ms := memStore(t)
	readParentThenSplit(t, newCoordinator(t, sub(stream, "latest"), ms, kc, &recorder{}), kc, ms, stream)
	children := pass(t, newCoordinator(t, sub(stream, "latest"), ms, kc, &recorder{}))
	if len(children.Started) != 2 {
		t.Fatalf("started %v, want both children", shardsOf(children.Started))
	}

	parentStarted, xRead, yDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	y := newCoordinator(t, sub(stream, "horizon"), &interleave{Store: ms, setStart: func(id string) {
		if id != "shardId-000000000000" {
			<-xRead // the children are revoked only after X read the rows
		}
	}, afterSetStart: func(id string) {
		if id == "shardId-000000000000" {
			close(parentStarted)
		}
	}}, kc, &recorder{})
	var yErr error
	go func() {
		defer close(yDone)
		_, yErr = y.Pass(t.Context())
	}()
	armed := true
	x := newCoordinator(t, sub(stream, "horizon"), &interleave{Store: ms, getMany: func(read func()) {
		if !armed {
			read()
			return
		}
		armed = false
		<-parentStarted
		read()
		close(xRead)
	}, getGeneration: func() {
		select {
		case <-xRead:
			<-yDone // the record X reads after the rows is the applied one
		default:
		}
	}}, kc, &recorder{})
	res := pass(t, x)
	<-yDone
	if yErr != nil {
		t.Fatal(yErr)
	}
	if got := shardsOf(res.Started); len(got) != 0 {
		t.Fatalf("X started %v while the children's revoked holders may still deliver the parent's keys", got)
	}
	if w := res.Waiting["shardId-000000000000"]; w.Kind != shards.WaitingOnDescendant {
		t.Fatalf("parent: %v, want it waiting on a descendant", w)
	}
}

// TestPass_AChildTakenWhileANewGenerationReopensItsParentIsGivenBack is
// world 222 of seeds 1–1,000 (2026-12-03): coordinator X decided a child
// leasable on its parent's row, read to its end; coordinator Y recorded a
// new generation and re-opened the parent before X's take of the child
// landed (Y writes the child's start after its parent's, so the child's
// counter, which X's take checks, had not moved). X's loop read the child
// before its parent. X now reads the generation record again after taking
// a child and gives the child back when it changed.
func TestPass_AChildTakenWhileANewGenerationReopensItsParentIsGivenBack(t *testing.T) {
	kc := testaws.Kinesis(t)
	stream := newStream(t, kc, 1)
	ms := memStore(t)
	readParentThenSplit(t, newCoordinator(t, sub(stream, "latest"), ms, kc, &recorder{}), kc, ms, stream)

	parentReopened, xDone, yDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	y := newCoordinator(t, sub(stream, "horizon"), &interleave{Store: ms, setStart: func(id string) {
		if id != "shardId-000000000000" {
			<-xDone // the children's starts come after X's pass
		}
	}, afterSetStart: func(id string) {
		if id == "shardId-000000000000" {
			close(parentReopened)
		}
	}}, kc, &recorder{})
	var yErr error
	started := false
	x := newCoordinator(t, sub(stream, "latest"), &interleave{Store: ms, take: func(id string) {
		if id == "shardId-000000000000" || started {
			return
		}
		started = true
		go func() {
			defer close(yDone)
			_, yErr = y.Pass(t.Context())
		}()
		<-parentReopened // Y re-opened the parent after X read the rows
	}}, kc, &recorder{})
	res := pass(t, x)
	close(xDone)
	<-yDone
	if yErr != nil {
		t.Fatal(yErr)
	}
	if !started {
		t.Fatal("X took no child: not the race asked for")
	}
	if got := shardsOf(res.Started); len(got) != 0 {
		t.Fatalf("X started %v after Y re-opened their parent", got)
	}
	for id, r := range rowsOf(t, ms, stream) {
		if id != "shardId-000000000000" && r.Owner != "" && !r.Revoked {
			t.Fatalf("child %s = %+v: held, not revoked, while its parent is read again", id, r)
		}
	}
}

// TestPass_AGenerationReopensTheChildrenItsListingMissed is world
// 1,004,422 of docs/benchmarks.md: a redeployed coordinator listed the
// stream while a split was UPDATING (one shard), recorded a timestamp
// generation over that listing and re-opened the parent; meanwhile a
// coordinator of the old generation had listed the children and taken one,
// which read on. The generation's pass took the parent at once, and its
// replay of the parent's keys ran beside the child's holder, which was
// never revoked. Now the pass that wrote the starts lists again and takes
// nothing when the listing grew, and a pass re-opens the children the
// generation's listing missed, revoking their holders, before the parent
// is taken.
func TestPass_AGenerationReopensTheChildrenItsListingMissed(t *testing.T) {
	// raced: another coordinator of the generation re-opens the children
	// first, so this pass's writes change nothing; it must still read the
	// rows again, not decide on those it read before the writes.
	for _, raced := range []bool{false, true} {
		t.Run(fmt.Sprintf("raced=%v", raced), func(t *testing.T) { generationReopensMissedChildren(t, raced) })
	}
}

func generationReopensMissedChildren(t *testing.T, raced bool) {
	const parent = "shardId-000000000000"
	m := splitAndTakeChildren(t, "horizon")
	stream, ms, children := m.stream, m.ms, m.children
	settle(t, ms, children, "5")
	past := "timestamp:" + strconv.FormatInt(time.Now().Add(-time.Hour).UnixMilli(), 10)
	store := &interleave{Store: ms, afterSetStart: m.showOnParentStart}
	y := newCoordinator(t, sub(stream, past), store, m.hiding, &recorder{})

	first := pass(t, y)
	if first.Step != "begin" || !slices.Equal(first.Generation.Shards, []string{parent}) {
		t.Fatalf("first pass = %+v, want a generation begun over the parent alone", first)
	}
	if got := shardsOf(first.Started); len(got) != 0 {
		t.Fatalf("the pass whose listing missed the children started %v while their holders read on", got)
	}

	if raced {
		g := first.Generation
		store.setStart = func(id string) {
			if id != parent {
				st := lease.Start{Position: past, Generation: g.ID, Order: g.Order, Incarnation: g.Incarnation, ClearCheckpoint: true}
				if _, err := ms.SetStart(context.Background(), stream, id, st); err != nil {
					t.Errorf("the other coordinator's start on %s: %v", id, err)
				}
			}
		}
	}
	second := pass(t, y)
	if got := shardsOf(second.Started); len(got) != 0 {
		t.Fatalf("second pass started %v before the children's revoked holders stopped", got)
	}
	if w := second.Waiting[parent]; w.Kind != shards.WaitingOnDescendant {
		t.Fatalf("parent: %v, want it waiting on a revoked child", w)
	}
	rows := rowsOf(t, ms, stream)
	for _, l := range children {
		r := rows[l.ShardID]
		if !r.Revoked || r.Checkpoint != "" || r.Start != past || r.GenerationOrder != first.Generation.Order {
			t.Fatalf("child %s = %+v, want it re-opened at the generation's start, its holder revoked", l.ShardID, r)
		}
	}
}

// A generation recorded over a listing that missed the split's children,
// whose start on the parent failed, is applied by another coordinator whose
// listing holds the children: the rows it read before its start showed the
// parent read to its end, so the children's holders must be revoked on the
// rows read after it, before anything is taken.
func TestPass_AGenerationAppliedByAnotherCoordinatorReopensTheChildrenItsListingMissed(t *testing.T) {
	const parent = "shardId-000000000000"
	m := splitAndTakeChildren(t, "horizon")
	kc, stream, ms, children, hiding := m.kc, m.stream, m.ms, m.children, m.hiding
	settle(t, ms, children, "5")
	past := "timestamp:" + strconv.FormatInt(time.Now().Add(-time.Hour).UnixMilli(), 10)
	x := newCoordinator(t, sub(stream, past), &interleave{Store: ms, startErr: errors.New("injected: start not written")}, hiding, &recorder{})
	if _, err := x.Pass(context.Background()); err == nil {
		t.Fatal("the pass whose starts fail succeeded")
	}
	if g, err := ms.GetGeneration(context.Background(), stream); err != nil || g.Applied || !slices.Equal(g.Shards, []string{parent}) {
		t.Fatalf("generation = %+v (%v), want one recorded over the parent alone, not applied", g, err)
	}

	y := newCoordinator(t, sub(stream, past), ms, kc, &recorder{})
	first := pass(t, y)
	if got := shardsOf(first.Started); len(got) != 0 {
		t.Fatalf("the pass that applied the generation started %v while the children's holders read on", got)
	}
	rows := rowsOf(t, ms, stream)
	for _, l := range children {
		r := rows[l.ShardID]
		if !r.Revoked || r.Checkpoint != "" || r.Start != past {
			t.Fatalf("child %s = %+v, want it re-opened at the generation's start, its holder revoked", l.ShardID, r)
		}
	}
	second := pass(t, y)
	if got := shardsOf(second.Started); len(got) != 0 {
		t.Fatalf("second pass started %v before the children's revoked holders stopped", got)
	}
	if w := second.Waiting[parent]; w.Kind != shards.WaitingOnDescendant {
		t.Fatalf("parent: %v, want it waiting on a revoked child", w)
	}
}

// A generation whose listing missed a split's children, recorded after an
// older generation with a start in the future wrote that start on them:
// the children owe everything to the newer one, so their rows are not left
// opening at the older start, an hour ahead.
func TestPass_AGenerationRestartsMissedChildrenThatCarryAnOlderLateStart(t *testing.T) {
	const parent = "shardId-000000000000"
	future := "timestamp:" + strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	m := splitAndTakeChildren(t, future)
	stream, ms, children := m.stream, m.ms, m.children
	for _, l := range children { // their loops gave them back unread
		if err := ms.Release(t.Context(), stream, l.ShardID, l.Owner, lease.Handover{}); err != nil {
			t.Fatal(err)
		}
	}
	y := newCoordinator(t, sub(stream, "horizon"), &interleave{Store: ms, afterSetStart: m.showOnParentStart}, m.hiding, &recorder{})
	first := pass(t, y)
	if !slices.Equal(first.Generation.Shards, []string{parent}) {
		t.Fatalf("generation %+v, want it recorded over the parent alone", first.Generation)
	}
	pass(t, y)
	rows := rowsOf(t, ms, stream)
	for _, l := range children {
		r := rows[l.ShardID]
		if r.Start != "horizon" || r.GenerationOrder != first.Generation.Order || r.Checkpoint != "" {
			t.Fatalf("child %s = %+v, want it to open at its first record under the new generation, not at %s", l.ShardID, r, future)
		}
	}
}

// The same, when a child was read from the older start before the newer
// generation, a latest start, was applied: the checkpoint does not make the
// older start stand, since records before it, which the newer generation
// owes, were skipped. The parent, read to its end under the older start,
// later than the newer tip, is read again from the tip (world 300 of the
// simulator), and the children after it, from the same place.
func TestPass_AGenerationRestartsMissedChildrenReadFromAnOlderLateStart(t *testing.T) {
	const parent = "shardId-000000000000"
	future := "timestamp:" + strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	m := splitAndTakeChildren(t, future)
	stream, ms, children := m.stream, m.ms, m.children
	put, err := m.kc.PutRecord(t.Context(), &kinesis.PutRecordInput{StreamName: aws.String(stream), PartitionKey: aws.String("k"),
		ExplicitHashKey: aws.String("0"), Data: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	read := aws.ToString(put.ShardId)
	for _, l := range children {
		if l.ShardID == read {
			if _, err := ms.Checkpoint(t.Context(), stream, l.ShardID, l.Owner, aws.ToString(put.SequenceNumber)); err != nil {
				t.Fatal(err)
			}
		}
	}
	y := newCoordinator(t, sub(stream, "latest"), ms, m.hiding, &recorder{})
	first := pass(t, y)
	if !slices.Equal(first.Generation.Shards, []string{parent}) {
		t.Fatalf("generation %+v, want it recorded over the parent alone", first.Generation)
	}
	m.showOnParentStart(parent)
	pass(t, y)
	rows := rowsOf(t, ms, stream)
	tip := first.Generation.Tip
	if r := rows[parent]; r.Start != tip || r.GenerationOrder != first.Generation.Order || r.Checkpoint != "" {
		t.Fatalf("parent = %+v, want it re-opened at the tip %s under the new generation, not left read to its end from %s", r, tip, future)
	}
	for _, l := range children {
		r := rows[l.ShardID]
		if r.Start != tip || r.GenerationOrder != first.Generation.Order || r.Checkpoint != "" || !r.Revoked {
			t.Fatalf("child %s = %+v, want it re-opened at the tip %s under the new generation, its holder revoked, not left at %s",
				l.ShardID, r, tip, future)
		}
	}
}

// A missed child's restart decided on a row nothing was read from (an
// older generation's start, no later than where the newer one opens such a
// shard) does not land once the child was read meanwhile: re-opened after it
// was read to its end, its records would be read again while its own
// children, which another coordinator started under the newer generation
// when it saw the child finished, read on (world 4366 of the simulator).
func TestPass_AMissedChildsRestartDoesNotLandOnceItWasRead(t *testing.T) {
	const parent, readMeanwhile = "shardId-000000000000", "shardId-000000000001"
	past := "timestamp:" + strconv.FormatInt(time.Now().Add(-time.Hour).UnixMilli(), 10)
	m := splitAndTakeChildren(t, past)
	stream, ms, children := m.stream, m.ms, m.children
	older := rowsOf(t, ms, stream)[parent]
	for _, l := range children { // given back unread, carrying the older generation's start
		if err := ms.Release(t.Context(), stream, l.ShardID, l.Owner, lease.Handover{}); err != nil {
			t.Fatal(err)
		}
		if _, err := ms.SetStart(t.Context(), stream, l.ShardID, lease.Start{Position: past, Generation: older.Generation, Order: older.GenerationOrder}); err != nil {
			t.Fatal(err)
		}
	}
	hook := &interleave{Store: ms, afterSetStart: m.showOnParentStart}
	sent := false
	hook.setStart = func(id string) {
		if id != readMeanwhile || sent {
			return
		}
		sent = true
		// A loop reads it to its end and gives it back while the start
		// decided on the unread row is on its way.
		if _, err := ms.Take(t.Context(), stream, id, "reader"); err != nil {
			t.Error(err)
		}
		if _, err := ms.Checkpoint(t.Context(), stream, id, "reader", lease.ShardEnd); err != nil {
			t.Error(err)
		}
		if err := ms.Release(t.Context(), stream, id, "reader", lease.Handover{}); err != nil {
			t.Error(err)
		}
	}
	y := newCoordinator(t, sub(stream, "latest"), hook, m.hiding, &recorder{})
	first := pass(t, y)
	if !slices.Equal(first.Generation.Shards, []string{parent}) {
		t.Fatalf("generation %+v, want it recorded over the parent alone", first.Generation)
	}
	pass(t, y)
	if !sent {
		t.Fatal("no start was sent for the child read meanwhile; the test does not reach the restart")
	}
	rows := rowsOf(t, ms, stream)
	if r := rows[readMeanwhile]; r.Checkpoint != lease.ShardEnd {
		t.Fatalf("child read to its end while its restart was on its way = %+v, want it still read to its end", r)
	}
	for _, l := range children {
		if r := rows[l.ShardID]; l.ShardID != readMeanwhile && (r.Start != "horizon" || r.GenerationOrder != first.Generation.Order) {
			t.Fatalf("child %s = %+v, want it restarted at its first record under the new generation", l.ShardID, r)
		}
	}
}

// missedChildren is a one-shard stream read to its end and split, both
// children taken by a coordinator of the first start, and a Kinesis that
// hides the children, for a coordinator whose listing must miss them.
type missedChildren struct {
	kc       *kinesis.Client
	stream   string
	ms       *lease.MemoryStore
	children []coordinator.Loop
	hiding   *hidingKinesis
}

func splitAndTakeChildren(t *testing.T, start string) missedChildren {
	t.Helper()
	kc := testaws.Kinesis(t)
	stream := newStream(t, kc, 1)
	ms := memStore(t)
	c := newCoordinator(t, sub(stream, start), ms, kc, &recorder{})
	readParentThenSplit(t, c, kc, ms, stream)
	children := pass(t, c)
	if got := shardsOf(children.Started); len(got) != 2 {
		t.Fatalf("started %v, want both children", got)
	}
	hiding := &hidingKinesis{Client: kc}
	hiding.hide("shardId-000000000001")
	hiding.hide("shardId-000000000002")
	return missedChildren{kc: kc, stream: stream, ms: ms, children: children.Started, hiding: hiding}
}

// showOnParentStart, an interleave's afterSetStart, shows the split's
// children from the moment a start is written on the parent.
func (m missedChildren) showOnParentStart(id string) {
	if id == "shardId-000000000000" { // the parent
		m.hiding.mu.Lock()
		clear(m.hiding.hidden)
		m.hiding.mu.Unlock()
	}
}

// interleave runs hooks around a store's calls, to order two coordinators'
// passes.
type interleave struct {
	Store                   lease.CoordinatorStore
	setStart, afterSetStart func(shardID string)
	startErr                error // every start fails with it, unwritten
	getMany                 func(read func())
	getGeneration           func()
	take                    func(shardID string)
}

func (s *interleave) SetStart(ctx context.Context, stream, shardID string, st lease.Start) (bool, error) {
	if s.setStart != nil {
		s.setStart(shardID)
	}
	if s.startErr != nil {
		return false, s.startErr
	}
	changed, err := s.Store.SetStart(ctx, stream, shardID, st)
	if s.afterSetStart != nil {
		s.afterSetStart(shardID)
	}
	return changed, err
}

func (s *interleave) GetMany(ctx context.Context, stream string, ids []string) (rows map[string]lease.Lease, err error) {
	read := func() { rows, err = s.Store.GetMany(ctx, stream, ids) }
	if s.getMany == nil {
		read()
	} else {
		s.getMany(read)
	}
	return rows, err
}

func (s *interleave) GetGeneration(ctx context.Context, stream string) (lease.Generation, error) {
	if s.getGeneration != nil {
		s.getGeneration()
	}
	return s.Store.GetGeneration(ctx, stream)
}

// The calls interleave passes on as they are.

func (s *interleave) List(ctx context.Context, stream string) ([]lease.Lease, error) {
	return s.Store.List(ctx, stream)
}

func (s *interleave) Delete(ctx context.Context, stream, shardID string, counter, incarnation int64) error {
	return s.Store.Delete(ctx, stream, shardID, counter, incarnation)
}

func (s *interleave) PutGeneration(ctx context.Context, stream string, g lease.Generation, prevOrder int64) error {
	return s.Store.PutGeneration(ctx, stream, g, prevOrder)
}

func (s *interleave) Take(ctx context.Context, stream, shardID, owner string, opts ...lease.TakeOption) (lease.Lease, error) {
	if s.take != nil {
		s.take(shardID)
	}
	return s.Store.Take(ctx, stream, shardID, owner, opts...)
}

func (s *interleave) Release(ctx context.Context, stream, shardID, owner string, ho lease.Handover) error {
	return s.Store.Release(ctx, stream, shardID, owner, ho)
}

// readParentThenSplit passes once with c over a one-shard stream, splits the
// shard, and has the started loop read it to its end and release it, as its
// reader would: the pass that follows finds a finished parent and two free
// children.
func readParentThenSplit(t *testing.T, c *coordinator.Coordinator, kc *kinesis.Client, store lease.Store, stream string) coordinator.StreamResult {
	t.Helper()
	first := pass(t, c)
	if got := shardsOf(first.Started); !slices.Equal(got, []string{"shardId-000000000000"}) {
		t.Fatalf("started %v, want the one shard", got)
	}
	splitShard(t, kc, stream, "shardId-000000000000")
	settle(t, store, first.Started, lease.ShardEnd)
	for _, l := range first.Started {
		if err := store.Release(t.Context(), stream, l.ShardID, l.Owner, lease.Handover{}); err != nil {
			t.Fatal(err)
		}
	}
	return first
}

func shardsOf(loops []coordinator.Loop) []string {
	var ids []string
	for _, l := range loops {
		ids = append(ids, l.ShardID)
	}
	slices.Sort(ids)
	return ids
}

// failingTake refuses the first n takes with a throttling error.
type failingTake struct {
	Store lease.CoordinatorStore
	mu    sync.Mutex
	n     int
}

func (f *failingTake) Take(ctx context.Context, stream, shardID, owner string, opts ...lease.TakeOption) (lease.Lease, error) {
	f.mu.Lock()
	if f.n > 0 {
		f.n--
		f.mu.Unlock()
		return lease.Lease{}, errors.New("injected: ProvisionedThroughputExceededException")
	}
	f.mu.Unlock()
	return f.Store.Take(ctx, stream, shardID, owner, opts...)
}

// The calls failingTake passes on as they are.

func (f *failingTake) GetMany(ctx context.Context, stream string, shardIDs []string) (map[string]lease.Lease, error) {
	return f.Store.GetMany(ctx, stream, shardIDs)
}

func (f *failingTake) List(ctx context.Context, stream string) ([]lease.Lease, error) {
	return f.Store.List(ctx, stream)
}

func (f *failingTake) SetStart(ctx context.Context, stream, shardID string, st lease.Start) (bool, error) {
	return f.Store.SetStart(ctx, stream, shardID, st)
}

func (f *failingTake) Delete(ctx context.Context, stream, shardID string, counter, incarnation int64) error {
	return f.Store.Delete(ctx, stream, shardID, counter, incarnation)
}

func (f *failingTake) GetGeneration(ctx context.Context, stream string) (lease.Generation, error) {
	return f.Store.GetGeneration(ctx, stream)
}

func (f *failingTake) PutGeneration(ctx context.Context, stream string, g lease.Generation, prevOrder int64) error {
	return f.Store.PutGeneration(ctx, stream, g, prevOrder)
}

func (f *failingTake) Release(ctx context.Context, stream, shardID, owner string, ho lease.Handover) error {
	return f.Store.Release(ctx, stream, shardID, owner, ho)
}

// TestPass_ParentWhoseTakeFailedIsNotReadBesideItsChildren is the bug of a
// startup that records the start on an open shard whose take then fails
// (throttling), after which the shard is split: "closed, no checkpoint,
// never taken" was inferred as "closed before startup", and the parent and
// its children were started together.
func TestPass_ParentWhoseTakeFailedIsNotReadBesideItsChildren(t *testing.T) {
	kc := testaws.Kinesis(t)
	stream := newStream(t, kc, 1)
	store := &failingTake{Store: memStore(t), n: 1}
	c := newCoordinator(t, sub(stream, "latest"), store, kc, &recorder{})
	if _, err := c.Pass(t.Context()); err == nil {
		t.Fatal("first pass: want the injected take failure")
	}
	splitShard(t, kc, stream, "shardId-000000000000")
	res := pass(t, c)
	if got := shardsOf(res.Started); !slices.Equal(got, []string{"shardId-000000000000"}) {
		t.Fatalf("started %v, want only the parent: its records since the start come before its children's", got)
	}
}

// TestPass_HorizonGenerationRereadsClosedShardsParentsFirst: a new
// generation at the horizon overrides every checkpoint, SHARD_END included,
// so closed shards still in retention are read again, parents before
// children.
func TestPass_HorizonGenerationRereadsClosedShardsParentsFirst(t *testing.T) {
	kc := testaws.Kinesis(t)
	stream := newStream(t, kc, 1)
	store := memStore(t)
	first := pass(t, newCoordinator(t, sub(stream, "latest"), store, kc, &recorder{}))
	splitShard(t, kc, stream, "shardId-000000000000")
	settle(t, store, first.Started, lease.ShardEnd)
	old := newCoordinator(t, sub(stream, "latest"), store, kc, &recorder{})
	children := pass(t, old)
	settle(t, store, children.Started, "1")

	// The new generation revokes the children's leases: they are taken again
	// once their counters stood still for a lease duration (their holders
	// have stopped by then).
	cfg := sub(stream, "horizon")
	cfg.LeaseDuration = 300 * time.Millisecond
	c := newCoordinator(t, cfg, store, kc, &recorder{})
	pass(t, c)
	time.Sleep(400 * time.Millisecond)
	res := pass(t, c)
	if got := shardsOf(res.Started); !slices.Equal(got, []string{"shardId-000000000000"}) {
		t.Fatalf("started %v, want the parent first", got)
	}
	for id, r := range rowsOf(t, store, stream) {
		if r.Start != "horizon" || r.StartApplied || r.Finished() {
			t.Fatalf("row %s = %+v, want horizon pending and no SHARD_END", id, r)
		}
	}
	if w := res.Waiting["shardId-000000000001"]; !strings.Contains(w.String(), "waiting on parent") {
		t.Fatalf("child: %v, want it waiting on its parent", w)
	}
}

// TestOnce_ParentReopenedByAGenerationWaitsForItsChildrensRevokedHolders is
// B6 of docs/benchmarks.md: a new generation at the horizon re-opens a parent
// read to its end and released, and revokes the loops reading its children.
// Those loops deliver the parent's keys until their next renewal is refused,
// and their invocations run on to the fence, so the parent is not read again
// until the children's leases have lapsed: then Once's watch takes it.
func TestOnce_ParentReopenedByAGenerationWaitsForItsChildrensRevokedHolders(t *testing.T) {
	kc := testaws.Kinesis(t)
	stream := newStream(t, kc, 1)
	store := memStore(t)
	first := pass(t, newCoordinator(t, sub(stream, "latest"), store, kc, &recorder{}))
	splitShard(t, kc, stream, "shardId-000000000000")
	settle(t, store, first.Started, lease.ShardEnd)
	for _, l := range first.Started { // as its reader does at SHARD_END
		if err := store.Release(t.Context(), stream, l.ShardID, l.Owner, lease.Handover{}); err != nil {
			t.Fatal(err)
		}
	}
	children := pass(t, newCoordinator(t, sub(stream, "latest"), store, kc, &recorder{}))
	settle(t, store, children.Started, "1")

	cfg := sub(stream, "horizon")
	cfg.LeaseDuration = 300 * time.Millisecond
	rec := &recorder{}
	c := newCoordinator(t, cfg, store, kc, rec)
	const parent = "shardId-000000000000"
	res := pass(t, c)
	if why := res.Waiting[parent]; len(res.Started) != 0 || why.Kind != shards.WaitingOnDescendant || why.Descendant != "shardId-000000000001" {
		t.Fatalf("first pass started %v, parent %v; want nothing started, the parent waiting on its first child's revoked holder",
			shardsOf(res.Started), why)
	}
	if _, _, err := c.Once(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := shardsOf(loopsFrom(rec, 0)); !slices.Equal(got, []string{parent}) {
		t.Fatalf("started %v, want the parent once its children's revoked leases lapsed", got)
	}
	if r := rowsOf(t, store, stream)[parent]; r.Owner != loopsFrom(rec, 0)[0].Owner || r.Start != "horizon" {
		t.Fatalf("parent row = %+v, want it held by the new loop with the horizon start", r)
	}
}

// TestPass_StreamCreatedAgainUnderTheSameNameIsNotWedged: the rows of a
// deleted stream (shard 0 read to its end) used to keep the new stream's
// shard 0 "finished" forever. Rows carry the stream's creation time; those
// of an earlier incarnation are replaced.
func TestPass_StreamCreatedAgainUnderTheSameNameIsNotWedged(t *testing.T) {
	for _, start := range []string{"", "horizon"} {
		t.Run("start="+start, func(t *testing.T) {
			kc := testaws.Kinesis(t)
			stream := newStream(t, kc, 1)
			store := memStore(t)
			cfg := sub(stream, start)
			cfg.LeaseDuration = 300 * time.Millisecond
			c := newCoordinator(t, cfg, store, kc, &recorder{})
			first := pass(t, c)
			settle(t, store, first.Started, lease.ShardEnd) // held by a loop that is gone

			if _, err := kc.DeleteStream(t.Context(), &kinesis.DeleteStreamInput{StreamName: aws.String(stream)}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool {
				_, err := kc.DescribeStreamSummary(t.Context(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
				return err != nil
			})
			time.Sleep(10 * time.Millisecond) // a creation time of its own
			if _, err := kc.CreateStream(t.Context(), &kinesis.CreateStreamInput{StreamName: aws.String(stream), ShardCount: aws.Int32(1)}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool {
				out, err := kc.DescribeStreamSummary(t.Context(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
				return err == nil && out.StreamDescriptionSummary.StreamStatus == "ACTIVE"
			})
			res := pass(t, c)
			if res.Step != "begin" || !res.StartRecorded {
				t.Fatalf("pass over the new incarnation = %+v, want a new generation recorded on shard 0", res)
			}
			// The old loop's lease is revoked; it is taken once it lapsed.
			time.Sleep(400 * time.Millisecond)
			if res := pass(t, c); len(res.Started) != 1 {
				t.Fatalf("pass after the old lease lapsed = %+v, want shard 0 started", res)
			}
			r := rowsOf(t, store, stream)["shardId-000000000000"]
			if r.Finished() || r.Checkpoint != "" || r.Incarnation != res.Generation.Incarnation || r.Incarnation == 0 || r.Revoked {
				t.Fatalf("shard 0 row = %+v, want a fresh row of the new incarnation", r)
			}
		})
	}
}

// recreate deletes stream and creates it again with n shards, ACTIVE.
func recreate(t *testing.T, kc *kinesis.Client, stream string, n int32) {
	t.Helper()
	if _, err := kc.DeleteStream(t.Context(), &kinesis.DeleteStreamInput{StreamName: aws.String(stream)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		_, err := kc.DescribeStreamSummary(t.Context(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
		return err != nil
	})
	time.Sleep(10 * time.Millisecond) // a creation time of its own
	if _, err := kc.CreateStream(t.Context(), &kinesis.CreateStreamInput{StreamName: aws.String(stream), ShardCount: aws.Int32(n)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		out, err := kc.DescribeStreamSummary(t.Context(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
		return err == nil && out.StreamDescriptionSummary.StreamStatus == "ACTIVE"
	})
}

// TestPass_SequenceStartIsNeverAppliedToAStreamCreatedAgain: a sequence
// start names one record of one stream. A coordinator still configured
// with it when the stream is deleted and created again (an older
// invocation running through a redeploy) used to begin the new stream with
// it: every read of that shard failed, forever, and its records were never
// delivered (found by the simulator). The new stream begins as without a
// start, and the configuration is stale from then on.
func TestPass_SequenceStartIsNeverAppliedToAStreamCreatedAgain(t *testing.T) {
	kc := testaws.Kinesis(t)
	stream := newStream(t, kc, 1)
	put, err := kc.PutRecord(t.Context(), &kinesis.PutRecordInput{StreamName: aws.String(stream), PartitionKey: aws.String("k"), Data: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	start := "sequence:shardId-000000000000:" + aws.ToString(put.SequenceNumber)
	store := memStore(t)
	cfg := sub(stream, start)
	cfg.LeaseDuration = 300 * time.Millisecond
	c := newCoordinator(t, cfg, store, kc, &recorder{})
	if res := pass(t, c); res.Step != "begin" || rowsOf(t, store, stream)["shardId-000000000000"].Start != start {
		t.Fatalf("first pass = %+v, want the sequence start recorded on shard 0", res)
	}
	recreate(t, kc, stream, 1)
	res := pass(t, c)
	if res.Step != "begin" || res.Generation.ID != lease.DefaultGeneration || res.GenerationPending {
		t.Fatalf("pass over the stream created again = %+v, want a default generation begun and applied", res)
	}
	if r := rowsOf(t, store, stream)["shardId-000000000000"]; strings.HasPrefix(r.Start, "sequence:") || r.Incarnation != res.Generation.Incarnation {
		t.Fatalf("shard 0 row = %+v, want a row of the new stream without the old stream's sequence start", r)
	}
	if res := pass(t, c); !res.StaleConfiguration {
		t.Fatalf("next pass = %+v, want the sequence configuration stale", res)
	}
}

// skewed is a store whose writes use its host's clock, skew away from now.
// TestPass_ClockSkewNeitherStealsALiveLeaseNorDelaysADeadOne is the bug of
// expiry judged by absolute times from two hosts' clocks: a coordinator 30 s
// fast stole healthy leases on every pass, and a reader 30 s fast left its
// dead shard unleasable for 30 s more. Lapse is judged on the taker's own
// clock from the counter now. In virtual time (testing/synctest, the
// in-memory Kinesis and lease table): the holder's renewals land every
// 200 ms however busy the machine is, so no take while it renews is ever
// right, and the dead holder's shard is taken within a lease and two passes
// of its last renewal. The holder's skew is the clock its rows' expiries are
// written with; the coordinator's, the clock it judges by.
func TestPass_ClockSkewNeitherStealsALiveLeaseNorDelaysADeadOne(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		holderSkew, takeSkew time.Duration
	}{
		{"CoordinatorFast", 0, 30 * time.Second},
		{"ReaderFast", 30 * time.Second, 0},
		{"CoordinatorSlow", 0, -30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { clockSkew(t, tc.holderSkew, tc.takeSkew) })
		})
	}
}

func clockSkew(t *testing.T, holderSkew, takeSkew time.Duration) {
	kc, err := kinesismem.New(kinesismem.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const stream, shard = "skew", "shardId-000000000000"
	if _, err := shards.CreateIfMissing(t.Context(), kc, stream, 1); err != nil {
		t.Fatal(err)
	}
	store, err := lease.NewMemoryStore(func(o *lease.Options) {
		o.Clock = func() time.Time { return time.Now().Add(holderSkew) }
		o.Duration = time.Second
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Take(t.Context(), stream, shard, "reader"); err != nil {
		t.Fatal(err)
	}
	renewing, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var last time.Time // of the holder's last renewal
	wg.Go(func() {
		for renewing.Err() == nil {
			time.Sleep(200 * time.Millisecond)
			if _, err := store.Renew(t.Context(), stream, shard, "reader", lease.Renewal{}); err != nil {
				t.Errorf("renew: %v", err)
				return
			}
			last = time.Now()
		}
	})
	rec := &recorder{}
	cfg := sub(stream, "")
	cfg.LeaseDuration = time.Second
	cfg.Clock = func() time.Time { return time.Now().Add(takeSkew) }
	c := newCoordinator(t, cfg, store, kc, rec)
	for range 15 { // 3 s of passes while the holder renews
		pass(t, c)
		time.Sleep(200 * time.Millisecond)
	}
	stop()
	wg.Wait()
	if n := len(rec.shards()); n != 0 {
		t.Fatalf("a live lease was taken %d times", n)
	}
	for len(rec.shards()) == 0 {
		if time.Since(last) > time.Minute { // bounds a failure only
			t.Fatal("the dead holder's shard was not taken within a minute of a 1 s lease")
		}
		pass(t, c)
		time.Sleep(100 * time.Millisecond)
	}
	if took := time.Since(last); took < cfg.LeaseDuration || took > cfg.LeaseDuration+200*time.Millisecond {
		t.Fatalf("taken %s after the last renewal, want within two passes after a full lease duration (%s)", took, cfg.LeaseDuration)
	}
}

// TestPass_AHalfAppliedGenerationIsFinishedByTheConfigurationThatReplacedIt
// is world 1868's stall: a deploy recorded a new start's generation and its
// pass failed part way; the configuration was changed back before any of
// its coordinators passed again. The coordinators left were stale to the
// record (it supersedes their start) or had no start at all, none finished
// it, and every pass took nothing, for good. Any coordinator now finishes
// the recorded generation from the record itself.
func TestPass_AHalfAppliedGenerationIsFinishedByTheConfigurationThatReplacedIt(t *testing.T) {
	for _, back := range []string{"latest", ""} {
		t.Run("back to "+strconv.Quote(back), func(t *testing.T) {
			kc := testaws.Kinesis(t)
			stream := newStream(t, kc, 2)
			ms := memStore(t)
			first := pass(t, newCoordinator(t, sub(stream, "latest"), ms, kc, &recorder{}))
			for _, l := range first.Started {
				if err := ms.Release(t.Context(), stream, l.ShardID, l.Owner, lease.Handover{}); err != nil {
					t.Fatal(err)
				}
			}
			half := newCoordinator(t, sub(stream, "horizon"), &failingSetStart{Store: ms, left: 1}, kc, &recorder{})
			if _, err := half.Pass(t.Context()); err == nil {
				t.Fatal("the horizon pass whose second start failed succeeded")
			}
			if rec, err := ms.GetGeneration(t.Context(), stream); err != nil || rec.Applied || rec.Start != "horizon" {
				t.Fatalf("record after the failed pass = %+v, %v; want horizon, not applied", rec, err)
			}

			res := pass(t, newCoordinator(t, sub(stream, back), ms, kc, &recorder{}))
			if len(res.Started) != 2 || res.GenerationPending {
				t.Fatalf("pass of the configuration changed back = %+v, want the recorded generation finished and both shards taken", res)
			}
			rec, err := ms.GetGeneration(t.Context(), stream)
			if err != nil || !rec.Applied || rec.Start != "horizon" {
				t.Fatalf("record = %+v, %v; want horizon, applied", rec, err)
			}
			for id, r := range rowsOf(t, ms, stream) {
				if r.Start != "horizon" || r.Generation != rec.ID {
					t.Fatalf("row %s = %+v, want the horizon generation's start", id, r)
				}
			}
		})
	}
}

// TestPass_AConfigurationDeployedAgainAfterTheOneThatSupersededItBegins: a
// deploy from latest to horizon, then back to latest. Latest is among the
// horizon record's superseded ids, but it was deployed after it: it is the
// newer configuration and begins again (before, it was stale for good and
// the deploy changed nothing). The horizon coordinator, deployed before,
// is stale to it.
func TestPass_AConfigurationDeployedAgainAfterTheOneThatSupersededItBegins(t *testing.T) {
	kc := testaws.Kinesis(t)
	stream := newStream(t, kc, 2)
	ms := memStore(t)
	at := func(start string, d time.Duration) coordinator.Config {
		c := sub(stream, start)
		c.Subscriptions[0].DeployedAt = time.UnixMilli(1_800_000_000_000).Add(d)
		return c
	}
	pass(t, newCoordinator(t, at("latest", 0), ms, kc, &recorder{}))
	if h := pass(t, newCoordinator(t, at("horizon", time.Minute), ms, kc, &recorder{})); h.Step != "begin" {
		t.Fatalf("horizon's pass = %+v, want it to begin", h)
	}
	again := pass(t, newCoordinator(t, at("latest", 2*time.Minute), ms, kc, &recorder{}))
	if again.Step != "begin" || again.Generation.Order != 3 || again.Generation.Supersedes(again.Generation.ID) {
		t.Fatalf("latest deployed again = %+v, want it to begin generation 3", again)
	}
	if h := pass(t, newCoordinator(t, at("horizon", time.Minute), ms, kc, &recorder{})); h.Step != "stale" {
		t.Fatalf("horizon's coordinator after latest was deployed again = %+v, want it stale", h)
	}
}

// TestPass_ChildrenOfAParentAHalfAppliedGenerationReopenedAreReopenedByTheNextOne
// is world 4000847 of the simulator: a horizon generation re-opened a parent
// read to its end (its checkpoint cleared), then its writes failed before
// it reached the parent's children, whose loops read on. A sequence start on
// one child superseded it before it was applied; such a start keeps every
// other row as it is, so the parent was read again from the horizon while
// its other child's loop delivered the same keys' newer records beside it.
// A generation that keeps a row re-opens it when a parent of it was
// re-opened by a newer generation than the row's: the child is read again
// after its parent, and the parent waits for the child's revoked holder.
func TestPass_ChildrenOfAParentAHalfAppliedGenerationReopenedAreReopenedByTheNextOne(t *testing.T) {
	// The children reading, or read to their end (their own children
	// reading on): either way they are read again after their parent.
	for _, ckpt := range []string{"1", lease.ShardEnd} {
		t.Run("children at "+ckpt, func(t *testing.T) { childrenOfAReopenedParent(t, ckpt) })
	}
}

// splitWithChildrenAt is a one-shard stream read to its end and split,
// its two children taken by a coordinator of a latest start and their rows
// at checkpoint ckpt, their loops holding them.
func splitWithChildrenAt(t *testing.T, ckpt string) (*kinesis.Client, string, *lease.MemoryStore) {
	t.Helper()
	kc := testaws.Kinesis(t)
	stream := newStream(t, kc, 1)
	store := memStore(t)
	first := pass(t, newCoordinator(t, sub(stream, "latest"), store, kc, &recorder{}))
	splitShard(t, kc, stream, "shardId-000000000000")
	settle(t, store, first.Started, lease.ShardEnd)
	for _, l := range first.Started {
		if err := store.Release(t.Context(), stream, l.ShardID, l.Owner, lease.Handover{}); err != nil {
			t.Fatal(err)
		}
	}
	children := pass(t, newCoordinator(t, sub(stream, "latest"), store, kc, &recorder{}))
	settle(t, store, children.Started, ckpt)
	return kc, stream, store
}

func childrenOfAReopenedParent(t *testing.T, ckpt string) {
	const parent, child1, child2 = "shardId-000000000000", "shardId-000000000001", "shardId-000000000002"
	kc, stream, store := splitWithChildrenAt(t, ckpt)

	half := newCoordinator(t, sub(stream, "horizon"), &failingSetStart{Store: store, left: 1}, kc, &recorder{})
	if _, err := half.Pass(t.Context()); err == nil {
		t.Fatal("the horizon pass whose writes to the children failed succeeded")
	}
	if rows := rowsOf(t, store, stream); rows[parent].Finished() || rows[parent].Start != "horizon" || rows[child1].Revoked || rows[child1].Checkpoint != ckpt {
		t.Fatalf("rows after the half-applied horizon generation = %+v, want the parent re-opened and the children as they were", rows)
	}

	cfg := sub(stream, "sequence:"+child2+":1")
	cfg.LeaseDuration = 300 * time.Millisecond
	rec := &recorder{}
	c := newCoordinator(t, cfg, store, kc, rec)
	res := pass(t, c)
	if res.Step != "begin" || res.GenerationPending {
		t.Fatalf("sequence start's pass = %+v, want its generation begun and applied", res)
	}
	if why := res.Waiting[parent]; len(res.Started) != 0 || why.Kind != shards.WaitingOnDescendant {
		t.Fatalf("pass started %v, parent %v; want nothing started, the parent waiting on its children's revoked holders", shardsOf(res.Started), why)
	}
	rows := rowsOf(t, store, stream)
	if r := rows[child1]; r.Start != "horizon" || r.Checkpoint != "" || !r.Revoked || r.GenerationOrder != res.Generation.Order {
		t.Fatalf("kept child = %+v, want it re-opened at its parent's start under generation %d, its holder revoked", r, res.Generation.Order)
	}
	if r := rows[child2]; r.Start != "sequence:"+child2+":1" || r.Checkpoint != "" || !r.Revoked {
		t.Fatalf("named child = %+v, want it re-opened at the sequence start, its holder revoked", r)
	}
	if _, _, err := c.Once(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := shardsOf(loopsFrom(rec, 0)); !slices.Equal(got, []string{parent}) {
		t.Fatalf("started %v, want the parent alone once its children's revoked leases lapsed", got)
	}
}

// A horizon generation is recorded over a parent read to its end and its
// children reading, and its pass's writes are on their way; a sequence
// generation supersedes it (sequenceOverAHorizonOnItsWay). World 6739 of
// seeds 1–10,000 (2026-12-07, with late writes): the horizon start on the
// parent landed after the sequence generation had been applied, which had
// kept the children reading on from their checkpoints; the parent's
// records were read again while the children went on after them.
func sequenceOverAHorizonOnItsWay(t *testing.T, store lease.CoordinatorStore, mem *lease.MemoryStore, kc *kinesis.Client, stream string) (lease.Generation, *coordinator.Coordinator, *recorder) {
	return sequenceOfOverAHorizonOnItsWay(t, "shardId-000000000002", store, mem, kc, stream)
}

// sequenceOfOverAHorizonOnItsWay is sequenceOverAHorizonOnItsWay with the
// sequence start naming shard named.
func sequenceOfOverAHorizonOnItsWay(t *testing.T, named string, store lease.CoordinatorStore, mem *lease.MemoryStore, kc *kinesis.Client, stream string) (lease.Generation, *coordinator.Coordinator, *recorder) {
	t.Helper()
	slow := newCoordinator(t, sub(stream, "horizon"), &failingSetStart{Store: mem}, kc, &recorder{})
	if _, err := slow.Pass(t.Context()); err == nil {
		t.Fatal("the horizon pass whose writes all failed succeeded")
	}
	horizon, err := mem.GetGeneration(t.Context(), stream)
	if err != nil || horizon.Start != "horizon" || horizon.Applied {
		t.Fatalf("generation record = %+v, %v; want the horizon generation, not applied", horizon, err)
	}
	cfg := sub(stream, "sequence:"+named+":1")
	cfg.LeaseDuration = 300 * time.Millisecond
	rec := &recorder{}
	return horizon, newCoordinator(t, cfg, store, kc, rec), rec
}

func lateHorizon(horizon lease.Generation) lease.Start {
	return lease.Start{Position: "horizon", Generation: horizon.ID, Order: horizon.Order, Incarnation: horizon.Incarnation, ClearCheckpoint: true}
}

// Applying the sequence generation raises the order of every row it keeps
// (Start.Keep): the horizon start that lands later is refused, and the
// children read on.
func TestPass_AStartOfASupersededGenerationLandingAfterTheKeepingOneWasAppliedIsRefused(t *testing.T) {
	const parent, child1 = "shardId-000000000000", "shardId-000000000001"
	kc, stream, store := splitWithChildrenAt(t, "1")
	horizon, c, _ := sequenceOverAHorizonOnItsWay(t, store, store, kc, stream)
	res := pass(t, c)
	if res.Step != "begin" || res.GenerationPending {
		t.Fatalf("sequence start's pass = %+v, want its generation begun and applied", res)
	}
	rows := rowsOf(t, store, stream)
	if r := rows[child1]; r.Checkpoint != "1" || r.Revoked || r.GenerationOrder != res.Generation.Order {
		t.Fatalf("child 1 after the sequence generation = %+v, want it kept, reading on, at order %d", r, res.Generation.Order)
	}
	if r := rows[parent]; !r.Finished() || r.GenerationOrder != res.Generation.Order {
		t.Fatalf("parent after the sequence generation = %+v, want it kept, read to its end, at order %d", r, res.Generation.Order)
	}
	if changed, err := store.SetStart(t.Context(), stream, parent, lateHorizon(horizon)); err != nil || changed {
		t.Fatalf("the late start on the parent: changed %v, %v; want it refused", changed, err)
	}
	if r := rowsOf(t, store, stream)[parent]; !r.Finished() {
		t.Fatalf("parent after the late start = %+v, want it read to its end", r)
	}
}

// landsBeforeKeep lands a start on a shard just before the first write
// over the row a pass read (Start.IfFrom, a keep among them) on that shard:
// a superseded generation's start that lands between a pass's read of the
// row and its write.
type landsBeforeKeep struct {
	*lease.MemoryStore
	shardID string
	start   lease.Start
	landed  bool
}

func (s *landsBeforeKeep) SetStart(ctx context.Context, stream, shardID string, st lease.Start) (bool, error) {
	if st.IfFrom && shardID == s.shardID && !s.landed {
		s.landed = true
		if _, err := s.MemoryStore.SetStart(ctx, stream, shardID, s.start); err != nil {
			return false, err
		}
	}
	return s.MemoryStore.SetStart(ctx, stream, shardID, st)
}

// When the horizon start lands between the sequence pass's read of the
// parent and its keep, the keep is refused: the generation is not applied
// by that pass, and the next one, deciding on the parent as it is now,
// keeps it re-opened and re-opens the children at its start; the parent
// waits for their revoked holders.
func TestPass_AKeepRefusedBecauseASupersededStartLandedIsDecidedAgain(t *testing.T) {
	const parent, child1 = "shardId-000000000000", "shardId-000000000001"
	kc, stream, mem := splitWithChildrenAt(t, "1")
	store := &landsBeforeKeep{MemoryStore: mem, shardID: parent}
	horizon, c, rec := sequenceOverAHorizonOnItsWay(t, store, mem, kc, stream)
	store.start = lateHorizon(horizon)
	if res := pass(t, c); !store.landed || !res.GenerationPending {
		t.Fatalf("sequence start's pass = %+v (late start landed %v), want its generation not applied", res, store.landed)
	}
	if r := rowsOf(t, mem, stream)[child1]; r.Checkpoint != "1" || r.Revoked {
		t.Fatalf("child 1 after the refused keep = %+v, want it as it was until the next pass decides", r)
	}
	res := pass(t, c)
	if res.GenerationPending {
		t.Fatalf("the next pass = %+v, want the generation applied", res)
	}
	if why := res.Waiting[parent]; len(res.Started) != 0 || why.Kind != shards.WaitingOnDescendant {
		t.Fatalf("pass started %v, parent %v; want nothing started, the parent waiting on its child's revoked holder", shardsOf(res.Started), why)
	}
	if r := rowsOf(t, mem, stream)[child1]; r.Start != "horizon" || r.Checkpoint != "" || !r.Revoked {
		t.Fatalf("child 1 = %+v, want it re-opened at its parent's start, its holder revoked", r)
	}
	if _, _, err := c.Once(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := shardsOf(loopsFrom(rec, 0)); !slices.Contains(got, parent) || slices.Contains(got, child1) {
		t.Fatalf("started %v, want the parent once its child's revoked lease lapsed, and not child 1 beside it", got)
	}
}

// World 1671 of seeds 1–2,000 (2026-12-07, with passes that outlive their
// supersession): a sequence generation naming a parent read to its end
// decided on the row as it was, so its start would keep SHARD_END and the
// children read on; a superseded horizon generation's start re-opened the
// parent before the write landed, and the parent was read again from the
// named record while its children went on. The write lands only over the
// row as read: refused, the next pass decides again, and re-opens the
// children with their parent.
func TestPass_AStartDecidedOnAParentReadToItsEndThatWasReopenedSinceIsDecidedAgain(t *testing.T) {
	const parent, child1 = "shardId-000000000000", "shardId-000000000001"
	kc, stream, mem := splitWithChildrenAt(t, "1")
	store := &landsBeforeKeep{MemoryStore: mem, shardID: parent}
	horizon, c, _ := sequenceOfOverAHorizonOnItsWay(t, parent, store, mem, kc, stream)
	store.start = lateHorizon(horizon)
	if res := pass(t, c); !store.landed || !res.GenerationPending {
		t.Fatalf("sequence start's pass = %+v (late start landed %v), want its generation not applied", res, store.landed)
	}
	if r := rowsOf(t, mem, stream)[parent]; r.Start != "horizon" {
		t.Fatalf("parent after the refused start = %+v, want the horizon start that landed first", r)
	}
	if res := pass(t, c); res.GenerationPending {
		t.Fatalf("the next pass = %+v, want the generation applied", res)
	}
	rows := rowsOf(t, mem, stream)
	if r := rows[parent]; r.Start != "sequence:"+parent+":1" || r.Finished() {
		t.Fatalf("parent = %+v, want it read again from the named record", r)
	}
	if r := rows[child1]; r.Checkpoint != "" || !r.Revoked {
		t.Fatalf("child 1 = %+v, want it re-opened with its parent, its holder revoked", r)
	}
}

// TestPass_AStaleConfigurationTakesNothingOfAStreamCreatedAgain is world
// 4168 of seeds 1–10,000 (2026-12-03): a coordinator whose configuration a
// newer deploy superseded took a shard of the stream created again before
// the newer configuration had begun it. With no start on the row, its loop
// opened at the tip; the newer configuration's generation, recorded a
// moment later, owed records from before that tip, and they reached the
// function after later records of their keys. A superseded configuration
// begins nothing, so it takes nothing of a stream whose generation record
// is of an earlier incarnation: the current configuration begins it.
func TestPass_AStaleConfigurationTakesNothingOfAStreamCreatedAgain(t *testing.T) {
	kc := testaws.Kinesis(t)
	stream := newStream(t, kc, 1)
	store := memStore(t)
	older := newCoordinator(t, sub(stream, "horizon"), store, kc, &recorder{})
	newer := newCoordinator(t, sub(stream, "latest"), store, kc, &recorder{})
	pass(t, older)
	if res := pass(t, newer); res.Step != "begin" {
		t.Fatalf("the newer configuration's pass = %+v, want a generation begun", res)
	}
	recreate(t, kc, stream, 2)
	res := pass(t, older)
	if !res.StaleConfiguration || len(res.Started) != 0 {
		t.Fatalf("the superseded configuration's pass over the stream created again = %+v; want it stale, taking nothing", res)
	}
	if res := pass(t, newer); res.Step != "begin" || len(res.Started) == 0 {
		t.Fatalf("the current configuration's pass = %+v, want it to begin the new stream and start its shards", res)
	}
	if res := pass(t, older); !res.StaleConfiguration || res.GenerationPending {
		t.Fatalf("the superseded configuration's pass once the new stream was begun = %+v, want it following the rows", res)
	}
}

// TestPass_RowsOfALaterIncarnationAreNeitherTakenNorDeleted: a pass that
// described the stream just before it was deleted and created again reads
// rows that the new stream's coordinators wrote. They are not stale rows
// of an earlier stream but rows of a later one: the pass deletes none and
// takes none (deleting one dropped the start it carried, and the shard
// was then read from its tip).
func TestPass_RowsOfALaterIncarnationAreNeitherTakenNorDeleted(t *testing.T) {
	kc := testaws.Kinesis(t)
	stream := newStream(t, kc, 2)
	store := memStore(t)
	c := newCoordinator(t, sub(stream, "horizon"), store, kc, &recorder{})
	first := pass(t, c)
	if len(first.Started) != 2 {
		t.Fatalf("first pass = %+v, want both shards started", first)
	}
	later := int64(0)
	for _, l := range first.Started {
		r := rowsOf(t, store, stream)[l.ShardID]
		if err := store.Release(t.Context(), stream, l.ShardID, r.Owner, lease.Handover{}); err != nil {
			t.Fatal(err)
		}
		later = r.Incarnation + 60_000
		st := lease.Start{Position: "horizon", Generation: "g-later", Order: r.GenerationOrder + 1, Incarnation: later, Fresh: true}
		if ok, err := store.SetStart(t.Context(), stream, l.ShardID, st); !ok || err != nil {
			t.Fatalf("SetStart of a later incarnation: %v %v", ok, err)
		}
	}
	res := pass(t, c)
	if len(res.Started) != 0 {
		t.Fatalf("pass over rows of a later incarnation = %+v, want nothing taken", res)
	}
	rows := rowsOf(t, store, stream)
	for _, l := range first.Started {
		if r, ok := rows[l.ShardID]; !ok || r.Incarnation != later || r.Generation != "g-later" {
			t.Fatalf("row of %s = %+v (present %v), want the later incarnation's row kept", l.ShardID, r, ok)
		}
	}
}
