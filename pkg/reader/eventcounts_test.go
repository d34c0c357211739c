package reader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestRun_EventCount_EachCountUnderTheTriggersMeaning runs one shard of 20
// records (15 buys, then 5 sells the filter drops) through the reader
// with each outcome the trigger counts, and checks every count against its
// definition: PolledEventCount the records read, FilteredOutEventCount
// those no filter passes, InvokedEventCount the records of every delivery
// (again at a retry), FailedInvokeEventCount those of a delivery that did
// not settle (all of a failed one; the unsettled rest of a partial one),
// DroppedEventCount those given up with no destination,
// OnFailureDestinationDeliveredEventCount those the destination accepted
// (once, however often it refused first), and IteratorAge at each delivery.
func TestRun_EventCount_EachCountUnderTheTriggersMeaning(t *testing.T) {
	kind := func(i int) string { return map[bool]string{true: "sell", false: "buy"}[i >= 15] }
	// 20 records, 5 sells: 15 pass, in batches of 5 (BatchSize 5).
	const polled, filtered, passed = 20, 5, 15
	type policy struct {
		fail  func(call int, b Batch) (int, error) // nil: settle everything
		retry *int
		dest  bool // an on-failure destination, which refuses its first send
	}
	for _, c := range []struct {
		name string
		p    policy
		want countsSeen
	}{
		{"success", policy{}, countsSeen{polled: polled, filtered: filtered, invoked: passed}},
		{"a failing batch retried once", policy{fail: func(call int, b Batch) (int, error) {
			if call == 1 {
				return 0, errors.New("function error")
			}
			return len(b.Records), nil
		}}, countsSeen{polled: polled, filtered: filtered, invoked: passed + 5, failed: 5}},
		{"a partial batch", policy{fail: func(call int, b Batch) (int, error) {
			if call == 1 {
				return 2, nil // batchItemFailures at the third record
			}
			return len(b.Records), nil
		}}, countsSeen{polled: polled, filtered: filtered, invoked: passed + 3, failed: 3}},
		{"a dropped batch", policy{retry: RetryAttempts(1), fail: func(call int, b Batch) (int, error) {
			if call <= 2 {
				return 0, errors.New("function error")
			}
			return len(b.Records), nil
		}}, countsSeen{polled: polled, filtered: filtered, invoked: passed + 5, failed: 10, dropped: 5}},
		{"a destination delivery", policy{retry: RetryAttempts(0), dest: true, fail: func(call int, b Batch) (int, error) {
			if call == 1 {
				return 0, errors.New("function error")
			}
			return len(b.Records), nil
		}}, countsSeen{polled: polled, filtered: filtered, invoked: passed, failed: 5, onFailure: 5}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newMemStream(t)
				m.putOrders(t, keys(1), 20, kind)
				time.Sleep(3 * time.Second) // the records are 3 s old when the run starts
				var mu sync.Mutex
				calls := 0
				tgt := &orderTarget{fail: func(b Batch) (int, error) {
					mu.Lock()
					calls++
					n := calls
					mu.Unlock()
					if c.p.fail == nil {
						return len(b.Records), nil
					}
					return c.p.fail(n, b)
				}}
				counts := &eventCounts{}
				o := Options{Kinesis: m.k, Store: m.store, Target: tgt, Mapping: Mapping{
					BatchSize:            5,
					FilterCriteria:       []string{buyFilter},
					MaximumRetryAttempts: c.p.retry,
				},
					Hooks: counts, RunLength: 5 * time.Second, RetryMin: 10 * time.Millisecond}
				sends := 0
				if c.p.dest {
					o.OnFailure = DestinationFunc(func(context.Context, FailureRecord) error {
						mu.Lock()
						defer mu.Unlock()
						if sends++; sends == 1 {
							return errors.New("queue unreachable")
						}
						return nil
					})
				}
				st, err := Run(t.Context(), o, m.state("A"))
				if err != nil || !st.Continue {
					t.Fatalf("Run = %+v, %v", st, err)
				}
				if st.Checkpoint != m.seqs[len(m.seqs)-1] {
					t.Errorf("checkpoint %q, want the last record: every record settled, was given up or filtered out", st.Checkpoint)
				}
				got := counts.get()
				if got.ages != tgt.calls() {
					t.Errorf("%d IteratorAge reports for %d deliveries", got.ages, tgt.calls())
				}
				if got.maxAge < 3000 || got.maxAge > 8000 {
					t.Errorf("IteratorAge at most %d ms, want the age of records read 3 s after they arrived", got.maxAge)
				}
				got.ages, got.maxAge = 0, 0
				if got != c.want {
					t.Errorf("counts %+v, want %+v", got, c.want)
				}
				if c.p.dest && sends != 2 {
					t.Errorf("%d sends to the destination, want a refused one and an accepted one", sends)
				}
			})
		})
	}
}

// TestRun_EventCount_HooksWithoutEventCounterAreNotAsked: a Hooks that does
// not implement EventCounter still gets its own calls, and the run works.
func TestRun_EventCount_HooksWithoutEventCounterAreNotAsked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemStream(t)
		m.putOrders(t, keys(2), 10, func(i int) string { return fmt.Sprint([]string{"buy", "sell"}[i%2]) })
		h := &deliveredOnly{}
		o := Options{Kinesis: m.k, Store: m.store, Target: &orderTarget{}, Mapping: Mapping{FilterCriteria: []string{buyFilter}}, Hooks: h, RunLength: 2 * time.Second}
		if _, err := Run(t.Context(), o, m.state("A")); err != nil {
			t.Fatal(err)
		}
		if h.n != 5 {
			t.Errorf("RecordsDelivered %d, want the 5 buys", h.n)
		}
	})
}

type deliveredOnly struct {
	NopHooks
	mu sync.Mutex
	n  int
}

func (d *deliveredOnly) RecordsDelivered(_, _ string, n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.n += n
}
