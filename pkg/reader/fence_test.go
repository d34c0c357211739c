package reader

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardloop/shardloop/pkg/lease"
)

// functionModel is a target as a Lambda function is: each invocation runs
// for its own duration whatever its caller does. A caller whose context
// ends gets its error at once, while the function runs on to its end. It
// records every invocation's span, as the function saw it.
type functionModel struct {
	took func(b Batch) time.Duration // how long one invocation runs

	mu       sync.Mutex
	running  int
	spans    []invocationSpan
	overlaps []string
	settled  map[string]bool // the data of records whose invocation answered
}

type invocationSpan struct {
	start, end time.Time
	first      string // the first record's data
	records    int
}

func newFunctionModel(took func(b Batch) time.Duration) *functionModel {
	return &functionModel{took: took, settled: map[string]bool{}}
}

func (f *functionModel) Deliver(ctx context.Context, b Batch) (int, error) {
	f.mu.Lock()
	start := time.Now()
	f.running++
	if f.running > 1 {
		f.overlaps = append(f.overlaps, fmt.Sprintf("%s at %v with %d running", b.Records[0].Data, start, f.running-1))
	}
	f.mu.Unlock()
	d := f.took(b)
	done := make(chan struct{})
	go func() { // the function: it runs to its end
		time.Sleep(d)
		f.mu.Lock()
		f.running--
		f.spans = append(f.spans, invocationSpan{start: start, end: time.Now(), first: string(b.Records[0].Data), records: len(b.Records)})
		f.mu.Unlock()
		close(done)
	}()
	select {
	case <-done:
		f.mu.Lock()
		for _, r := range b.Records {
			f.settled[string(r.Data)] = true
		}
		f.mu.Unlock()
		return len(b.Records), nil
	case <-ctx.Done():
		return 0, ctx.Err() // the caller gave up; the function did not
	}
}

func (f *functionModel) report() (overlaps []string, spans []invocationSpan, settled int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.overlaps), slices.Clone(f.spans), len(f.settled)
}

// partitionedStore cuts one loop's runs off the table from the moment cut
// is set: every call of an owner in that loop's family fails, as from a host
// that lost its network, while everyone else reaches the table.
type partitionedStore struct {
	Store Store
	loop  string
	cut   atomic.Bool
}

var errPartitioned = errors.New("lease table unreachable from this host")

func (p *partitionedStore) off(owner string) bool {
	return p.cut.Load() && lease.InFamily(owner, p.loop)
}

func (p *partitionedStore) Take(ctx context.Context, stream, shardID, owner string, opts ...lease.TakeOption) (lease.Lease, error) {
	if p.off(owner) {
		return lease.Lease{}, errPartitioned
	}
	return p.Store.Take(ctx, stream, shardID, owner, opts...)
}

func (p *partitionedStore) Renew(ctx context.Context, stream, shardID, owner string, rn lease.Renewal) (lease.Lease, error) {
	if p.off(owner) {
		return lease.Lease{}, errPartitioned
	}
	return p.Store.Renew(ctx, stream, shardID, owner, rn)
}

func (p *partitionedStore) Checkpoint(ctx context.Context, stream, shardID, owner, seq string, opts ...lease.CheckpointOption) (lease.Lease, error) {
	if p.off(owner) {
		return lease.Lease{}, errPartitioned
	}
	return p.Store.Checkpoint(ctx, stream, shardID, owner, seq, opts...)
}

func (p *partitionedStore) Release(ctx context.Context, stream, shardID, owner string, ho lease.Handover) error {
	if p.off(owner) {
		return errPartitioned
	}
	return p.Store.Release(ctx, stream, shardID, owner, ho)
}

// The calls partitionedStore passes on as they are.

func (p *partitionedStore) CheckpointWindow(ctx context.Context, stream, shardID, owner string, w lease.Window) error {
	return p.Store.CheckpointWindow(ctx, stream, shardID, owner, w)
}

func (p *partitionedStore) Pin(ctx context.Context, stream, shardID, owner, start string) (lease.Lease, error) {
	return p.Store.Pin(ctx, stream, shardID, owner, start)
}

