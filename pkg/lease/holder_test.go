package lease_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardloop/shardloop/pkg/lease"
)

// slowStore delays or fails renewals as a test tells it to.
type slowStore struct {
	Store    lease.HolderStore
	mu       sync.Mutex
	renew    func(n int) (delay time.Duration, fail bool) // per renewal, numbered from 1
	n        int
	written  []string // checkpoints that reached the store
	delayEnd bool     // apply the delay after the write instead of before
}

var errDown = errors.New("store unreachable")

func (s *slowStore) Renew(ctx context.Context, stream, shardID, owner string, rn lease.Renewal) (lease.Lease, error) {
	s.mu.Lock()
	s.n++
	delay, fail := s.renew(s.n)
	after := s.delayEnd
	s.mu.Unlock()
	if !after {
		if err := sleepCtx(ctx, delay); err != nil {
			return lease.Lease{}, err
		}
	}
	if fail {
		return lease.Lease{}, errDown
	}
	l, err := s.Store.Renew(ctx, stream, shardID, owner, rn)
	if after {
		if err := sleepCtx(ctx, delay); err != nil {
			return lease.Lease{}, err // the answer is lost
		}
	}
	return l, err
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (s *slowStore) Checkpoint(ctx context.Context, stream, shardID, owner, seq string, opts ...lease.CheckpointOption) (lease.Lease, error) {
	s.mu.Lock()
	s.written = append(s.written, seq)
	s.mu.Unlock()
	return s.Store.Checkpoint(ctx, stream, shardID, owner, seq, opts...)
}

// The calls slowStore passes on as they are.

func (s *slowStore) Take(ctx context.Context, stream, shardID, owner string, opts ...lease.TakeOption) (lease.Lease, error) {
	return s.Store.Take(ctx, stream, shardID, owner, opts...)
}

func (s *slowStore) CheckpointWindow(ctx context.Context, stream, shardID, owner string, w lease.Window) error {
	return s.Store.CheckpointWindow(ctx, stream, shardID, owner, w)
}

func (s *slowStore) Pin(ctx context.Context, stream, shardID, owner, start string) (lease.Lease, error) {
	return s.Store.Pin(ctx, stream, shardID, owner, start)
}

func (s *slowStore) Release(ctx context.Context, stream, shardID, owner string, ho lease.Handover) error {
	return s.Store.Release(ctx, stream, shardID, owner, ho)
}

func (s *slowStore) Get(ctx context.Context, stream, shardID string) (lease.Lease, error) {
	return s.Store.Get(ctx, stream, shardID)
}

func newHolder(t *testing.T, s lease.HolderStore, clock func() time.Time) *lease.Holder {
	t.Helper()
	h, _, err := lease.Hold(t.Context(), lease.HolderOptions{Store: s, Stream: stream, ShardID: "s1", Owner: "A", Clock: clock})
	must(t, err)
	t.Cleanup(h.Close)
	return h
}

func memStore(t *testing.T) lease.Store {
	t.Helper()
	s, err := lease.NewMemoryStore()
	must(t, err)
	return s
}

// The defaults: a 10 s lease, renewed every 3 s, with a 1 s margin.
const validFor = lease.DefaultDuration - lease.DefaultDuration/10

func TestHolder_StopsAtTheDeadlineWhenEveryRenewalFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &slowStore{Store: memStore(t), renew: func(int) (time.Duration, bool) { return 0, true }}
		taken := time.Now()
		h := newHolder(t, s, time.Now)
		go h.KeepAlive(t.Context())

		time.Sleep(validFor - time.Millisecond)
		if err := h.Valid(); err != nil {
			t.Fatalf("1 ms before the deadline: %v", err)
		}
		if h.Context().Err() != nil {
			t.Fatal("context cancelled before the deadline")
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if err := h.Valid(); !errors.Is(err, lease.ErrLapsed) {
			t.Fatalf("at the deadline: Valid = %v, want ErrLapsed", err)
		}
		if !errors.Is(context.Cause(h.Context()), lease.ErrLapsed) {
			t.Fatalf("context cause = %v, want ErrLapsed", context.Cause(h.Context()))
		}
		if got := h.Deadline(); !got.Equal(taken.Add(validFor)) {
			t.Fatalf("deadline %v, want the take's send time + %s", got.Sub(taken), validFor)
		}
		if _, err := h.Checkpoint(t.Context(), "5"); !errors.Is(err, lease.ErrLapsed) {
			t.Fatalf("checkpoint past the deadline: err = %v, want ErrLapsed", err)
		}
		if len(s.written) != 0 {
			t.Fatalf("checkpoints %v reached the store past the deadline", s.written)
		}
	})
}

