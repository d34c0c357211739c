// Package reader reads one Kinesis shard for a bounded time and delivers its
// records, in order, to a target: the unit of work of one shardreader
// Lambda invocation, of one goroutine of the local runner, and of tests.
//
// Run takes (or renews) the shard's lease through a lease.Holder, which
// renews it every 3 s in the background and whose deadline (its last good
// renewal's send time + the lease − a margin) ends every delivery and
// checkpoint; it reads with GetRecords, hands the records to a Target and
// checkpoints them once settled, and returns a State before its deadline.
// The State is the Step Functions payload, a plain value the run reads at
// its start and builds at its end: the next run continues from its
// iterator without calling GetShardIterator (docs/state.md describes it).
// Delivery is at least once: a checkpoint is written only after its records
// settled, and a new owner resumes after the last checkpoint.
//
// A run has parts with one job each: the holder (the lease), the cursor
// (the iterator, reopening, the pinned tip, the batching window, the pacing
// of reads), the lanes (delivery under the failure policy, as a queue of
// work where bisection pushes halves), and the ledger (the checkpoint
// rule). One goroutine of the run routes records to lanes, hands out
// batches, starts reads and writes checkpoints; the others report to it.
//
// Options.Mapping holds what a Lambda event source mapping on the stream
// would set (BatchSize, MaximumBatchingWindow, ParallelizationFactor,
// FilterCriteria, the failure policy, TumblingWindow), one field for each
// of its settings and under its name; the rest of Options is the reader's
// own.
//
// With ParallelizationFactor N > 1 (as Lambda's, 1 to 10) the records go
// to N lanes by a hash of their partition key: each lane delivers its keys'
// records in order, one batch in flight, and the lanes deliver
// concurrently. The checkpoint is the last record with every record before
// it settled; SHARD_END only once every lane settled everything. A failing
// record holds back only its lane; at most MaxAheadRecords are held past the
// checkpoint, and a run hands the next what its lanes settled past it, so
// the others are not delivered again (docs/failure-policy.md).
//
// Where a shard opens is the pure function Open over the lease row: an
// unapplied start position, else the checkpoint, else TRIM_HORIZON for a
// child, else the tip. The tip is pinned on the row before anything is read
// (Kinesis's time of a LATEST GetShardIterator, less a second, as an
// AT_TIMESTAMP start), so no reader opens a shard at LATEST twice. A
// reopening inside a loop (an expired iterator, a batch left unsettled)
// goes after the loop's checkpoint, or to the first record it read, or to
// the row's start.
//
// Policies, in one place:
//
//   - A failing target is retried with capped exponential backoff
//     (RetryMin to RetryMax); nothing past an unsettled record is
//     checkpointed, and the lease stays renewed. By default this lasts until
//     the target accepts the record or the record leaves the stream's
//     retention, blocking the shard: alarm on Hooks.TargetError. The failure
//     policy changes that (docs/failure-policy.md): MaximumRetryAttempts
//     and MaximumRecordAge give records up, BisectBatchOnFunctionError
//     splits a failing batch to isolate the bad records, and OnFailure
//     receives a FailureRecord (the shape of Lambda's on-failure record)
//     before the checkpoint passes a given-up batch. Without a destination a given-up batch is logged at
//     error level and reported to Hooks.BatchGivenUp: never silent.
//   - A KPL-aggregated record is not delivered: it is reported as an
//     AggregatedRecordError (error log, Hooks.AggregatedRecord) and the
//     checkpoint moves past it, so one such record cannot block the shard.
//     With Deaggregate its user records are delivered instead (Batch.Subs),
//     and settle together; a corrupt aggregate is still reported.
//   - FilterCriteria (Lambda's, pkg/filter) drops the records that match
//     no pattern before batching: they are never delivered, the
//     checkpoint passes them, and a read of nothing but them costs no
//     delivery. A Hooks that is also an EventCounter counts the records as
//     the trigger's EventCount metrics and IteratorAge do.
//   - MaximumBatchingWindow gathers several reads into one delivery, up to
//     BatchSize records (that pass the filters) or MaxBatchBytes.
//   - A throttled read waits PollInterval and retries the same iterator; any
//     other read error waits ReadErrorWait and retries it; the 11th
//     consecutive error releases the lease (ReasonReadErrors).
//   - A refused renewal cancels the delivery in flight and nothing more is
//     written (ReasonLeaseLost). SHARD_END is written only after every
//     delivery settled; then the lease is released and Nudge called.
//   - Reads are pipelined: while the lanes deliver, the cursor reads the
//     next records, as long as the shard has a backlog (the last read was
//     full or behind the tip) and a lane has less than a batch waiting (at
//     most one read's worth waits in all). At the tip it reads only once a
//     lane is idle, as a sequential reader would, so an idle shard reads
//     once per PollInterval and a slow one once per delivery. Every read is
//     paced within the shard's limits, 5 GetRecords calls and 2 MiB a
//     second (counted from the answers), whatever the factor or batch size.
//
// With TumblingWindow (Lambda's TumblingWindowInSeconds, 1 to 900 s, one
// lane) the Target is a WindowTarget: each shard's records are grouped by
// arrival time into windows, a batch never spans two, each invocation gets
// the state the previous one of its window returned, and a final
// invocation closes each window (early at a shard's end). The state is
// written beside the lease row in the checkpoint's own conditional write
// (lease.HolderStore.CheckpointWindow), never in the State payload (window.go).
//
// LambdaTarget invokes a function with exactly the event Lambda's own
// Kinesis trigger sends and reads batchItemFailures from its answer;
// FuncTarget is an in-process Go function.
package reader
