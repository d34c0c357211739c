// Package coordinator decides which shards get a reader and starts one loop
// per leasable shard. It is the library behind the coordinator Lambda and the
// local runner.
//
// A pass lists each subscribed stream's shards, reads their lease rows in
// batches, asks pkg/shards which shards may be taken, takes each one's lease
// for a fresh owner id and starts a loop for it through a Starter (a Step
// Functions execution named after the owner in AWS, a goroutine locally).
// Overlapping coordinators are harmless: the conditional take decides which
// one starts a loop. Whether a held lease has lapsed is judged on the
// coordinator's own clock by a lease.Observer watching the row's counter.
//
// A coordinator passes when there is something to do, as a deployment runs
// it: Once per scheduled invocation (one pass a minute) and per Nudge (a
// reader at SHARD_END, or that released its lease), and Watch for a loop
// whose execution ended FAILED, TIMED_OUT or ABORTED: it waits, about a lease
// duration, until that shard's lease has lapsed by its own watch, then takes
// the shard. Once also watches the leases its pass found revoked (a new
// start generation), whose loops end without failing. Serve is that shape
// in one process (the local runner), with Failed in place of the execution
// event. Run is the older shape, kept as an option (a window): it relists
// every relist interval (10 s) for the length of its window and passes
// again just after the earliest moment a watched lease would lapse.
//
// Each pass also reads the stream's generation record (lease.Generation): a
// configured start position the table has not seen begins a new generation,
// applied once to the shards listed then; one the table has superseded
// changes nothing (StreamResult.StaleConfiguration). Without a configured
// start no checkpoint ever moves. docs/design.md states the rules.
package coordinator