// TestHolder_DeadlineRunsFromTheSendTimeOfASlowRenewal is the bug of a
// renewal that took 2.5 s to succeed (SDK retries under throttling) and
// then failures: the deadline must count from when that renewal was sent,
// not from when its answer came, and not from the expiry the store wrote.
func TestHolder_DeadlineRunsFromTheSendTimeOfASlowRenewal(t *testing.T) {
	for _, after := range []bool{false, true} {
		name := map[bool]string{false: "DelayBeforeTheWrite", true: "DelayAfterTheWrite"}[after]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &slowStore{Store: memStore(t), delayEnd: after, renew: func(n int) (time.Duration, bool) {
					if n == 1 {
						return 2500 * time.Millisecond, false
					}
					return 0, true
				}}
				taken := time.Now()
				h := newHolder(t, s, time.Now)
				go h.KeepAlive(t.Context())
				sent := taken.Add(lease.DefaultRenewInterval) // the first tick
				time.Sleep(sent.Add(validFor).Sub(time.Now()) - time.Millisecond)
				if err := h.Valid(); err != nil {
					t.Fatalf("before the slow renewal's send time + %s: %v", validFor, err)
				}
				time.Sleep(time.Millisecond)
				synctest.Wait()
				if err := h.Valid(); !errors.Is(err, lease.ErrLapsed) {
					t.Fatalf("at the slow renewal's send time + %s: Valid = %v, want ErrLapsed (deadline %v after the take)",
						validFor, err, h.Deadline().Sub(taken))
				}
			})
		})
	}
}

func TestHolder_RefusedRenewalLosesTheLeaseAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memStore(t)
		h := newHolder(t, s, time.Now)
		go h.KeepAlive(t.Context())
		row, err := s.Get(t.Context(), stream, "s1")
		must(t, err)
		noErr(t)(s.Take(t.Context(), stream, "s1", "B", lease.IfCounter(row.Counter)))
		time.Sleep(lease.DefaultRenewInterval)
		synctest.Wait()
		if err := h.Valid(); !errors.Is(err, lease.ErrNotOwner) {
			t.Fatalf("after B took the row: Valid = %v, want ErrNotOwner", err)
		}
		if h.Context().Err() == nil {
			t.Fatal("context still live after the lease was lost")
		}
	})
}

func TestHolder_RenewalsKeepItValid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHolder(t, memStore(t), time.Now)
		go h.KeepAlive(t.Context())
		for range 20 {
			time.Sleep(time.Second)
			if err := h.Valid(); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := h.Checkpoint(t.Context(), "9"); err != nil {
			t.Fatal(err)
		}
		must(t, h.Release(t.Context(), ""))
		if h.Valid() == nil {
			t.Fatal("valid after release")
		}
	})
}

func TestHolder_RefusesOptionsThatCannotHold(t *testing.T) {
	_, _, err := lease.Hold(t.Context(), lease.HolderOptions{Store: memStore(t), Stream: stream, ShardID: "s1", Owner: "A",
		Duration: 3 * time.Second, RenewInterval: 3 * time.Second})
	if !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("renew interval as long as the lease: err = %v, want ErrInvalid", err)
	}
}

// TestHolderAndObserver_NeverTwoOwnersWhateverTheSkew drives a holder and a
// taker on clocks up to 30 s apart, with renewals that are slow (0 to 5 s),
// before or after the write, then failing, over many seeded rounds. The
// taker takes only what its Observer judges lapsed; the holder acts only
// while Valid. The last moment the holder was valid must come before the
// taker's take, in true (virtual) time.
func TestHolderAndObserver_NeverTwoOwnersWhateverTheSkew(t *testing.T) {
	for seed := range uint64(40) {
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			skew := func() time.Duration { return time.Duration(rng.Int64N(int64(60*time.Second))) - 30*time.Second }
			holderSkew, takerSkew := skew(), skew()
			holderClock := func() time.Time { return time.Now().Add(holderSkew) }
			takerClock := func() time.Time { return time.Now().Add(takerSkew) }
			var mu sync.Mutex
			// Renewals succeed, each taking 0 to 5 s, until the k-th; from
			// then on they fail (after a delay too), so the taker must take.
			k := 1 + rng.IntN(8)
			delays := make([]time.Duration, 64)
			for i := range delays {
				delays[i] = time.Duration(rng.Int64N(int64(5 * time.Second)))
			}
			s := &slowStore{Store: memStore(t), delayEnd: rng.IntN(2) == 0, renew: func(n int) (time.Duration, bool) {
				mu.Lock()
				defer mu.Unlock()
				return delays[min(n-1, len(delays)-1)], n >= k
			}}
			h := newHolder(t, s, holderClock)
			go h.KeepAlive(t.Context())

			var lastValid time.Time
			done := make(chan struct{})
			go func() { // the holder "delivers" every 10 ms while valid
				defer close(done)
				for h.Valid() == nil {
					lastValid = time.Now()
					time.Sleep(10 * time.Millisecond)
				}
			}()
			obs := lease.NewObserver(lease.DefaultDuration)
			var took time.Time
			for took.IsZero() {
				time.Sleep(time.Duration(20+rng.IntN(500)) * time.Millisecond)
				row, err := s.Get(t.Context(), stream, "s1")
				must(t, err)
				v := obs.Observe(row, takerClock())
				if !v.Available() {
					continue
				}
				if _, err := s.Take(t.Context(), stream, "s1", "B", lease.IfCounter(v.Counter)); err == nil {
					took = time.Now()
				}
			}
			<-done
			h.Close()
			if !lastValid.Before(took) {
				t.Fatalf("seed %d (holder skew %s, taker skew %s): holder valid at %v, taker took at %v",
					seed, holderSkew, takerSkew, lastValid, took)
			}
		})
	}
}

