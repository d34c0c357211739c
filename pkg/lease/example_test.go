package lease_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/shardloop/shardloop/pkg/lease"
)

// A reader takes a shard's lease, checkpoints what it settled, and a second
// owner is refused while the lease is live.
func Example() {
	ctx := context.Background()
	store, _ := lease.NewMemoryStore()

	l, _ := store.Take(ctx, "orders", "shardId-000000000000", "reader-a")
	fmt.Println("owner:", l.Owner)

	_, _ = store.Checkpoint(ctx, "orders", "shardId-000000000000", "reader-a", "4959")
	_, err := store.Take(ctx, "orders", "shardId-000000000000", "reader-b")
	fmt.Println("held:", errors.Is(err, lease.ErrHeld))

	_ = store.Release(ctx, "orders", "shardId-000000000000", "reader-a", lease.Handover{})
	l, _ = store.Take(ctx, "orders", "shardId-000000000000", "reader-b")
	fmt.Println("owner:", l.Owner, "resumes after", l.Checkpoint)
	// Output:
	// owner: reader-a
	// held: true
	// owner: reader-b resumes after 4959
}
