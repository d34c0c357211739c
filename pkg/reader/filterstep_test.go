package reader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/pkg/filter"
	"github.com/shardloop/shardloop/pkg/lease"
)

// buyFilter passes the records whose data is a JSON object with "type":
// "buy".
const buyFilter = `{"data": {"type": ["buy"]}}`

// order is the data of the records of these tests.
type order struct {
	Key  string `json:"key"`
	I    int    `json:"i"`
	Type string `json:"type"`
}

// putOrders writes n records on keys, record i with type kind(i), and
// returns their sequence numbers by type.
func (m *memStream) putOrders(t *testing.T, keys []string, n int, kind func(i int) string) map[string][]string {
	t.Helper()
	bySeq := map[string][]string{}
	var in []types.PutRecordsRequestEntry
	for i := range n {
		k := keys[i%len(keys)]
		d, _ := json.Marshal(order{Key: k, I: len(m.seqs) + len(in), Type: kind(i)})
		in = append(in, types.PutRecordsRequestEntry{PartitionKey: aws.String(k), Data: d})
		if len(in) == 500 || i == n-1 {
			out, err := m.k.PutRecords(t.Context(), &kinesis.PutRecordsInput{StreamName: aws.String(m.stream), Records: in})
			if err != nil || aws.ToInt32(out.FailedRecordCount) != 0 {
				t.Fatalf("put: %v", err)
			}
			for j, r := range out.Records {
				var o order
				_ = json.Unmarshal(in[j].Data, &o)
				m.seqs = append(m.seqs, aws.ToString(r.SequenceNumber))
				m.keys = append(m.keys, o.Key)
				bySeq[o.Type] = append(bySeq[o.Type], aws.ToString(r.SequenceNumber))
			}
			in = in[:0]
		}
	}
	return bySeq
}

// orderTarget keeps every delivery; fail, when set, decides how many
// records of a delivery settle.
type orderTarget struct {
	mu      sync.Mutex
	batches [][]order
	settled map[string]bool // sequence numbers settled
	fail    func(b Batch) (int, error)
}

func (o *orderTarget) Deliver(_ context.Context, b Batch) (int, error) {
	n, err := len(b.Records), error(nil)
	if o.fail != nil {
		n, err = o.fail(b)
	}
	n = max(0, min(n, len(b.Records)))
	o.mu.Lock()
	defer o.mu.Unlock()
	var got []order
	for _, r := range b.Records {
		var x order
		if json.Unmarshal(r.Data, &x) != nil {
			x.Type = "not JSON: " + string(r.Data)
		}
		got = append(got, x)
	}
	o.batches = append(o.batches, got)
	if o.settled == nil {
		o.settled = map[string]bool{}
	}
	for _, r := range b.Records[:n] {
		o.settled[aws.ToString(r.SequenceNumber)] = true
	}
	return n, err
}

func (o *orderTarget) calls() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.batches)
}

func (o *orderTarget) all() []order {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []order
	for _, b := range o.batches {
		out = append(out, b...)
	}
	return out
}

func (o *orderTarget) isSettled(seq string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.settled[seq]
}

// passStore checks every checkpoint write: each record at or before it
// that passes the filters settled at the target (those filtered out are
// passed without delivery).
type passStore struct {
	Store    Store
	m        *memStream
	passing  map[string]bool
	tgt      *orderTarget
	mu       sync.Mutex
	written  []string
	breaches []string
}

func (s *passStore) Checkpoint(ctx context.Context, stream, shard, owner, seq string, opts ...lease.CheckpointOption) (lease.Lease, error) {
	for _, r := range s.m.seqs {
		if (seq == lease.ShardEnd || !seqLess(seq, r)) && s.passing[r] && !s.tgt.isSettled(r) {
			s.mu.Lock()
			s.breaches = append(s.breaches, fmt.Sprintf("checkpoint %s written while %s had not settled", seq, r))
			s.mu.Unlock()
			break
		}
	}
	l, err := s.Store.Checkpoint(ctx, stream, shard, owner, seq, opts...)
	if err == nil {
		s.mu.Lock()
		s.written = append(s.written, seq)
		s.mu.Unlock()
	}
	return l, err
}

// The calls passStore passes on as they are.

