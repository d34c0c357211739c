package kinesismem_test

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/shardloop/shardloop/internal/kinesismem"
	"github.com/shardloop/shardloop/pkg/shards"
)

func TestGetRecords_IteratorExpiresFiveMinutesAfterIssue(t *testing.T) {
	e := newEnv(t, 1, kinesismem.Options{})
	it := e.iterator(shardN(0), types.ShardIteratorTypeTrimHorizon)
	e.clock.Advance(kinesismem.IteratorLifetime)
	out, err := e.get(it)
	if err != nil {
		t.Fatalf("at 5 minutes: %v", err)
	}
	e.clock.Advance(time.Millisecond)
	if _, err := e.get(it); !is[*types.ExpiredIteratorException](err) {
		t.Errorf("5 minutes and 1 ms after issue: err = %v, want ExpiredIteratorException", err)
	}
	if _, err := e.get(out.NextShardIterator); err != nil {
		t.Errorf("the next iterator, issued 1 ms ago: %v", err)
	}
}

func TestRetention_TrimsOldRecordsAndDropsClosedShardsFromTheListing(t *testing.T) {
	e := newEnv(t, 1, kinesismem.Options{NoReadLimits: true})
	e.putAt("1", "old")
	e.clock.Advance(12 * time.Hour)
	e.putAt("1", "young")
	parentIt := e.iterator(shardN(0), types.ShardIteratorTypeTrimHorizon)
	e.clock.Advance(time.Hour) // t0+13h
	e.split(shardN(0), mid)
	e.putAt("1", "child")

	e.clock.Set(t0.Add(24*time.Hour - time.Millisecond))
	if got := data(e.mustGet(e.iterator(shardN(0), types.ShardIteratorTypeTrimHorizon)).Records); !slices.Equal(got, []string{"old", "young"}) {
		t.Errorf("just before 24 h: %v", got)
	}
	e.clock.Set(t0.Add(24 * time.Hour))
	if got := data(e.mustGet(e.iterator(shardN(0), types.ShardIteratorTypeTrimHorizon)).Records); !slices.Equal(got, []string{"young"}) {
		t.Errorf("at 24 h the oldest record should be gone: %v", got)
	}
	old, err := e.c.GetShardIterator(e.ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(e.stream), ShardId: aws.String(shardN(0)),
		ShardIteratorType: types.ShardIteratorTypeAtTimestamp, Timestamp: aws.Time(t0)})
	if err != nil {
		t.Fatal(err)
	}
	if got := data(e.mustGet(old.ShardIterator).Records); !slices.Equal(got, []string{"young"}) {
		t.Errorf("AT_TIMESTAMP before the trim horizon read %v, want it to start at the horizon", got)
	}
	if got := ids(e.list(&types.ShardFilter{Type: types.ShardFilterTypeAtTrimHorizon})); !slices.Equal(got, []string{shardN(0)}) {
		t.Errorf("AT_TRIM_HORIZON at 24 h: %v", got)
	}

	e.clock.Set(t0.Add(37*time.Hour - time.Millisecond)) // 24 h after the close, less 1 ms
	if got := ids(e.list(nil)); !slices.Equal(got, []string{shardN(0), shardN(1), shardN(2)}) {
		t.Errorf("before the parent expires: %v", got)
	}
	e.clock.Set(t0.Add(37 * time.Hour))
	if got := ids(e.list(nil)); !slices.Equal(got, []string{shardN(1), shardN(2)}) {
		t.Errorf("24 h after the close the parent should be gone: %v", got)
	}
	if got := ids(e.list(&types.ShardFilter{Type: types.ShardFilterTypeAtTrimHorizon})); !slices.Equal(got, []string{shardN(1), shardN(2)}) {
		t.Errorf("AT_TRIM_HORIZON after the parent expired: %v", got)
	}
	_, err = e.c.GetShardIterator(e.ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(e.stream), ShardId: aws.String(shardN(0)), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
	if !is[*types.ResourceNotFoundException](err) {
		t.Errorf("GetShardIterator on the expired parent: err = %v, want ResourceNotFoundException", err)
	}
	if _, err := e.get(parentIt); !is[*types.ResourceNotFoundException](err) {
		t.Errorf("GetRecords on the expired parent: err = %v, want ResourceNotFoundException", err)
	}
	if got := data(e.mustGet(e.iterator(shardN(1), types.ShardIteratorTypeTrimHorizon)).Records); !slices.Equal(got, []string{}) {
		t.Errorf("the child's record, 24 h old, should be gone too: %v", got)
	}
}

