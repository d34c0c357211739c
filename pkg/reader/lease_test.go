package reader

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/shardloop/shardloop/pkg/lease"
)

// renewPlan is a store whose renewals follow a plan: renewal n (from 1)
// waits plan(n).delay, then fails when plan(n).fail.
type renewPlan struct {
	Store Store
	mu    sync.Mutex
	n     int
	plan  func(n int) (delay time.Duration, fail bool)
}

func (s *renewPlan) Renew(ctx context.Context, stream, shardID, owner string, rn lease.Renewal) (lease.Lease, error) {
	s.mu.Lock()
	s.n++
	delay, fail := s.plan(s.n)
	s.mu.Unlock()
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return lease.Lease{}, ctx.Err()
	case <-t.C:
	}
	if fail {
		return lease.Lease{}, errors.New("dynamodb: throttled")
	}
	return s.Store.Renew(ctx, stream, shardID, owner, rn)
}

// The calls renewPlan passes on as they are.

func (s *renewPlan) Take(ctx context.Context, stream, shardID, owner string, opts ...lease.TakeOption) (lease.Lease, error) {
	return s.Store.Take(ctx, stream, shardID, owner, opts...)
}

func (s *renewPlan) Checkpoint(ctx context.Context, stream, shardID, owner, seq string, opts ...lease.CheckpointOption) (lease.Lease, error) {
	return s.Store.Checkpoint(ctx, stream, shardID, owner, seq, opts...)
}

func (s *renewPlan) CheckpointWindow(ctx context.Context, stream, shardID, owner string, w lease.Window) error {
	return s.Store.CheckpointWindow(ctx, stream, shardID, owner, w)
}

func (s *renewPlan) Pin(ctx context.Context, stream, shardID, owner, start string) (lease.Lease, error) {
	return s.Store.Pin(ctx, stream, shardID, owner, start)
}

func (s *renewPlan) Release(ctx context.Context, stream, shardID, owner string, ho lease.Handover) error {
	return s.Store.Release(ctx, stream, shardID, owner, ho)
}

func (s *renewPlan) Get(ctx context.Context, stream, shardID string) (lease.Lease, error) {
	return s.Store.Get(ctx, stream, shardID)
}

func (s *renewPlan) GetWindow(ctx context.Context, stream, shardID string) (lease.Window, error) {
	return s.Store.GetWindow(ctx, stream, shardID)
}

// TestRun_StopsDeliveringAtTheLeaseDeadlineAfterASlowRenewal is the bug of
// a renewal that succeeds slowly (2.5 s of SDK retries under throttling)
// followed by failures: the reader took its last good renewal's time from
// the answer and checked only on renewal ticks, so it delivered for seconds
// past the lease a taker waits out. No delivery may start after the slow
// renewal's send time + the lease less its margin.
func TestRun_StopsDeliveringAtTheLeaseDeadlineAfterASlowRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, err := lease.NewMemoryStore()
		if err != nil {
			t.Fatal(err)
		}
		store := &renewPlan{Store: mem, plan: func(n int) (time.Duration, bool) {
			if n == 1 {
				return 2500 * time.Millisecond, false
			}
			return 0, true
		}}
		var mu sync.Mutex
		var starts []time.Time
		tgt := FuncTarget(func(ctx context.Context, b Batch) (int, error) {
			mu.Lock()
			starts = append(starts, time.Now())
			mu.Unlock()
			t := time.NewTimer(100 * time.Millisecond)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-t.C:
			}
			return len(b.Records), nil
		})
		kin := &memKinesis{data: []byte("x"), n: 1_000_000, arrival: time.Now()}
		if _, err := mem.SetStart(t.Context(), "s", "shardId-000000000000", lease.Start{Position: "horizon", Generation: "g", Order: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := mem.Take(t.Context(), "s", "shardId-000000000000", "A"); err != nil { // the coordinator's take for the loop
			t.Fatal(err)
		}
		began := time.Now()
		st, err := Run(t.Context(), Options{Kinesis: kin, Store: store, Target: tgt, Mapping: Mapping{BatchSize: 10}, RunLength: time.Minute},
			State{Stream: "s", ShardID: "shardId-000000000000", Owner: "A"})
		if err != nil {
			t.Fatal(err)
		}
		if st.Reason != ReasonLeaseLost {
			t.Fatalf("run ended %q, want lease_lost", st.Reason)
		}
		deadline := began.Add(lease.DefaultRenewInterval + lease.DefaultDuration - lease.DefaultDuration/10)
		last := starts[len(starts)-1]
		if !last.Before(deadline) {
			t.Fatalf("a delivery started %s after the take, past the deadline at %s", last.Sub(began), deadline.Sub(began))
		}
		if last.Before(deadline.Add(-time.Second)) {
			t.Fatalf("deliveries stopped %s after the take, long before the deadline at %s", last.Sub(began), deadline.Sub(began))
		}
	})
}

