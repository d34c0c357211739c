package lease_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shardloop/shardloop/internal/quiet"
	"github.com/shardloop/shardloop/internal/testaws"
	"github.com/shardloop/shardloop/pkg/lease"
)

// BenchmarkLeaseOpOverhead compares DynamoStore's Take+Renew+Checkpoint with
// three raw UpdateItem calls against the same dynalite, interleaved in one run
// so that both see the same emulator. Run it with -benchtime=1x (make bench):
// it repeats internally and prints `bench lease_op_overhead_ratio <x> x`.
func BenchmarkLeaseOpOverhead(b *testing.B) {
	const rounds = 600
	guard := quiet.Begin(b, "lease_op_overhead_ratio", "lease_op_request_ratio", "lease_op_client_ratio", "lease_ops_per_round_us")
	client := testaws.Dynamo(b)
	table := testaws.Name(b)
	ctx := b.Context()
	if err := lease.CreateTable(ctx, client, table); err != nil {
		b.Fatal(err)
	}
	counted := &countingDynamo{Client: client}
	store, err := lease.NewDynamoStore(counted, table)
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
	// replay sends the requests ours just sent, unchanged but for the key
	// (a mirror row with the same history, so every condition holds as it
	// did), straight through the client: the emulator's cost of our requests
	// (their conditions, attributes and returned rows) without our code.
	replay := func() {
		for _, in := range counted.taken() {
			mirror := *in
			mirror.Key = map[string]types.AttributeValue{}
			for k, v := range in.Key {
				mirror.Key[k] = &types.AttributeValueMemberS{Value: "mirror:" + v.(*types.AttributeValueMemberS).Value}
			}
			if _, err := client.UpdateItem(ctx, &mirror); err != nil {
				b.Fatal(err)
			}
		}
	}
	for i := range 300 { // warm every path (dynalite runs on a JIT)
		raw("raw:warm", i)
		ours("warm", i)
		replay()
	}
	var tRaw, tOurs, tReplay time.Duration
	counted.reset()
	b.ResetTimer()
	for i := range rounds {
		shard := fmt.Sprintf("s%d", i%10)
		t0 := time.Now()
		raw("raw:"+shard, i)
		t1 := time.Now()
		ours(shard, i)
		t2 := time.Now()
		replay()
		t3 := time.Now()
		tRaw += t1.Sub(t0)
		tOurs += t2.Sub(t1)
		tReplay += t3.Sub(t2)
	}
	guard.Check(b)
	ratio := float64(tOurs) / float64(tRaw)
	b.ReportMetric(ratio, "ratio")
	fmt.Printf("bench lease_op_overhead_ratio %.3f x\n", ratio)
	// The split of that ratio: the requests themselves, sent raw, against
	// the plain ones; and our code around them (building the conditions,
	// decoding the row) against the same requests sent raw.
	fmt.Printf("bench lease_op_request_ratio %.3f x (our requests sent raw / plain requests)\n", float64(tReplay)/float64(tRaw))
	fmt.Printf("bench lease_op_client_ratio %.3f x (the store / our requests sent raw)\n", float64(tOurs)/float64(tReplay))
	fmt.Printf("bench lease_ops_per_round_us %.0f us\n", float64(tOurs.Microseconds())/rounds)
	fmt.Printf("bench lease_requests_per_op %.2f requests (%s)\n", float64(counted.total())/(3*rounds), counted)
}

// countingDynamo counts the requests a DynamoStore sends, by operation,
// and keeps its UpdateItem requests until taken.
type countingDynamo struct {
	*dynamodb.Client
	mu      sync.Mutex
	n       map[string]int
	updates []*dynamodb.UpdateItemInput
}

// taken returns the UpdateItem requests sent since it was last called.
func (c *countingDynamo) taken() []*dynamodb.UpdateItemInput {
	c.mu.Lock()
	defer c.mu.Unlock()
	u := c.updates
	c.updates = nil
	return u
}

func (c *countingDynamo) count(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[op]++
}

func (c *countingDynamo) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n = nil
}

func (c *countingDynamo) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := 0
	for _, n := range c.n {
		t += n
	}
	return t
}

func (c *countingDynamo) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ops := slices.Sorted(maps.Keys(c.n))
	parts := make([]string, len(ops))
	for i, op := range ops {
		parts[i] = fmt.Sprintf("%s %d", op, c.n[op])
	}
	return strings.Join(parts, ", ")
}

func (c *countingDynamo) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.count("UpdateItem")
	c.mu.Lock()
	c.updates = append(c.updates, in)
	c.mu.Unlock()
	return c.Client.UpdateItem(ctx, in, optFns...)
}

func (c *countingDynamo) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.count("GetItem")
	return c.Client.GetItem(ctx, in, optFns...)
}

func (c *countingDynamo) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	c.count("BatchGetItem")
	return c.Client.BatchGetItem(ctx, in, optFns...)
}

func (c *countingDynamo) Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	c.count("Scan")
	return c.Client.Scan(ctx, in, optFns...)
}

func (c *countingDynamo) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	c.count("DeleteItem")
	return c.Client.DeleteItem(ctx, in, optFns...)
}

func (c *countingDynamo) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.count("PutItem")
	return c.Client.PutItem(ctx, in, optFns...)
}

var _ lease.DynamoAPI = (*countingDynamo)(nil)