func (p *partitionedStore) Get(ctx context.Context, stream, shardID string) (lease.Lease, error) {
	return p.Store.Get(ctx, stream, shardID)
}

func (p *partitionedStore) GetWindow(ctx context.Context, stream, shardID string) (lease.Window, error) {
	return p.Store.GetWindow(ctx, stream, shardID)
}

// coordinate is a coordinator's watch of the shard for loop owner: it takes
// the row for it once its Observer judges it free or lapsed, then runs the
// loop until done. It may run in a goroutine of its own.
func coordinate(t *testing.T, o Options, st State, owner string, done func() bool) {
	t.Helper()
	obs := lease.NewObserver(o.LeaseDuration)
	for {
		row, err := o.Store.Get(t.Context(), st.Stream, st.ShardID)
		if err != nil {
			t.Error(err)
			return
		}
		if v := obs.Observe(row, time.Now()); v.Available() {
			if _, err := o.Store.Take(t.Context(), st.Stream, st.ShardID, owner, lease.IfCounter(v.Counter)); err == nil {
				break
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	st.Owner = owner
	for !done() {
		next, err := Run(t.Context(), o, st)
		if err != nil || !next.Continue {
			t.Errorf("loop %s ended %q, %v", owner, next.Reason, err)
			return
		}
		st = next
	}
}

// TestRun_ACancelledInvocationRunsOnAndTheNextOwnerWaitsForIt: a loop's
// host loses the lease table while its function is mid-invocation. At the
// holder's deadline the reader gives up on the invocation, but a Lambda
// invocation cannot be cancelled: the function runs on. The coordinator
// takes the shard once the lease has lapsed on its clock; the new owner
// must not invoke the function before every invocation the old one started
// could have ended (the lease plus the function's timeout). One shard, one
// lane: no two invocations may overlap at all.
func TestRun_ACancelledInvocationRunsOnAndTheNextOwnerWaitsForIt(t *testing.T) {
	for _, c := range []struct{ took, cut time.Duration }{
		{1500 * time.Millisecond, 20 * time.Second}, {2500 * time.Millisecond, 21 * time.Second},
		{3900 * time.Millisecond, 20 * time.Second}, {3900 * time.Millisecond, 22 * time.Second},
		{3900 * time.Millisecond, 23500 * time.Millisecond}, {3900 * time.Millisecond, 25 * time.Second},
	} {
		took := c.took
		t.Run(fmt.Sprintf("%s-cut-at-%s", c.took, c.cut), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newMemStream(t)
				m.put(t, keys(5), 60)
				fm := newFunctionModel(func(Batch) time.Duration { return took })
				ps := &partitionedStore{Store: m.store, loop: "A"}
				o := Options{Kinesis: m.k, Store: ps, Target: fm, Mapping: Mapping{BatchSize: 5}, RunLength: 5 * time.Minute,
					PollInterval: 200 * time.Millisecond, RetryMin: 100 * time.Millisecond, RetryMax: time.Second,
					TargetTimeout: 4 * time.Second} // the function's configured timeout
				go func() {
					time.Sleep(c.cut) // mid-invocation, some way into the shard
					ps.cut.Store(true)
				}()
				var wg sync.WaitGroup
				wg.Go(func() { // the coordinator watches the row all along
					coordinate(t, o, m.state("A"), "B", func() bool {
						_, _, n := fm.report()
						return n == 60
					})
				})
				st, err := Run(t.Context(), o, m.state("A"))
				if err != nil {
					t.Fatal(err)
				}
				if st.Reason != ReasonLeaseLost {
					t.Fatalf("the cut-off loop ended %q, want lease_lost", st.Reason)
				}
				wg.Wait()
				overlaps, spans, _ := fm.report()
				if len(overlaps) > 0 {
					t.Fatalf("invocations overlapped at the function: %v", overlaps)
				}
				if len(spans) < 2 {
					t.Fatalf("%d invocations", len(spans))
				}
			})
		})
	}
}