// TestRun_TipOpeningIsPinnedSoTheNextLoopLosesNothing: a loop that opens a
// shard at the tip and dies before its first checkpoint (a crash, 11 read
// errors, a lost lease) used to leave where it opened only in its own
// payload; the next loop opened at a new tip and the records in between
// were never delivered. The opening is pinned on the row now, for a shard
// with no start at all and for the shards a sequence start does not name.
func TestRun_TipOpeningIsPinnedSoTheNextLoopLosesNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		start func(e *env) string // the row's start; "" for none
	}{
		{"NoStartAtAll", func(*env) string { return "" }},
		{"ASequenceStartOfAnotherShard", func(e *env) string { return "sequence:" + e.shards[0] + ":1" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, 2)
			shard := e.shards[1]
			if start := tc.start(e); start != "" {
				e.setStart(t, shard, start)
			}
			o := e.opts(&sink{})
			o.RunLength = 2 * time.Second                       // long enough to open on a slow machine
			st, err := Run(t.Context(), o, e.state(shard, "A")) // opens at the tip, reads nothing
			if err != nil || !st.Continue {
				t.Fatalf("first run: %+v, %v", st, err)
			}
			// Loop A dies here; its payload is gone with it.
			afterPinSlack()
			keys := []string{}
			for range 5 {
				keys = append(keys, keyOnShard(t, e, shard))
			}
			e.put(t, keys, values("b", 5))
			s := &sink{}
			ob := e.opts(s)
			ob.Store = thief(t, e)
			runUntil(t, ob, e.state(shard, "B"), func() bool { return s.len() >= 5 })
			if got := s.data(); !slices.Equal(got, values("b", 5)) {
				t.Fatalf("the next loop delivered %v, want the 5 records written after the first opened", got)
			}
		})
	}
}

// keyOnShard finds a partition key that the stream routes to shard.
func keyOnShard(t *testing.T, e *env, shard string) string {
	t.Helper()
	out, err := e.k.ListShards(t.Context(), &kinesis.ListShardsInput{StreamName: aws.String(e.stream)})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range out.Shards {
		if aws.ToString(s.ShardId) == shard {
			return keyInRange(t, aws.ToString(s.HashKeyRange.StartingHashKey), aws.ToString(s.HashKeyRange.EndingHashKey))
		}
	}
	t.Fatalf("shard %s not listed", shard)
	return ""
}

// keyInRange returns a partition key whose MD5 hash key lies in [lo, hi].
func keyInRange(t *testing.T, lo, hi string) string {
	t.Helper()
	l, _ := new(big.Int).SetString(lo, 10)
	h, _ := new(big.Int).SetString(hi, 10)
	for i := range 100_000 {
		k := fmt.Sprintf("key-%d", i)
		sum := md5.Sum([]byte(k))
		v := new(big.Int).SetBytes(sum[:])
		if v.Cmp(l) >= 0 && v.Cmp(h) <= 0 {
			return k
		}
	}
	t.Fatalf("no key in [%s, %s]", lo, hi)
	return ""
}

