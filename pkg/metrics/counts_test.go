package metrics_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/shardloop/shardloop/pkg/metrics"
	"github.com/shardloop/shardloop/pkg/reader"
)

// TestRecorder_EventCountMetricsCarryTheTriggersNamesUnitsAndDimensions:
// the trigger's event counts and IteratorAge are valid EMF with Lambda's
// names; the ones a busy shard emits every minute (polled, filtered out,
// invoked, the iterator age) carry [Stream] alone, so a shard adds no
// custom metric; the ones of trouble (failed invokes, drops, destination
// deliveries) carry [Stream, Shard] too, as TargetErrors does. IteratorAge
// is the interval's most, in milliseconds.
func TestRecorder_EventCountMetricsCarryTheTriggersNamesUnitsAndDimensions(t *testing.T) {
	var w syncBuffer
	c := &clock{now: time.UnixMilli(1_800_000_000_000)}
	r := newRecorder(t, &w, c, time.Minute)
	var ec reader.EventCounter = r
	const s, sh = "orders", "shardId-000000000003"
	ec.EventsPolled(s, sh, 100)
	ec.EventsPolled(s, sh, 20)
	ec.EventsFilteredOut(s, sh, 30)
	ec.EventsInvoked(s, sh, 90)
	ec.EventsFailedInvoke(s, sh, 5)
	ec.EventsDropped(s, sh, 2)
	ec.EventsOnFailureDelivered(s, sh, 3)
	ec.IteratorAge(s, sh, 1200)
	ec.IteratorAge(s, sh, 4500)
	ec.IteratorAge(s, sh, 0)
	r.Flush()
	lines := parseAll(t, w.String())
	if len(lines) != 1 {
		t.Fatalf("got %d lines, want 1:\n%s", len(lines), w.String())
	}
	l := lines[0]
	want := map[string]float64{
		metrics.PolledEventCount: 120, metrics.FilteredOutEventCount: 30, metrics.InvokedEventCount: 90,
		metrics.FailedInvokeEventCount: 5, metrics.DroppedEventCount: 2, metrics.OnFailureDestinationDeliveredEventCount: 3,
		metrics.IteratorAge: 4500,
	}
	if fmt.Sprint(l.Values) != fmt.Sprint(want) {
		t.Fatalf("values %v\nwant   %v", l.Values, want)
	}
	for name := range want {
		dims, unit := "[[Stream] [Stream Shard]]", "Count"
		switch name {
		case metrics.PolledEventCount, metrics.FilteredOutEventCount, metrics.InvokedEventCount:
			dims = "[[Stream]]"
		case metrics.IteratorAge:
			dims, unit = "[[Stream]]", "Milliseconds"
		}
		if l.Dimensions[name] != dims || l.Units[name] != unit {
			t.Errorf("%s: dimensions %s unit %s, want %s %s", name, l.Dimensions[name], l.Units[name], dims, unit)
		}
	}
	// The names are the trigger's own.
	for got, name := range map[string]string{
		metrics.PolledEventCount: "PolledEventCount", metrics.FilteredOutEventCount: "FilteredOutEventCount",
		metrics.InvokedEventCount: "InvokedEventCount", metrics.FailedInvokeEventCount: "FailedInvokeEventCount",
		metrics.DroppedEventCount: "DroppedEventCount", metrics.OnFailureDestinationDeliveredEventCount: "OnFailureDestinationDeliveredEventCount",
		metrics.IteratorAge: "IteratorAge",
	} {
		if got != name {
			t.Errorf("metric %q, want the trigger's name %q", got, name)
		}
	}
}

// TestRecorder_EventCountIteratorAgeOfZeroIsStillPublished: a delivery of
// records that arrived this millisecond has an age of 0, which is a value,
// not an absence.
func TestRecorder_EventCountIteratorAgeOfZeroIsStillPublished(t *testing.T) {
	var w syncBuffer
	c := &clock{now: time.UnixMilli(1_800_000_000_000)}
	r := newRecorder(t, &w, c, time.Minute)
	r.IteratorAge("orders", "shardId-000000000000", 0)
	r.Flush()
	lines := parseAll(t, w.String())
	if len(lines) != 1 || lines[0].Units[metrics.IteratorAge] != "Milliseconds" || lines[0].Values[metrics.IteratorAge] != 0 {
		t.Fatalf("lines %+v, want one with IteratorAge 0 ms", lines)
	}
}