func (s *passStore) Take(ctx context.Context, stream, shardID, owner string, opts ...lease.TakeOption) (lease.Lease, error) {
	return s.Store.Take(ctx, stream, shardID, owner, opts...)
}

func (s *passStore) Renew(ctx context.Context, stream, shardID, owner string, rn lease.Renewal) (lease.Lease, error) {
	return s.Store.Renew(ctx, stream, shardID, owner, rn)
}

func (s *passStore) CheckpointWindow(ctx context.Context, stream, shardID, owner string, w lease.Window) error {
	return s.Store.CheckpointWindow(ctx, stream, shardID, owner, w)
}

func (s *passStore) Pin(ctx context.Context, stream, shardID, owner, start string) (lease.Lease, error) {
	return s.Store.Pin(ctx, stream, shardID, owner, start)
}

func (s *passStore) Release(ctx context.Context, stream, shardID, owner string, ho lease.Handover) error {
	return s.Store.Release(ctx, stream, shardID, owner, ho)
}

func (s *passStore) Get(ctx context.Context, stream, shardID string) (lease.Lease, error) {
	return s.Store.Get(ctx, stream, shardID)
}

func (s *passStore) GetWindow(ctx context.Context, stream, shardID string) (lease.Window, error) {
	return s.Store.GetWindow(ctx, stream, shardID)
}

func setOf(seqs []string) map[string]bool {
	out := map[string]bool{}
	for _, s := range seqs {
		out[s] = true
	}
	return out
}

// TestRun_Filter_DeliversOnlyMatchingRecordsInFullBatchesAndPassesTheRest
// reads a closed shard of 600 records on 8 keys, a third of them "buy", to
// its end through the filter {"data": {"type": ["buy"]}}, at factors 1 and
// 4. The target gets exactly the buys, each once, each key's in order, in
// batches of at most BatchSize records that pass (the batch size counts
// delivered records: with a backlog, batches are full, though each read of
// BatchSize records holds a third of that); no checkpoint passes a buy
// before it settled; SHARD_END comes last; the sells are counted as
// filtered out.
func TestRun_Filter_DeliversOnlyMatchingRecordsInFullBatchesAndPassesTheRest(t *testing.T) {
	for _, factor := range []int{1, 4} {
		t.Run(fmt.Sprintf("factor %d", factor), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newMemStream(t)
				by := m.putOrders(t, keys(8), 600, func(i int) string { return map[bool]string{true: "buy", false: "sell"}[i%3 == 0] })
				m.close(t)
				tgt := &orderTarget{fail: func(b Batch) (int, error) {
					time.Sleep(time.Second) // a target slower than the reads: a backlog
					return len(b.Records), nil
				}}
				ps := &passStore{Store: m.store, m: m, passing: setOf(by["buy"]), tgt: tgt}
				counts := &eventCounts{}
				o := Options{Kinesis: m.k, Store: ps, Target: tgt, Mapping: Mapping{
					BatchSize:             20,
					ParallelizationFactor: factor,
					FilterCriteria:        []string{buyFilter},
				},
					Hooks: counts, RunLength: time.Minute}
				st := runLoop(t, o, m.state("A"), 3, nil)
				if st.Reason != ReasonShardEnd {
					t.Fatalf("ended %q", st.Reason)
				}
				got := tgt.all()
				if len(got) != len(by["buy"]) {
					t.Errorf("delivered %d records, want the %d buys", len(got), len(by["buy"]))
				}
				last := map[string]int{}
				for _, x := range got {
					if x.Type != "buy" {
						t.Fatalf("delivered %+v, which the filter does not pass", x)
					}
					if p, ok := last[x.Key]; ok && x.I <= p {
						t.Errorf("key %s: record %d after %d", x.Key, x.I, p)
					}
					last[x.Key] = x.I
				}
				full := 0
				for _, b := range tgt.batches {
					if len(b) > int(o.BatchSize) {
						t.Errorf("a batch of %d records, BatchSize %d", len(b), o.BatchSize)
					}
					if len(b) == int(o.BatchSize) {
						full++
					}
				}
				if factor == 1 && full < len(tgt.batches)/2 {
					t.Errorf("%d of %d batches full: filtered-out records should not count against BatchSize", full, len(tgt.batches))
				}
				if len(ps.breaches) > 0 {
					t.Errorf("checkpoint rule broken: %v", ps.breaches)
				}
				if n := len(ps.written); n == 0 || ps.written[n-1] != lease.ShardEnd {
					t.Errorf("checkpoints %v, want SHARD_END last", ps.written)
				}
				c := counts.get()
				if c.filtered != len(by["sell"]) || c.polled != len(m.seqs) || c.invoked != len(by["buy"]) {
					t.Errorf("counts %+v, want polled %d, filtered out %d, invoked %d", c, len(m.seqs), len(by["sell"]), len(by["buy"]))
				}
				t.Logf("factor %d: %d deliveries (%d full), %d checkpoints", factor, len(tgt.batches), full, len(ps.written))
			})
		})
	}
}

