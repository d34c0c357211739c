package kinesismem_test

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/internal/kinesismem"
)

// A stream on a fixed clock: put two records, split the shard, read the
// parent to its end and find its children there.
func Example() {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	k, err := kinesismem.New(kinesismem.Options{Clock: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	stream := aws.String("orders")
	_, _ = k.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: stream, ShardCount: aws.Int32(1)})
	for _, order := range []string{"order-1", "order-2"} {
		_, _ = k.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: stream, PartitionKey: aws.String("customer-7"), Data: []byte(order)})
	}
	_, _ = k.SplitShard(ctx, &kinesis.SplitShardInput{StreamName: stream, ShardToSplit: aws.String("shardId-000000000000"),
		NewStartingHashKey: aws.String("170141183460469231731687303715884105728")})

	it, _ := k.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: stream, ShardId: aws.String("shardId-000000000000"),
		ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
	out, _ := k.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
	for _, r := range out.Records {
		fmt.Println(string(r.Data), r.ApproximateArrivalTimestamp.Format(time.RFC3339))
	}
	fmt.Println("shard end:", out.NextShardIterator == nil)
	for _, c := range out.ChildShards {
		fmt.Println("child", *c.ShardId, "of", c.ParentShards)
	}
	// Output:
	// order-1 2026-03-01T12:00:00Z
	// order-2 2026-03-01T12:00:00Z
	// shard end: true
	// child shardId-000000000001 of [shardId-000000000000]
	// child shardId-000000000002 of [shardId-000000000000]
}