// TestRun_NoDeliveryStartsThatTheTargetsTimeoutWouldCarryPastTheRun: a
// delivery cut at the run's end goes on at a Lambda target while the next
// run delivers the same records again, two invocations at once for one
// shard. With the target's timeout known, the run starts no delivery it
// could not wait out.
func TestRun_NoDeliveryStartsThatTheTargetsTimeoutWouldCarryPastTheRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, err := lease.NewMemoryStore()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mem.SetStart(t.Context(), "s", "shardId-000000000000", lease.Start{Position: "horizon", Generation: "g", Order: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := mem.Take(t.Context(), "s", "shardId-000000000000", "A"); err != nil { // the coordinator's take for the loop
			t.Fatal(err)
		}
		const took = 4 * time.Second // every invocation runs this long, whatever the caller does
		var ends []time.Time
		tgt := FuncTarget(func(ctx context.Context, b Batch) (int, error) {
			time.Sleep(took)
			ends = append(ends, time.Now())
			return len(b.Records), ctx.Err()
		})
		kin := &memKinesis{data: []byte("x"), n: 1_000_000, arrival: time.Now()}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // the invocation's deadline
		defer cancel()
		st, err := Run(ctx, Options{Kinesis: kin, Store: mem, Target: tgt, Mapping: Mapping{BatchSize: 10}, RunLength: 25 * time.Second, TargetTimeout: took},
			State{Stream: "s", ShardID: "shardId-000000000000", Owner: "A"})
		if err != nil || !st.Continue {
			t.Fatalf("run: %+v, %v", st, err)
		}
		deadline, _ := ctx.Deadline()
		cut := deadline.Add(-DefaultMargin / 2)
		if len(ends) == 0 || ends[len(ends)-1].After(cut) {
			t.Fatalf("deliveries ended at %v, the last after the run's cut at %v", ends, cut)
		}
	})
}

// TestRun_CheckpointsRideOnTheRenewalsOfABusyShard: by default a busy
// shard's checkpoints are carried by its lease renewals, so its lease
// writes are the renewals an idle shard makes; with EagerCheckpoints each
// batch writes its own. Either way the run ends with every settled record
// checkpointed.
func TestRun_CheckpointsRideOnTheRenewalsOfABusyShard(t *testing.T) {
	for _, eager := range []bool{false, true} {
		t.Run(fmt.Sprintf("eager=%v", eager), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem, err := lease.NewMemoryStore()
				if err != nil {
					t.Fatal(err)
				}
				if _, err := mem.SetStart(t.Context(), "s", "shardId-000000000000", lease.Start{Position: "horizon", Generation: "g", Order: 1}); err != nil {
					t.Fatal(err)
				}
				if _, err := mem.Take(t.Context(), "s", "shardId-000000000000", "A"); err != nil { // the coordinator's take for the loop
					t.Fatal(err)
				}
				counts := &countingLeaseStore{MemoryStore: mem}
				batches := 0
				tgt := FuncTarget(func(ctx context.Context, b Batch) (int, error) {
					time.Sleep(100 * time.Millisecond) // ten batches a second
					batches++
					return len(b.Records), nil
				})
				kin := &memKinesis{data: []byte("x"), n: 100_000, arrival: time.Now()}
				st, err := Run(t.Context(), Options{Kinesis: kin, Store: counts, Target: tgt, Mapping: Mapping{BatchSize: 10}, RunLength: 30 * time.Second, EagerCheckpoints: eager, noReadPacing: true},
					State{Stream: "s", ShardID: "shardId-000000000000", Owner: "A"})
				if err != nil || !st.Continue {
					t.Fatalf("run: %+v, %v", st, err)
				}
				row, _ := mem.Get(t.Context(), "s", "shardId-000000000000")
				if row.Checkpoint != st.Checkpoint || row.Checkpoint != fmt.Sprintf("%020d", batches*10-1) {
					t.Fatalf("row checkpoint %s, state %s, want the last of %d batches", row.Checkpoint, st.Checkpoint, batches)
				}
				writes := counts.total()
				renewals := int(30 * time.Second / lease.DefaultRenewInterval)
				if !eager && writes > renewals+3 { // the take, the renewals, the flush at the end
					t.Fatalf("%d lease writes for %d batches in 30 s, want about the %d renewals", writes, batches, renewals)
				}
				if eager && writes < batches/2 {
					t.Fatalf("%d lease writes for %d batches with eager checkpoints, want about one a batch", writes, batches)
				}
			})
		})
	}
}

