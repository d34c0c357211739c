package reader

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/shardloop/shardloop/internal/kinesismem"
	"github.com/shardloop/shardloop/pkg/lease"
)

func countingTarget(n *atomic.Int64, each func()) Target {
	return FuncTarget(func(_ context.Context, b Batch) (int, error) {
		n.Add(int64(len(b.Records)))
		if each != nil {
			each()
		}
		return len(b.Records), nil
	})
}

// TestRun_StreamGone_ARowOfAnEarlierStreamIsReleasedUnread: the shard's row
// was taken under a stream of this name created at another time (its
// incarnation); the stream there now is another one. A run delivers
// nothing under that row: it releases the lease and ends the loop, for the
// coordinator to replace the row under the stream that exists.
func TestRun_StreamGone_ARowOfAnEarlierStreamIsReleasedUnread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemStream(t)
		m.put(t, []string{"a"}, 5)
		if _, err := m.store.Take(t.Context(), m.stream, m.shard, "A", lease.WithIncarnation(12345)); err != nil {
			t.Fatal(err)
		}
		var delivered atomic.Int64
		o := Options{Kinesis: m.k, Store: m.store, Target: countingTarget(&delivered, nil), PollInterval: 200 * time.Millisecond, RunLength: 10 * time.Second}
		st, err := Run(t.Context(), o, m.state("A"))
		if err != nil {
			t.Fatal(err)
		}
		endedUnread(t, m, st, delivered.Load())
	})
}

// TestRun_StreamGone_ADeletedStreamEndsTheRun: the stream is deleted while
// a run reads it. The run ends at its next read, with the lease released
// and what it delivered checkpointed, rather than retry until its length
// is up (and read a stream created again under the same name with this
// row's checkpoint).
func TestRun_StreamGone_ADeletedStreamEndsTheRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemStream(t)
		m.put(t, []string{"a"}, 3)
		var delivered atomic.Int64
		var deleted atomic.Bool
		del := func() {
			if !deleted.Swap(true) {
				if _, err := m.k.DeleteStream(context.Background(), &kinesis.DeleteStreamInput{StreamName: aws.String(m.stream)}); err != nil {
					t.Error(err)
				}
			}
		}
		o := Options{Kinesis: m.k, Store: m.store, Target: countingTarget(&delivered, del), Mapping: Mapping{BatchSize: 3}, PollInterval: 200 * time.Millisecond, RunLength: 5 * time.Minute}
		began := time.Now()
		st, err := Run(t.Context(), o, m.state("A"))
		if err != nil {
			t.Fatal(err)
		}
		if st.Reason != ReasonStreamGone || st.Continue || delivered.Load() != 3 || time.Since(began) > time.Minute {
			t.Fatalf("reason %s continue %v after %s, %d delivered: want %s at once, the loop ended, the 3 records delivered", st.Reason, st.Continue, time.Since(began), delivered.Load(), ReasonStreamGone)
		}
		if row, _ := m.store.Get(t.Context(), m.stream, m.shard); row.Owner != "" || row.Checkpoint != m.seqs[2] {
			t.Fatalf("row %+v: want the lease released at the last record delivered %s", row, m.seqs[2])
		}
	})
}

// pinAnswerLost writes the first pin and loses its answer, as a store
// call that times out after its write landed; put runs in between.
type pinAnswerLost struct {
	*lease.MemoryStore
	pins []string
	put  func()
}

var errAnswerLost = errors.New("answer lost (injected)")

func (s *pinAnswerLost) Pin(ctx context.Context, stream, shardID, owner, start string) (lease.Lease, error) {
	l, err := s.MemoryStore.Pin(ctx, stream, shardID, owner, start)
	s.pins = append(s.pins, start)
	if len(s.pins) == 1 && err == nil {
		s.put()
		return lease.Lease{}, errAnswerLost
	}
	return l, err
}

// TestRun_PinWhoseAnswerWasLostIsSentAgainUnchanged: a reader opening a
// shard at its tip pins the opening on the row first; that write landed,
// its answer was lost, and a record arrived. The retry used to pin a later
// tip, skipping the record, which the row's first pin owed (found by the
// simulator). It sends the same pin again.
func TestRun_PinWhoseAnswerWasLostIsSentAgainUnchanged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemStream(t)
		store := &pinAnswerLost{MemoryStore: m.store}
		store.put = func() {
			time.Sleep(10 * time.Millisecond)
			m.put(t, []string{"a"}, 1)
		}
		// No start on the row: the shard opens at its tip.
		if row, err := m.store.Get(t.Context(), m.stream, m.shard); err != nil {
			t.Fatal(err)
		} else if err := m.store.Delete(t.Context(), m.stream, m.shard, row.Counter, row.Incarnation); err != nil {
			t.Fatal(err)
		}
		var delivered atomic.Int64
		o := Options{Kinesis: m.k, Store: store, Target: countingTarget(&delivered, nil), PollInterval: 200 * time.Millisecond,
			RunLength: 10 * time.Second, ReadErrorWait: 3 * time.Second}
		if _, err := Run(t.Context(), o, m.state("A")); err != nil {
			t.Fatal(err)
		}
		if len(store.pins) < 2 || store.pins[1] != store.pins[0] || delivered.Load() != 1 {
			t.Fatalf("pins %q, %d delivered: want the lost pin sent again unchanged and the record after it delivered", store.pins, delivered.Load())
		}
	})
}

