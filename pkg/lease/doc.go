// Package lease is shardloop's lease table: one row per shard recording which
// owner reads it, until when, and how far it has read.
//
// A lease lasts DefaultDuration (10 s) and its holder renews it every
// DefaultRenewInterval (3 s). Every write is conditional:
//
//   - Take succeeds when the row has no owner, has this owner, or has expired;
//     otherwise it fails with ErrHeld.
//   - Renew, Checkpoint and Release succeed only while the row names this
//     owner; otherwise they fail with ErrNotOwner. A reader that gets
//     ErrNotOwner has lost its shard and must stop without writing again.
//   - Reset is the operator's write (shardloop reset): it moves where the
//     shard opens next and clears the owner, refused with ErrHeld while a
//     live owner holds the row unless forced.
//
// WithLag wraps a store so that each checkpoint also records how far behind
// the tip the reader was (MillisBehind, LagAt), which shardloop status shows.
//
// Expiry is judged by the clock of the process that writes: a take succeeds
// when the stored expiry is not after the taker's now. Hosts whose clocks
// disagree by more than a few seconds (Lambda's are kept in sync; a laptop
// running `shardloop run` against a shared table may not be) can take a
// live lease early, which costs duplicates, not records.
//
// Rows are keyed by stream name and shard id together, because shard ids
// repeat across streams. Stream names, never ARNs, go into the key.
//
// Two stores implement Store: MemoryStore, for one process (local runs and
// tests; empty after a restart), and DynamoStore, which keeps the rows in a
// DynamoDB table with the single string hash key "lease_key".
package lease
