package kinesismem_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/internal/kinesismem"
	"github.com/shardloop/shardloop/internal/quiet"
)

// BenchmarkThroughput measures the model itself, without limits: 100,000
// records of 1 KB put by PutRecords of 500 to 4 shards, then read back by
// GetRecords of 1,000. It prints `bench kinesismem_put_records_per_second`
// and `bench kinesismem_get_records_per_second`.
func BenchmarkThroughput(b *testing.B) {
	const records, batch = 100_000, 500
	guard := quiet.Begin(b, "kinesismem_put_records_per_second", "kinesismem_get_records_per_second")
	ctx := context.Background()
	blob := make([]byte, 1024)
	for b.Loop() {
		c, err := kinesismem.New(kinesismem.Options{NoReadLimits: true, NoWriteLimits: true})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String("s"), ShardCount: aws.Int32(4)}); err != nil {
			b.Fatal(err)
		}
		entries := make([]types.PutRecordsRequestEntry, batch)
		start := time.Now()
		for i := 0; i < records; i += batch {
			for j := range entries {
				entries[j] = types.PutRecordsRequestEntry{PartitionKey: aws.String(fmt.Sprint(i + j)), Data: blob}
			}
			if _, err := c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String("s"), Records: entries}); err != nil {
				b.Fatal(err)
			}
		}
		put := time.Since(start)
		start, n := time.Now(), 0
		for s := range 4 {
			it, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String(shardN(s)), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
			if err != nil {
				b.Fatal(err)
			}
			for iter := it.ShardIterator; ; {
				out, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(1000)})
				if err != nil {
					b.Fatal(err)
				}
				if len(out.Records) == 0 {
					break
				}
				n += len(out.Records)
				iter = out.NextShardIterator
			}
		}
		get := time.Since(start)
		if n != records {
			b.Fatalf("read %d records, want %d", n, records)
		}
		putRate, getRate := records/put.Seconds(), records/get.Seconds()
		b.ReportMetric(putRate, "put-records/s")
		b.ReportMetric(getRate, "get-records/s")
		guard.Check(b)
		fmt.Printf("bench kinesismem_put_records_per_second %.0f records/s\n", putRate)
		fmt.Printf("bench kinesismem_get_records_per_second %.0f records/s\n", getRate)
	}
}