// countingStore counts the writes that reach the store.
type countingStore struct {
	Store   lease.HolderStore
	mu      sync.Mutex
	writes  map[string]int
	failing []string // what renewals carried as the row's Failing, in order
}

func (c *countingStore) count(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.writes == nil {
		c.writes = map[string]int{}
	}
	c.writes[op]++
}

func (c *countingStore) Renew(ctx context.Context, stream, shardID, owner string, rn lease.Renewal) (lease.Lease, error) {
	if rn.Checkpoint != "" {
		c.count("renew+checkpoint")
	} else {
		c.count("renew")
	}
	if rn.Failing != nil {
		c.mu.Lock()
		c.failing = append(c.failing, *rn.Failing)
		c.mu.Unlock()
	}
	return c.Store.Renew(ctx, stream, shardID, owner, rn)
}

func (c *countingStore) Checkpoint(ctx context.Context, stream, shardID, owner, seq string, opts ...lease.CheckpointOption) (lease.Lease, error) {
	c.count("checkpoint")
	return c.Store.Checkpoint(ctx, stream, shardID, owner, seq, opts...)
}

// The calls countingStore passes on as they are.

func (c *countingStore) Take(ctx context.Context, stream, shardID, owner string, opts ...lease.TakeOption) (lease.Lease, error) {
	return c.Store.Take(ctx, stream, shardID, owner, opts...)
}

func (c *countingStore) CheckpointWindow(ctx context.Context, stream, shardID, owner string, w lease.Window) error {
	return c.Store.CheckpointWindow(ctx, stream, shardID, owner, w)
}

func (c *countingStore) Pin(ctx context.Context, stream, shardID, owner, start string) (lease.Lease, error) {
	return c.Store.Pin(ctx, stream, shardID, owner, start)
}

func (c *countingStore) Release(ctx context.Context, stream, shardID, owner string, ho lease.Handover) error {
	return c.Store.Release(ctx, stream, shardID, owner, ho)
}

func (c *countingStore) Get(ctx context.Context, stream, shardID string) (lease.Lease, error) {
	return c.Store.Get(ctx, stream, shardID)
}

// TestHolder_SettledCheckpointsRideOnTheRenewals: a busy shard settling
// batches many times a second writes one lease write per renew interval,
// carrying the renewal and the latest checkpoint; Flush writes what is
// left at once.
func TestHolder_SettledCheckpointsRideOnTheRenewals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memStore(t)
		s := &countingStore{Store: mem}
		h := newHolder(t, s, time.Now)
		go h.KeepAlive(t.Context())
		for i := range 100 { // 10 batches a second for 10 s
			h.Settle(fmt.Sprint(1000 + i))
			time.Sleep(100 * time.Millisecond)
		}
		synctest.Wait()
		s.mu.Lock()
		got := maps.Clone(s.writes)
		s.mu.Unlock()
		if got["checkpoint"] != 0 || got["renew"] != 0 || got["renew+checkpoint"] != 3 {
			t.Fatalf("writes %v, want 3 renewals carrying checkpoints and nothing else", got)
		}
		row, _ := mem.Get(t.Context(), stream, "s1")
		if row.Checkpoint == "" || !row.StartApplied {
			t.Fatalf("row %+v: want the last renewal's checkpoint", row)
		}
		if h.Pending() == "" {
			t.Fatal("nothing pending after the last renewal: want the batches settled since")
		}
		must(t, h.Flush(t.Context()))
		if row, _ := mem.Get(t.Context(), stream, "s1"); row.Checkpoint != "1099" || h.Pending() != "" {
			t.Fatalf("after Flush the row has %q, pending %q; want 1099 and nothing", row.Checkpoint, h.Pending())
		}
	})
}

