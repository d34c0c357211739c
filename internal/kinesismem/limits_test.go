package kinesismem_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/internal/kinesismem"
)

func TestGetRecords_ThrottlesTheSixthCallWithinASecond(t *testing.T) {
	e := newEnv(t, 2, kinesismem.Options{})
	it := e.iterator(shardN(0), types.ShardIteratorTypeTrimHorizon)
	other := e.iterator(shardN(1), types.ShardIteratorTypeTrimHorizon)
	for i := range 5 {
		out, err := e.get(it)
		if err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
		it = out.NextShardIterator
		e.clock.Advance(100 * time.Millisecond)
	}
	if _, err := e.get(it); !is[*types.ProvisionedThroughputExceededException](err) {
		t.Fatalf("sixth call within a second: err = %v, want ProvisionedThroughputExceededException", err)
	}
	if _, err := e.get(other); err != nil {
		t.Errorf("another shard is throttled too: %v", err)
	}
	e.clock.Advance(500 * time.Millisecond) // a second after the first call
	if _, err := e.get(it); err != nil {
		t.Errorf("a second after the first call: %v", err)
	}
}

func TestGetShardIterator_ThrottlesTheSixthCallWithinASecond(t *testing.T) {
	e := newEnv(t, 1, kinesismem.Options{})
	in := &kinesis.GetShardIteratorInput{StreamName: aws.String(e.stream), ShardId: aws.String(shardN(0)), ShardIteratorType: types.ShardIteratorTypeLatest}
	for i := range 5 {
		if _, err := e.c.GetShardIterator(e.ctx, in); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	if _, err := e.c.GetShardIterator(e.ctx, in); !is[*types.ProvisionedThroughputExceededException](err) {
		t.Fatalf("sixth call: err = %v, want ProvisionedThroughputExceededException", err)
	}
	e.clock.Advance(time.Second)
	if _, err := e.c.GetShardIterator(e.ctx, in); err != nil {
		t.Errorf("a second later: %v", err)
	}
}

func TestGetRecords_CapsAnAnswerAt10MiBAndThenThrottlesUntilTheReadsAreRepaid(t *testing.T) {
	e := newEnv(t, 1, kinesismem.Options{NoWriteLimits: true})
	blob := make([]byte, 1000_000)
	for range 12 {
		e.put("k", blob)
	}
	out := e.mustGet(e.iterator(shardN(0), types.ShardIteratorTypeTrimHorizon))
	if len(out.Records) != 10 {
		t.Fatalf("read %d records of 1 MB, want 10 (the 10 MiB cap)", len(out.Records))
	}
	if out.MillisBehindLatest == nil || out.NextShardIterator == nil {
		t.Fatal("no next iterator")
	}
	// 10 MB read against 2 MiB/s with 2 MiB of burst: about 3.8 s of debt.
	for _, d := range []time.Duration{time.Second, 3 * time.Second} {
		e.clock.Set(t0.Add(d))
		if _, err := e.get(out.NextShardIterator); !is[*types.ProvisionedThroughputExceededException](err) {
			t.Errorf("%s after a 10 MB read: err = %v, want ProvisionedThroughputExceededException", d, err)
		}
	}
	e.clock.Set(t0.Add(4 * time.Second))
	rest, err := e.get(out.NextShardIterator)
	if err != nil || len(rest.Records) != 2 {
		t.Errorf("4 s after a 10 MB read: %v, %d records, want the last 2", err, len(rest.Records))
	}
}

func TestPutRecords_FailsTheEntriesBeyond1000RecordsASecondOnAShard(t *testing.T) {
	e := newEnv(t, 2, kinesismem.Options{})
	batch := func(hash string) []types.PutRecordsRequestEntry {
		var es []types.PutRecordsRequestEntry
		for range 500 {
			es = append(es, types.PutRecordsRequestEntry{PartitionKey: aws.String("k"), ExplicitHashKey: aws.String(hash), Data: []byte("x")})
		}
		return es
	}
	for i := range 2 {
		out, err := e.c.PutRecords(e.ctx, &kinesis.PutRecordsInput{StreamName: aws.String(e.stream), Records: batch("0")})
		if err != nil || aws.ToInt32(out.FailedRecordCount) != 0 {
			t.Fatalf("batch %d: %v, %d failed", i+1, err, aws.ToInt32(out.FailedRecordCount))
		}
	}
	mixed := append(batch("0")[:3], batch(mid)[:2]...)
	out, err := e.c.PutRecords(e.ctx, &kinesis.PutRecordsInput{StreamName: aws.String(e.stream), Records: mixed})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToInt32(out.FailedRecordCount) != 3 {
		t.Errorf("FailedRecordCount %d, want 3 (shard 0's)", aws.ToInt32(out.FailedRecordCount))
	}
	for i, r := range out.Records {
		failed := aws.ToString(r.ErrorCode) == "ProvisionedThroughputExceededException"
		if failed != (i < 3) || failed == (r.SequenceNumber != nil) || (failed && r.ErrorMessage == nil) {
			t.Errorf("entry %d: %+v", i, r)
		}
	}
	_, err = e.c.PutRecord(e.ctx, &kinesis.PutRecordInput{StreamName: aws.String(e.stream), PartitionKey: aws.String("k"), ExplicitHashKey: aws.String("0"), Data: []byte("x")})
	if !is[*types.ProvisionedThroughputExceededException](err) {
		t.Errorf("PutRecord over the limit: err = %v, want ProvisionedThroughputExceededException", err)
	}
	e.clock.Advance(100 * time.Millisecond) // refills 100 records
	out, err = e.c.PutRecords(e.ctx, &kinesis.PutRecordsInput{StreamName: aws.String(e.stream), Records: batch("0")[:150]})
	if err != nil || aws.ToInt32(out.FailedRecordCount) != 50 {
		t.Errorf("150 entries 100 ms later: %v, %d failed, want 50", err, aws.ToInt32(out.FailedRecordCount))
	}
}

func TestPutRecord_ThrottlesBeyond1MiBASecondOnAShard(t *testing.T) {
	e := newEnv(t, 1, kinesismem.Options{})
	blob := make([]byte, 300<<10)
	for i := range 4 { // 1.2 MiB: the fourth overdraws the bucket, and is taken
		if _, err := e.c.PutRecord(e.ctx, &kinesis.PutRecordInput{StreamName: aws.String(e.stream), PartitionKey: aws.String("k"), Data: blob}); err != nil {
			t.Fatalf("record %d: %v", i+1, err)
		}
	}
	_, err := e.c.PutRecord(e.ctx, &kinesis.PutRecordInput{StreamName: aws.String(e.stream), PartitionKey: aws.String("k"), Data: []byte("x")})
	if !is[*types.ProvisionedThroughputExceededException](err) {
		t.Errorf("a record after 1.2 MiB: err = %v, want ProvisionedThroughputExceededException", err)
	}
	e.clock.Advance(time.Second)
	if _, err := e.c.PutRecord(e.ctx, &kinesis.PutRecordInput{StreamName: aws.String(e.stream), PartitionKey: aws.String("k"), Data: []byte("x")}); err != nil {
		t.Errorf("a second later: %v", err)
	}
}

func TestOptions_NoLimitsLetEveryCallThrough(t *testing.T) {
	e := newEnv(t, 1, kinesismem.Options{NoReadLimits: true, NoWriteLimits: true})
	for i := range 4 {
		var es []types.PutRecordsRequestEntry
		for j := range 500 {
			es = append(es, types.PutRecordsRequestEntry{PartitionKey: aws.String(fmt.Sprint(i, j)), Data: make([]byte, 1000)})
		}
		out, err := e.c.PutRecords(e.ctx, &kinesis.PutRecordsInput{StreamName: aws.String(e.stream), Records: es})
		if err != nil || aws.ToInt32(out.FailedRecordCount) != 0 {
			t.Fatalf("batch %d: %v, %d failed", i, err, aws.ToInt32(out.FailedRecordCount))
		}
	}
	it := e.iterator(shardN(0), types.ShardIteratorTypeTrimHorizon)
	n := 0
	for range 50 {
		out, err := e.c.GetRecords(e.ctx, &kinesis.GetRecordsInput{ShardIterator: it, Limit: aws.Int32(100)})
		if err != nil {
			t.Fatalf("read %d: %v", n, err)
		}
		n += len(out.Records)
		it = out.NextShardIterator
		e.iterator(shardN(0), types.ShardIteratorTypeLatest)
	}
	if n != 2000 {
		t.Errorf("read %d records, want 2000", n)
	}
}
