// Package coordinator decides which shards get a reader and starts one loop
// per leasable shard. It is the library behind the coordinator Lambda and the
// local runner.
//
// Every relist interval (10 s) for the length of its window a Coordinator
// lists each subscribed stream's shards, reads their lease rows in batches,
// asks pkg/shards which shards may be taken, takes each one's lease for a
// fresh owner id and starts a loop for it through a Starter (a Step Functions
// execution named after the owner in AWS, a goroutine locally). Overlapping
// coordinators are harmless: the conditional take decides which one starts a
// loop. A reader that reaches SHARD_END or releases its lease calls Nudge so
// that children open at once rather than at the next relist, and Run passes
// again just after the earliest lease expiry it saw, so a dead loop's shard
// is taken over within moments of its lease lapsing.
//
// The first pass of a subscription generation records the subscription's
// start position on the rows of the shards it opens with (lease.SetStart);
// readers apply it there and nowhere else. A changed start position is a
// new generation.
package coordinator