// TestHolder_FailingRidesOnTheRenewalsAndOutlivesTheHolder: what SetFailing
// records costs no write of its own; the renewal after it carries it, once, and a holder that takes the row next
// (a new loop after a crash) starts from it.
func TestHolder_FailingRidesOnTheRenewalsAndOutlivesTheHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memStore(t)
		s := &countingStore{Store: mem}
		h := newHolder(t, s, time.Now)
		go h.KeepAlive(t.Context())
		h.SetFailing("seq 5, 1 attempt")
		time.Sleep(lease.DefaultRenewInterval + time.Millisecond)
		h.SetFailing("seq 5, 2 attempts")
		time.Sleep(3 * lease.DefaultRenewInterval) // three renewals, the first carrying it
		synctest.Wait()
		s.mu.Lock()
		if want := []string{"seq 5, 1 attempt", "seq 5, 2 attempts"}; !slices.Equal(s.failing, want) {
			t.Errorf("renewals carried %q, want %q (each once)", s.failing, want)
		}
		if s.writes["checkpoint"] != 0 || s.writes["renew+checkpoint"] != 0 {
			t.Errorf("writes %v: want renewals only", s.writes)
		}
		s.mu.Unlock()
		h.SetFailing("seq 5, 3 attempts")
		h.Close() // crashed before its next renewal: that attempt is not on the row
		row, _ := mem.Get(t.Context(), stream, "s1")
		if row.Failing != "seq 5, 2 attempts" {
			t.Fatalf("row after a crash = %q, want the last renewal's", row.Failing)
		}
		// The next holder sees it; its release hands on what it recorded.
		next, taken, err := lease.Hold(t.Context(), lease.HolderOptions{Store: mem, Stream: stream, ShardID: "s1", Owner: "B"}, lease.IfCounter(row.Counter))
		must(t, err)
		if taken.Failing != "seq 5, 2 attempts" {
			t.Fatalf("taken row Failing = %q", taken.Failing)
		}
		next.SetFailing("")
		must(t, next.Release(t.Context(), ""))
		if row, _ := mem.Get(t.Context(), stream, "s1"); row.Failing != "" {
			t.Fatalf("row after a release with nothing failing = %q", row.Failing)
		}
	})
}

// TestHolder_WriteFailingWritesOnlyWhatTheRowLacks: WriteFailing sends a
// renewal carrying what SetFailing recorded at once, and nothing when the
// row has it already (a delivery that succeeds costs no write).
func TestHolder_WriteFailingWritesOnlyWhatTheRowLacks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memStore(t)
		s := &countingStore{Store: mem}
		h := newHolder(t, s, time.Now)
		must(t, h.WriteFailing(t.Context()))
		h.SetFailing("seq 5, 1 attempt")
		must(t, h.WriteFailing(t.Context()))
		must(t, h.WriteFailing(t.Context()))
		s.mu.Lock()
		if want := []string{"seq 5, 1 attempt"}; !slices.Equal(s.failing, want) || s.writes["renew"] != 1 {
			t.Errorf("renewals carried %q in %v, want %q in one renewal", s.failing, s.writes, want)
		}
		s.mu.Unlock()
		h.Close() // crashed before any renewal of its own: the count is on the row
		if row, _ := mem.Get(t.Context(), stream, "s1"); row.Failing != "seq 5, 1 attempt" {
			t.Fatalf("row after a crash = %q, want the count WriteFailing wrote", row.Failing)
		}
		if err := h.WriteFailing(t.Context()); err == nil {
			t.Fatal("WriteFailing on a closed holder: want its error")
		}
	})
}

// slowRenewCheckpointStore holds every renewal that carries a checkpoint
// for delay before it writes.
type slowRenewCheckpointStore struct {
	Store lease.HolderStore
	delay time.Duration
}

func (s *slowRenewCheckpointStore) Renew(ctx context.Context, stream, shardID, owner string, rn lease.Renewal) (lease.Lease, error) {
	if rn.Checkpoint != "" {
		if err := sleepCtx(ctx, s.delay); err != nil {
			return lease.Lease{}, err
		}
	}
	return s.Store.Renew(ctx, stream, shardID, owner, rn)
}

// The calls slowRenewCheckpointStore passes on as they are.

func (s *slowRenewCheckpointStore) Take(ctx context.Context, stream, shardID, owner string, opts ...lease.TakeOption) (lease.Lease, error) {
	return s.Store.Take(ctx, stream, shardID, owner, opts...)
}

