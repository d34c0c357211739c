package coordinator_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardloop/shardloop/internal/testaws"
	"github.com/shardloop/shardloop/pkg/coordinator"
	"github.com/shardloop/shardloop/pkg/lease"
)

// shortLeases is a memory store whose leases last d, and a coordinator
// configuration that judges them by d, with an hour between relists (so
// that only a watch can take a shard back in a test's time).
func shortLeases(t *testing.T, stream string, d time.Duration) (*lease.MemoryStore, coordinator.Config) {
	t.Helper()
	store, err := lease.NewMemoryStore(func(o *lease.Options) { o.Duration = d })
	if err != nil {
		t.Fatal(err)
	}
	return store, coordinator.Config{
		Subscriptions:  []coordinator.Subscription{{Stream: stream}},
		RelistInterval: time.Hour,
		LeaseDuration:  d,
	}
}

// startLoops runs one pass and returns the loops it started, by shard.
func startLoops(t *testing.T, c *coordinator.Coordinator, want int) map[string]coordinator.Loop {
	t.Helper()
	res := pass(t, c)
	if len(res.Started) != want {
		t.Fatalf("first pass started %d loops, want %d", len(res.Started), want)
	}
	loops := map[string]coordinator.Loop{}
	for _, l := range res.Started {
		loops[l.ShardID] = l
	}
	return loops
}

// A loop that died (its execution failed) is taken over once its counter has
// stood still for a lease duration on the coordinator's clock, never before.
func TestWatch_TakesTheShardOnceTheDeadLoopsLeaseLapses(t *testing.T) {
	kc := testaws.Kinesis(t)
	stream := newStream(t, kc, 1)
	const d = 2 * time.Second
	store, cfg := shortLeases(t, stream, d)
	rec := &recorder{}
	c := newCoordinator(t, cfg, store, kc, rec)
	dead := startLoops(t, c, 1)["shardId-000000000000"]
	// A run of the loop renews once, as a run does, then the loop dies.
	if _, err := store.Take(t.Context(), stream, dead.ShardID, dead.Owner+lease.RunSeparator+"r1", lease.WithOwnerFamily(dead.Owner)); err != nil {
		t.Fatal(err)
	}
	watcher := newCoordinator(t, cfg, store, kc, rec) // a fresh invocation: it never saw the row
	begin := time.Now()
	res, err := watcher.Watch(t.Context(), dead)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != coordinator.WatchTaken || res.Started.ShardID != dead.ShardID || res.Started.Owner == dead.Owner {
		t.Fatalf("watch = %+v, want the shard taken for a new owner", res)
	}
	if took := time.Since(begin); took < d {
		t.Fatalf("taken after %v, before a lease duration (%v) on the watcher's clock", took, d)
	}
	row, err := store.Get(t.Context(), stream, dead.ShardID)
	if err != nil || row.Owner != res.Started.Owner {
		t.Fatalf("row %+v, %v; want it held by %s", row, err, res.Started.Owner)
	}
}

// A loop that still renews (the run of a stopped execution goes on) is not
// taken from; its shard is taken once it stops renewing.
func TestWatch_WaitsWhileTheLoopStillRenews(t *testing.T) {
	kc := testaws.Kinesis(t)
	stream := newStream(t, kc, 1)
	const d = 2 * time.Second
	store, cfg := shortLeases(t, stream, d)
	c := newCoordinator(t, cfg, store, kc, &recorder{})
	live := startLoops(t, c, 1)["shardId-000000000000"]
	const renewFor = 3 * time.Second
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		end := time.Now().Add(renewFor)
		for time.Now().Before(end) {
			if _, err := store.Renew(context.Background(), stream, live.ShardID, live.Owner, lease.Renewal{}); err != nil {
				t.Errorf("renew: %v", err)
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
	}()
	res, err := c.Watch(t.Context(), live)
	if err != nil {
		t.Fatal(err)
	}
	<-stopped
	if res.Outcome != coordinator.WatchTaken {
		t.Fatalf("watch = %+v, want taken once the renewals stopped", res)
	}
	if res.Took < renewFor {
		t.Fatalf("taken after %v, while the loop still renewed (for %v)", res.Took, renewFor)
	}
}

// The watch ends at its deadline when the loop still renews: the schedule
// takes the shard later. It never takes a live lease to meet its deadline.
func TestWatch_EndsUnfinishedAtItsDeadlineWhileTheLoopRenews(t *testing.T) {
	kc := testaws.Kinesis(t)
	stream := newStream(t, kc, 1)
	const d = 2 * time.Second
	store, cfg := shortLeases(t, stream, d)
	c := newCoordinator(t, cfg, store, kc, &recorder{})
	live := startLoops(t, c, 1)["shardId-000000000000"]
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Second)
	defer cancel()
	var renewing atomic.Bool
	renewing.Store(true)
	go func() {
		for renewing.Load() {
			_, _ = store.Renew(context.Background(), stream, live.ShardID, live.Owner, lease.Renewal{})
			time.Sleep(300 * time.Millisecond)
		}
	}()
	defer renewing.Store(false)
	res, err := c.Watch(ctx, live)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != coordinator.WatchUnfinished {
		t.Fatalf("watch = %+v, want unfinished", res)
	}
	row, _ := store.Get(t.Context(), stream, live.ShardID)
	if row.Owner != live.Owner {
		t.Fatalf("row owner %q, want the live loop %q", row.Owner, live.Owner)
	}
}

