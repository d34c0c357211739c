package metrics

// The trigger's event counts: Lambda's event source mapping metrics
// (MetricsConfig EventCount) and IteratorAge, under the same names and
// meanings (reader.EventCounter says what each counts). They are Counts
// except IteratorAge.
const (
	PolledEventCount                        = "PolledEventCount"                        // records read from the stream
	FilteredOutEventCount                   = "FilteredOutEventCount"                   // records no filter passed, consumed
	InvokedEventCount                       = "InvokedEventCount"                       // records sent to the target, again at each retry
	FailedInvokeEventCount                  = "FailedInvokeEventCount"                  // records of deliveries that did not settle them
	DroppedEventCount                       = "DroppedEventCount"                       // records given up with no on-failure destination
	OnFailureDestinationDeliveredEventCount = "OnFailureDestinationDeliveredEventCount" // records given up, accepted by the destination
	// IteratorAge is, in Milliseconds, the age of the last record of a
	// delivery when it was sent: the most in the interval, like
	// MillisBehindLatest (its Maximum over [Stream] is the stream's worst).
	IteratorAge = "IteratorAge"
)

// EventsPolled implements reader.EventCounter.
func (r *Recorder) EventsPolled(stream, shardID string, n int) {
	r.add(stream, shardID, PolledEventCount, int64(n))
}

// EventsFilteredOut implements reader.EventCounter.
func (r *Recorder) EventsFilteredOut(stream, shardID string, n int) {
	r.add(stream, shardID, FilteredOutEventCount, int64(n))
}

// EventsInvoked implements reader.EventCounter.
func (r *Recorder) EventsInvoked(stream, shardID string, n int) {
	r.add(stream, shardID, InvokedEventCount, int64(n))
}

// EventsFailedInvoke implements reader.EventCounter.
func (r *Recorder) EventsFailedInvoke(stream, shardID string, n int) {
	r.add(stream, shardID, FailedInvokeEventCount, int64(n))
}

// EventsDropped implements reader.EventCounter.
func (r *Recorder) EventsDropped(stream, shardID string, n int) {
	r.add(stream, shardID, DroppedEventCount, int64(n))
}

// EventsOnFailureDelivered implements reader.EventCounter.
func (r *Recorder) EventsOnFailureDelivered(stream, shardID string, n int) {
	r.add(stream, shardID, OnFailureDestinationDeliveredEventCount, int64(n))
}

// IteratorAge implements reader.EventCounter: the interval keeps the most.
func (r *Recorder) IteratorAge(stream, shardID string, ms int64) {
	r.record(stream, shardID, func(c *counts) {
		if v, ok := c.n[IteratorAge]; !ok || ms > v {
			c.n[IteratorAge] = ms
		}
	})
}

// iteratorAge adds IteratorAge to a line's document when the interval saw
// one, and returns the metric to declare.
func iteratorAge(doc map[string]any, c *counts) (emfMetric, bool) {
	v, ok := c.n[IteratorAge]
	if !ok {
		return emfMetric{}, false
	}
	doc[IteratorAge] = v
	return emfMetric{Name: IteratorAge, Unit: UnitMilliseconds}, true
}