func (s *slowRenewCheckpointStore) Checkpoint(ctx context.Context, stream, shardID, owner, seq string, opts ...lease.CheckpointOption) (lease.Lease, error) {
	return s.Store.Checkpoint(ctx, stream, shardID, owner, seq, opts...)
}

func (s *slowRenewCheckpointStore) CheckpointWindow(ctx context.Context, stream, shardID, owner string, w lease.Window) error {
	return s.Store.CheckpointWindow(ctx, stream, shardID, owner, w)
}

func (s *slowRenewCheckpointStore) Pin(ctx context.Context, stream, shardID, owner, start string) (lease.Lease, error) {
	return s.Store.Pin(ctx, stream, shardID, owner, start)
}

func (s *slowRenewCheckpointStore) Release(ctx context.Context, stream, shardID, owner string, ho lease.Handover) error {
	return s.Store.Release(ctx, stream, shardID, owner, ho)
}

func (s *slowRenewCheckpointStore) Get(ctx context.Context, stream, shardID string) (lease.Lease, error) {
	return s.Store.Get(ctx, stream, shardID)
}

// TestHolder_SlowRenewalCannotMoveTheCheckpointBack: a renewal carrying
// checkpoint 10 is slow to land; meanwhile the run settles 20 and
// flushes it (its end, or SHARD_END). The flush waits for the renewal, so
// the row ends at 20, never back at 10 (which would deliver again, and
// after a SHARD_END reopen a parent whose children are being read).
func TestHolder_SlowRenewalCannotMoveTheCheckpointBack(t *testing.T) {
	for _, last := range []string{"20", lease.ShardEnd} {
		t.Run(last, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := memStore(t)
				h := newHolder(t, &slowRenewCheckpointStore{Store: mem, delay: 2 * time.Second}, time.Now)
				go h.KeepAlive(t.Context())
				h.Settle("10")
				time.Sleep(lease.DefaultRenewInterval + time.Second) // the renewal with 10 is on its way
				h.Settle(last)
				must(t, h.Flush(t.Context()))
				time.Sleep(1500 * time.Millisecond) // the slow renewal landed; the next is not due
				if row, _ := mem.Get(t.Context(), stream, "s1"); row.Checkpoint != last {
					t.Fatalf("row checkpoint %q after a slow renewal and a flush of %s, want %s", row.Checkpoint, last, last)
				}
			})
		})
	}
}