// A shard another loop holds already, or that is read to its end, ends the
// watch at once.
func TestWatch_ReturnsAtOnceWhenTheShardIsTakenOrFinished(t *testing.T) {
	kc := testaws.Kinesis(t)
	stream := newStream(t, kc, 2)
	store, cfg := shortLeases(t, stream, 10*time.Second)
	c := newCoordinator(t, cfg, store, kc, &recorder{})
	loops := startLoops(t, c, 2)
	a, b := loops["shardId-000000000000"], loops["shardId-000000000001"]
	if _, err := store.Checkpoint(t.Context(), stream, b.ShardID, b.Owner, lease.ShardEnd); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		loop coordinator.Loop
		want coordinator.WatchOutcome
	}{
		{coordinator.Loop{Stream: stream, ShardID: a.ShardID, Owner: "some-older-loop"}, coordinator.WatchOther},
		{b, coordinator.WatchFinished},
	} {
		res, err := c.Watch(t.Context(), tc.loop)
		if err != nil || res.Outcome != tc.want || res.Took > time.Second {
			t.Errorf("watch of %s by %s = %+v, %v; want %s at once", tc.loop.ShardID, tc.loop.Owner, res, err, tc.want)
		}
		if tc.want == coordinator.WatchOther && res.Owner != a.Owner {
			t.Errorf("owner %q, want %q", res.Owner, a.Owner)
		}
	}
}

