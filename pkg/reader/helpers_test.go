package reader

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/internal/testaws"
	"github.com/shardloop/shardloop/pkg/lease"
)

func TestMain(m *testing.M) {
	code := testaws.Main(m)
	stopGoAWS()
	stopFakeS3()
	os.Exit(code)
}

// env is one stream on kinesis-local and one lease table on dynalite.
type env struct {
	k      *kinesis.Client
	store  *lease.DynamoStore
	table  string
	stream string
	shards []string
}

func newEnv(t *testing.T, shards int) *env {
	t.Helper()
	ctx := t.Context()
	e := &env{k: testaws.Kinesis(t), table: testaws.Name(t), stream: testaws.Name(t)}
	d := testaws.Dynamo(t)
	if err := lease.CreateTable(ctx, d, e.table); err != nil {
		t.Fatalf("create table: %v", err)
	}
	var err error
	if e.store, err = lease.NewDynamoStore(d, e.table); err != nil {
		t.Fatal(err)
	}
	if _, err := e.k.CreateStream(ctx, &kinesis.CreateStreamInput{
		StreamName: aws.String(e.stream), ShardCount: aws.Int32(int32(shards)),
		StreamModeDetails: &types.StreamModeDetails{StreamMode: types.StreamModeProvisioned},
	}); err != nil {
		t.Fatalf("create stream: %v", err)
	}
	e.waitActive(t)
	e.shards = e.listShards(t)
	return e
}

func (e *env) waitActive(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := e.k.DescribeStreamSummary(t.Context(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(e.stream)})
		if err == nil && out.StreamDescriptionSummary.StreamStatus == types.StreamStatusActive {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream %s not active: %v", e.stream, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *env) listShards(t *testing.T) []string {
	t.Helper()
	out, err := e.k.ListShards(t.Context(), &kinesis.ListShardsInput{StreamName: aws.String(e.stream)})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range out.Shards {
		ids = append(ids, aws.ToString(s.ShardId))
	}
	return ids
}

// put writes values with the given partition keys, in order, and returns
// their sequence numbers.
func (e *env) put(t *testing.T, keys, values []string) []string {
	t.Helper()
	var seqs []string
	for i := 0; i < len(values); i += 500 {
		j := min(i+500, len(values))
		var in []types.PutRecordsRequestEntry
		for n := i; n < j; n++ {
			in = append(in, types.PutRecordsRequestEntry{Data: []byte(values[n]), PartitionKey: aws.String(keys[n%len(keys)])})
		}
		out, err := e.k.PutRecords(t.Context(), &kinesis.PutRecordsInput{StreamName: aws.String(e.stream), Records: in})
		if err != nil || aws.ToInt32(out.FailedRecordCount) != 0 {
			t.Fatalf("put records: %v (%d failed)", err, aws.ToInt32(out.FailedRecordCount))
		}
		for _, r := range out.Records {
			seqs = append(seqs, aws.ToString(r.SequenceNumber))
		}
	}
	return seqs
}

// putN writes n values "<prefix>-<i>" under one key and returns their
// sequence numbers.
func (e *env) putN(t *testing.T, prefix string, n int) []string {
	t.Helper()
	return e.put(t, []string{"k"}, values(prefix, n))
}

func values(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%05d", prefix, i)
	}
	return out
}

// opts are fast options for tests.
func (e *env) opts(tgt Target) Options {
	return Options{
		Kinesis: e.k, Store: e.store, Target: tgt,
		PollInterval: 20 * time.Millisecond, RunLength: 700 * time.Millisecond,
		// Each lease write is bounded by the renew interval: a second fits a
		// write to dynalite on a busy machine.
		RenewInterval: time.Second, ReadErrorWait: 5 * time.Millisecond,
		RetryMin: 5 * time.Millisecond, RetryMax: 40 * time.Millisecond,
	}
}

// state is the state a coordinator starts loop owner with on shard: it
// takes a free row for the loop first, as coordinator.Pass does (a loop's
// run never takes a free row itself).
func (e *env) state(shard, owner string) State {
	takeForLoop(e.store, e.stream, shard, owner)
	return State{Stream: e.stream, ShardID: shard, Owner: owner}
}