func TestStatus_ChangesHappenOnTheFirstCallAtOrAfterTheirDelay(t *testing.T) {
	e := newEnv(t, 0, kinesismem.Options{CreateDelay: time.Second, ReshardDelay: 2 * time.Second, DeleteDelay: 3 * time.Second})
	if _, err := e.c.CreateStream(e.ctx, &kinesis.CreateStreamInput{StreamName: aws.String(e.stream), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	if s := e.status(); s != types.StreamStatusCreating {
		t.Errorf("status %s right after CreateStream, want CREATING", s)
	}
	_, err := e.c.PutRecord(e.ctx, &kinesis.PutRecordInput{StreamName: aws.String(e.stream), PartitionKey: aws.String("k"), Data: []byte("x")})
	if !is[*types.ResourceInUseException](err) {
		t.Errorf("PutRecord while CREATING: err = %v, want ResourceInUseException", err)
	}
	e.clock.Advance(time.Second)
	if s := e.status(); s != types.StreamStatusActive {
		t.Fatalf("status %s after the CreateDelay, want ACTIVE", s)
	}

	e.split(shardN(0), mid)
	if s := e.status(); s != types.StreamStatusUpdating {
		t.Errorf("status %s after SplitShard, want UPDATING", s)
	}
	if out := e.putAt("1", "during"); aws.ToString(out.ShardId) != shardN(0) {
		t.Errorf("a put while UPDATING went to %s, want the parent", aws.ToString(out.ShardId))
	}
	_, err = e.c.SplitShard(e.ctx, &kinesis.SplitShardInput{StreamName: aws.String(e.stream), ShardToSplit: aws.String(shardN(0)), NewStartingHashKey: aws.String("1000")})
	if !is[*types.ResourceInUseException](err) {
		t.Errorf("SplitShard while UPDATING: err = %v, want ResourceInUseException", err)
	}
	e.clock.Advance(5 * time.Second) // the next call comes late; the split is done at its time
	if out := e.putAt("1", "after"); aws.ToString(out.ShardId) != shardN(1) {
		t.Errorf("a put after the split went to %s, want %s", aws.ToString(out.ShardId), shardN(1))
	}
	done := t0.Add(3 * time.Second) // CreateDelay, then ReshardDelay
	for at, want := range map[time.Time][]string{done.Add(-time.Millisecond): {shardN(0)}, done: {shardN(1), shardN(2)}} {
		if got := ids(e.list(&types.ShardFilter{Type: types.ShardFilterTypeAtTimestamp, Timestamp: aws.Time(at)})); !slices.Equal(got, want) {
			t.Errorf("open at %s: %v, want %v", at.Sub(t0), got, want)
		}
	}

	it := e.iterator(shardN(1), types.ShardIteratorTypeTrimHorizon)
	if _, err := e.c.DeleteStream(e.ctx, &kinesis.DeleteStreamInput{StreamName: aws.String(e.stream)}); err != nil {
		t.Fatal(err)
	}
	if s := e.status(); s != types.StreamStatusDeleting {
		t.Errorf("status %s after DeleteStream, want DELETING", s)
	}
	if got := data(e.mustGet(it).Records); !slices.Equal(got, []string{"after"}) {
		t.Errorf("a read while DELETING: %v", got)
	}
	e.clock.Advance(3 * time.Second)
	if _, err := e.get(it); !is[*types.ResourceNotFoundException](err) {
		t.Errorf("GetRecords after the deletion: err = %v, want ResourceNotFoundException", err)
	}
}

func TestClock_SteppingBackIsHeldAtTheLatestTime(t *testing.T) {
	e := newEnv(t, 1, kinesismem.Options{})
	e.put("k", []byte("a"))
	e.clock.Advance(-time.Hour)
	out := e.put("k", []byte("b"))
	if ts, _ := shards.ServerTime(out.ResultMetadata); !ts.Equal(t0) {
		t.Errorf("server time %s after the clock stepped back, want %s", ts, t0)
	}
	recs := e.mustGet(e.iterator(shardN(0), types.ShardIteratorTypeTrimHorizon)).Records
	if len(recs) != 2 || recs[1].ApproximateArrivalTimestamp.Before(*recs[0].ApproximateArrivalTimestamp) {
		t.Errorf("arrivals went back: %v", recs)
	}
}

func TestAnswers_CarryTheClocksTimeAsServerTime(t *testing.T) {
	e := newEnv(t, 1, kinesismem.Options{})
	e.clock.Advance(1234 * time.Millisecond)
	want := e.clock.Now()
	put := e.put("k", []byte("x"))
	desc, _ := e.c.DescribeStreamSummary(e.ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(e.stream)})
	list, _ := e.c.ListShards(e.ctx, &kinesis.ListShardsInput{StreamName: aws.String(e.stream)})
	it, _ := e.c.GetShardIterator(e.ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(e.stream), ShardId: aws.String(shardN(0)), ShardIteratorType: types.ShardIteratorTypeLatest})
	get := e.mustGet(it.ShardIterator)
	for what, md := range map[string]middleware.Metadata{"PutRecord": put.ResultMetadata, "DescribeStreamSummary": desc.ResultMetadata,
		"ListShards": list.ResultMetadata, "GetShardIterator": it.ResultMetadata, "GetRecords": get.ResultMetadata} {
		if got, ok := shards.ServerTime(md); !ok || !got.Equal(want) {
			t.Errorf("%s server time %s (known %v), want %s", what, got, ok, want)
		}
	}
}