func TestWatch_RefusesALoopItCannotWatch(t *testing.T) {
	c, err := coordinator.New(coordinator.Config{Subscriptions: []coordinator.Subscription{{Stream: "orders"}}},
		memStore(t), testaws.Kinesis(t), &recorder{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []coordinator.Loop{
		{Stream: "payments", ShardID: "shardId-000000000000", Owner: "o"},
		{Stream: "orders", Owner: "o"},
		{Stream: "orders", ShardID: "shardId-000000000000"},
	} {
		_, err := c.Watch(t.Context(), l)
		var ce *coordinator.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, coordinator.ErrInvalidConfig) {
			t.Errorf("watch of %+v: err = %v, want a ConfigError", l, err)
		}
	}
}

// Serve passes on its schedule and at nudges only: a dead loop that is
// reported (Failed) is taken over once its lease lapses; one that dies
// unreported is taken by passes (a nudge here, the schedule in a
// deployment) once two of them have seen its counter a lease duration apart.
func TestServe_TakesOverAReportedLoopAndPassesOnlyOnEvents(t *testing.T) {
	kc := testaws.Kinesis(t)
	stream := newStream(t, kc, 2)
	const d = 2 * time.Second
	store, cfg := shortLeases(t, stream, d)
	var passes atomic.Int64
	cfg.OnPass = func(coordinator.StreamResult) { passes.Add(1) }
	rec := &recorder{}
	c := newCoordinator(t, cfg, store, kc, rec)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Serve(ctx, time.Hour) }()
	defer func() { cancel(); <-done }()
	waitFor(t, func() bool { return len(rec.shards()) == 2 })
	rec.mu.Lock()
	first := append([]coordinator.Loop(nil), rec.loops...)
	rec.mu.Unlock()
	dead, live := first[0], first[1]
	var renewing atomic.Bool
	renewing.Store(true)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		for renewing.Load() {
			if _, err := store.Renew(context.Background(), stream, live.ShardID, live.Owner, lease.Renewal{}); err != nil {
				t.Errorf("renew %s: %v", live.ShardID, err)
				return
			}
			time.Sleep(300 * time.Millisecond)
		}
	}()
	c.Failed(dead)
	waitFor(t, func() bool { return len(rec.shards()) == 3 })
	rec.mu.Lock()
	third := rec.loops[2]
	rec.mu.Unlock()
	if third.ShardID != dead.ShardID || third.Owner == dead.Owner {
		t.Fatalf("third loop %+v: want %s taken over from %s", third, dead.ShardID, dead.Owner)
	}
	// The live loop dies unreported, after a last renewal no pass has seen:
	// no pass happens, so nothing takes it.
	renewing.Store(false)
	<-renewed
	if _, err := store.Renew(t.Context(), stream, live.ShardID, live.Owner, lease.Renewal{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * d)
	if n := len(rec.shards()); n != 3 {
		t.Fatalf("%d loops started with no event, want 3: Serve must not relist", n)
	}
	before := passes.Load()
	c.Nudge() // first sight of the final counter: not lapsed yet
	waitFor(t, func() bool { return passes.Load() > before })
	// That pass took the third loop's shard again (nothing renews it
	// either, and the watch's pass saw its counter), not the live one's.
	if got := shardsOf(loopsFrom(rec, 3)); !slices.Equal(got, []string{dead.ShardID}) {
		t.Fatalf("loops after one pass over the dead lease took %v, want only %s", got, dead.ShardID)
	}
	// Nudged again until a pass takes it: a lease duration after the pass
	// above first saw its final counter, however late that pass ran.
	waitFor(t, func() bool {
		c.Nudge()
		return slices.Contains(shardsOf(loopsFrom(rec, 3)), live.ShardID)
	})
}

// Once, after a new start generation revoked the leases of the loops that
// read under the old one, watches them and takes their shards once they
// lapse: no failed execution reports them. It watches them together: one
// pass for all once they lapse, not one each.
func TestOnce_TakesRevokedShardsOnceTheirLeasesLapseInOnePass(t *testing.T) {
	kc := testaws.Kinesis(t)
	stream := newStream(t, kc, 3)
	const d = 2 * time.Second
	store, cfg := shortLeases(t, stream, d)
	old := newCoordinator(t, cfg, store, kc, &recorder{})
	before := startLoops(t, old, 3)
	cfg.Subscriptions[0].Start = "horizon"
	rec := &recorder{}
	var passes atomic.Int64
	c := newCoordinator(t, cfg, store, &countingKinesis{Client: kc, passes: &passes}, rec)
	res, watched, err := c.Once(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := len(res.Revoked()); got != 3 {
		t.Fatalf("revoked %d loops, want 3: %+v", got, res.Streams[0])
	}
	if len(watched) != 3 {
		t.Fatalf("watched %+v, want every revoked loop", watched)
	}
	for _, w := range watched {
		if w.Outcome != coordinator.WatchTaken || w.Started.Owner == before[w.Loop.ShardID].Owner {
			t.Errorf("watch of %s = %+v, want the shard taken for a new owner", w.Loop.ShardID, w)
		}
		if w.Took < d {
			t.Errorf("%s taken after %v, before a lease duration", w.Loop.ShardID, w.Took)
		}
	}
	if n := passes.Load(); n != 2 {
		t.Errorf("%d passes, want 2: Once's and one for the three lapsed leases", n)
	}
	rows := rowsOf(t, store, stream)
	for _, l := range loopsFrom(rec, 0) {
		r := rows[l.ShardID]
		if r.Owner != l.Owner || l.Owner == before[l.ShardID].Owner || r.Start != "horizon" || r.Revoked {
			t.Errorf("row %s = %+v, want it held by the new loop %s with the new start, not revoked", l.ShardID, r, l.Owner)
		}
	}
}

// loopsFrom returns the loops rec started, from the n-th on.
func loopsFrom(rec *recorder, n int) []coordinator.Loop {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if n > len(rec.loops) {
		return nil
	}
	return append([]coordinator.Loop(nil), rec.loops[n:]...)
}
