package lease_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shardloop/shardloop/pkg/lease"
)

// TestTumblingWindowStoreConformance holds every Store to the same rules for
// tumbling windows: the window and its checkpoint are written in one
// conditional write, read back whole (a state of 1 MB included), and a
// refused write changes neither.
func TestTumblingWindowStoreConformance(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range windowCases {
				t.Run(c.name, func(t *testing.T) {
					clock := newClock()
					c.run(t, t.Context(), st.make(t, clock.Now), clock)
				})
			}
		})
	}
}

func window(seq string, state []byte) lease.Window {
	start := time.UnixMilli(1_800_000_000_000).UTC()
	return lease.Window{Seq: seq, Start: start, End: start.Add(time.Minute), State: state}
}

func sameWindow(t *testing.T, got, want lease.Window) {
	t.Helper()
	if got.Seq != want.Seq || !got.Start.Equal(want.Start) || !got.End.Equal(want.End) || got.Closed != want.Closed || !bytes.Equal(got.State, want.State) {
		t.Fatalf("window = {seq %s %s-%s closed %v state %d bytes}, want {seq %s %s-%s closed %v state %d bytes}",
			got.Seq, got.Start, got.End, got.Closed, len(got.State), want.Seq, want.Start, want.End, want.Closed, len(want.State))
	}
}

var windowCases = []struct {
	name string
	run  func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock)
}{
	{"WindowAndCheckpointWrittenTogether", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		noErr(t)(s.Take(ctx, stream, "s1", "A"))
		if _, err := s.GetWindow(ctx, stream, "s1"); !errors.Is(err, lease.ErrNotFound) {
			t.Fatalf("get window before any = %v, want ErrNotFound", err)
		}
		w := window("100", []byte(`{"a":1}`))
		must(t, s.CheckpointWindow(ctx, stream, "s1", "A", w))
		got, err := s.GetWindow(ctx, stream, "s1")
		must(t, err)
		sameWindow(t, got, w)
		row, err := s.Get(ctx, stream, "s1")
		must(t, err)
		if row.Checkpoint != "100" || row.Owner != "A" {
			t.Fatalf("row = %+v, want checkpoint 100 owner A", row)
		}
		// A later write replaces it; a closed window has no state.
		closed := window("200", nil)
		closed.Closed = true
		must(t, s.CheckpointWindow(ctx, stream, "s1", "A", closed))
		got, err = s.GetWindow(ctx, stream, "s1")
		must(t, err)
		sameWindow(t, got, closed)
	}},
	{"WindowOfOneMegabyteRoundTrips", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		noErr(t)(s.Take(ctx, stream, "s1", "A"))
		big := bytes.Repeat([]byte("0123456789abcdef"), lease.MaxWindowState/16)
		big[0], big[len(big)-1] = '{', '}'
		w := window("100", big)
		must(t, s.CheckpointWindow(ctx, stream, "s1", "A", w))
		got, err := s.GetWindow(ctx, stream, "s1")
		must(t, err)
		sameWindow(t, got, w)
		// A small one after a large one is read as written.
		small := window("101", []byte(`{}`))
		must(t, s.CheckpointWindow(ctx, stream, "s1", "A", small))
		got, err = s.GetWindow(ctx, stream, "s1")
		must(t, err)
		sameWindow(t, got, small)
	}},
	{"WindowOverOneMegabyteRefused", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		noErr(t)(s.Take(ctx, stream, "s1", "A"))
		err := s.CheckpointWindow(ctx, stream, "s1", "A", window("100", make([]byte, lease.MaxWindowState+1)))
		var ie *lease.InvalidError
		if !errors.As(err, &ie) || ie.Field != "window state" {
			t.Fatalf("checkpoint of a state over 1 MB = %v, want an InvalidError naming the window state", err)
		}
		row, err := s.Get(ctx, stream, "s1")
		must(t, err)
		if row.Checkpoint != "" {
			t.Fatalf("checkpoint = %q after a refused write, want none", row.Checkpoint)
		}
	}},
	{"WindowWriteByAnotherOwnerRefusedAndChangesNothing", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		noErr(t)(s.Take(ctx, stream, "s1", "A"))
		w := window("100", []byte(`{"n":1}`))
		must(t, s.CheckpointWindow(ctx, stream, "s1", "A", w))
		noErr(t)(s.Take(ctx, stream, "s1", "B", lease.IfCounter(1)))
		err := s.CheckpointWindow(ctx, stream, "s1", "A", window("200", []byte(`{"n":2}`)))
		if !errors.Is(err, lease.ErrNotOwner) {
			t.Fatalf("window write by the old owner = %v, want ErrNotOwner", err)
		}
		got, err := s.GetWindow(ctx, stream, "s1")
		must(t, err)
		sameWindow(t, got, w)
		row, err := s.Get(ctx, stream, "s1")
		must(t, err)
		if row.Checkpoint != "100" {
			t.Fatalf("checkpoint = %q, want 100", row.Checkpoint)
		}
	}},
	{"WindowWriteRefusedOnRevokedLease", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		noErr(t)(s.Take(ctx, stream, "s1", "A"))
		if _, err := s.SetStart(ctx, stream, "s1", lease.Start{Position: "horizon", Generation: "g2", Order: 2}); err != nil {
			t.Fatal(err)
		}
		if err := s.CheckpointWindow(ctx, stream, "s1", "A", window("100", []byte(`{}`))); !errors.Is(err, lease.ErrNotOwner) {
			t.Fatalf("window write on a revoked lease = %v, want ErrNotOwner", err)
		}
	}},
	{"CheckpointWithoutWindowLeavesWindowBehind", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		noErr(t)(s.Take(ctx, stream, "s1", "A"))
		must(t, s.CheckpointWindow(ctx, stream, "s1", "A", window("100", []byte(`{}`))))
		noErr(t)(s.Checkpoint(ctx, stream, "s1", "A", "150"))
		got, err := s.GetWindow(ctx, stream, "s1")
		must(t, err)
		row, err := s.Get(ctx, stream, "s1")
		must(t, err)
		if got.Seq != "100" || row.Checkpoint != "150" {
			t.Fatalf("window seq %q, row checkpoint %q: want 100 and 150 (the window describes earlier records)", got.Seq, row.Checkpoint)
		}
	}},
}