// TestRun_Filter_AllFilteredCostsNoInvocationAndTheCheckpointMovesPast: a
// shard whose 300 records all fail the filter is read without one delivery,
// and the run checkpoints its last record, at factors 1 and 4.
func TestRun_Filter_AllFilteredCostsNoInvocationAndTheCheckpointMovesPast(t *testing.T) {
	for _, factor := range []int{1, 4} {
		t.Run(fmt.Sprintf("factor %d", factor), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newMemStream(t)
				m.putOrders(t, keys(5), 300, func(int) string { return "sell" })
				tgt := &orderTarget{}
				counts := &eventCounts{}
				o := Options{Kinesis: m.k, Store: m.store, Target: tgt, Mapping: Mapping{
					BatchSize:             50,
					ParallelizationFactor: factor,
					FilterCriteria:        []string{buyFilter},
				},
					Hooks: counts, RunLength: 3 * time.Second}
				st, err := Run(t.Context(), o, m.state("A"))
				if err != nil || !st.Continue {
					t.Fatalf("Run = %+v, %v", st, err)
				}
				if n := tgt.calls(); n != 0 {
					t.Errorf("%d target invocations for records that all fail the filter", n)
				}
				last := m.seqs[len(m.seqs)-1]
				if st.Checkpoint != last {
					t.Errorf("state checkpoint %q, want the last record %s", st.Checkpoint, last)
				}
				if row, err := m.store.Get(t.Context(), m.stream, m.shard); err != nil || row.Checkpoint != last {
					t.Errorf("row checkpoint %q (%v), want %s", row.Checkpoint, err, last)
				}
				if st.Records != 0 || st.Batches != 0 {
					t.Errorf("state counts %d records in %d batches delivered, want none", st.Records, st.Batches)
				}
				if c := counts.get(); c != (countsSeen{polled: 300, filtered: 300}) {
					t.Errorf("counts %+v, want 300 polled and filtered out, nothing else", c)
				}
			})
		})
	}
}

// TestRun_Filter_FilteredRecordsBeforeAFailingOneDoNotHoldTheCheckpointBack:
// 50 filtered-out records, then a buy the target never takes (retried
// without end, the default policy), then more of both: the checkpoint moves
// past the 50 at once and stops before the failing record, at factors 1
// and 4; at 4 the other lanes deliver their buys.
func TestRun_Filter_FilteredRecordsBeforeAFailingOneDoNotHoldTheCheckpointBack(t *testing.T) {
	for _, factor := range []int{1, 4} {
		t.Run(fmt.Sprintf("factor %d", factor), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newMemStream(t)
				m.putOrders(t, keys(1), 50, func(int) string { return "sell" })
				by := m.putOrders(t, keys(4), 40, func(i int) string { return map[bool]string{true: "buy", false: "sell"}[i%2 == 0] })
				poison := by["buy"][0]
				tgt := &orderTarget{fail: func(b Batch) (int, error) {
					for i, r := range b.Records {
						if aws.ToString(r.SequenceNumber) == poison {
							return i, errors.New("cannot take it")
						}
					}
					return len(b.Records), nil
				}}
				counts := &eventCounts{}
				o := Options{Kinesis: m.k, Store: m.store, Target: tgt, Mapping: Mapping{
					BatchSize:             10,
					ParallelizationFactor: factor,
					FilterCriteria:        []string{buyFilter},
				},
					Hooks: counts, RunLength: 3 * time.Second, RetryMin: 50 * time.Millisecond, RetryMax: 200 * time.Millisecond}
				st, err := Run(t.Context(), o, m.state("A"))
				if err != nil || !st.Continue {
					t.Fatalf("Run = %+v, %v", st, err)
				}
				if want := m.seqs[49]; st.Checkpoint != want {
					t.Errorf("checkpoint %q, want %s: the 50 filtered-out records before the failing one are passed", st.Checkpoint, want)
				}
				if factor > 1 {
					delivered := 0
					for _, x := range tgt.all() {
						if x.Key != m.keys[slices.Index(m.seqs, poison)] && tgt.isSettled(m.seqs[x.I]) {
							delivered++
						}
					}
					if delivered == 0 {
						t.Errorf("no buy of another lane delivered while one lane retried the failing record")
					}
				}
				c := counts.get()
				if c.failed == 0 || c.filtered < 50 {
					t.Errorf("counts %+v, want failed invocations and at least the first 50 filtered out", c)
				}
			})
		})
	}
}

