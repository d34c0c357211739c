package lease_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shardloop/shardloop/internal/testaws"
	"github.com/shardloop/shardloop/pkg/lease"
)

// BenchmarkLeaseOpOverhead compares DynamoStore's Take+Renew+Checkpoint with
// three raw UpdateItem calls against the same dynalite, interleaved in one run
// so that both see the same emulator. Run it with -benchtime=1x (make bench):
// it repeats internally and prints `bench lease_op_overhead_ratio <x> x`.
func BenchmarkLeaseOpOverhead(b *testing.B) {
	const rounds = 600
	client := testaws.Dynamo(b)
	table := testaws.Name(b)
	ctx := b.Context()
	if err := lease.CreateTable(ctx, client, table); err != nil {
		b.Fatal(err)
	}
	store, err := lease.NewDynamoStore(client, table)
	if err != nil {
		b.Fatal(err)
	}
	raw := func(key string, i int) {
		for _, upd := range []string{"SET o = :v", "SET e = :v", "SET c = :v"} {
			_, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName:                 aws.String(table),
				Key:                       map[string]types.AttributeValue{"lease_key": &types.AttributeValueMemberS{Value: key}},
				UpdateExpression:          aws.String(upd),
				ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberN{Value: fmt.Sprint(i)}},
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	ours := func(shard string, i int) {
		if _, err := store.Take(ctx, "bench", shard, "owner"); err != nil {
			b.Fatal(err)
		}
		if _, err := store.Renew(ctx, "bench", shard, "owner", lease.Renewal{}); err != nil {
			b.Fatal(err)
		}
		if _, err := store.Checkpoint(ctx, "bench", shard, "owner", fmt.Sprint(i)); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 300 { // warm both paths (dynalite runs on a JIT)
		raw("raw:warm", i)
		ours("warm", i)
	}
	var tRaw, tOurs time.Duration
	b.ResetTimer()
	for i := range rounds {
		shard := fmt.Sprintf("s%d", i%10)
		t0 := time.Now()
		raw("raw:"+shard, i)
		t1 := time.Now()
		ours(shard, i)
		t2 := time.Now()
		tRaw += t1.Sub(t0)
		tOurs += t2.Sub(t1)
	}
	ratio := float64(tOurs) / float64(tRaw)
	b.ReportMetric(ratio, "ratio")
	fmt.Printf("bench lease_op_overhead_ratio %.3f x\n", ratio)
	fmt.Printf("bench lease_ops_per_round_us %.0f us\n", float64(tOurs.Microseconds())/rounds)
}
