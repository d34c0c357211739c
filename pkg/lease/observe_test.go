package lease_test

import (
	"testing"
	"time"

	"github.com/shardloop/shardloop/pkg/lease"
)

func TestObserver_JudgesLapseOnItsOwnClock(t *testing.T) {
	const d = 10 * time.Second
	t0 := time.UnixMilli(1_800_000_000_000)
	row := func(owner string, counter int64) lease.Lease {
		// The holder's expiry is far in the past or future on purpose: the
		// observer never reads it.
		return lease.Lease{Stream: stream, ShardID: "s1", Owner: owner, Counter: counter, Expiry: t0.Add(-time.Hour)}
	}
	fenced := func(owner string, counter int64, fence time.Duration) lease.Lease {
		r := row(owner, counter)
		r.Fence = fence
		return r
	}
	type step struct {
		at     time.Duration
		row    lease.Lease
		lapsed bool
		free   bool
		until  time.Duration // LapsesAt - t0
		family string        // the taker's loop (ObserveAs)
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"AHeldRowWithAFenceLapsesAfterTheLeaseAndTheFence", []step{
			{0, fenced("A", 1, 3*time.Second), false, false, d + 3*time.Second, ""},
			{d, fenced("A", 1, 3*time.Second), false, false, d + 3*time.Second, ""},
			{d + 3*time.Second, fenced("A", 1, 3*time.Second), true, false, d + 3*time.Second, ""},
		}},
		{"ARowReleasedWithAFenceLapsesAfterTheFence", []step{
			{0, fenced("", 2, 2*time.Second), false, false, 2 * time.Second, ""},
			{2 * time.Second, fenced("", 2, 2*time.Second), true, false, 2 * time.Second, ""},
		}},
		{"ARowHandedBackIsFreeToItsLoopAndHeldForOthers", []step{
			{0, row("loop", 3), false, true, 0, "loop"},
			{0, row("loop", 3), false, false, d, ""},
		}},
		{"ARowHandedBackWithAFenceIsWaitedOutByItsLoop", []step{
			{0, fenced("loop", 3, time.Second), false, false, time.Second, "loop"},
			{time.Second, fenced("loop", 3, time.Second), true, false, time.Second, "loop"},
		}},
		{"ARowARunOfTheLoopHoldsIsHeldForTheLoop", []step{
			{0, fenced("loop/r1", 3, time.Second), false, false, d + time.Second, "loop"},
		}},
		{"ReleasedRowIsFreeAtOnce", []step{{0, row("", 4), false, true, 0, ""}}},
		{"FirstSightStartsTheWatch", []step{{0, row("A", 1), false, false, d, ""}}},
		{"UnchangedForTheDurationLapses", []step{
			{0, row("A", 1), false, false, d, ""},
			{d - time.Millisecond, row("A", 1), false, false, d, ""},
			{d, row("A", 1), true, false, d, ""},
		}},
		{"ARenewalRestartsTheWatch", []step{
			{0, row("A", 1), false, false, d, ""},
			{9 * time.Second, row("A", 2), false, false, 9*time.Second + d, ""},
			{12 * time.Second, row("A", 2), false, false, 9*time.Second + d, ""},
			{19 * time.Second, row("A", 2), true, false, 9*time.Second + d, ""},
		}},
		{"ANewOwnerRestartsTheWatch", []step{
			{0, row("A", 5), false, false, d, ""},
			{11 * time.Second, row("B", 5), false, false, 11*time.Second + d, ""},
		}},
		{"AClockThatWentBackRestartsTheWatch", []step{
			{20 * time.Second, row("A", 1), false, false, 20*time.Second + d, ""},
			{5 * time.Second, row("A", 1), false, false, 5*time.Second + d, ""},
		}},
		{"AReleaseForgetsTheWatch", []step{
			{0, row("A", 1), false, false, d, ""},
			{5 * time.Second, row("", 2), false, true, 0, ""},
			{6 * time.Second, row("A", 1), false, false, 6*time.Second + d, ""},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := lease.NewObserver(d)
			for i, s := range c.steps {
				v := o.ObserveAs(s.row, t0.Add(s.at), s.family)
				var until time.Duration
				if !v.LapsesAt.IsZero() {
					until = v.LapsesAt.Sub(t0)
				}
				if v.Lapsed != s.lapsed || v.Free != s.free || until != s.until || v.Counter != s.row.Counter {
					t.Fatalf("step %d: %+v (lapses at +%s), want lapsed %v free %v at +%s", i, v, until, s.lapsed, s.free, s.until)
				}
				if v.Available() != (s.lapsed || s.free) {
					t.Fatalf("step %d: Available = %v", i, v.Available())
				}
			}
		})
	}
}

func TestObserver_RunnerIsGoneOnceItsHeartbeatStoodStillForADuration(t *testing.T) {
	const d = 10 * time.Second
	o := lease.NewObserver(d)
	t0 := time.UnixMilli(1_800_000_000_000)
	// BeatAt is the runner's clock, 30 s off: never read.
	hb := func(counter int64) lease.Heartbeat {
		return lease.Heartbeat{Runner: "r1", Counter: counter, BeatAt: t0.Add(30 * time.Second)}
	}
	if v := o.ObserveRunner(stream, hb(5), t0); v.Lapsed || v.Free || !v.LapsesAt.Equal(t0.Add(d)) {
		t.Fatalf("first sight = %+v, want live until t0+d", v)
	}
	if v := o.ObserveRunner(stream, hb(6), t0.Add(9*time.Second)); v.Lapsed || !v.LapsesAt.Equal(t0.Add(19*time.Second)) {
		t.Fatalf("after a beat = %+v, want the watch restarted", v)
	}
	if v := o.ObserveRunner(stream, hb(6), t0.Add(19*time.Second)); !v.Lapsed || v.Counter != 6 {
		t.Fatalf("standing still for d = %+v, want lapsed at counter 6", v)
	}
	// The same id on another stream, or a shard row of the same name, is
	// watched apart.
	if v := o.ObserveRunner("other", hb(6), t0.Add(19*time.Second)); v.Lapsed {
		t.Fatalf("another stream's runner = %+v, want a fresh watch", v)
	}
	if v := o.Observe(lease.Lease{Stream: stream, ShardID: "r1", Owner: "r1", Counter: 6}, t0.Add(19*time.Second)); v.Lapsed {
		t.Fatalf("a shard row named like the runner = %+v, want a fresh watch", v)
	}
	o.ForgetRunner(stream, "r1")
	if v := o.ObserveRunner(stream, hb(6), t0.Add(20*time.Second)); v.Lapsed {
		t.Fatalf("after Forget = %+v, want a fresh watch", v)
	}
}

func TestOwnerRunner_NamesTheRunnerOfALoopOrRunOwner(t *testing.T) {
	for _, c := range []struct{ owner, want string }{
		{lease.RunnerOwner("shardId-1-ab", "host-1-cd"), "host-1-cd"},
		{lease.RunnerOwner("shardId-1-ab", "host-1-cd") + lease.RunSeparator + "0123", "host-1-cd"},
		{"shardId-1-ab", ""},
		{"shardId-1-ab/0123", ""},
		{"", ""},
	} {
		if got := lease.OwnerRunner(c.owner); got != c.want {
			t.Errorf("OwnerRunner(%q) = %q, want %q", c.owner, got, c.want)
		}
	}
}