// TestHolderAndObserver_NoInvocationRunsWhenATakerTakes is the fence at the
// function: a holder whose target is a function that runs to its own end
// whatever its caller does (up to MaxRun), with idle gaps between
// invocations, slow renewals that then fail, a caller that gives up on an
// invocation when the lease is lost, and sometimes a release at the run's
// end with an invocation given up on, on clocks up to 30 s apart whose
// rates each differ from true time by up to 4 % either way. The taker
// takes only what its Observer judges lapsed, and its first invocation
// starts at once; no invocation of the holder may still be running then.
func TestHolderAndObserver_NoInvocationRunsWhenATakerTakes(t *testing.T) {
	for seed := range uint64(60) {
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 19))
			skew := func() time.Duration { return time.Duration(rng.Int64N(int64(60*time.Second))) - 30*time.Second }
			holderSkew, takerSkew := skew(), skew()
			maxRun := time.Duration(500+rng.IntN(30000)) * time.Millisecond
			var fence time.Duration // sometimes below maxRun: enforced at each start
			if maxRun > 6*time.Second && rng.IntN(2) == 0 {
				fence = maxRun - time.Duration(rng.Int64N(int64(6*time.Second)))
			}
			k := 1 + rng.IntN(10) // renewals fail from the k-th on
			release := rng.IntN(3) == 0
			drift := func() float64 { return (rng.Float64()*2 - 1) * 4 / 100 }
			holderDrift, takerDrift := drift(), drift()
			began := time.Now()
			clock := func(skew time.Duration, drift float64) func() time.Time {
				return func() time.Time {
					now := time.Now()
					return now.Add(skew + time.Duration(float64(now.Sub(began))*drift))
				}
			}
			holderClock, takerClock := clock(holderSkew, holderDrift), clock(takerSkew, takerDrift)
			var mu sync.Mutex
			delays := make([]time.Duration, 64)
			for i := range delays {
				delays[i] = time.Duration(rng.Int64N(int64(2 * time.Second)))
			}
			s := &slowStore{Store: memStore(t), delayEnd: rng.IntN(2) == 0, renew: func(n int) (time.Duration, bool) {
				mu.Lock()
				defer mu.Unlock()
				return delays[min(n-1, len(delays)-1)], n >= k
			}}
			h, _, err := lease.Hold(t.Context(), lease.HolderOptions{Store: s, Stream: stream, ShardID: "s1", Owner: "loop/r1",
				MaxRun: maxRun, Fence: fence, Clock: holderClock})
			must(t, err)
			t.Cleanup(h.Close)
			go h.KeepAlive(t.Context())

			var ends []time.Time // when each invocation's function ended, in true time
			var endsMu sync.Mutex
			runs := rand.New(rand.NewPCG(seed, 23))
			holderDone := make(chan struct{})
			go func() {
				defer close(holderDone)
				for i := 0; ; i++ {
					if release && i == 3 {
						// The run ends: it gives up on the invocation it
						// just began (the function runs its whole timeout)
						// and hands the row back with a fence.
						if end, err := h.Begin(h.Context()); err == nil {
							endsMu.Lock()
							ends = append(ends, time.Now().Add(maxRun))
							endsMu.Unlock()
							time.Sleep(time.Duration(runs.Int64N(int64(200 * time.Millisecond))))
							end(false)
						}
						_ = h.Release(context.Background(), "loop")
						return
					}
					if runs.IntN(3) == 0 {
						time.Sleep(time.Duration(runs.Int64N(int64(8 * time.Second)))) // idle, at the tip
					}
					end, err := h.Begin(h.Context())
					if err != nil {
						if h.Valid() != nil {
							return
						}
						continue
					}
					run := maxRun - time.Duration(runs.Int64N(int64(maxRun/2))) // most run long
					endsMu.Lock()
					ends = append(ends, time.Now().Add(run))
					endsMu.Unlock()
					select {
					case <-time.After(run):
						end(true)
					case <-h.Context().Done():
						end(false) // the caller gives up; the function runs on
					}
				}
			}()
			obs := lease.NewObserver(lease.DefaultDuration)
			var took time.Time
			for took.IsZero() {
				time.Sleep(time.Duration(1+rng.IntN(50)) * time.Millisecond) // a taker that looks often meets the fence's end
				row, err := s.Get(t.Context(), stream, "s1")
				must(t, err)
				// With a release, the taker is the loop's next run, which
				// waits out the fence alone once the row is handed back.
				family, taker, opts := "", "B", []lease.TakeOption(nil)
				if release {
					family, taker, opts = "loop", "loop/r2", []lease.TakeOption{lease.WithOwnerFamily("loop")}
				}
				v := obs.ObserveAs(row, takerClock(), family)
				if !v.Available() {
					continue
				}
				if _, err := s.Take(t.Context(), stream, "s1", taker, append(opts, lease.IfCounter(v.Counter))...); err == nil {
					took = time.Now()
				}
			}
			<-holderDone
			endsMu.Lock()
			defer endsMu.Unlock()
			for i, end := range ends {
				if !end.Before(took) {
					t.Fatalf("seed %d (max run %s, fence %s, renewals fail from %d, release %v, drift %+.2f%% and %+.2f%%): invocation %d runs until %v, the taker took at %v",
						seed, maxRun, fence, k, release, 100*holderDrift, 100*takerDrift, i, end, took)
				}
			}
		})
	}
}

// TestHolder_FenceIsArmedBeforeTheFirstInvocationAfterAnIdleInterval: a
// renewal that follows a whole interval with nothing running records no
// fence (a holder that dies idle costs no more than the lease); the first
// invocation after it waits for a renewal that records the fence again;
// invocations close together cost no write.
func TestHolder_FenceIsArmedBeforeTheFirstInvocationAfterAnIdleInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memStore(t)
		s := &countingStore{Store: mem}
		h, _, err := lease.Hold(t.Context(), lease.HolderOptions{Store: s, Stream: stream, ShardID: "s1", Owner: "A", MaxRun: 4 * time.Second})
		must(t, err)
		t.Cleanup(h.Close)
		go h.KeepAlive(t.Context())
		fence := func() time.Duration {
			row, err := mem.Get(t.Context(), stream, "s1")
			must(t, err)
			return row.Fence
		}
		if f := fence(); f != 0 {
			t.Fatalf("fence after the take = %s, want none", f)
		}
		end, err := h.Begin(t.Context())
		must(t, err)
		if f := fence(); f != 4400*time.Millisecond {
			t.Fatalf("fence once an invocation began = %s, want 4.4s (4 s and a tenth for the clocks)", f)
		}
		time.Sleep(500 * time.Millisecond)
		end(true)
		end, err = h.Begin(t.Context()) // close behind: no write
		must(t, err)
		end(true)
		s.mu.Lock()
		if n := s.writes["renew"]; n != 1 {
			t.Fatalf("%d renewals for two invocations close together, want the one that armed the fence", n)
		}
		s.mu.Unlock()
		time.Sleep(2*lease.DefaultRenewInterval + time.Millisecond) // one renewal covers the last start, the next finds the holder idle
		synctest.Wait()
		if f := fence(); f != 0 {
			t.Fatalf("fence after an idle interval = %s, want none", f)
		}
		end, err = h.Begin(t.Context())
		must(t, err)
		if f := fence(); f != 4400*time.Millisecond {
			t.Fatalf("fence once an invocation began after idling = %s, want 4.4s", f)
		}
		// Given up on after 1 s, it may run its whole timeout from then (a
		// call may have sent its last request just before): a release a
		// second later records what is left.
		time.Sleep(time.Second)
		end(false)
		time.Sleep(time.Second)
		must(t, h.Release(t.Context(), "loop"))
		row, _ := mem.Get(t.Context(), stream, "s1")
		if row.Owner != "loop" || row.Fence != 3400*time.Millisecond {
			t.Fatalf("row handed back = owner %q fence %s, want loop and 3.4s", row.Owner, row.Fence)
		}
	})
}

