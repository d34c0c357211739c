// Package lease is shardloop's lease table: one row per shard recording which
// owner reads it, how far it has read, and where it opens next; one row per
// stream recording its start generation; and, for local runners that share
// a table, one heartbeat row per runner and stream.
//
// A lease lasts DefaultDuration (10 s) and its holder renews it every
// DefaultRenewInterval (3 s). Every write is conditional:
//
//   - Take succeeds when the row has no owner, has this owner (or one of its
//     loop's runs, WithOwnerFamily), or still has the counter the taker saw
//     stand still for a lease duration on its own clock (IfCounter);
//     otherwise it fails with ErrHeld.
//   - Renew, Checkpoint and Pin succeed only while the row names this owner
//     and its lease was not revoked; Release while it names this owner.
//     Otherwise they fail with ErrNotOwner: a reader that gets it has lost
//     its shard and must stop without writing again.
//   - SetStart records a generation's start on a row, conditional on the
//     generation's order, and revokes the holder's lease; Reset is the
//     operator's write (shardloop reset), which does the same with a position
//     of the operator's choosing, refused with ErrHeld while an owner holds
//     the row unless forced. A revoked holder stops at its next renewal; the
//     row is taken again once its lease has lapsed.
//   - PutGeneration writes a stream's generation record over the order it
//     read, or fails with ErrChanged.
//
// Expiry is judged without trusting any clock but the taker's, as the
// Kinesis Client Library does: an Observer deems a lease lapsed once it has
// seen the row's owner and counter unchanged for a lease duration, and the
// take is conditional on that counter. A Holder, on its side, stops acting
// before its last good renewal's send time + the lease − a margin, so
// whatever the skew between the two hosts, never do two owners act on one
// shard at once. The Expiry written on the row is the holder's clock's, for
// operators.
//
// Runners that share a table (pkg/runner with balancing on) each Beat a
// heartbeat row per stream ("<stream>#runner#<id>", listed in the row
// "<stream>#runners"); a watcher deems a runner gone once its counter has
// stood still for a lease duration on the watcher's clock
// (Observer.ObserveRunner) and removes it with Leave, conditional on that
// counter. Loop owners of a runner end with "@<runner id>" (RunnerOwner,
// OwnerRunner).
//
// A checkpoint can record how far behind the tip the reader was
// (MillisBehind, LagAt: WithMillisBehind, Renewal.MillisBehind), which
// shardloop status shows; a Holder given HolderOptions.Lag records it with
// each checkpoint it writes.
//
// Rows are keyed by stream name and shard id together, because shard ids
// repeat across streams. Stream names, never ARNs, go into the key.
//
// Callers take the part of the table they use: a Holder a HolderStore, a
// coordinator a CoordinatorStore, runners sharing a table a HeartbeatStore,
// a reader of tumbling windows a WindowReader, an operator's tool an
// AdminStore. Store is all of them. Two stores implement it: MemoryStore,
// for one process (local runs and tests; empty after a restart), and
// DynamoStore, which keeps the rows in a DynamoDB table with the single
// string hash key "lease_key".
package lease
