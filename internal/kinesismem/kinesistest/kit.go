package kinesistest

import (
	"context"
	"crypto/md5"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// kit is what a case works with: the target and helpers that fail the test
// on an unexpected error.
type kit struct {
	Target
	ctx context.Context
}

type testCase struct {
	name  string
	needs Quirk // AWS behaviours the case checks that some targets lack
	run   func(t *testing.T, k *kit)
}

// create makes a provisioned stream of n shards, waits until it is ACTIVE
// and deletes it when the test ends.
func (k *kit) create(t *testing.T, n int) string {
	t.Helper()
	name := k.Name(t)
	if _, err := k.API.CreateStream(k.ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(int32(n))}); err != nil {
		t.Fatalf("CreateStream %s: %v", name, err)
	}
	t.Cleanup(func() {
		_, _ = k.API.DeleteStream(context.Background(), &kinesis.DeleteStreamInput{StreamName: aws.String(name)})
	})
	k.waitActive(t, name)
	return name
}

func (k *kit) describe(t *testing.T, name string) *types.StreamDescriptionSummary {
	t.Helper()
	out, err := k.API.DescribeStreamSummary(k.ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
	if err != nil {
		t.Fatalf("DescribeStreamSummary %s: %v", name, err)
	}
	return out.StreamDescriptionSummary
}

func (k *kit) waitActive(t *testing.T, name string) {
	t.Helper()
	deadline := time.Now().Add(k.Timeout)
	for {
		d := k.describe(t, name)
		if d.StreamStatus == types.StreamStatusActive {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream %s still %s after %s", name, d.StreamStatus, k.Timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// list returns every shard of a stream, following NextToken.
func (k *kit) list(t *testing.T, name string, filter *types.ShardFilter) []types.Shard {
	t.Helper()
	in := &kinesis.ListShardsInput{StreamName: aws.String(name), ShardFilter: filter}
	var all []types.Shard
	for {
		out, err := k.API.ListShards(k.ctx, in)
		if err != nil {
			t.Fatalf("ListShards %s: %v", name, err)
		}
		all = append(all, out.Shards...)
		if out.NextToken == nil {
			return all
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
}

func ids(ss []types.Shard) []string {
	var out []string
	for _, s := range ss {
		out = append(out, aws.ToString(s.ShardId))
	}
	return out
}

func (k *kit) put(t *testing.T, name, key string, data string, explicit *string) *kinesis.PutRecordOutput {
	t.Helper()
	out, err := k.API.PutRecord(k.ctx, &kinesis.PutRecordInput{StreamName: aws.String(name), PartitionKey: aws.String(key), Data: []byte(data), ExplicitHashKey: explicit})
	if err != nil {
		t.Fatalf("PutRecord %s %s: %v", name, key, err)
	}
	return out
}

func (k *kit) iterator(t *testing.T, in *kinesis.GetShardIteratorInput) *string {
	t.Helper()
	var out *kinesis.GetShardIteratorOutput
	err := retryThrottled(func() (err error) {
		out, err = k.API.GetShardIterator(k.ctx, in)
		return err
	})
	if err != nil {
		t.Fatalf("GetShardIterator %s %s: %v", aws.ToString(in.ShardId), in.ShardIteratorType, err)
	}
	return out.ShardIterator
}

func (k *kit) at(t *testing.T, name, shard string, typ types.ShardIteratorType) *string {
	t.Helper()
	return k.iterator(t, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: aws.String(shard), ShardIteratorType: typ})
}

func (k *kit) atSeq(t *testing.T, name, shard string, typ types.ShardIteratorType, seq string) *string {
	t.Helper()
	return k.iterator(t, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: aws.String(shard), ShardIteratorType: typ, StartingSequenceNumber: aws.String(seq)})
}

func (k *kit) atTime(t *testing.T, name, shard string, ts time.Time) *string {
	t.Helper()
	return k.iterator(t, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: aws.String(shard), ShardIteratorType: types.ShardIteratorTypeAtTimestamp, Timestamp: aws.Time(ts)})
}

func (k *kit) get(t *testing.T, it *string, limit int) *kinesis.GetRecordsOutput {
	t.Helper()
	in := &kinesis.GetRecordsInput{ShardIterator: it}
	if limit > 0 {
		in.Limit = aws.Int32(int32(limit))
	}
	var out *kinesis.GetRecordsOutput
	err := retryThrottled(func() (err error) {
		out, err = k.API.GetRecords(k.ctx, in)
		return err
	})
	if err != nil {
		t.Fatalf("GetRecords: %v", err)
	}
	return out
}

// retryThrottled calls f again while it is throttled, as a reader must on
// AWS, where a shard takes 5 reads a second.
func retryThrottled(f func() error) error {
	for range 50 {
		err := f()
		if !errors.As(err, new(*types.ProvisionedThroughputExceededException)) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
	return f()
}

// drain reads from it until the tip (an empty answer) or SHARD_END and
// returns the records and the last answer.
func (k *kit) drain(t *testing.T, it *string, limit int) ([]types.Record, *kinesis.GetRecordsOutput) {
	t.Helper()
	var recs []types.Record
	for range 100 {
		out := k.get(t, it, limit)
		recs = append(recs, out.Records...)
		if out.NextShardIterator == nil || len(out.Records) == 0 {
			return recs, out
		}
		it = out.NextShardIterator
	}
	t.Fatal("drain: no end after 100 reads")
	return nil, nil
}

func data(rs []types.Record) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, string(r.Data))
	}
	return out
}

// wantErr fails unless err is (or wraps) a *T.
func wantErr[T error](t *testing.T, what string, err error) {
	t.Helper()
	var target T
	if !errors.As(err, &target) {
		t.Errorf("%s: err = %v, want %T", what, err, target)
	}
}

func bigOf(t *testing.T, s string) *big.Int {
	t.Helper()
	b, ok := new(big.Int).SetString(s, 10)
	if !ok {
		t.Fatalf("%q is not a decimal", s)
	}
	return b
}

// hashOf is a partition key's hash key: MD5, big-endian.
func hashOf(key string) *big.Int {
	sum := md5.Sum([]byte(key))
	return new(big.Int).SetBytes(sum[:])
}

var (
	two128  = new(big.Int).Lsh(big.NewInt(1), 128)
	maxHash = new(big.Int).Sub(two128, big.NewInt(1))
	midHash = new(big.Int).Lsh(big.NewInt(1), 127) // first key of the upper half
)

// holds reports whether shard s's hash key range holds h.
func holds(t *testing.T, s types.Shard, h *big.Int) bool {
	return bigOf(t, *s.HashKeyRange.StartingHashKey).Cmp(h) <= 0 && h.Cmp(bigOf(t, *s.HashKeyRange.EndingHashKey)) <= 0
}

func shardOf(t *testing.T, ss []types.Shard, h *big.Int) string {
	t.Helper()
	for _, s := range ss {
		if s.SequenceNumberRange.EndingSequenceNumber == nil && holds(t, s, h) {
			return *s.ShardId
		}
	}
	t.Fatalf("no open shard holds %s", h)
	return ""
}

func byID(ss []types.Shard, id string) types.Shard {
	for _, s := range ss {
		if aws.ToString(s.ShardId) == id {
			return s
		}
	}
	return types.Shard{}
}