// countingLeaseStore counts a MemoryStore's writes.
type countingLeaseStore struct {
	*lease.MemoryStore
	mu sync.Mutex
	n  int
}

func (c *countingLeaseStore) inc() { c.mu.Lock(); c.n++; c.mu.Unlock() }
func (c *countingLeaseStore) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func (c *countingLeaseStore) Take(ctx context.Context, stream, shardID, owner string, opts ...lease.TakeOption) (lease.Lease, error) {
	c.inc()
	return c.MemoryStore.Take(ctx, stream, shardID, owner, opts...)
}

func (c *countingLeaseStore) Renew(ctx context.Context, stream, shardID, owner string, rn lease.Renewal) (lease.Lease, error) {
	c.inc()
	return c.MemoryStore.Renew(ctx, stream, shardID, owner, rn)
}

func (c *countingLeaseStore) Checkpoint(ctx context.Context, stream, shardID, owner, seq string, opts ...lease.CheckpointOption) (lease.Lease, error) {
	c.inc()
	return c.MemoryStore.Checkpoint(ctx, stream, shardID, owner, seq, opts...)
}

// TestRun_AFenceThatCannotBeRecordedPastTheRunsLengthIsNotRetriedAtOnce:
// an invocation after a quiet spell waits for its holder to record its
// fence; when that renewal fails, the lane tries again after RetryMin, but
// never past the run's length: there the wait is cut to nothing, and a
// lane that went on trying would call the store in a loop without pause
// until the lease lapsed (under testing/synctest, for ever: the
// simulator's SetStart plant showed it). Past its length a run leaves the
// batch to the next run.
func TestRun_AFenceThatCannotBeRecordedPastTheRunsLengthIsNotRetriedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemStream(t)
		m.put(t, []string{"a", "b"}, 20)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		store := &renewPlan{Store: m.store, plan: func(n int) (time.Duration, bool) {
			if n == 1000 {
				cancel() // a lane retrying without pause: end the run, and say so below
			}
			// The first two renewals (3 s and 6 s in) succeed, the
			// second, two renew intervals after the last invocation,
			// without a fence; every one after them fails at once.
			return 0, n > 2
		}}
		var delivered atomic.Int64
		o := Options{Kinesis: m.k, Store: store, Target: countingTarget(&delivered, nil), RunLength: 10 * time.Second, RetryMin: 100 * time.Millisecond, RetryMax: time.Second, TargetTimeout: 2 * time.Second}
		go func() {
			time.Sleep(7500 * time.Millisecond) // after the quiet spell
			m.put(t, []string{"c"}, 5)
		}()
		next, err := Run(ctx, o, m.state("A"))
		store.mu.Lock()
		n := store.n
		store.mu.Unlock()
		if n >= 1000 {
			t.Fatalf("%d renewals in one run of 10s with retries 100ms apart: the lane retried without pause past the run's length", n)
		}
		if got := delivered.Load(); got != 20 {
			t.Fatalf("%d records delivered, want the 20 before the quiet spell and none of those after it (their fence was never recorded)", got)
		}
		t.Logf("run ended %q after %d renewals (err %v)", next.Reason, n, err)
	})
}