// checkpointed reports whether the shard's row carries seq: what a test
// judges once the deliveries it waits for happened. A run's final flush is
// bounded by the renew interval, so on a busy machine a run may end before
// its answer arrives (its state then names no checkpoint); the next run
// writes it, and runUntil goes on until the row has it.
func (e *env) checkpointed(t *testing.T, shard, seq string) bool {
	t.Helper()
	return e.row(t, shard).Checkpoint == seq
}

func (e *env) row(t *testing.T, shard string) lease.Lease {
	t.Helper()
	l, err := e.store.Get(context.WithoutCancel(t.Context()), e.stream, shard)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// setStart records start on shard's row as generation "g-<start>" of order
// 1 would.
func (e *env) setStart(t *testing.T, shard, start string) {
	t.Helper()
	e.setGeneration(t, shard, start, "g-"+start, 1)
}

func (e *env) setGeneration(t *testing.T, shard, start, gen string, order int64) {
	t.Helper()
	if _, err := e.store.SetStart(t.Context(), e.stream, shard, lease.Start{Position: start, Generation: gen, Order: order}); err != nil {
		t.Fatal(err)
	}
}

// sink is an in-process target that keeps what it got.
type sink struct {
	mu   sync.Mutex
	got  []types.Record
	fail func(b Batch) (int, error) // nil: settle everything
}

func (s *sink) Deliver(ctx context.Context, b Batch) (int, error) {
	n, err := len(b.Records), error(nil)
	if s.fail != nil {
		n, err = s.fail(b)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, b.Records[:n]...)
	return n, err
}

func (s *sink) data() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.got {
		out = append(out, string(r.Data))
	}
	return out
}

func (s *sink) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got)
}

// runUntil runs the loop until done() or the loop ends, within 20 s.
//
// The runs are short so that tests see many run ends; on a busy machine a
// short run can end before its first read or delivery completes, and every
// run after it the same way. So a run that moved nothing (no read, no
// checkpoint, no delivery counted by done) doubles the next one's length,
// up to maxAdaptiveRun: the loop waits on progress, not on a speed. The
// deadline only bounds a failing test.
func runUntil(t *testing.T, o Options, st State, done func() bool) State {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		next, err := Run(t.Context(), o, st)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		moved := next.Checkpoint != st.Checkpoint || next.FirstSequence != st.FirstSequence || next.Iterator != st.Iterator
		st = next
		if !st.Continue || done() {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("loop did not finish; state %+v", st)
		}
		if !moved {
			o.RunLength = min(2*o.RunLength, maxAdaptiveRun)
		}
	}
}

// maxAdaptiveRun bounds the run length runUntil grows to on a busy machine.
const maxAdaptiveRun = 10 * time.Second

// faultKinesis wraps the real client; hooks may replace a call's result.
type faultKinesis struct {
	KinesisAPI
	mu       sync.Mutex
	reads    []string // iterators passed to GetRecords
	opens    []kinesis.GetShardIteratorInput
	onRead   func(n int) error // n counts GetRecords calls from 1; a non-nil error is returned instead
	onOpen   func(n int) error
	nReads   int
	nOpens   int
	readsErr int
}

// DescribeStreamSummary passes on.
func (f *faultKinesis) DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	return f.KinesisAPI.DescribeStreamSummary(ctx, in, optFns...)
}

func (f *faultKinesis) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, fns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	f.mu.Lock()
	f.nReads++
	n := f.nReads
	f.reads = append(f.reads, aws.ToString(in.ShardIterator))
	hook := f.onRead
	f.mu.Unlock()
	if hook != nil {
		if err := hook(n); err != nil {
			return nil, err
		}
	}
	return f.KinesisAPI.GetRecords(ctx, in, fns...)
}

func (f *faultKinesis) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, fns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	f.mu.Lock()
	f.nOpens++
	n := f.nOpens
	f.opens = append(f.opens, *in)
	hook := f.onOpen
	f.mu.Unlock()
	if hook != nil {
		if err := hook(n); err != nil {
			return nil, err
		}
	}
	return f.KinesisAPI.GetShardIterator(ctx, in, fns...)
}

