package runner_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/internal/kinesismem"
	"github.com/shardloop/shardloop/pkg/coordinator"
	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/reader"
	"github.com/shardloop/shardloop/pkg/runner"
)

// model is a stream on the in-memory Kinesis, for tests in virtual time.
type model struct {
	k      *kinesismem.Client
	stream string
	n      int // records put so far
}

func newModel(t *testing.T, stream string, shards int) *model {
	t.Helper()
	k, err := kinesismem.New(kinesismem.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.CreateStream(t.Context(), &kinesis.CreateStreamInput{StreamName: aws.String(stream), ShardCount: aws.Int32(int32(shards))}); err != nil {
		t.Fatal(err)
	}
	return &model{k: k, stream: stream}
}

// put writes n records "k<key> <i>" over keys partition keys.
func (m *model) put(t *testing.T, keys, n int) {
	t.Helper()
	for n > 0 {
		var es []types.PutRecordsRequestEntry
		for ; n > 0 && len(es) < 100; n-- {
			key := m.n % keys
			es = append(es, types.PutRecordsRequestEntry{PartitionKey: aws.String(fmt.Sprint("k", key)), Data: fmt.Appendf(nil, "k%d %d", key, m.n)})
			m.n++
		}
		out, err := m.k.PutRecords(t.Context(), &kinesis.PutRecordsInput{StreamName: aws.String(m.stream), Records: es})
		if err != nil || aws.ToInt32(out.FailedRecordCount) != 0 {
			t.Fatalf("put: %v", err)
		}
	}
}

// deliveries keeps what a target got, per record, with who delivered it.
type deliveries struct {
	mu    sync.Mutex
	seen  map[string]int      // record data -> times delivered
	byKey map[string][]int    // key -> record numbers in delivery order
	by    map[string][]string // runner id -> records
	block func(b reader.Batch) <-chan struct{}
}

func newDeliveries() *deliveries {
	return &deliveries{seen: map[string]int{}, byKey: map[string][]int{}, by: map[string][]string{}}
}

func (d *deliveries) target(runnerID string) reader.Target {
	return reader.FuncTarget(func(ctx context.Context, b reader.Batch) (int, error) {
		d.mu.Lock()
		block := d.block
		d.mu.Unlock()
		if block != nil {
			if ch := block(b); ch != nil {
				select {
				case <-ch:
				case <-ctx.Done():
					return 0, ctx.Err()
				}
			}
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, r := range b.Records {
			var key string
			var n int
			fmt.Sscanf(string(r.Data), "%s %d", &key, &n)
			d.seen[string(r.Data)]++
			d.byKey[key] = append(d.byKey[key], n)
			d.by[runnerID] = append(d.by[runnerID], string(r.Data))
		}
		return len(b.Records), nil
	})
}

func (d *deliveries) unique() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.seen)
}

// checkOrder fails t when some key's records were first delivered out of
// order, or when one of the first n records was never delivered.
func (d *deliveries) check(t *testing.T, n int) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range n {
		found := false
		for k := range d.byKey {
			if d.seen[fmt.Sprintf("%s %d", k, i)] > 0 {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("record %d never delivered", i)
		}
	}
	for k, ns := range d.byKey {
		high := -1
		firsts := map[int]bool{}
		for _, x := range ns {
			if firsts[x] {
				continue // a redelivery after a takeover: at least once
			}
			firsts[x] = true
			if x < high {
				t.Errorf("key %s: record %d first delivered after %d", k, x, high)
			}
			high = max(high, x)
		}
	}
}

