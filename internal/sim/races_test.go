package sim

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
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
