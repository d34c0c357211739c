package reader_test

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/reader"
)

// closedShard is a stand-in for a Kinesis client: one closed shard holding
// three records. Use a *kinesis.Client in real code.
type closedShard struct{}

func (closedShard) GetShardIterator(context.Context, *kinesis.GetShardIteratorInput, ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	return &kinesis.GetShardIteratorOutput{ShardIterator: aws.String("0")}, nil
}

func (closedShard) DescribeStreamSummary(context.Context, *kinesis.DescribeStreamSummaryInput, ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	created := time.UnixMilli(1_700_000_000_000)
	return &kinesis.DescribeStreamSummaryOutput{StreamDescriptionSummary: &types.StreamDescriptionSummary{StreamCreationTimestamp: &created}}, nil
}

func (closedShard) GetRecords(_ context.Context, in *kinesis.GetRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	if *in.ShardIterator != "0" {
		return &kinesis.GetRecordsOutput{}, nil // past the end: no next iterator
	}
	out := &kinesis.GetRecordsOutput{NextShardIterator: aws.String("3")}
	for i := range 3 {
		out.Records = append(out.Records, types.Record{
			Data: []byte("hello " + strconv.Itoa(i)), PartitionKey: aws.String("k"), SequenceNumber: aws.String(strconv.Itoa(100 + i)),
		})
	}
	return out, nil
}

func Example() {
	ctx := context.Background()
	store, _ := lease.NewMemoryStore()
	// The subscription started at the oldest record, and the loop "loop-1"
	// was started on the shard (the coordinator records both: a loop's runs
	// take only a row taken for the loop, or handed back to it).
	_, _ = store.SetStart(ctx, "orders", "shardId-000000000000", lease.Start{Position: "horizon", Generation: "gen-1", Order: 1})
	_, _ = store.Take(ctx, "orders", "shardId-000000000000", "loop-1")

	opts := reader.Options{
		Kinesis: closedShard{},
		Store:   store,
		Target: reader.FuncTarget(func(ctx context.Context, b reader.Batch) (int, error) {
			for _, r := range b.Records {
				fmt.Printf("%s %s\n", *r.SequenceNumber, r.Data)
			}
			return len(b.Records), nil // all settled
		}),
		// The settings of Lambda's event source mapping, under its names.
		Mapping: reader.Mapping{BatchSize: 100},
	}
	st := reader.State{Stream: "orders", ShardID: "shardId-000000000000", Owner: "loop-1"}
	for {
		var err error
		if st, err = reader.Run(ctx, opts, st); err != nil || !st.Continue {
			break
		}
	}
	row, _ := store.Get(ctx, "orders", "shardId-000000000000")
	fmt.Println(st.Reason, row.Checkpoint, row.Owner == "")
	// Output:
	// 100 hello 0
	// 101 hello 1
	// 102 hello 2
	// shard_end SHARD_END true
}
