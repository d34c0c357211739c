package kinesismem_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/internal/kinesismem"
	"github.com/shardloop/shardloop/pkg/coordinator"
	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/reader"
	"github.com/shardloop/shardloop/pkg/runner"
)

// The real runner (coordinator and readers) on the model in virtual time:
// it creates the stream, reads it from the oldest record through a split,
// and delivers every record with each key's in write order.
func TestRunner_DeliversEveryRecordThroughASplitInVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, stop := context.WithCancel(t.Context())
		defer stop()
		k, err := kinesismem.New(kinesismem.Options{CreateDelay: 2 * time.Second, ReshardDelay: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		store, err := lease.NewMemoryStore()
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		seen := map[string][]int{}
		target := reader.FuncTarget(func(_ context.Context, b reader.Batch) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			for _, r := range b.Records {
				var key string
				var n int
				fmt.Sscanf(string(r.Data), "%s %d", &key, &n)
				seen[key] = append(seen[key], n)
			}
			return len(b.Records), nil
		})
		r, err := runner.New(runner.Options{
			Subscriptions: []coordinator.Subscription{{Stream: "orders", Start: "horizon", CreateShards: 2}},
			Store:         store, Kinesis: k,
			Reader: reader.Options{Target: target, Mapping: reader.Mapping{BatchSize: 100}},
		})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()

		const keys, perKey = 8, 60
		for i := range perKey {
			var es []types.PutRecordsRequestEntry
			for key := range keys {
				es = append(es, types.PutRecordsRequestEntry{PartitionKey: aws.String(fmt.Sprint("k", key)), Data: fmt.Appendf(nil, "k%d %d", key, i)})
			}
			for {
				out, err := k.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String("orders"), Records: es})
				if err == nil && aws.ToInt32(out.FailedRecordCount) == 0 {
					break
				}
				time.Sleep(500 * time.Millisecond) // CREATING, or throttled: try the whole batch again
			}
			if i == perKey/2 {
				if _, err := k.SplitShard(ctx, &kinesis.SplitShardInput{StreamName: aws.String("orders"), ShardToSplit: aws.String(shardN(0)), NewStartingHashKey: aws.String("1000")}); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
		deadline := time.Now().Add(10 * time.Minute)
		for {
			mu.Lock()
			n := 0
			for _, v := range seen {
				n += len(v)
			}
			mu.Unlock()
			if n >= keys*perKey || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Second)
		}
		stop()
		<-done
		for key := range keys {
			firsts, next := seen[fmt.Sprint("k", key)], 0
			for _, n := range firsts {
				if n == next {
					next++
				} else if n > next {
					t.Errorf("k%d: %d delivered before %d", key, n, next)
					break
				}
			}
			if next != perKey {
				t.Errorf("k%d: first deliveries reached %d of %d", key, next, perKey)
			}
		}
	})
}
