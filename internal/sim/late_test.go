package sim

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardloop/shardloop/pkg/lease"
)

// TestStore_AWriteHeldOnItsWayLandsAfterItsCallerGaveUp: a write drawn
// late lands at its time whether its caller waits for the answer or gives
// up first; the caller that gave up gets nothing back, and a write still
// on its way when the world ends does not land.
func TestStore_AWriteHeldOnItsWayLandsAfterItsCallerGaveUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const late = 5 * time.Second
		w := &World{
			cfg: Config{Faults: Faults{Late: 1, LateMin: late, LateMax: late}},
			rnd: newStreams(1), tr: newTracer(time.Now()), began: time.Now(),
		}
		mem, err := lease.NewMemoryStore()
		if err != nil {
			t.Fatal(err)
		}
		w.table = &table{w: w, inner: mem, lastCkpts: map[string][]string{}}
		worldCtx, endWorld := context.WithCancel(context.Background())
		w.ctx = worldCtx
		s := &store{t: w.table, dep: "a"}
		host := withHost(context.Background(), "a#1")
		beats := func() int {
			hbs, err := mem.Runners(context.Background(), "s")
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, hb := range hbs {
				if hb.Counter > 0 {
					n++
				}
			}
			return n
		}

		// A caller that waits gets its answer once the write has landed.
		t0 := time.Now()
		hb, err := s.Beat(host, "s", lease.Heartbeat{Runner: "r1"})
		if err != nil || hb.Counter != 1 || time.Since(t0) < late {
			t.Fatalf("a waited-for late write answered %+v, %v after %s, want counter 1 after %s or more", hb, err, time.Since(t0), late)
		}

		// A caller that gives up first sees its deadline, and the write
		// lands all the same, at its time.
		ctx, cancel := context.WithTimeout(host, time.Second)
		defer cancel()
		hb, err = s.Beat(ctx, "s", lease.Heartbeat{Runner: "r2"})
		if !errors.Is(err, context.DeadlineExceeded) || hb.Counter != 0 {
			t.Fatalf("a late write given up on returned %+v, %v; want nothing and the deadline", hb, err)
		}
		if n := beats(); n != 1 {
			t.Fatalf("%d runners beat as the caller gave up, want 1 (the late write not landed yet)", n)
		}
		time.Sleep(late)
		synctest.Wait()
		if n := beats(); n != 2 {
			t.Fatalf("%d runners beat after the late write's time, want 2", n)
		}

		// A write still on its way when the world ends does not land, and
		// the world's helpers end with it.
		ctx2, cancel2 := context.WithTimeout(host, time.Second)
		defer cancel2()
		if _, err := s.Beat(ctx2, "s", lease.Heartbeat{Runner: "r3"}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a late write given up on returned %v, want the deadline", err)
		}
		endWorld()
		w.bg.Wait()
		if n := beats(); n != 2 {
			t.Fatalf("%d runners beat after the world ended, want 2 (the last write never landed)", n)
		}
	})
}