// TestOptions_FilterErrorsNameTheFilterAndTheProblem: more than MaxFilters
// patterns, or a bad one, is refused before anything is read, with an
// error that names the filter (from 1) and what is wrong.
func TestOptions_FilterErrorsNameTheFilterAndTheProblem(t *testing.T) {
	six := slices.Repeat([]string{buyFilter}, MaxFilters+1)
	for _, c := range []struct {
		filters []string
		want    []string
	}{
		{six, []string{"FilterCriteria", "6 filters", "at most 5"}},
		{[]string{buyFilter, `{"data": {"amount": [{"numeric": [">", 0, "<"]}]}}`}, []string{"FilterCriteria", "filter 2", "data.amount[0].numeric", "operator and value pairs"}},
		{[]string{`{"data": {"name": [{"wildcard": "a*"}]}}`}, []string{"filter 1", "wildcard"}},
		{[]string{`not json`}, []string{"filter 1", "not valid JSON"}},
	} {
		o := Options{Kinesis: &faultKinesis{}, Store: &spyStore{}, Target: FuncTarget(nil), Mapping: Mapping{FilterCriteria: c.filters}}
		o.setDefaults()
		err := o.validate()
		var fe *filter.Error
		if !errors.Is(err, ErrInvalid) || !errors.As(err, &fe) {
			t.Errorf("%v: err = %v, want ErrInvalid with a *filter.Error", c.filters, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %q lacks %q", c.filters, err, w)
			}
		}
	}
	o := Options{Kinesis: &faultKinesis{}, Store: &spyStore{}, Target: FuncTarget(nil), Mapping: Mapping{FilterCriteria: slices.Repeat([]string{buyFilter}, MaxFilters)}}
	o.setDefaults()
	if err := o.validate(); err != nil {
		t.Errorf("%d filters: %v", MaxFilters, err)
	}
	if MaxFilters != 5 {
		t.Errorf("MaxFilters %d, want Lambda's default quota of 5 filters per event source mapping", MaxFilters)
	}
}

// TestRun_Filter_OnTheEmulatorsDataThatIsNotJSONFailsADataFilter runs one
// filtered subscription against kinesis-local and dynalite with the
// trigger's rules for data: a filter on data passes JSON that matches it and
// never data that is not JSON; a second filter on the partition key passes
// records of the audit key whatever their data. The record that ends the
// shard's data fails both, and the checkpoint moves past it.
func TestRun_Filter_OnTheEmulatorsDataThatIsNotJSONFailsADataFilter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	keys := []string{"k", "k", "k", "audit-1", "k", "audit-2", "k", "k"}
	vals := []string{`{"type":"buy","i":0}`, `{"type":"sell","i":1}`, `buy`, `plain text`, `{"type":"buy","i":4}`, `{"type":"sell","i":5}`, "\x1f\x8b\x08 gzip", `{"type":"sell","i":7}`}
	var seqs []string
	for i := range vals {
		seqs = append(seqs, e.put(t, keys[i:i+1], vals[i:i+1])...)
	}
	e.setStart(t, e.shards[0], "horizon")
	s := &sink{}
	counts := &eventCounts{}
	o := e.opts(s)
	o.FilterCriteria = []string{buyFilter, `{"partitionKey": [{"prefix": "audit-"}]}`}
	o.Hooks = counts
	last := seqs[len(seqs)-1]
	runUntil(t, o, e.state(e.shards[0], "A"), func() bool {
		return counts.get().polled >= len(vals) && e.checkpointed(t, e.shards[0], last)
	})
	want := []string{vals[0], vals[3], vals[4], vals[5]}
	if got := s.data(); !slices.Equal(got, want) {
		t.Errorf("delivered %q, want %q", got, want)
	}
	if row := e.row(t, e.shards[0]); row.Checkpoint != last {
		t.Errorf("checkpoint %q, want the last record %s, filtered out", row.Checkpoint, last)
	}
	if c := counts.get(); c.filtered != 4 || c.invoked != 4 {
		t.Errorf("counts %+v, want 4 filtered out and 4 invoked", c)
	}
}

