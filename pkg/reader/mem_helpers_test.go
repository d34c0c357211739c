package reader

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/internal/kinesismem"
	"github.com/shardloop/shardloop/pkg/lease"
)

// memStream is a one-shard stream on the in-memory Kinesis (with its read
// limits on, as Kinesis has them) and a memory lease store, for tests that
// run the whole reader in virtual time (testing/synctest) without an
// emulator.
type memStream struct {
	k      *kinesismem.Client
	store  *lease.MemoryStore
	stream string
	shard  string
	seqs   []string // every record put, in order
	keys   []string // their partition keys
}

func newMemStream(t *testing.T) *memStream {
	t.Helper()
	k, err := kinesismem.New(kinesismem.Options{NoWriteLimits: true})
	if err != nil {
		t.Fatal(err)
	}
	m := &memStream{k: k, stream: "s", shard: "shardId-000000000000"}
	if _, err := k.CreateStream(t.Context(), &kinesis.CreateStreamInput{StreamName: aws.String(m.stream), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	if m.store, err = lease.NewMemoryStore(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.store.SetStart(t.Context(), m.stream, m.shard, lease.Start{Position: "horizon", Generation: "g1", Order: 1}); err != nil {
		t.Fatal(err)
	}
	return m
}

// put writes n records spread over keys (record i has key keys[i % len]
// and data "<key>|<i>").
func (m *memStream) put(t *testing.T, keys []string, n int) {
	t.Helper()
	for i := 0; i < n; i += 500 {
		var in []types.PutRecordsRequestEntry
		for j := i; j < min(i+500, n); j++ {
			k := keys[j%len(keys)]
			in = append(in, types.PutRecordsRequestEntry{PartitionKey: aws.String(k), Data: fmt.Appendf(nil, "%s|%d", k, len(m.seqs)+j-i)})
		}
		out, err := m.k.PutRecords(t.Context(), &kinesis.PutRecordsInput{StreamName: aws.String(m.stream), Records: in})
		if err != nil || aws.ToInt32(out.FailedRecordCount) != 0 {
			t.Fatalf("put: %v", err)
		}
		for j, r := range out.Records {
			m.seqs = append(m.seqs, aws.ToString(r.SequenceNumber))
			m.keys = append(m.keys, aws.ToString(in[j].PartitionKey))
		}
	}
}

// close splits the shard, so that it ends after what was put.
func (m *memStream) close(t *testing.T) {
	t.Helper()
	if _, err := m.k.SplitShard(t.Context(), &kinesis.SplitShardInput{StreamName: aws.String(m.stream), ShardToSplit: aws.String(m.shard),
		NewStartingHashKey: aws.String("170141183460469231731687303715884105728")}); err != nil {
		t.Fatal(err)
	}
}

// state is the state a coordinator starts loop owner with: it takes a free
// row for the loop first, as coordinator.Pass does (a loop's run never
// takes a free row itself).
func (m *memStream) state(owner string) State {
	takeForLoop(m.store, m.stream, m.shard, owner)
	return State{Stream: m.stream, ShardID: m.shard, Owner: owner}
}

// takeForLoop takes shard's row for loop owner when it is free, as
// coordinator.Pass does before it starts a loop.
func takeForLoop(store lease.Store, stream, shard, owner string) {
	ctx := context.Background()
	if row, err := store.Get(ctx, stream, shard); err == nil && row.Owner == "" && row.Fence == 0 {
		_, _ = store.Take(ctx, stream, shard, owner)
	}
}

func keys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("key-%03d", i)
	}
	return out
}

// keyedTarget is an in-process target that checks what the promise says of
// lanes: one key's records reach it in order and never while an earlier
// delivery of the key is in flight. It records what settled.
type keyedTarget struct {
	took                  func(b Batch) time.Duration // how long a delivery takes (nil: no time)
	fail                  func(b Batch) (int, error)  // nil: settle everything
	mu                    sync.Mutex
	t                     *testing.T
	busy                  map[string]bool // keys with a delivery in flight
	next                  map[string]int  // per key, the highest record number delivered first
	seen                  map[string]int  // deliveries settled per record (data)
	done                  map[string]bool // settled sequence numbers
	inFlight, maxInFlight int
	calls                 int
	overlaps, disorder    int
}

func newKeyedTarget(t *testing.T) *keyedTarget {
	return &keyedTarget{t: t, busy: map[string]bool{}, next: map[string]int{}, seen: map[string]int{}, done: map[string]bool{}}
}

func (k *keyedTarget) Deliver(ctx context.Context, b Batch) (int, error) {
	k.mu.Lock()
	k.calls++
	ks := map[string]bool{}
	for _, r := range b.Records {
		ks[aws.ToString(r.PartitionKey)] = true
	}
	for key := range ks {
		if k.busy[key] {
			k.overlaps++
		}
		k.busy[key] = true
	}
	k.inFlight++
	k.maxInFlight = max(k.maxInFlight, k.inFlight)
	k.mu.Unlock()
	if k.took != nil {
		if d := k.took(b); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
	}
	n, err := len(b.Records), error(nil)
	if k.fail != nil {
		n, err = k.fail(b)
	}
	if ctx.Err() != nil {
		n, err = 0, ctx.Err()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.inFlight--
	for key := range ks {
		delete(k.busy, key)
	}
	for _, r := range b.Records[:n] {
		key, num, _ := strings.Cut(string(r.Data), "|")
		var i int
		fmt.Sscan(num, &i)
		if k.seen[string(r.Data)]++; k.seen[string(r.Data)] == 1 {
			// Records are numbered in put order: the first delivery of each of
			// a key's records must come in increasing order.
			if last, ok := k.next[key]; ok && i < last {
				k.disorder++
			}
			k.next[key] = max(k.next[key], i)
		}
		k.done[aws.ToString(r.SequenceNumber)] = true
	}
	return n, err
}

func (k *keyedTarget) settled(seq string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.done[seq]
}

func (k *keyedTarget) giveUp(first, last string, m *memStream) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, s := range m.seqs {
		if !seqLess(s, first) && !seqLess(last, s) {
			k.done[s] = true
		}
	}
}

// ruleStore checks the checkpoint rule at every checkpoint write: every
// record at or before the checkpoint settled at the target; SHARD_END only
// once every record did.
type ruleStore struct {
	Store    Store
	m        *memStream
	tgt      *keyedTarget
	mu       sync.Mutex
	written  []string
	breaches []string
}

func (s *ruleStore) Checkpoint(ctx context.Context, stream, shard, owner, seq string, opts ...lease.CheckpointOption) (lease.Lease, error) {
	for _, r := range s.m.seqs {
		if (seq == lease.ShardEnd || !seqLess(seq, r)) && !s.tgt.settled(r) {
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

// The calls ruleStore passes on as they are.

func (s *ruleStore) Take(ctx context.Context, stream, shardID, owner string, opts ...lease.TakeOption) (lease.Lease, error) {
	return s.Store.Take(ctx, stream, shardID, owner, opts...)
}

func (s *ruleStore) Renew(ctx context.Context, stream, shardID, owner string, rn lease.Renewal) (lease.Lease, error) {
	return s.Store.Renew(ctx, stream, shardID, owner, rn)
}

func (s *ruleStore) CheckpointWindow(ctx context.Context, stream, shardID, owner string, w lease.Window) error {
	return s.Store.CheckpointWindow(ctx, stream, shardID, owner, w)
}

func (s *ruleStore) Pin(ctx context.Context, stream, shardID, owner, start string) (lease.Lease, error) {
	return s.Store.Pin(ctx, stream, shardID, owner, start)
}

func (s *ruleStore) Release(ctx context.Context, stream, shardID, owner string, ho lease.Handover) error {
	return s.Store.Release(ctx, stream, shardID, owner, ho)
}

func (s *ruleStore) Get(ctx context.Context, stream, shardID string) (lease.Lease, error) {
	return s.Store.Get(ctx, stream, shardID)
}

func (s *ruleStore) GetWindow(ctx context.Context, stream, shardID string) (lease.Window, error) {
	return s.Store.GetWindow(ctx, stream, shardID)
}

// readCounter counts reads, and the throttled ones, per virtual second.
type readCounter struct {
	KinesisAPI KinesisAPI
	mu         sync.Mutex
	reads      []time.Time
	throttled  int
}

// DescribeStreamSummary passes on.
func (c *readCounter) DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	return c.KinesisAPI.DescribeStreamSummary(ctx, in, optFns...)
}

func (c *readCounter) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, fns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	c.mu.Lock()
	c.reads = append(c.reads, time.Now())
	c.mu.Unlock()
	out, err := c.KinesisAPI.GetRecords(ctx, in, fns...)
	var pe *types.ProvisionedThroughputExceededException
	if err != nil && errors.As(err, &pe) {
		c.mu.Lock()
		c.throttled++
		c.mu.Unlock()
	}
	return out, err
}

// maxPerSecond is the most reads in any one second.
func (c *readCounter) maxPerSecond() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	most := 0
	for i := range c.reads {
		n := 0
		for j := i; j < len(c.reads) && c.reads[j].Sub(c.reads[i]) < time.Second; j++ {
			n++
		}
		most = max(most, n)
	}
	return most
}

func (c *readCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.reads)
}

func (c *readCounter) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	return c.KinesisAPI.GetShardIterator(ctx, in, optFns...)
}

// runLoop runs the loop until it ends or done(), at most runs runs.
func runLoop(t *testing.T, o Options, st State, runs int, done func(State) bool) State {
	t.Helper()
	for i := 0; i < runs; i++ {
		next, err := Run(t.Context(), o, st)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		st = next
		if !st.Continue || (done != nil && done(st)) {
			return st
		}
	}
	t.Fatalf("the loop did not end in %d runs; state %+v", runs, st)
	return st
}
