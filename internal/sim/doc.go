// Package sim runs the whole of shardloop in simulated worlds: the real
// coordinator, readers, local runner, lease logic and failure policy, over
// the in-memory Kinesis (internal/kinesismem) and the memory lease store,
// in the virtual time of testing/synctest, so that a world of ten
// simulated minutes costs tens of milliseconds.
//
// A world is drawn from a seed (Draw): the stream's shape, keys and rates;
// one or two deployments on one lease table, each a local runner (pkg/runner,
// one or more processes) or the Lambda shape (a model of the coordinator's
// one-minute schedule and nudges, Step Functions executions with the ASL's
// retries and continue-as-new, and shardreader invocations with deadlines),
// with their start positions and redeploys; parallel lanes, batching
// windows, filters and tumbling windows (window.go); the faults of the lease store,
// of Kinesis, of the target and of Lambda and Step Functions, with their
// rates and latencies; each host's clock, skewed and drifting; kills,
// crashes, splits, merges and a stream deleted and created again. Run runs
// it and checks the promise on everything it saw (see checker); a failing
// world prints its seed, the command that replays it, and its trace.
//
// Nothing in a world touches the network or the wall clock. The code under
// test takes its clocks and clients by injection (reader.Options.Clock,
// coordinator.Config.Clock, kinesismem's own clock); under synctest,
// time.Now is virtual anyway, so a host's skew is an offset on its
// injected clock and its drift a rate.
package sim
