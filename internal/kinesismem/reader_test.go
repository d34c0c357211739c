package kinesismem_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/shardloop/shardloop/internal/kinesismem"
	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/reader"
)

// The real reader, with its default limits on, reads a split shard from its
// oldest record to SHARD_END on the model, in virtual time.
func TestReader_ReadsASplitShardToItsEndInVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		k, err := kinesismem.New(kinesismem.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String("orders"), ShardCount: aws.Int32(1)}); err != nil {
			t.Fatal(err)
		}
		var want []string
		for i := range 2500 {
			want = append(want, fmt.Sprint("r", i))
			if _, err := k.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String("orders"), PartitionKey: aws.String("k"), Data: []byte(want[i])}); err != nil {
				// 1,000 records a second: wait for the shard's write budget.
				time.Sleep(time.Second)
				if _, err := k.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String("orders"), PartitionKey: aws.String("k"), Data: []byte(want[i])}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := k.SplitShard(ctx, &kinesis.SplitShardInput{StreamName: aws.String("orders"), ShardToSplit: aws.String(shardN(0)), NewStartingHashKey: aws.String(mid)}); err != nil {
			t.Fatal(err)
		}
		store, err := lease.NewMemoryStore()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.SetStart(ctx, "orders", shardN(0), lease.Start{Position: "horizon", Generation: "g1", Order: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Take(ctx, "orders", shardN(0), "loop-1"); err != nil { // the coordinator's take for the loop
			t.Fatal(err)
		}
		var got []string
		target := reader.FuncTarget(func(_ context.Context, b reader.Batch) (int, error) {
			for _, r := range b.Records {
				got = append(got, string(r.Data))
			}
			return len(b.Records), nil
		})
		opts := reader.Options{Kinesis: k, Store: store, Target: target, Mapping: reader.Mapping{BatchSize: 1000}}
		st := reader.State{Stream: "orders", ShardID: shardN(0), Owner: "loop-1"}
		start := time.Now()
		for i := 0; ; i++ {
			if st, err = reader.Run(ctx, opts, st); err != nil {
				t.Fatal(err)
			}
			if !st.Continue || i > 100 {
				break
			}
		}
		if st.Reason != reader.ReasonShardEnd || !slices.Equal(got, want) {
			t.Errorf("ended %q after %d of %d records (%s of virtual time)", st.Reason, len(got), len(want), time.Since(start))
		}
	})
}
