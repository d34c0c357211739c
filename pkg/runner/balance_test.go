package runner_test

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardloop/shardloop/pkg/coordinator"
	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/reader"
	"github.com/shardloop/shardloop/pkg/runner"
)

// crashable is a lease store that, once crashed, fails every call: a
// runner whose process died makes none.
type crashable struct {
	Store   runner.Store
	mu      sync.Mutex
	crashed bool
}

var errCrashed = errors.New("the runner's process is dead")

func (c *crashable) dead() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.crashed }
func (c *crashable) crash()     { c.mu.Lock(); c.crashed = true; c.mu.Unlock() }

func (c *crashable) Take(ctx context.Context, stream, shard, owner string, o ...lease.TakeOption) (lease.Lease, error) {
	if c.dead() {
		return lease.Lease{}, errCrashed
	}
	return c.Store.Take(ctx, stream, shard, owner, o...)
}
func (c *crashable) Renew(ctx context.Context, stream, shard, owner string, rn lease.Renewal) (lease.Lease, error) {
	if c.dead() {
		return lease.Lease{}, errCrashed
	}
	return c.Store.Renew(ctx, stream, shard, owner, rn)
}
func (c *crashable) Checkpoint(ctx context.Context, stream, shard, owner, seq string, opts ...lease.CheckpointOption) (lease.Lease, error) {
	if c.dead() {
		return lease.Lease{}, errCrashed
	}
	return c.Store.Checkpoint(ctx, stream, shard, owner, seq, opts...)
}
func (c *crashable) Pin(ctx context.Context, stream, shard, owner, start string) (lease.Lease, error) {
	if c.dead() {
		return lease.Lease{}, errCrashed
	}
	return c.Store.Pin(ctx, stream, shard, owner, start)
}
func (c *crashable) Release(ctx context.Context, stream, shard, owner string, ho lease.Handover) error {
	if c.dead() {
		return errCrashed
	}
	return c.Store.Release(ctx, stream, shard, owner, ho)
}
func (c *crashable) Beat(ctx context.Context, stream string, hb lease.Heartbeat) (lease.Heartbeat, error) {
	if c.dead() {
		return lease.Heartbeat{}, errCrashed
	}
	return c.Store.Beat(ctx, stream, hb)
}
func (c *crashable) Leave(ctx context.Context, stream, runner string, counter int64) error {
	if c.dead() {
		return errCrashed
	}
	return c.Store.Leave(ctx, stream, runner, counter)
}
func (c *crashable) GetMany(ctx context.Context, stream string, ids []string) (map[string]lease.Lease, error) {
	if c.dead() {
		return nil, errCrashed
	}
	return c.Store.GetMany(ctx, stream, ids)
}

// The calls crashable passes on as they are.

func (c *crashable) List(ctx context.Context, stream string) ([]lease.Lease, error) {
	return c.Store.List(ctx, stream)
}

func (c *crashable) SetStart(ctx context.Context, stream, shardID string, st lease.Start) (bool, error) {
	return c.Store.SetStart(ctx, stream, shardID, st)
}

func (c *crashable) Delete(ctx context.Context, stream, shardID string, counter, incarnation int64) error {
	return c.Store.Delete(ctx, stream, shardID, counter, incarnation)
}

func (c *crashable) GetGeneration(ctx context.Context, stream string) (lease.Generation, error) {
	return c.Store.GetGeneration(ctx, stream)
}

func (c *crashable) PutGeneration(ctx context.Context, stream string, g lease.Generation, prevOrder int64) error {
	return c.Store.PutGeneration(ctx, stream, g, prevOrder)
}

func (c *crashable) CheckpointWindow(ctx context.Context, stream, shardID, owner string, w lease.Window) error {
	return c.Store.CheckpointWindow(ctx, stream, shardID, owner, w)
}

func (c *crashable) Get(ctx context.Context, stream, shardID string) (lease.Lease, error) {
	return c.Store.Get(ctx, stream, shardID)
}

func (c *crashable) GetWindow(ctx context.Context, stream, shardID string) (lease.Window, error) {
	return c.Store.GetWindow(ctx, stream, shardID)
}

func (c *crashable) Runners(ctx context.Context, stream string) ([]lease.Heartbeat, error) {
	return c.Store.Runners(ctx, stream)
}

