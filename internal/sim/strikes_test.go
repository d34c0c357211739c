package sim

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestStrikes_WaitForTheirMoment: a strike armed in a deployment strikes
// the first host of that deployment to meet its moment, once, and a
// struck host's invocations run as the strike says.
func TestStrikes_WaitForTheirMoment(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &World{
			cfg: Config{Reader: ReaderConfig{Lease: 10 * time.Second, Renew: 3 * time.Second, FunctionTimeout: 8 * time.Second},
				Deployments: []Deployment{{Name: "a"}, {Name: "b"}}},
			rnd: newStreams(1), tr: newTracer(time.Now()),
		}
		a1, a2 := withHost(context.Background(), "a#1"), withHost(context.Background(), "a#2")
		const fast = 50 * time.Millisecond
		invoke := func(ctx context.Context, dep, shard string) time.Duration {
			lat, ended := w.strikeInvocation(ctx, dep, shard, fast)
			ended()
			return lat
		}
		struck := func(host string) bool { return w.cutOff(withHost(context.Background(), host), "store") }

		// Nothing armed: nothing strikes.
		if lat := invoke(a1, "a", "s1"); lat != fast {
			t.Fatalf("an invocation with no strike armed ran %s, want %s", lat, fast)
		}
		// A quiet strike waits for a quiet spell on a shard, in its own
		// deployment.
		w.armStrike(Event{Kind: Strike, Deployment: 0, Start: "quiet", Pick: 0.5, Pause: 15 * time.Second})
		time.Sleep(time.Second)
		if lat := invoke(a1, "a", "s1"); lat != fast || struck("a#1") {
			t.Fatalf("an invocation 1 s after the last one was struck (ran %s)", lat)
		}
		if lat := invoke(a1, "b", "s2"); lat != fast {
			t.Fatalf("deployment b's invocation met a's strike (ran %s)", lat)
		}
		time.Sleep(6 * time.Second)
		lat := invoke(a2, "a", "s1")
		if lat < 4*time.Second || lat > 8*time.Second || !struck("a#2") || struck("a#1") {
			t.Fatalf("the invocation after a quiet spell ran %s (want half to all of 8s), a#2 cut off %v, a#1 %v", lat, struck("a#2"), struck("a#1"))
		}
		time.Sleep(7 * time.Second)
		if lat := invoke(a1, "a", "s1"); lat != fast {
			t.Fatalf("a strike struck twice (ran %s)", lat)
		}
		// A brown-out strikes the next invocation, which times out; about
		// one in two of the host's invocations time out until it ends.
		w.armStrike(Event{Kind: Strike, Deployment: 0, Start: "brownout", Pause: 12 * time.Second})
		if lat := invoke(a1, "a", "s3"); lat <= 8*time.Second || !struck("a#1") {
			t.Fatalf("the invocation a brown-out struck ran %s, want past the 8s timeout; cut off %v", lat, struck("a#1"))
		}
		hungOf := func(ctx context.Context, shard string) int {
			n := 0
			for range 10 {
				time.Sleep(time.Second / 2)
				if invoke(ctx, "a", shard) > 8*time.Second {
					n++
				}
			}
			return n
		}
		if hung := hungOf(a1, "s3"); hung == 0 || hung == 10 || !struck("a#1") {
			t.Fatalf("%d of 10 invocations in a brown-out timed out, want some; cut off %v", hung, struck("a#1"))
		}
		time.Sleep(8 * time.Second)
		if lat := invoke(a1, "a", "s3"); lat != fast || struck("a#1") {
			t.Fatalf("after the brown-out an invocation ran %s; cut off %v", lat, struck("a#1"))
		}
		// A renewal strike makes the answer late, within the call's
		// deadline, and starts a brown-out.
		w.armStrike(Event{Kind: Strike, Deployment: 0, Start: "renewal", Pause: 12 * time.Second})
		if after := w.strikeRenewal(a2, "a", "s1", 0, time.Now().Add(time.Second)); after != 0 {
			t.Fatalf("a renewal whose call ends within the margin was answered after %s", after)
		}
		dl := time.Now().Add(3 * time.Second)
		after := w.strikeRenewal(a2, "a", "s1", 0, dl)
		if after <= time.Second || after >= 3*time.Second || !struck("a#2") {
			t.Fatalf("a struck renewal was answered after %s (want past the 1s margin, before its 3s deadline); cut off %v", after, struck("a#2"))
		}
		if hung := hungOf(a2, "s1"); hung == 0 || hung == 10 {
			t.Fatalf("%d of 10 invocations after a struck renewal timed out, want some (a brown-out)", hung)
		}
	})
}
