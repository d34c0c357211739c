package shards_test

import (
	"fmt"
	"time"

	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/shards"
)

// Shard 0 was split into shards 1 and 2, and shard 2 was merged with shard 3
// into shard 4. Shard 0 is read to its end; a reader is still on shard 3.
// The coordinator may take the shards in Leasable, in order.
func Example() {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	listing := []shards.Shard{ // as shards.List returns it
		{ID: "shardId-000000000000", EndingSequence: "4960"},
		{ID: "shardId-000000000001", ParentID: "shardId-000000000000"},
		{ID: "shardId-000000000002", ParentID: "shardId-000000000000", EndingSequence: "4970"},
		{ID: "shardId-000000000003", EndingSequence: "4980"},
		{ID: "shardId-000000000004", ParentID: "shardId-000000000002", AdjacentParentID: "shardId-000000000003"},
	}
	rows := map[string]lease.Lease{ // from lease.Store.GetMany, by shard id
		"shardId-000000000000": {Checkpoint: lease.ShardEnd},
		"shardId-000000000003": {Owner: "loop-7", Counter: 12, Checkpoint: "4975"},
	}

	// The coordinator's observer saw loop-7 renew moments ago: its lease
	// lapses 10 s after that unless it renews again.
	verdicts := map[string]lease.Verdict{"shardId-000000000003": {Counter: 12, LapsesAt: now.Add(10 * time.Second)}}

	d := shards.Decide(shards.Input{Shards: listing, Leases: rows, Verdicts: verdicts})
	for _, s := range d.Leasable {
		fmt.Println("take", s.ID)
	}
	for _, s := range listing {
		if r, ok := d.NotLeasable[s.ID]; ok {
			fmt.Println(s.ID, r)
		}
	}
	// Output:
	// take shardId-000000000001
	// take shardId-000000000002
	// shardId-000000000000 finished
	// shardId-000000000003 held by loop-7 until 2026-03-01T12:00:10Z
	// shardId-000000000004 waiting on parent shardId-000000000002
}

func ExampleStreamName() {
	name, _ := shards.StreamName("arn:aws:kinesis:us-east-1:123456789012:stream/orders")
	fmt.Println(name)
	_, err := shards.StreamName("orders/consumer/c")
	fmt.Println(err != nil)
	// Output:
	// orders
	// true
}