// span is one delivery of one shard by one owner, in (virtual) time.
type span struct {
	shard, owner string
	from, to     time.Time
}

// cluster is runners sharing one lease table over one stream.
type cluster struct {
	t       *testing.T
	m       *model
	store   lease.Store
	d       *deliveries
	leaseOf time.Duration

	mu      sync.Mutex
	runners map[string]*member
	spans   []span
	joined  map[string]time.Time // runner id -> when it started
	firsts  []time.Duration      // joining -> first delivery on a shard handed over
	firstOf map[string]bool      // runner/shard pairs measured
}

type member struct {
	r     *runner.Runner
	store *crashable
	stop  context.CancelFunc
	done  chan struct{}
}

func (c *cluster) target(id string, cs *crashable) reader.Target {
	inner := c.d.target(id)
	return reader.FuncTarget(func(ctx context.Context, b reader.Batch) (int, error) {
		if cs.dead() {
			return 0, errCrashed
		}
		owner, _ := runner.LoopOwner(ctx)
		from := time.Now()
		time.Sleep(20 * time.Millisecond) // a delivery takes time: overlaps would show
		n, err := inner.Deliver(ctx, b)
		c.mu.Lock()
		c.spans = append(c.spans, span{shard: b.ShardID, owner: owner, from: from, to: time.Now()})
		key := id + " " + b.ShardID
		if at, ok := c.joined[id]; ok && !c.firstOf[key] && n > 0 {
			c.firstOf[key] = true
			c.firsts = append(c.firsts, time.Since(at))
		}
		c.mu.Unlock()
		return n, err
	})
}

func (c *cluster) start(id string) {
	c.t.Helper()
	cs := &crashable{Store: c.store}
	mb := &member{store: cs, done: make(chan struct{})}
	r, err := runner.New(runner.Options{
		Subscriptions: []coordinator.Subscription{{Stream: c.m.stream}},
		Store:         cs, Kinesis: c.m.k,
		Reader: reader.Options{Target: c.target(id, cs), Mapping: reader.Mapping{BatchSize: 50}, PollInterval: 200 * time.Millisecond,
			RunLength: 5 * time.Second, LeaseDuration: c.leaseOf, RenewInterval: c.leaseOf / 4},
		Balance: &runner.Balance{ID: id},
	})
	if err != nil {
		c.t.Fatal(err)
	}
	mb.r = r
	ctx, stop := context.WithCancel(context.Background())
	mb.stop = stop
	c.mu.Lock()
	c.runners[id] = mb
	c.joined[id] = time.Now()
	c.mu.Unlock()
	go func() { _ = r.Run(ctx); close(mb.done) }()
}

// leave stops a runner as Ctrl-C does; crash kills it.
func (c *cluster) leave(id string) {
	c.mu.Lock()
	mb := c.runners[id]
	delete(c.joined, id)
	c.mu.Unlock()
	mb.stop()
	<-mb.done
	c.mu.Lock()
	delete(c.runners, id)
	c.mu.Unlock()
}

func (c *cluster) crash(id string) {
	c.mu.Lock()
	mb := c.runners[id]
	delete(c.joined, id)
	delete(c.runners, id)
	c.mu.Unlock()
	mb.store.crash()
	mb.stop() // its goroutines end; it writes nothing more
	<-mb.done
}

// counts is how many shard rows name each runner.
func (c *cluster) counts() map[string]int {
	rows, err := c.store.List(context.Background(), c.m.stream)
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range rows {
		if r.Owner != "" {
			out[lease.OwnerRunner(r.Owner)]++
		}
	}
	return out
}

