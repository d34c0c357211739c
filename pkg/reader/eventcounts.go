package reader

// EventCounter counts a run's records as Lambda's event source mapping
// counts its events (the EventCount metrics of its MetricsConfig, and
// IteratorAge), under the same meanings. A run calls it when Options.Hooks
// implements it too (metrics.Recorder does); Hooks that do not are not
// asked. Its methods are called from the run's goroutines, must be fast and
// safe for concurrent use.
//
// Records are Kinesis records, except that with Deaggregate the records a
// delivery carries (invoked, failed, filtered out) are the user records of
// the aggregated ones.
type EventCounter interface {
	// EventsPolled: n records were read from the shard (PolledEventCount).
	// A record read again (after a takeover, or to pass what an earlier run
	// settled) counts again.
	EventsPolled(stream, shardID string, n int)
	// EventsFilteredOut: n records matched none of Options.FilterCriteria and were
	// consumed without being delivered (FilteredOutEventCount).
	EventsFilteredOut(stream, shardID string, n int)
	// EventsInvoked: one delivery sent n records to the target
	// (InvokedEventCount). A record delivered again after a failure counts
	// again.
	EventsInvoked(stream, shardID string, n int)
	// EventsFailedInvoke: n records of one delivery did not settle: the
	// invocation failed (function error, throttle, timeout, network) or
	// its answer reported them in batchItemFailures
	// (FailedInvokeEventCount). Counted at each failed delivery.
	EventsFailedInvoke(stream, shardID string, n int)
	// EventsDropped: n records were given up under the failure policy
	// (MaximumRetryAttempts, MaximumRecordAge) with no on-failure destination, so
	// nothing but the log and this count holds them (DroppedEventCount).
	EventsDropped(stream, shardID string, n int)
	// EventsOnFailureDelivered: n records were given up and the on-failure
	// destination accepted their record
	// (OnFailureDestinationDeliveredEventCount).
	EventsOnFailureDelivered(stream, shardID string, n int)
	// IteratorAge: a delivery was sent whose last record arrived ms
	// milliseconds before (by its ApproximateArrivalTimestamp and
	// Options.Clock), Lambda's IteratorAge.
	IteratorAge(stream, shardID string, ms int64)
}

// counter is Hooks' EventCounter, nil when the hooks count no events.
func (r *run) counter() EventCounter {
	c, _ := r.o.Hooks.(EventCounter)
	return c
}

func (r *run) polled(n int) {
	if c := r.counter(); c != nil && n > 0 {
		c.EventsPolled(r.in.Stream, r.in.ShardID, n)
	}
}

func (r *run) filteredOut(n int) {
	if c := r.counter(); c != nil && n > 0 {
		c.EventsFilteredOut(r.in.Stream, r.in.ShardID, n)
	}
}

// invoked counts a delivery of b about to be sent, and its iterator age.
func (r *run) invoked(b Batch) {
	c := r.counter()
	if c == nil || len(b.Records) == 0 {
		return
	}
	c.EventsInvoked(r.in.Stream, r.in.ShardID, len(b.Records))
	if t := b.Records[len(b.Records)-1].ApproximateArrivalTimestamp; t != nil {
		c.IteratorAge(r.in.Stream, r.in.ShardID, max(0, r.o.Clock().Sub(*t).Milliseconds()))
	}
}

func (r *run) failedInvoke(n int) {
	if c := r.counter(); c != nil && n > 0 {
		c.EventsFailedInvoke(r.in.Stream, r.in.ShardID, n)
	}
}

// gaveUp counts n records given up: delivered to the on-failure
// destination when there is one (giveUp returns only once it accepted
// them), dropped otherwise.
func (r *run) gaveUp(n int) {
	c := r.counter()
	if c == nil || n <= 0 {
		return
	}
	if r.o.OnFailure != nil {
		c.EventsOnFailureDelivered(r.in.Stream, r.in.ShardID, n)
		return
	}
	c.EventsDropped(r.in.Stream, r.in.ShardID, n)
}