func waitFor(t *testing.T, what string, limit time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func fastReader(target reader.Target) reader.Options {
	return reader.Options{Target: target, Mapping: reader.Mapping{BatchSize: 50}, PollInterval: 200 * time.Millisecond, RunLength: 5 * time.Second}
}

// Ctrl-C: the delivery in flight settles, then every lease is released and
// checkpointed, so the next runner on the table takes the shards at once,
// not after a lease duration.
func TestRunner_StopLetsTheDeliveryInFlightSettleAndReleasesEveryLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newModel(t, "orders", 4)
		store, err := lease.NewMemoryStore()
		if err != nil {
			t.Fatal(err)
		}
		d := newDeliveries()
		newRunner := func() *runner.Runner {
			r, err := runner.New(runner.Options{
				Subscriptions: []coordinator.Subscription{{Stream: m.stream}},
				Store:         store, Kinesis: m.k, Reader: fastReader(d.target("")),
			})
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		ctx, stop := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { _ = newRunner().Run(ctx); close(done) }()
		time.Sleep(2 * time.Second) // the tips are pinned
		m.put(t, 8, 40)
		waitFor(t, "first records", time.Minute, func() bool { return d.unique() == 40 })

		inFlight, settle := make(chan struct{}), make(chan struct{})
		var once sync.Once
		d.mu.Lock()
		d.block = func(reader.Batch) <-chan struct{} {
			var ch <-chan struct{}
			once.Do(func() { close(inFlight); ch = settle })
			return ch
		}
		d.mu.Unlock()
		m.put(t, 8, 40)
		<-inFlight
		stop()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("Run returned while a delivery was in flight")
		default:
		}
		close(settle)
		<-done
		rows, err := store.List(t.Context(), m.stream)
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range rows {
			if row.Owner != "" || row.Checkpoint == "" {
				t.Errorf("row after the stop = %+v, want released with a checkpoint", row)
			}
		}
		settled := d.unique()

		// The next runner delivers at once what arrived meanwhile, and what
		// was left unread.
		m.put(t, 8, 40)
		began := time.Now()
		ctx2, stop2 := context.WithCancel(t.Context())
		done2 := make(chan struct{})
		go func() { _ = newRunner().Run(ctx2); close(done2) }()
		waitFor(t, "records after the restart", time.Minute, func() bool { return d.unique() == 120 })
		if took := time.Since(began); took >= lease.DefaultDuration {
			t.Errorf("the restart delivered everything after %s (virtual), want well within a lease duration", took)
		}
		stop2()
		<-done2
		d.check(t, 120)
		t.Logf("%d settled at the stop; restart delivered the rest in %s of virtual time", settled, time.Since(began))
	})
}

// A delivery still running after StopTimeout is abandoned: Run returns,
// nothing is checkpointed past it, and its lease is kept (it lapses), since
// the target may still be working on it.
func TestRunner_StopAbandonsADeliveryStillRunningAfterStopTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newModel(t, "orders", 1)
		store, err := lease.NewMemoryStore()
		if err != nil {
			t.Fatal(err)
		}
		d := newDeliveries()
		hang := make(chan struct{})
		defer close(hang)
		inFlight := make(chan struct{})
		var once sync.Once
		d.block = func(reader.Batch) <-chan struct{} { once.Do(func() { close(inFlight) }); return hang }
		r, err := runner.New(runner.Options{
			Subscriptions: []coordinator.Subscription{{Stream: m.stream}},
			Store:         store, Kinesis: m.k, Reader: fastReader(d.target("")),
			StopTimeout: 3 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { _ = r.Run(ctx); close(done) }()
		time.Sleep(2 * time.Second)
		m.put(t, 1, 5)
		<-inFlight
		stopped := time.Now()
		stop()
		<-done
		if took := time.Since(stopped); took < 3*time.Second || took > 4*time.Second {
			t.Errorf("Run returned %s after the stop (virtual), want at the stop timeout of 3 s", took)
		}
		row, err := store.Get(t.Context(), m.stream, "shardId-000000000000")
		if err != nil {
			t.Fatal(err)
		}
		if row.Owner == "" || row.Checkpoint != "" {
			t.Fatalf("row = %+v, want the lease kept (to lapse) and nothing checkpointed", row)
		}
	})
}

// failingRenewals fails every renewal and checkpoint of one shard while on,
// as a network that drops one loop's lease writes does.
type failingRenewals struct {
	Store runner.Store
	shard string
	mu    sync.Mutex
	on    bool
}

var errDropped = errors.New("lease write dropped")

func (f *failingRenewals) failing(shard string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.on && shard == f.shard
}

func (f *failingRenewals) set(on bool) { f.mu.Lock(); f.on = on; f.mu.Unlock() }

func (f *failingRenewals) Renew(ctx context.Context, stream, shard, owner string, rn lease.Renewal) (lease.Lease, error) {
	if f.failing(shard) {
		return lease.Lease{}, errDropped
	}
	return f.Store.Renew(ctx, stream, shard, owner, rn)
}

func (f *failingRenewals) Checkpoint(ctx context.Context, stream, shard, owner, seq string, opts ...lease.CheckpointOption) (lease.Lease, error) {
	if f.failing(shard) {
		return lease.Lease{}, errDropped
	}
	return f.Store.Checkpoint(ctx, stream, shard, owner, seq, opts...)
}

// The calls failingRenewals passes on as they are.

func (f *failingRenewals) GetMany(ctx context.Context, stream string, shardIDs []string) (map[string]lease.Lease, error) {
	return f.Store.GetMany(ctx, stream, shardIDs)
}

func (f *failingRenewals) List(ctx context.Context, stream string) ([]lease.Lease, error) {
	return f.Store.List(ctx, stream)
}

func (f *failingRenewals) SetStart(ctx context.Context, stream, shardID string, st lease.Start) (bool, error) {
	return f.Store.SetStart(ctx, stream, shardID, st)
}

func (f *failingRenewals) Delete(ctx context.Context, stream, shardID string, counter, incarnation int64) error {
	return f.Store.Delete(ctx, stream, shardID, counter, incarnation)
}