// TestRun_ALoopOfAnEarlierStreamDoesNotReadTheNewOnesShard: the stream was
// deleted and created again, and its shard ids are used anew. A loop that
// read shard X of the earlier stream must not take the row of the new
// stream's X (a coordinator wrote it afresh, without the parents it may
// have) and read it: that shard's parents may not be read yet. The loop's
// state remembers the incarnation of its row; a run that finds the row of
// another one releases it unread and ends the loop. The simulator's world
// 1371: such a run delivered a child of the new stream before its parent
// was read to its end.
func TestRun_ALoopOfAnEarlierStreamDoesNotReadTheNewOnesShard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemStream(t)
		m.put(t, []string{"a"}, 5)
		created := m.created(t)
		if _, err := m.store.Take(t.Context(), m.stream, m.shard, "A", lease.WithIncarnation(created)); err != nil {
			t.Fatal(err)
		}
		var delivered atomic.Int64
		o := Options{Kinesis: m.k, Store: m.store, Target: countingTarget(&delivered, nil), PollInterval: 200 * time.Millisecond, RunLength: 10 * time.Second}
		earlier := m.state("A")
		earlier.Incarnation = created - 60_000
		st, err := Run(t.Context(), o, earlier)
		if err != nil {
			t.Fatal(err)
		}
		endedUnread(t, m, st, delivered.Load())

		// A loop of this stream reads on, and its state carries the row's
		// incarnation to the next run.
		if _, err := m.store.Take(t.Context(), m.stream, m.shard, "B", lease.WithIncarnation(created)); err != nil {
			t.Fatal(err)
		}
		o.RunLength = 2 * time.Second
		st, err = Run(t.Context(), o, m.state("B"))
		if err != nil {
			t.Fatal(err)
		}
		if st.Reason == ReasonStreamGone || delivered.Load() != 5 || st.Incarnation != created {
			t.Fatalf("reason %s, %d delivered, incarnation %d: want the 5 records delivered and incarnation %d carried on", st.Reason, delivered.Load(), st.Incarnation, created)
		}
	})
}

// TestRun_ALoopOfAnEarlierStreamDoesNotRecreateItsDeletedRow: the loop
// read a shard of a stream since deleted and created again; the
// coordinator deleted the old stream's row as stale. The loop's next run
// finds no row and takes it afresh, as it may; the fresh row names no
// incarnation, so the run judges it by the one its state carries, and
// releases it unread. The simulator's world 4246: the run read the new
// stream's shard of that id, a child of a merge, from its tip before its
// parents were read to their end.
func TestRun_ALoopOfAnEarlierStreamDoesNotRecreateItsDeletedRow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemStream(t)
		m.put(t, []string{"a"}, 5)
		created := m.created(t)
		var delivered atomic.Int64
		o := Options{Kinesis: m.k, Store: m.store, Target: countingTarget(&delivered, nil), PollInterval: 200 * time.Millisecond, RunLength: 10 * time.Second}
		earlier := m.state("A")
		earlier.Incarnation = created - 60_000
		st, err := Run(t.Context(), o, earlier)
		if err != nil {
			t.Fatal(err)
		}
		endedUnread(t, m, st, delivered.Load())

		// Nor when the stream cannot be described: a fresh row says
		// nothing of the stream it is for, so the run does not read on.
		row, _ := m.store.Get(t.Context(), m.stream, m.shard)
		if err := m.store.Delete(t.Context(), m.stream, m.shard, row.Counter, row.Incarnation); err != nil {
			t.Fatal(err)
		}
		o.Kinesis = describeFails{m.k}
		if st, err = Run(t.Context(), o, earlier); err != nil {
			t.Fatal(err)
		}
		endedUnread(t, m, st, delivered.Load())
	})
}

// describeFails is a Kinesis whose DescribeStreamSummary always fails.
type describeFails struct{ *kinesismem.Client }

func (describeFails) DescribeStreamSummary(context.Context, *kinesis.DescribeStreamSummaryInput, ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	return nil, errors.New("describe: throttled (injected)")
}

// created is the stream's creation time (Unix ms): its incarnation.
func (m *memStream) created(t *testing.T) int64 {
	t.Helper()
	sum, err := m.k.DescribeStreamSummary(t.Context(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(m.stream)})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToTime(sum.StreamDescriptionSummary.StreamCreationTimestamp).UnixMilli()
}

// endedUnread fails t unless the run ended the loop (stream_gone),
// delivered nothing and released the lease.
func endedUnread(t *testing.T, m *memStream, st State, delivered int64) {
	t.Helper()
	if st.Reason != ReasonStreamGone || st.Continue || delivered != 0 {
		t.Fatalf("reason %s continue %v, %d delivered: want %s, the loop ended, nothing delivered", st.Reason, st.Continue, delivered, ReasonStreamGone)
	}
	if row, _ := m.store.Get(t.Context(), m.stream, m.shard); row.Owner != "" {
		t.Fatalf("row %+v: want the lease released", row)
	}
}
