package kinesismem_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/internal/kinesismem"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newClock() *fakeClock { return &fakeClock{t: t0} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// env is a model on a fake clock with one stream.
type env struct {
	t      *testing.T
	c      *kinesismem.Client
	clock  *fakeClock
	stream string
	ctx    context.Context
}

func newEnv(t *testing.T, shards int, opts kinesismem.Options) *env {
	t.Helper()
	clock := newClock()
	if opts.Clock == nil {
		opts.Clock = clock.Now
	}
	c, err := kinesismem.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, c: c, clock: clock, stream: "orders", ctx: context.Background()}
	if shards > 0 {
		if _, err := c.CreateStream(e.ctx, &kinesis.CreateStreamInput{StreamName: aws.String(e.stream), ShardCount: aws.Int32(int32(shards))}); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func (e *env) put(key string, data []byte) *kinesis.PutRecordOutput {
	e.t.Helper()
	out, err := e.c.PutRecord(e.ctx, &kinesis.PutRecordInput{StreamName: aws.String(e.stream), PartitionKey: aws.String(key), Data: data})
	if err != nil {
		e.t.Fatalf("PutRecord: %v", err)
	}
	return out
}

func (e *env) putAt(hash string, data string) *kinesis.PutRecordOutput {
	e.t.Helper()
	out, err := e.c.PutRecord(e.ctx, &kinesis.PutRecordInput{StreamName: aws.String(e.stream), PartitionKey: aws.String("k"), ExplicitHashKey: aws.String(hash), Data: []byte(data)})
	if err != nil {
		e.t.Fatalf("PutRecord: %v", err)
	}
	return out
}

func (e *env) iterator(shard string, typ types.ShardIteratorType) *string {
	e.t.Helper()
	out, err := e.c.GetShardIterator(e.ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(e.stream), ShardId: aws.String(shard), ShardIteratorType: typ})
	if err != nil {
		e.t.Fatalf("GetShardIterator %s %s: %v", shard, typ, err)
	}
	return out.ShardIterator
}

func (e *env) get(it *string) (*kinesis.GetRecordsOutput, error) {
	return e.c.GetRecords(e.ctx, &kinesis.GetRecordsInput{ShardIterator: it})
}

func (e *env) mustGet(it *string) *kinesis.GetRecordsOutput {
	e.t.Helper()
	out, err := e.get(it)
	if err != nil {
		e.t.Fatalf("GetRecords: %v", err)
	}
	return out
}

func (e *env) list(filter *types.ShardFilter) []types.Shard {
	e.t.Helper()
	out, err := e.c.ListShards(e.ctx, &kinesis.ListShardsInput{StreamName: aws.String(e.stream), ShardFilter: filter})
	if err != nil {
		e.t.Fatalf("ListShards: %v", err)
	}
	return out.Shards
}

func (e *env) status() types.StreamStatus {
	e.t.Helper()
	out, err := e.c.DescribeStreamSummary(e.ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(e.stream)})
	if err != nil {
		e.t.Fatalf("DescribeStreamSummary: %v", err)
	}
	return out.StreamDescriptionSummary.StreamStatus
}

func (e *env) split(shard, key string) {
	e.t.Helper()
	if _, err := e.c.SplitShard(e.ctx, &kinesis.SplitShardInput{StreamName: aws.String(e.stream), ShardToSplit: aws.String(shard), NewStartingHashKey: aws.String(key)}); err != nil {
		e.t.Fatalf("SplitShard: %v", err)
	}
}

func ids(ss []types.Shard) []string {
	var out []string
	for _, s := range ss {
		out = append(out, aws.ToString(s.ShardId))
	}
	return out
}

func data(rs []types.Record) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, string(r.Data))
	}
	return out
}

func is[T error](err error) bool {
	var target T
	return errors.As(err, &target)
}

func shardN(i int) string { return fmt.Sprintf("shardId-%012d", i) }

const mid = "170141183460469231731687303715884105728" // 2^127