// answerLostStore lands the writes it is told to and then loses their
// answers (the SDK gave up on the attempt).
type answerLostStore struct {
	Store lease.HolderStore
	mu    sync.Mutex
	lose  map[string]bool // checkpoints whose answer is lost
}

var errAnswerLost = errors.New("answer lost")

func (s *answerLostStore) Checkpoint(ctx context.Context, stream, shardID, owner, seq string, opts ...lease.CheckpointOption) (lease.Lease, error) {
	l, err := s.Store.Checkpoint(ctx, stream, shardID, owner, seq, opts...)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && s.lose[seq] {
		return lease.Lease{}, errAnswerLost
	}
	return l, err
}

// The calls answerLostStore passes on as they are.

func (s *answerLostStore) Take(ctx context.Context, stream, shardID, owner string, opts ...lease.TakeOption) (lease.Lease, error) {
	return s.Store.Take(ctx, stream, shardID, owner, opts...)
}

func (s *answerLostStore) Renew(ctx context.Context, stream, shardID, owner string, rn lease.Renewal) (lease.Lease, error) {
	return s.Store.Renew(ctx, stream, shardID, owner, rn)
}

func (s *answerLostStore) CheckpointWindow(ctx context.Context, stream, shardID, owner string, w lease.Window) error {
	return s.Store.CheckpointWindow(ctx, stream, shardID, owner, w)
}

func (s *answerLostStore) Pin(ctx context.Context, stream, shardID, owner, start string) (lease.Lease, error) {
	return s.Store.Pin(ctx, stream, shardID, owner, start)
}

func (s *answerLostStore) Release(ctx context.Context, stream, shardID, owner string, ho lease.Handover) error {
	return s.Store.Release(ctx, stream, shardID, owner, ho)
}

func (s *answerLostStore) Get(ctx context.Context, stream, shardID string) (lease.Lease, error) {
	return s.Store.Get(ctx, stream, shardID)
}

// TestHolder_LostAnswersAroundShardEndNeverMoveItBack: the run's last
// checkpoint and then SHARD_END both land with their answers lost; the
// holder's next renewal must not write the older checkpoint over
// SHARD_END (a coordinator may have opened the children already).
func TestHolder_LostAnswersAroundShardEndNeverMoveItBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memStore(t)
		s := &answerLostStore{Store: mem, lose: map[string]bool{"20": true, lease.ShardEnd: true}}
		h := newHolder(t, s, time.Now)
		go h.KeepAlive(t.Context())
		h.Settle("10")
		time.Sleep(lease.DefaultRenewInterval + time.Millisecond) // 10 rides on a renewal
		synctest.Wait()
		h.Settle("20")
		if err := h.Flush(t.Context()); !errors.Is(err, errAnswerLost) {
			t.Fatalf("flush = %v, want the lost answer", err)
		}
		if _, err := h.Checkpoint(t.Context(), lease.ShardEnd); !errors.Is(err, errAnswerLost) {
			t.Fatalf("SHARD_END = %v, want the lost answer", err)
		}
		time.Sleep(2 * lease.DefaultRenewInterval) // renewals go on
		synctest.Wait()
		if row, _ := mem.Get(t.Context(), stream, "s1"); !row.Finished() {
			t.Fatalf("row checkpoint %q after renewals, want SHARD_END kept", row.Checkpoint)
		}
	})
}

