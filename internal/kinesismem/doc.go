// Package kinesismem is an in-memory Kinesis Data Streams: a *Client with
// the methods, signatures and typed errors of *kinesis.Client for the calls
// shardloop makes, so the real coordinator, readers and runner can run
// against it in one process, with no network and, under testing/synctest,
// in virtual time.
//
// It is a model of AWS, held to kinesis-local by one conformance suite
// (package kinesistest) that runs on both; where kinesis-local differs
// from AWS, the model follows AWS and the suite names the difference.
//
// What it models:
//   - streams (provisioned; on-demand ones get 4 shards and never scale)
//     created, described and deleted, with the CREATING, UPDATING and
//     DELETING statuses lasting Options.CreateDelay, ReshardDelay and
//     DeleteDelay (0 by default). Status changes happen lazily, on the first
//     call at or after their time: the Client starts no goroutines.
//   - shards with 128-bit hash key ranges; records go to the open shard
//     whose range holds their ExplicitHashKey or the MD5 of their partition
//     key; SplitShard, MergeShards and UpdateShardCount (uniform scaling by
//     splits and merges) close parents with an EndingSequenceNumber and
//     record ParentShardId and AdjacentParentShardId.
//   - sequence numbers: 56 decimal digits that grow with arrival across the
//     whole stream (so a child's exceed its parents'), and that encode their
//     shard, so one used on another shard is refused.
//   - the five iterator types, AT_TIMESTAMP by ApproximateArrivalTimestamp
//     on the millisecond grain; iterators that expire after 5 minutes;
//     GetRecords' Limit, 10 MiB cap, MillisBehindLatest and, at the end of
//     a closed shard, no NextShardIterator and the ChildShards.
//   - retention (24 h by default): older records vanish, and a closed shard
//     leaves ListShards once retention has passed since it closed.
//   - the per-shard limits of a provisioned stream: 5 GetRecords and 5
//     GetShardIterator calls a second and 2 MiB/s of reads, 1,000
//     records/s and 1 MiB/s of writes (data plus partition key). Beyond
//     them reads fail with *types.ProvisionedThroughputExceededException,
//     PutRecord too, and PutRecords fails the entries alone. Options can
//     turn the read or the write limits off.
//   - ListShards pagination (MaxResults, NextToken that expires after 300
//     s, ExclusiveStartShardId) and every ShardFilter type.
//   - the errors of bad calls: *types.ResourceNotFoundException for a
//     missing stream or shard, *types.InvalidArgumentException for bad
//     input (the model uses it also where AWS answers ValidationException),
//     *types.ResourceInUseException, *types.LimitExceededException (shard
//     limit, streams CREATING, scalings a day), *types.ExpiredIteratorException
//     and *types.ExpiredNextTokenException. They come wrapped in a
//     *smithy.OperationError, as the SDK's do: use errors.As.
//
// Every answer carries the server's time for shards.ServerTime, from
// Options.Clock, the one clock of the model.
//
// What it does not model: enhanced fan-out (RegisterStreamConsumer,
// SubscribeToShard), server-side encryption, on-demand scaling, records
// larger than 1 MiB (UpdateMaxRecordSize), warm throughput, tags, resource
// policies, account-level call rates (e.g. ListShards' 1,000 a second, the
// control plane's 5 a second), retention changes, DryRun, network latency,
// and faults (wrap the Client in internal/faults for those). Calls' optFns
// are ignored. Within one Client every call holds one lock, so calls are
// serialised; results are deterministic for a given order of calls and
// clock readings.
package kinesismem
