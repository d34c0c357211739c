package reader

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// A yield while a delivery is in flight lets it settle, checkpoints it and
// releases: the next owner takes the row at once and resumes after it.
func TestRun_YieldLetsTheDeliveryInFlightSettleThenCheckpointsAndReleases(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	seqs := e.putN(t, "a", 5)
	e.setStart(t, e.shards[0], "horizon")
	yield := make(chan struct{})
	inFlight, settle := make(chan struct{}), make(chan struct{})
	deliveries := 0
	s := &sink{fail: func(b Batch) (int, error) {
		deliveries++
		if deliveries == 1 {
			close(inFlight)
			<-settle
		}
		return len(b.Records), nil
	}}
	spy := &spyStore{Store: e.store}
	o := e.opts(s)
	o.Store, o.Yield, o.RunLength = spy, yield, 10*time.Second
	done := make(chan State, 1)
	go func() {
		st, err := Run(t.Context(), o, e.state(e.shards[0], "A"))
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		done <- st
	}()
	<-inFlight
	close(yield)
	e.putN(t, "b", 3) // read by nobody before the next owner
	close(settle)
	st := <-done
	if st.Reason != ReasonReleased || st.Continue || st.Checkpoint != seqs[4] {
		t.Fatalf("state = %+v, want released after checkpointing %s", st, seqs[4])
	}
	if deliveries != 1 || s.len() != 5 {
		t.Fatalf("%d deliveries of %d records, want the one in flight only", deliveries, s.len())
	}
	ops := spy.ops()
	if i := slices.Index(ops, "checkpoint "+seqs[4]); i < 0 || ops[len(ops)-1] != "release" {
		t.Fatalf("ops %v: want the checkpoint of the settled batch, then the release", ops)
	}
	if row := e.row(t, e.shards[0]); row.Owner != "" || row.Checkpoint != seqs[4] {
		t.Fatalf("row = %+v, want released at %s", row, seqs[4])
	}
	// Another owner takes it at once, without watching it lapse.
	next := &sink{}
	o2 := e.opts(next)
	runUntil(t, o2, e.state(e.shards[0], "B"), func() bool { return next.len() >= 3 })
	if got := next.data(); len(got) != 3 || got[0] != "b-00000" {
		t.Fatalf("the next owner got %v, want b-00000.. only", got)
	}
}

// A yield while the target fails stops retrying: nothing is checkpointed
// past the unsettled records, and the lease is released.
func TestRun_YieldStopsRetryingAFailingDeliveryWithoutCheckpointingPastIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	e.putN(t, "a", 4)
	e.setStart(t, e.shards[0], "horizon")
	yield := make(chan struct{})
	fails := 0
	s := &sink{fail: func(b Batch) (int, error) {
		if fails++; fails == 2 {
			close(yield)
		}
		return 0, errors.New("handler down")
	}}
	spy := &spyStore{Store: e.store}
	o := e.opts(s)
	o.Store, o.Yield, o.RunLength = spy, yield, 10*time.Second
	o.RetryMin, o.RetryMax = time.Second, time.Second // a backoff the yield cuts short
	st, err := Run(t.Context(), o, e.state(e.shards[0], "A"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Reason != ReasonReleased || fails != 2 {
		t.Fatalf("state %+v after %d failed deliveries, want released after the second", st, fails)
	}
	for _, op := range spy.ops() {
		if op != "take" && op != "renew" && op != "release" {
			t.Fatalf("ops %v: want no checkpoint", spy.ops())
		}
	}
	if row := e.row(t, e.shards[0]); row.Owner != "" || row.Checkpoint != "" || row.Start != "horizon" {
		t.Fatalf("row = %+v, want released with nothing checkpointed", row)
	}
}

// A yield during the wait after an empty read ends the wait at once.
func TestRun_YieldEndsThePollWait(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	e.setStart(t, e.shards[0], "horizon")
	yield := make(chan struct{})
	var cut bool
	o := e.opts(&sink{})
	o.Yield, o.RunLength, o.PollInterval = yield, 30*time.Second, 5*time.Second
	o.sleep = func(ctx context.Context, d time.Duration) error {
		if d == 5*time.Second {
			close(yield)
		}
		err := sleep(ctx, d)
		cut = cut || (d == 5*time.Second && err != nil)
		return err
	}
	st, err := Run(t.Context(), o, e.state(e.shards[0], "A"))
	if err != nil || st.Reason != ReasonReleased || !cut {
		t.Fatalf("Run = %+v, %v (poll wait cut: %v), want released with the wait cut short", st, err, cut)
	}
}

// A run that starts after the yield takes the row, releases it and
// delivers nothing, keeping the checkpoint.
func TestRun_YieldedBeforeTheRunReleasesWithoutReading(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	if _, err := e.store.Take(t.Context(), e.stream, e.shards[0], "A"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Checkpoint(t.Context(), e.stream, e.shards[0], "A", "42"); err != nil {
		t.Fatal(err)
	}
	e.putN(t, "a", 2)
	yield := make(chan struct{})
	close(yield)
	s := &sink{}
	o := e.opts(s)
	o.Yield = yield
	st, err := Run(t.Context(), o, e.state(e.shards[0], "A"))
	if err != nil || st.Reason != ReasonReleased || s.len() != 0 {
		t.Fatalf("Run = %+v, %v with %d delivered, want released with nothing delivered", st, err, s.len())
	}
	if row := e.row(t, e.shards[0]); row.Owner != "" || row.Checkpoint != "42" {
		t.Fatalf("row = %+v, want released with its checkpoint", row)
	}
	if _, err := e.store.Take(t.Context(), e.stream, e.shards[0], "B"); err != nil {
		t.Fatalf("take by another owner right after: %v", err)
	}
}
