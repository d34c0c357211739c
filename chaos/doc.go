// Package chaos runs shardloop under fire and checks, from what the target
// really received, that nothing was lost: several local runners (owners)
// share one lease table and read one keyed stream while loops are killed at
// random moments (mid-batch included), the stream is split and merged, and
// Kinesis reads, lease writes and deliveries fail at injected rates
// (internal/faults).
//
// Run returns a Report: records produced and lost, duplicates, per-key order
// (the first delivery of each key's records in the order they were
// produced), and, per shard, how long two owners delivered at overlapping
// times. The package's test runs it at a modest size on kinesis-local and
// dynalite; its benchmarks (make bench) run it at full size on moto_server
// and measure failover, child opening, delivery latency, a coordinator pass
// over 1,000 shards and the cost of a shard (docs/benchmarks.md).
package chaos
