package kinesismem_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/internal/kinesismem"
)

// Writers, readers and a split at once (for the race detector), then a
// reader that follows the lineage: every record is read once and each key's
// records come in write order.
func TestConcurrentUse_LosesNothingAndKeepsEachKeysOrder(t *testing.T) {
	c, err := kinesismem.New(kinesismem.Options{NoReadLimits: true, NoWriteLimits: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String("s"), ShardCount: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	const writers, perWriter = 6, 300
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				_, err := c.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String(fmt.Sprint("key-", w)), Data: []byte(strconv.Itoa(i))})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		time.Sleep(time.Millisecond)
		if _, err := c.SplitShard(ctx, &kinesis.SplitShardInput{StreamName: aws.String("s"), ShardToSplit: aws.String(shardN(0)), NewStartingHashKey: aws.String("1000")}); err != nil {
			t.Error(err)
		}
	})
	done := make(chan struct{})
	var tails sync.WaitGroup
	for _, shard := range []string{shardN(0), shardN(1)} {
		tails.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				out, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String(shard), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
				if err == nil {
					_, err = c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: out.ShardIterator, Limit: aws.Int32(50)})
				}
				if err == nil {
					_, err = c.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String("s")})
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	got := map[string][]int{}
	var mu sync.Mutex
	read := func(shard string) {
		out, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String(shard), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Error(err)
			return
		}
		for it, idle := out.ShardIterator, 0; it != nil && idle < 200; {
			res, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it, Limit: aws.Int32(37)})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			for _, r := range res.Records {
				n, _ := strconv.Atoi(string(r.Data))
				got[*r.PartitionKey] = append(got[*r.PartitionKey], n)
			}
			mu.Unlock()
			if len(res.Records) == 0 {
				idle++
				time.Sleep(100 * time.Microsecond)
			}
			it = res.NextShardIterator
		}
	}
	wg.Wait()
	close(done)
	tails.Wait()
	// The parent is read to its end before its children, as a reader must.
	var rg sync.WaitGroup
	rg.Go(func() { read(shardN(1)) })
	read(shardN(0))
	rg.Go(func() { read(shardN(2)) })
	rg.Go(func() { read(shardN(3)) })
	rg.Wait()
	for w := range writers {
		seq := got[fmt.Sprint("key-", w)]
		if len(seq) != perWriter {
			t.Errorf("key-%d: read %d records, want %d", w, len(seq), perWriter)
			continue
		}
		for i, n := range seq {
			if n != i {
				t.Errorf("key-%d: record %d is %d: %s", w, i, n, strings.Trim(fmt.Sprint(seq[max(0, i-3):i+1]), "[]"))
				break
			}
		}
	}
}