func (f *faultKinesis) openTypes() []types.ShardIteratorType {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []types.ShardIteratorType
	for _, in := range f.opens {
		out = append(out, in.ShardIteratorType)
	}
	return out
}

// spyStore wraps a lease store and records its writes.
type spyStore struct {
	Store  Store
	mu     sync.Mutex
	calls  []string // "checkpoint <seq>", "renew", "release", "handback", "take"; a renewal carrying a checkpoint is "renew", "checkpoint <seq>"
	before func(op string) error
}

func (s *spyStore) record(op string) error {
	s.mu.Lock()
	s.calls = append(s.calls, op)
	f := s.before
	s.mu.Unlock()
	if f != nil {
		return f(op)
	}
	return nil
}

func (s *spyStore) Take(ctx context.Context, stream, shard, owner string, opts ...lease.TakeOption) (lease.Lease, error) {
	if err := s.record("take"); err != nil {
		return lease.Lease{}, err
	}
	return s.Store.Take(ctx, stream, shard, owner, opts...)
}

// Renew records "renew", then "checkpoint <seq>" when the renewal carries
// one.
func (s *spyStore) Renew(ctx context.Context, stream, shard, owner string, rn lease.Renewal) (lease.Lease, error) {
	if err := s.record("renew"); err != nil {
		return lease.Lease{}, err
	}
	if rn.Checkpoint != "" {
		if err := s.record("checkpoint " + rn.Checkpoint); err != nil {
			return lease.Lease{}, err
		}
	}
	return s.Store.Renew(ctx, stream, shard, owner, rn)
}

func (s *spyStore) Checkpoint(ctx context.Context, stream, shard, owner, seq string, opts ...lease.CheckpointOption) (lease.Lease, error) {
	if err := s.record("checkpoint " + seq); err != nil {
		return lease.Lease{}, err
	}
	return s.Store.Checkpoint(ctx, stream, shard, owner, seq, opts...)
}

// Release records "release", or "handback" for a run handing the row
// back to its loop.
func (s *spyStore) Release(ctx context.Context, stream, shard, owner string, ho lease.Handover) error {
	op := "release"
	if ho.To != "" {
		op = "handback"
	}
	if err := s.record(op); err != nil {
		return err
	}
	return s.Store.Release(ctx, stream, shard, owner, ho)
}

func (s *spyStore) ops() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// The calls spyStore passes on as they are.

func (s *spyStore) CheckpointWindow(ctx context.Context, stream, shardID, owner string, w lease.Window) error {
	return s.Store.CheckpointWindow(ctx, stream, shardID, owner, w)
}

func (s *spyStore) Pin(ctx context.Context, stream, shardID, owner, start string) (lease.Lease, error) {
	return s.Store.Pin(ctx, stream, shardID, owner, start)
}

func (s *spyStore) Get(ctx context.Context, stream, shardID string) (lease.Lease, error) {
	return s.Store.Get(ctx, stream, shardID)
}

func (s *spyStore) GetWindow(ctx context.Context, stream, shardID string) (lease.Window, error) {
	return s.Store.GetWindow(ctx, stream, shardID)
}

// recHooks records what hooks saw.
type recHooks struct {
	NopHooks
	mu         sync.Mutex
	aggregated []string
	readErrs   []bool // throttled?
	targetErrs int
	lost       int
	shardEnd   int
	onLost     func()
}

func (h *recHooks) AggregatedRecord(e *AggregatedRecordError) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.aggregated = append(h.aggregated, e.Seq)
}

func (h *recHooks) ReadError(_, _ string, _ error, throttled bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.readErrs = append(h.readErrs, throttled)
}

func (h *recHooks) TargetError(string, string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.targetErrs++
}

func (h *recHooks) LeaseLost(string, string, string) {
	h.mu.Lock()
	h.lost++
	f := h.onLost
	h.mu.Unlock()
	if f != nil {
		f()
	}
}

func (h *recHooks) ShardEnd(string, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.shardEnd++
}

// sleeps records injected sleeps and sleeps a tenth of them.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return sleep(ctx, d/10)
}

func (s *sleeps) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.d)
}

func dynamoOf(t *testing.T) *dynamodb.Client { return testaws.Dynamo(t) }
