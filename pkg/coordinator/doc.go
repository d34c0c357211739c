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
// loop. Whether a held lease has lapsed is judged on the coordinator's own
// clock by a lease.Observer watching the row's counter; Run passes again just
// after the earliest moment a watched lease would lapse, and at once after a
// Nudge (a reader at SHARD_END, a loop that ended), so a dead loop's shard is
// taken over within moments of its lease lapsing.
//
// Each pass also reads the stream's generation record (lease.Generation): a
// configured start position the table has not seen begins a new generation,
// applied once to the shards listed then; one the table has superseded
// changes nothing (StreamResult.StaleConfiguration). Without a configured
// start no checkpoint ever moves. docs/design.md states the rules.
package coordinator