// eventCounts is a Hooks and EventCounter that keeps the counts.
type eventCounts struct {
	NopHooks
	mu sync.Mutex
	c  countsSeen
}

type countsSeen struct {
	polled, filtered, invoked, failed, dropped, onFailure int
	ages                                                  int   // IteratorAge reports
	maxAge                                                int64 // the largest
}

func (e *eventCounts) add(f func(c *countsSeen)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f(&e.c)
}

func (e *eventCounts) get() countsSeen {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.c
}

func (e *eventCounts) EventsPolled(_, _ string, n int) { e.add(func(c *countsSeen) { c.polled += n }) }
func (e *eventCounts) EventsFilteredOut(_, _ string, n int) {
	e.add(func(c *countsSeen) { c.filtered += n })
}
func (e *eventCounts) EventsInvoked(_, _ string, n int) {
	e.add(func(c *countsSeen) { c.invoked += n })
}
func (e *eventCounts) EventsFailedInvoke(_, _ string, n int) {
	e.add(func(c *countsSeen) { c.failed += n })
}
func (e *eventCounts) EventsDropped(_, _ string, n int) {
	e.add(func(c *countsSeen) { c.dropped += n })
}
func (e *eventCounts) EventsOnFailureDelivered(_, _ string, n int) {
	e.add(func(c *countsSeen) { c.onFailure += n })
}
func (e *eventCounts) IteratorAge(_, _ string, ms int64) {
	e.add(func(c *countsSeen) { c.ages++; c.maxAge = max(c.maxAge, ms) })
}

var _ EventCounter = (*eventCounts)(nil)

// TestRun_Filter_BatchingWindowGathersBatchSizeRecordsThatPass: records
// trickle in, three every 300 ms of which one passes the filter; with a
// batching window of 2 s and a batch size of 5, a batch closes once 5
// records that pass are gathered (1.5 s), not once 5 records were read.
func TestRun_Filter_BatchingWindowGathersBatchSizeRecordsThatPass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemStream(t)
		m.putOrders(t, keys(1), 1, func(int) string { return "sell" })
		var wg sync.WaitGroup
		var mu sync.Mutex
		wg.Go(func() {
			for range 20 {
				time.Sleep(300 * time.Millisecond)
				mu.Lock()
				m.putOrders(t, keys(3), 3, func(i int) string { return map[bool]string{true: "buy", false: "sell"}[i == 0] })
				mu.Unlock()
			}
		})
		tgt := &orderTarget{}
		o := Options{Kinesis: m.k, Store: m.store, Target: tgt, Mapping: Mapping{
			BatchSize:             5,
			MaximumBatchingWindow: 2 * time.Second,
			FilterCriteria:        []string{buyFilter},
		},
			PollInterval: 200 * time.Millisecond, RunLength: 7 * time.Second}
		if _, err := Run(t.Context(), o, m.state("A")); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		sizes := []int{}
		for _, b := range tgt.batches {
			sizes = append(sizes, len(b))
		}
		full := 0
		for _, n := range sizes {
			if n > 5 {
				t.Errorf("a batch of %d records, BatchSize 5", n)
			}
			if n == 5 {
				full++
			}
		}
		if full < 2 {
			t.Errorf("batch sizes %v: want batches of 5 records that pass, gathered over the window", sizes)
		}
	})
}