// settle waits until the live runners hold want shards each, and
// nobody else holds any; it returns how long it took.
func (c *cluster) settle(want map[string]int, limit time.Duration) time.Duration {
	c.t.Helper()
	began := time.Now()
	for {
		got := c.counts()
		if maps(got, want) {
			return time.Since(began)
		}
		if time.Since(began) > limit {
			c.t.Fatalf("shares %v after %s, want %v", got, limit, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func maps(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// checkOneOwnerAtATime fails when two owners' deliveries of one shard
// overlap in time.
func (c *cluster) checkOneOwnerAtATime() {
	c.mu.Lock()
	defer c.mu.Unlock()
	byShard := map[string][]span{}
	for _, s := range c.spans {
		byShard[s.shard] = append(byShard[s.shard], s)
	}
	for shard, ss := range byShard {
		sort.Slice(ss, func(i, j int) bool { return ss[i].from.Before(ss[j].from) })
		for i := 1; i < len(ss); i++ {
			if ss[i].owner != ss[i-1].owner && ss[i].from.Before(ss[i-1].to) {
				c.t.Errorf("%s: %s delivered from %s while %s delivered until %s", shard, ss[i].owner, ss[i].from, ss[i-1].owner, ss[i-1].to)
			}
		}
	}
}

// Runners sharing one table divide 12 shards evenly as they join and leave
// (4, 3, 2 and back to 3 runners), hand shards over without a lease
// duration's wait, count a crashed runner out after one, and deliver every
// record in order per key with never two owners of a shard at once.
func TestRunner_RunnersSharingATableDivideTheShardsAndHandThemOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const leaseFor = 2 * time.Second
		m := newModel(t, "orders", 12)
		store, err := lease.NewMemoryStore(func(o *lease.Options) { o.Duration = leaseFor })
		if err != nil {
			t.Fatal(err)
		}
		c := &cluster{t: t, m: m, store: store, d: newDeliveries(), leaseOf: leaseFor,
			runners: map[string]*member{}, joined: map[string]time.Time{}, firstOf: map[string]bool{}}
		c.start("r1")
		c.settle(map[string]int{"r1": 12}, time.Minute)

		prodCtx, stopProd := context.WithCancel(context.Background())
		prodDone := make(chan struct{})
		go func() {
			defer close(prodDone)
			for prodCtx.Err() == nil {
				m.put(t, 48, 24)
				time.Sleep(100 * time.Millisecond)
			}
		}()
		time.Sleep(time.Second)

		c.start("r2")
		c.start("r3")
		c.start("r4")
		took := c.settle(map[string]int{"r1": 3, "r2": 3, "r3": 3, "r4": 3}, time.Minute)
		t.Logf("4 runners: 3 each after %s", took)
		time.Sleep(time.Second) // each delivers for a while

		c.leave("r2") // Ctrl-C: its shards are released at once
		took = c.settle(map[string]int{"r1": 4, "r3": 4, "r4": 4}, time.Minute)
		if took >= leaseFor {
			t.Errorf("after a graceful leave the shards were shared again in %s, want within a lease duration (%s)", took, leaseFor)
		}
		t.Logf("3 runners after a leave: 4 each after %s", took)
		time.Sleep(time.Second) // each delivers for a while

		c.crash("r3") // it stops beating and renewing: counted out after a lease duration
		took = c.settle(map[string]int{"r1": 6, "r4": 6}, time.Minute)
		t.Logf("2 runners after a crash: 6 each after %s", took)
		time.Sleep(time.Second) // each delivers for a while

		c.start("r5")
		took = c.settle(map[string]int{"r1": 4, "r4": 4, "r5": 4}, time.Minute)
		t.Logf("3 runners after a join: 4 each after %s", took)

		time.Sleep(2 * time.Second)
		stopProd()
		<-prodDone
		waitFor(t, "every record", 2*time.Minute, func() bool { return c.d.unique() == m.n })
		for _, id := range []string{"r1", "r4", "r5"} {
			c.leave(id)
		}
		c.d.check(t, m.n)
		c.checkOneOwnerAtATime()
		c.mu.Lock()
		firsts := slices.Clone(c.firsts)
		c.mu.Unlock()
		slices.Sort(firsts)
		t.Logf("%d records; join to first delivery on a handed-over shard: %v", m.n, firsts)
		if hs, _ := store.Runners(context.Background(), m.stream); len(hs) != 0 {
			t.Errorf("heartbeat rows left after every runner stopped: %+v", hs)
		}
		var owners []string
		for id := range c.d.by {
			owners = append(owners, id)
		}
		slices.Sort(owners)
		if got := strings.Join(owners, ","); got != "r1,r2,r3,r4,r5" {
			t.Errorf("runners that delivered: %s, want all five", got)
		}
	})
}

// takeoversAfter returns, for each shard the runner crashed held at the
// crash, how long after it the first delivery by another runner came, and
// fails t for a shard no other runner delivered.
func (c *cluster) takeoversAfter(crashed string, held []string, at time.Time) []time.Duration {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Duration
	for _, shard := range held {
		var first time.Time
		for _, s := range c.spans {
			if s.shard == shard && lease.OwnerRunner(s.owner) != crashed && !s.from.Before(at) && (first.IsZero() || s.from.Before(first)) {
				first = s.from
			}
		}
		if first.IsZero() {
			c.t.Errorf("%s of %s: never delivered by another runner after the crash", shard, crashed)
			continue
		}
		out = append(out, first.Sub(at))
	}
	return out
}

// heldBy lists the shards whose rows name runner id.
func (c *cluster) heldBy(id string) []string {
	rows, err := c.store.List(context.Background(), c.m.stream)
	if err != nil {
		c.t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		if lease.OwnerRunner(r.Owner) == id {
			out = append(out, r.ShardID)
		}
	}
	return out
}

// A runner that crashes (kill -9, a lost host) while records flow releases
// nothing: the survivors take each of its shards about a lease duration
// after the crash, with 3, 2 and 1 survivors, not at the next minute's
// relist. Each survivor reads the rows the others hold at every look, so
// its coordinator's observer sees a dead runner's last renewal within a look
// of its write, and passes when those rows lapse on its own clock. Default
// lease timings (a 10 s lease), 12 shards, a producer writing throughout.
func TestRunner_ACrashedRunnersShardsAreTakenOverInAboutALeaseWhileRecordsFlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		leaseFor := lease.DefaultDuration
		m := newModel(t, "orders", 12)
		store, err := lease.NewMemoryStore()
		if err != nil {
			t.Fatal(err)
		}
		c := &cluster{t: t, m: m, store: store, d: newDeliveries(), leaseOf: leaseFor,
			runners: map[string]*member{}, joined: map[string]time.Time{}, firstOf: map[string]bool{}}
		prodCtx, stopProd := context.WithCancel(context.Background())
		prodDone := make(chan struct{})
		go func() {
			defer close(prodDone)
			for prodCtx.Err() == nil {
				m.put(t, 48, 24)
				time.Sleep(100 * time.Millisecond)
			}
		}()
		defer func() { stopProd(); <-prodDone }() // before a Fatal ends the test
		for _, id := range []string{"r1", "r2", "r3", "r4"} {
			c.start(id)
		}
		c.settle(map[string]int{"r1": 3, "r2": 3, "r3": 3, "r4": 3}, time.Minute)

		// The bound: the dead runner's last renewal, seen within a look
		// (500 ms), stands still for a lease; a pass then takes the row and
		// the new loop delivers. A second more for a pass lost to another
		// survivor's take of the same row.
		limit := leaseFor + 1500*time.Millisecond
		var all []time.Duration
		for i, tc := range []struct {
			crash string
			want  map[string]int
		}{
			{"r4", map[string]int{"r1": 4, "r2": 4, "r3": 4}},
			{"r2", map[string]int{"r1": 6, "r3": 6}},
			{"r3", map[string]int{"r1": 12}},
		} {
			time.Sleep(time.Duration(1300+700*i) * time.Millisecond) // at another moment of the renewals each time
			held := c.heldBy(tc.crash)
			at := time.Now()
			c.crash(tc.crash)
			took := c.settle(tc.want, time.Minute)
			time.Sleep(2 * time.Second) // each survivor delivers what it took
			ts := c.takeoversAfter(tc.crash, held, at)
			slices.Sort(ts)
			t.Logf("%s crashed holding %v: shares %v after %s; first deliveries by the survivors after %v", tc.crash, held, tc.want, took, ts)
			for _, d := range ts {
				if d > limit {
					t.Errorf("%s crashed: a shard it held was delivered by a survivor only %s after the crash, want within %s (a lease and a look)", tc.crash, d, limit)
				}
			}
			all = append(all, ts...)
		}
		if len(all) != 3+4+6 {
			t.Errorf("%d takeovers measured, want 13", len(all))
		}
		stopProd()
		<-prodDone
		waitFor(t, "every record", 2*time.Minute, func() bool { return c.d.unique() == m.n })
		c.leave("r1")
		c.d.check(t, m.n)
		c.checkOneOwnerAtATime()
	})
}