func TestListShards_NextTokenExpiresAfter300Seconds(t *testing.T) {
	e := newEnv(t, 3, kinesismem.Options{})
	out, err := e.c.ListShards(e.ctx, &kinesis.ListShardsInput{StreamName: aws.String(e.stream), MaxResults: aws.Int32(1)})
	if err != nil || out.NextToken == nil {
		t.Fatalf("first page: %v", err)
	}
	e.clock.Advance(300 * time.Second)
	next, err := e.c.ListShards(e.ctx, &kinesis.ListShardsInput{NextToken: out.NextToken, MaxResults: aws.Int32(1)})
	if err != nil || !slices.Equal(ids(next.Shards), []string{shardN(1)}) {
		t.Fatalf("at 300 s: %v %v", err, ids(next.Shards))
	}
	e.clock.Advance(time.Millisecond)
	if _, err := e.c.ListShards(e.ctx, &kinesis.ListShardsInput{NextToken: out.NextToken}); !is[*types.ExpiredNextTokenException](err) {
		t.Errorf("after 300 s: err = %v, want ExpiredNextTokenException", err)
	}
}

// The model's default clock is time.Now, so under testing/synctest it runs
// in the bubble's virtual time: five minutes pass at once.
func TestSynctest_DefaultClockRunsInVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := kinesismem.New(kinesismem.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		if _, err := c.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String("s"), ShardCount: aws.Int32(1)}); err != nil {
			t.Fatal(err)
		}
		it, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String(shardN(0)), ShardIteratorType: types.ShardIteratorTypeLatest})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		time.Sleep(kinesismem.IteratorLifetime + time.Second)
		if _, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator}); !is[*types.ExpiredIteratorException](err) {
			t.Errorf("after %s of virtual time: err = %v, want ExpiredIteratorException", time.Since(start), err)
		}
	})
}