// TestHolder_RecordsTheLagWithEveryCheckpointItWrites: HolderOptions.Lag
// rides on a renewal that carries a checkpoint and on a checkpoint of its
// own, a negative lag as 0; a renewal carrying none records none.
func TestHolder_RecordsTheLagWithEveryCheckpointItWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memStore(t)
		var mu sync.Mutex
		lag := int64(300)
		h, _, err := lease.Hold(t.Context(), lease.HolderOptions{Store: mem, Stream: stream, ShardID: "s1", Owner: "A",
			Lag: func(st, shard string) (int64, bool) {
				mu.Lock()
				defer mu.Unlock()
				return lag, st == stream && shard == "s1"
			}})
		must(t, err)
		t.Cleanup(h.Close)
		go h.KeepAlive(t.Context())
		h.Settle("10")
		time.Sleep(lease.DefaultRenewInterval + time.Millisecond) // 10 rides on a renewal
		synctest.Wait()
		row, _ := mem.Get(t.Context(), stream, "s1")
		if row.Checkpoint != "10" || row.MillisBehind != 300 || row.LagAt.IsZero() {
			t.Fatalf("after a renewal carrying 10: row %+v, want checkpoint 10 with lag 300", row)
		}
		mu.Lock()
		lag = -5
		mu.Unlock()
		noErr(t)(h.Checkpoint(t.Context(), "11"))
		row, _ = mem.Get(t.Context(), stream, "s1")
		if row.Checkpoint != "11" || row.MillisBehind != 0 {
			t.Fatalf("after a checkpoint with lag -5: row %+v, want checkpoint 11 with lag 0", row)
		}
		at := row.LagAt
		mu.Lock()
		lag = 900
		mu.Unlock()
		time.Sleep(lease.DefaultRenewInterval + time.Millisecond) // a renewal carrying nothing
		synctest.Wait()
		if row, _ = mem.Get(t.Context(), stream, "s1"); row.MillisBehind != 0 || !row.LagAt.Equal(at) {
			t.Fatalf("after a renewal carrying no checkpoint: row %+v, want the lag as it was", row)
		}
	})
}

// TestHolder_AFenceOutlastsTheFunctionOnClocksThatRunApart: a run gives
// up on an invocation just after it began and hands the row back; the
// function runs its whole timeout by true time. The holder measured the
// fence on a clock 4 % fast, and the loop's next run waits it out on
// another clock 4 % fast: it must not take the row before the function
// ended (world 1211 of the simulator: the next run took 83 ms early).
func TestHolder_AFenceOutlastsTheFunctionOnClocksThatRunApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { handBackOnAFastClock(t, 0) })
}

// TestHolder_AReleaseLateInTheFunctionsRunStillFencesItOnAFastClock: a run
// gives up on an invocation and hands the row back near the end of the
// function's timeout, when the timeout has passed on the holder's clock (4 %
// fast) but not in true time. The release must still carry a fence to the
// function's end and the tenth for clocks, not none (world 1,000,392 of the
// simulator: the next run invoked 88 ms before the function ended).
func TestHolder_AReleaseLateInTheFunctionsRunStillFencesItOnAFastClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { handBackOnAFastClock(t, 20*time.Second-500*time.Millisecond) })
}

// handBackOnAFastClock: a holder on a clock 4 % fast gives up on an
// invocation of a function with a 20 s timeout just after it began, and
// hands the row back to its loop after the given true time; the loop's next
// run, on another clock 4 % fast, must not see the row available before the
// function ended in true time. Run it in a synctest bubble.
func handBackOnAFastClock(t *testing.T, after time.Duration) {
	mem := memStore(t)
	began := time.Now()
	fast := func() time.Time { return began.Add(time.Duration(float64(time.Since(began)) * 1.04)) }
	const maxRun = 20 * time.Second
	h, _, err := lease.Hold(t.Context(), lease.HolderOptions{Store: mem, Stream: stream, ShardID: "s1", Owner: "loop/r1", MaxRun: maxRun, Clock: fast})
	must(t, err)
	t.Cleanup(h.Close)
	go h.KeepAlive(t.Context())
	end, err := h.Begin(t.Context())
	must(t, err)
	ends := time.Now().Add(maxRun) // the function's own timeout, in true time
	end(false)                     // the call breaks at once; the function runs on
	time.Sleep(after)
	must(t, h.Release(t.Context(), "loop"))
	obs := lease.NewObserver(lease.DefaultDuration)
	for {
		row, err := mem.Get(t.Context(), stream, "s1")
		must(t, err)
		if v := obs.ObserveAs(row, fast(), "loop"); v.Available() {
			if time.Now().Before(ends) {
				t.Fatalf("the loop's next run may take the row %s before the function it gave up on ends (fence %s)", ends.Sub(time.Now()), row.Fence)
			}
			return
		}
		time.Sleep(time.Millisecond)
	}
}
