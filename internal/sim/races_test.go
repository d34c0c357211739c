package sim

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardloop/shardloop/pkg/lease"
)

// TestRecreateRaces_FreezeTheFirstHostToMeetTheirMoment: a race a
// re-creation arms freezes the first host of its deployment that meets its
// moment, once, and tells the re-creation so; a race disarmed freezes no
// one.
func TestRecreateRaces_FreezeTheFirstHostToMeetTheirMoment(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &World{
			cfg: Config{Deployments: []Deployment{{Name: "a"}, {Name: "b"}}},
			rnd: newStreams(1), tr: newTracer(time.Now()), began: time.Now(),
		}
		// The hosts' names, as the world makes them, name their deployment.
		coord, reader := w.newHost("a-coordinator").name, w.newHost("a-reader").name
		for _, h := range []string{coord, reader, w.newHost("a").name} {
			if dep := depOfHost(h); dep != "a" {
				t.Fatalf("depOfHost(%q) = %q, want a", h, dep)
			}
		}
		ctx := withHost(context.Background(), coord)
		other := withHost(context.Background(), "b#9")
		frozenFor := func(ctx context.Context) time.Duration {
			t0 := time.Now()
			w.wake(ctx)
			return time.Since(t0)
		}

		if w.meetRace(ctx, "describe", "a") {
			t.Fatal("a host met a race none armed")
		}
		met := w.armRace(Event{Kind: Recreate, Deployment: 0, Start: "describe", Pause: 9 * time.Second})
		if w.meetRace(other, "describe", "b") || w.meetRace(ctx, "start", "a") || w.meetRace(context.Background(), "describe", "a") {
			t.Fatal("a race was met in another deployment, at another moment, or by no host")
		}
		select {
		case <-met:
			t.Fatal("the re-creation was told of a race not met")
		default:
		}
		if !w.meetRace(ctx, "describe", depOfHost(coord)) {
			t.Fatal("the coordinator's description did not meet the race armed for it")
		}
		<-met
		if d := frozenFor(ctx); d != 9*time.Second {
			t.Fatalf("the host that met the race was frozen for %s, want 9s", d)
		}
		if w.meetRace(ctx, "describe", "a") {
			t.Fatal("a race was met twice")
		}

		// Where Pick < 0.5, the host wakes as the next start write lands.
		w.thawOnStart() // none waits: nothing happens
		w.armRace(Event{Kind: Recreate, Deployment: 0, Start: "describe", Pick: 0.2, Pause: 20 * time.Second})
		if !w.meetRace(ctx, "describe", "a") {
			t.Fatal("a second race was not met")
		}
		go func() {
			time.Sleep(4 * time.Second)
			w.thawOnStart()
		}()
		if d := frozenFor(ctx); d != 4*time.Second {
			t.Fatalf("the host was frozen for %s, want 4s (until the start write)", d)
		}

		w.armRace(Event{Kind: Recreate, Deployment: 1, Start: "start", Pause: 5 * time.Second})
		w.disarmRace()
		if w.meetRace(other, "start", "b") || frozenFor(other) != 0 {
			t.Fatal("a disarmed race froze a host")
		}
	})
}

// TestStartPause_FreezesTheHostsThatWriteTheStartUntilOneMoment: a pause
// armed for a start freezes the first host of its deployment that writes
// that start, for the pause, and every host that writes it meanwhile until
// the same moment; another start, another deployment, or a write after the
// moment freezes no one.
func TestStartPause_FreezesTheHostsThatWriteTheStartUntilOneMoment(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &World{
			cfg: Config{Deployments: []Deployment{{Name: "a"}, {Name: "b"}}},
			rnd: newStreams(1), tr: newTracer(time.Now()), began: time.Now(),
		}
		first, second := withHost(context.Background(), "a#1"), withHost(context.Background(), "a#2")
		other := withHost(context.Background(), "b#1")
		frozenFor := func(ctx context.Context) time.Duration {
			t0 := time.Now()
			w.wake(ctx)
			return time.Since(t0)
		}
		horizon := lease.Start{Position: "horizon", Generation: "g2", Order: 2}
		met := w.armStartPause("a", "horizon", 30*time.Second)
		w.startPaused(first, "a", lease.Start{Position: "latest", Generation: "g3", Order: 3})
		w.startPaused(other, "b", horizon)
		if frozenFor(first) != 0 || frozenFor(other) != 0 {
			t.Fatal("a host that wrote another start, or of another deployment, froze")
		}
		select {
		case <-met:
			t.Fatal("the pause was met by no host")
		default:
		}
		w.startPaused(first, "a", horizon)
		<-met
		time.Sleep(10 * time.Second)
		w.startPaused(second, "a", horizon)
		if d := frozenFor(second); d != 20*time.Second {
			t.Fatalf("the second host was frozen for %s, want 20s (until the first one wakes)", d)
		}
		if d := frozenFor(first); d != 0 {
			t.Fatalf("the first host is still frozen %s after the pause", d)
		}
		w.startPaused(second, "a", horizon)
		if d := frozenFor(second); d != 0 {
			t.Fatalf("a host that wrote the start after the pause froze for %s", d)
		}
	})
}

// TestStartPauseUntil_FreezesTheDeploymentsStartWritersUntilTheMoment: the
// newer start's pause of a Supersede with an Overlap freezes each host of
// its deployment that writes any start, until the moment it was armed
// with, and no host after it.
func TestStartPauseUntil_FreezesTheDeploymentsStartWritersUntilTheMoment(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &World{
			cfg: Config{Deployments: []Deployment{{Name: "a"}, {Name: "b"}}},
			rnd: newStreams(1), tr: newTracer(time.Now()), began: time.Now(),
		}
		frozenFor := func(ctx context.Context) time.Duration {
			t0 := time.Now()
			w.wake(ctx)
			return time.Since(t0)
		}
		first, second := withHost(context.Background(), "b#1"), withHost(context.Background(), "b#2")
		other := withHost(context.Background(), "a#1")
		w.armStartPauseUntil("b", time.Now().Add(40*time.Second))
		if !w.pausedUntil("b").Equal(time.Now().Add(40 * time.Second)) {
			t.Fatalf("pausedUntil = %s, want the moment armed", w.pausedUntil("b"))
		}
		w.startPaused(other, "a", lease.Start{Position: "sequence:s1:9", Generation: "g3", Order: 3})
		if d := frozenFor(other); d != 0 {
			t.Fatalf("a host of another deployment froze for %s", d)
		}
		time.Sleep(5 * time.Second)
		w.startPaused(first, "b", lease.Start{Position: "sequence:s1:9", Generation: "g3", Order: 3})
		if d := frozenFor(first); d != 35*time.Second {
			t.Fatalf("the first host was frozen for %s, want 35s (until the moment)", d)
		}
		w.startPaused(second, "b", lease.Start{Position: "horizon", Generation: "g3", Order: 3, Keep: true})
		if d := frozenFor(second); d != 0 {
			t.Fatalf("a host that wrote a start after the moment froze for %s", d)
		}
	})
}