// TestRun_ARetriedRunWaitsForTheRunItRetries: Step Functions retries a Read
// whose connection broke while the first invocation runs on: two runs of
// one loop with the same state. The retried run must deliver nothing while
// the first one may: it waits until the first hands the row back at its
// end, then goes on from the row's checkpoint.
func TestRun_ARetriedRunWaitsForTheRunItRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemStream(t)
		m.put(t, keys(5), 200)
		fm := newFunctionModel(func(Batch) time.Duration { return 400 * time.Millisecond })
		o := Options{Kinesis: m.k, Store: m.store, Target: fm, Mapping: Mapping{BatchSize: 5}, RunLength: 5 * time.Second,
			PollInterval: 200 * time.Millisecond, TargetTimeout: time.Second}
		st := m.state("A")
		var first, retried State
		var wg sync.WaitGroup
		wg.Go(func() {
			var err error
			if first, err = Run(t.Context(), o, st); err != nil {
				t.Error(err)
			}
		})
		time.Sleep(300 * time.Millisecond) // the retry starts while the first run delivers
		retried = st
		for retried.Records == 0 {
			next, err := Run(t.Context(), o, retried)
			if err != nil {
				t.Fatal(err)
			}
			if !next.Continue {
				t.Fatalf("the retried loop ended %q", next.Reason)
			}
			retried = next
		}
		wg.Wait()
		if overlaps, _, _ := fm.report(); len(overlaps) > 0 {
			t.Fatalf("the two runs' invocations overlapped: %v", overlaps)
		}
		if first.Reason != ReasonContinue || first.Records == 0 {
			t.Fatalf("first run ended %q with %d records, want continue (it ran its length and handed back)", first.Reason, first.Records)
		}
		if retried.Checkpoint == "" || !seqLess(first.Checkpoint, retried.Checkpoint) {
			t.Fatalf("the retried loop checkpointed %q after the first run's %q, want it to go on from there", retried.Checkpoint, first.Checkpoint)
		}
	})
}

// TestRun_ALoopWaitsOutItsCrashedRunAcrossShortRuns: a run of a loop
// crashes mid-invocation (it writes nothing more); the loop's next runs,
// each shorter than the wait, watch the row without delivering and hand
// the watch on, until the lease and the function's timeout have passed;
// then one takes the row and delivers.
func TestRun_ALoopWaitsOutItsCrashedRunAcrossShortRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemStream(t)
		m.put(t, keys(3), 30)
		fm := newFunctionModel(func(Batch) time.Duration { return 3 * time.Second })
		ps := &partitionedStore{Store: m.store, loop: "A"}
		o := Options{Kinesis: m.k, Store: ps, Target: fm, Mapping: Mapping{BatchSize: 5}, RunLength: 7 * time.Second,
			PollInterval: 200 * time.Millisecond, TargetTimeout: 6 * time.Second}
		ctx, crash := context.WithCancel(t.Context())
		go func() {
			time.Sleep(1500 * time.Millisecond) // the first invocation is running
			ps.cut.Store(true)                  // the host dies: nothing it sends arrives
			crash()
		}()
		st, err := Run(ctx, o, m.state("A"))
		if err != nil {
			t.Fatal(err)
		}
		crashed := time.Now()
		ps.cut.Store(false) // the loop's next run is elsewhere
		st.Iterator, st.Checkpoint = "", ""
		waits := 0
		for {
			next, err := Run(t.Context(), o, st)
			if err != nil {
				t.Fatal(err)
			}
			if next.Reason != ReasonWaiting {
				st = next
				break
			}
			if next.Watch == nil {
				t.Fatal("a waiting run handed on no watch")
			}
			waits++
			st = next
		}
		if st.Reason != ReasonContinue || st.Records == 0 {
			t.Fatalf("after %d waiting runs: %q with %d records", waits, st.Reason, st.Records)
		}
		if waits < 2 {
			t.Fatalf("%d waiting runs of 7 s, want the lease (10 s) and the timeout (6 s) waited out", waits)
		}
		if overlaps, spans, _ := fm.report(); len(overlaps) > 0 {
			t.Fatalf("invocations overlapped: %v (spans %v)", overlaps, spans)
		}
		if waited := time.Since(crashed); waited > 30*time.Second {
			t.Fatalf("took %s to take over: the watch was not handed on", waited)
		}
	})
}
