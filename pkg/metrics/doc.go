// Package metrics turns shardloop's reader and coordinator events into
// CloudWatch metrics in the embedded metric format (EMF): JSON lines written
// to stdout that CloudWatch Logs extracts into metrics, with no API call from
// the function and no extra latency on the hot path.
//
// A Recorder implements reader.Hooks and reader.EventCounter (the Kinesis
// trigger's event counts, under its names). It gathers counts per stream and shard
// and writes one line per shard with activity every FlushInterval (from
// within a hook call; it starts no goroutine) and on Flush, which the Lambda
// handlers call at the end of each invocation. The metric names, units and
// dimensions are the constants of this package; docs/operations.md says what
// each means and which to alarm on.
package metrics