func (f *failingRenewals) GetGeneration(ctx context.Context, stream string) (lease.Generation, error) {
	return f.Store.GetGeneration(ctx, stream)
}

func (f *failingRenewals) PutGeneration(ctx context.Context, stream string, g lease.Generation, prevOrder int64) error {
	return f.Store.PutGeneration(ctx, stream, g, prevOrder)
}

func (f *failingRenewals) Take(ctx context.Context, stream, shardID, owner string, opts ...lease.TakeOption) (lease.Lease, error) {
	return f.Store.Take(ctx, stream, shardID, owner, opts...)
}

func (f *failingRenewals) Release(ctx context.Context, stream, shardID, owner string, ho lease.Handover) error {
	return f.Store.Release(ctx, stream, shardID, owner, ho)
}

func (f *failingRenewals) CheckpointWindow(ctx context.Context, stream, shardID, owner string, w lease.Window) error {
	return f.Store.CheckpointWindow(ctx, stream, shardID, owner, w)
}

func (f *failingRenewals) Pin(ctx context.Context, stream, shardID, owner, start string) (lease.Lease, error) {
	return f.Store.Pin(ctx, stream, shardID, owner, start)
}

func (f *failingRenewals) Get(ctx context.Context, stream, shardID string) (lease.Lease, error) {
	return f.Store.Get(ctx, stream, shardID)
}

func (f *failingRenewals) GetWindow(ctx context.Context, stream, shardID string) (lease.Window, error) {
	return f.Store.GetWindow(ctx, stream, shardID)
}

func (f *failingRenewals) Beat(ctx context.Context, stream string, hb lease.Heartbeat) (lease.Heartbeat, error) {
	return f.Store.Beat(ctx, stream, hb)
}

func (f *failingRenewals) Runners(ctx context.Context, stream string) ([]lease.Heartbeat, error) {
	return f.Store.Runners(ctx, stream)
}

func (f *failingRenewals) Leave(ctx context.Context, stream, runner string, counter int64) error {
	return f.Store.Leave(ctx, stream, runner, counter)
}

// A loop whose renewals keep failing stops, presuming its lease lost, and
// leaves its row naming it. The runner that learns its loop ended so
// pursues the shard until the lease lapses on its own clock and takes it
// again: about a lease after the last renewal, not at the next relist a
// minute later.
func TestRunner_ALoopThatLostItsLeaseHasItsShardTakenAgainOnceTheLeaseLapses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newModel(t, "orders", 2)
		mem, err := lease.NewMemoryStore()
		if err != nil {
			t.Fatal(err)
		}
		const shard = "shardId-000000000001"
		store := &failingRenewals{Store: mem, shard: shard}
		var mu sync.Mutex
		var last time.Time // the last delivery of shard
		d := newDeliveries()
		inner := d.target("")
		target := reader.FuncTarget(func(ctx context.Context, b reader.Batch) (int, error) {
			if b.ShardID == shard {
				mu.Lock()
				last = time.Now()
				mu.Unlock()
			}
			return inner.Deliver(ctx, b)
		})
		r, err := runner.New(runner.Options{
			Subscriptions: []coordinator.Subscription{{Stream: m.stream, Start: "horizon"}},
			Store:         store, Kinesis: m.k,
			Reader: reader.Options{Target: target, Mapping: reader.Mapping{BatchSize: 50}, PollInterval: 200 * time.Millisecond},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { _ = r.Run(ctx); close(done) }()
		prodCtx, stopProd := context.WithCancel(t.Context())
		prodDone := make(chan struct{})
		go func() {
			defer close(prodDone)
			for prodCtx.Err() == nil {
				m.put(t, 8, 8)
				time.Sleep(100 * time.Millisecond)
			}
		}()
		defer func() { stopProd(); <-prodDone; stop(); <-done }()
		time.Sleep(5 * time.Second)

		began := time.Now()
		store.set(true) // the loop's lease writes fail from now on
		waitFor(t, "the loop to stop, presuming its lease lost", time.Minute, func() bool {
			for _, l := range r.Loops() {
				if l.ShardID == shard && l.Done {
					return true
				}
			}
			return false
		})
		stopped := time.Since(began)
		store.set(false) // the network is back
		waitFor(t, "the shard read again", 2*time.Minute, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return time.Since(last) < time.Second && len(r.Loops()) > 2
		})
		took := time.Since(began)
		t.Logf("renewals failing from 0: the loop stopped after %s; the shard was read again after %s", stopped, took)
		if limit := lease.DefaultDuration + 2*time.Second; took > limit {
			t.Errorf("the shard was read again %s after its renewals began to fail, want within %s (a lease after its last renewal)", took, limit)
		}
	})
}
