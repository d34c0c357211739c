package reader

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/shardloop/shardloop/pkg/lease"
)

// invocation is one call a windowCounter received.
type invocation struct {
	start, end   time.Time
	data         []string
	in           map[string]string
	final, early bool
}

// windowCounter is a stock tumbling-window handler: it counts the window's
// records in its state ({"count": "<n>"}, strings as aws-lambda-go's
// map[string]string wants) and keeps every invocation it got.
type windowCounter struct {
	mu    sync.Mutex
	calls []invocation
	// noState, when set, makes the answer to call i (from 0) carry no state.
	noState func(i int) bool
}

func (w *windowCounter) DeliverWindow(ctx context.Context, b WindowBatch) (int, json.RawMessage, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	inv := invocation{start: b.Window.Start, end: b.Window.End, final: b.Final, early: b.TerminatedEarly, in: map[string]string{}}
	if err := json.Unmarshal(b.State, &inv.in); err != nil {
		return 0, nil, err
	}
	for _, r := range b.Records {
		inv.data = append(inv.data, string(r.Data))
	}
	i := len(w.calls)
	w.calls = append(w.calls, inv)
	if w.noState != nil && w.noState(i) {
		return len(b.Records), nil, nil
	}
	n, _ := strconv.Atoi(inv.in["count"])
	out, _ := json.Marshal(map[string]string{"count": strconv.Itoa(n + len(b.Records))})
	return len(b.Records), out, nil
}

func (w *windowCounter) Deliver(context.Context, Batch) (int, error) {
	return 0, errors.New("windowCounter needs a window")
}

func (w *windowCounter) all() []invocation {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]invocation(nil), w.calls...)
}

func (w *windowCounter) finals() []invocation {
	var out []invocation
	for _, c := range w.all() {
		if c.final {
			out = append(out, c)
		}
	}
	return out
}

// countOrEmpty is the count a window's state holds after n records: none
// before the first.
func countOrEmpty(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

func memWindowOpts(m *memStream, tgt Target, window time.Duration) Options {
	return Options{
		Kinesis: m.k, Store: m.store, Target: tgt, Mapping: Mapping{
			TumblingWindow: window,
			BatchSize:      2,
		},
		PollInterval: 200 * time.Millisecond, RunLength: 10 * time.Second,
		RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond,
	}
}

// TestTumblingWindow_StateCarriesAcrossInvocationsAndAFinalInvokeClosesEachWindow:
// records of two windows read at once are delivered in batches that never
// span the two; each invocation gets the state the previous one of its
// window returned; the first window's final invocation (no records, its
// last state) comes before the second window's first batch, which starts
// from {}; the second window is closed on time once the shard is read at its
// tip after its end.
func TestTumblingWindow_StateCarriesAcrossInvocationsAndAFinalInvokeClosesEachWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemStream(t)
		m.put(t, []string{"a"}, 3)
		time.Sleep(2500 * time.Millisecond) // into the next 2 s window
		m.put(t, []string{"b"}, 2)
		tgt := &windowCounter{}
		st, err := Run(t.Context(), memWindowOpts(m, tgt, 2*time.Second), m.state("A"))
		if err != nil {
			t.Fatal(err)
		}
		if st.Reason != ReasonContinue {
			t.Fatalf("reason %s", st.Reason)
		}
		// How the reads cut each window's records into batches depends on
		// when the read ahead lands (batches of at most 2, never across the
		// windows): check per window that the records arrive in order, each
		// invocation gets the count the previous returned, and one final
		// invocation, with the window's whole count, comes last.
		calls := tgt.all()
		windows := [][]string{{"a|0", "a|1", "a|2"}, {"b|3", "b|4"}}
		i := 0
		for wi, want := range windows {
			var got []string
			start := calls[min(i, len(calls)-1)].start
			for ; i < len(calls) && !calls[i].final; i++ {
				c := calls[i]
				if c.in["count"] != countOrEmpty(len(got)) || len(c.data) == 0 || len(c.data) > 2 || !c.start.Equal(start) {
					t.Fatalf("window %d, invocation %d = %+v: want 1-2 records of the window starting %s, state in count %q", wi, i, c, start, countOrEmpty(len(got)))
				}
				got = append(got, c.data...)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("window %d got %q, want %q: %+v", wi, got, want, calls)
			}
			if i >= len(calls) || calls[i].in["count"] != strconv.Itoa(len(want)) || len(calls[i].data) != 0 || calls[i].early || !calls[i].start.Equal(start) {
				t.Fatalf("window %d: want a final invocation with count %d and no records after its batches: %+v", wi, len(want), calls)
			}
			if c := calls[i]; c.end.Sub(c.start) != 2*time.Second || c.start.UnixMilli()%2000 != 0 {
				t.Fatalf("window %d %s-%s, want 2 s aligned on the epoch", wi, c.start, c.end)
			}
			i++
		}
		if i != len(calls) {
			t.Fatalf("%d invocations after the two windows closed: %+v", len(calls)-i, calls[i:])
		}
		if second, first := calls[len(calls)-1].start, calls[0].start; !second.After(first) {
			t.Fatalf("second window %s not after the first %s", second, first)
		}
		// The last record's checkpoint is on the row, with the closed window.
		w, err := m.store.GetWindow(t.Context(), m.stream, m.shard)
		if err != nil {
			t.Fatal(err)
		}
		if w.Seq != m.seqs[4] || !w.Closed || w.State != nil || st.Checkpoint != m.seqs[4] {
			t.Fatalf("window on the row = %+v (checkpoint %s), want the last record's, closed", w, st.Checkpoint)
		}
	})
}

// TestTumblingWindow_ASplitEndsTheWindowEarly: a shard that ends (a split)
// before its window does gets the window's final invocation with
// isWindowTerminatedEarly, then SHARD_END.
func TestTumblingWindow_ASplitEndsTheWindowEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemStream(t)
		m.put(t, []string{"a"}, 3)
		m.close(t)
		tgt := &windowCounter{}
		st, err := Run(t.Context(), memWindowOpts(m, tgt, 15*time.Minute), m.state("A"))
		if err != nil {
			t.Fatal(err)
		}
		if st.Reason != ReasonShardEnd {
			t.Fatalf("reason %s, want shard_end", st.Reason)
		}
		fs := tgt.finals()
		if len(fs) != 1 || !fs[0].early || fs[0].in["count"] != "3" || len(fs[0].data) != 0 {
			t.Fatalf("finals = %+v, want one, terminated early, with count 3", fs)
		}
		if row, _ := m.store.Get(t.Context(), m.stream, m.shard); row.Checkpoint != lease.ShardEnd {
			t.Fatalf("checkpoint %q, want SHARD_END", row.Checkpoint)
		}
	})
}

// TestTumblingWindow_AnAnswerWithoutStateIsAFailure: an answer without a
// state fails the invocation (as Lambda's trigger counts it): nothing
// settles, and the records are delivered again with the state as it was.
func TestTumblingWindow_AnAnswerWithoutStateIsAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemStream(t)
		m.put(t, []string{"a"}, 2)
		tgt := &windowCounter{noState: func(i int) bool { return i == 0 }}
		var hooks recHooks
		o := memWindowOpts(m, tgt, 15*time.Minute)
		o.Hooks = &hooks
		if _, err := Run(t.Context(), o, m.state("A")); err != nil {
			t.Fatal(err)
		}
		calls := tgt.all()
		if len(calls) != 2 || len(calls[0].data) != 2 || len(calls[1].data) != 2 || calls[1].in["count"] != "" {
			t.Fatalf("invocations %+v, want the same two records twice, both from {}", calls)
		}
		w, err := m.store.GetWindow(t.Context(), m.stream, m.shard)
		if err != nil || string(w.State) != `{"count":"2"}` || w.Seq != m.seqs[1] {
			t.Fatalf("window %+v (%v), want count 2 at the last record", w, err)
		}
	})
}

// TestTumblingWindow_LambdaAnswerWithoutStateIsAFailure: the Lambda target
// refuses an answer with no state, a null one or one that is not an object,
// and reads one that has it.
func TestTumblingWindow_LambdaAnswerWithoutStateIsAFailure(t *testing.T) {
	b := WindowBatch{Batch: Batch{ShardID: "shardId-000000000000", StreamARN: "arn:aws:kinesis:us-east-1:123456789012:stream/s"},
		Window: Window{Start: time.Unix(1800000000, 0), End: time.Unix(1800000060, 0)}, State: json.RawMessage(`{}`)}
	for _, c := range []struct {
		answer string
		ok     bool
	}{
		{``, false}, {`{}`, false}, {`{"batchItemFailures":[]}`, false}, {`{"state":null}`, false}, {`{"state":[1]}`, false},
		{`{"state":{}}`, true}, {`{"state":{"1":"282"},"batchItemFailures":[]}`, true},
	} {
		var sent []byte
		tgt, err := NewLambdaTarget(invokeFunc(func(_ context.Context, in *lambda.InvokeInput) (*lambda.InvokeOutput, error) {
			sent = in.Payload
			return &lambda.InvokeOutput{StatusCode: 200, Payload: []byte(c.answer)}, nil
		}), "f", func(o *LambdaOptions) { o.Region = "us-east-1" })
		if err != nil {
			t.Fatal(err)
		}
		_, state, err := tgt.DeliverWindow(t.Context(), b)
		if c.ok != (err == nil) || (!c.ok && !errors.Is(err, ErrNoState)) {
			t.Fatalf("answer %q: state %s, err %v; want ok %v (else ErrNoState)", c.answer, state, err, c.ok)
		}
		want := `{"Records":[],"window":{"start":"2027-01-15T08:00:00Z","end":"2027-01-15T08:01:00Z"},"state":{},"shardId":"shardId-000000000000",` +
			`"eventSourceARN":"arn:aws:kinesis:us-east-1:123456789012:stream/s","isFinalInvokeForWindow":false,"isWindowTerminatedEarly":false}`
		if string(sent) != want {
			t.Fatalf("payload\n%s\nwant\n%s", sent, want)
		}
	}
}

// TestTumblingWindow_BadSettingsFailValidationNamingTheField: a window
// outside 1 s to 900 s, or not whole seconds, and the combinations Lambda's
// trigger refuses, are refused before anything is read.
func TestTumblingWindow_BadSettingsFailValidationNamingTheField(t *testing.T) {
	m := newMemStream(t)
	for _, c := range []struct {
		window time.Duration
		factor int
		target Target
		field  string
	}{
		{901 * time.Second, 1, &windowCounter{}, "TumblingWindow"},
		{-time.Second, 1, &windowCounter{}, "TumblingWindow"},
		{1500 * time.Millisecond, 1, &windowCounter{}, "TumblingWindow"},
		{time.Minute, 2, &windowCounter{}, "ParallelizationFactor"},
		{time.Minute, 1, FuncTarget(func(context.Context, Batch) (int, error) { return 0, nil }), "Target"},
	} {
		o := memWindowOpts(m, c.target, c.window)
		o.ParallelizationFactor = c.factor
		_, err := Run(t.Context(), o, m.state("A"))
		var ie *InvalidError
		if !errors.As(err, &ie) || ie.Field != c.field {
			t.Fatalf("window %s factor %d: err %v, want an InvalidError naming %s", c.window, c.factor, err, c.field)
		}
	}
	for _, w := range []time.Duration{time.Second, MaxTumblingWindow} {
		o := memWindowOpts(m, &windowCounter{}, w)
		o.setDefaults()
		if err := o.validate(); err != nil {
			t.Fatalf("window %s refused: %v", w, err)
		}
	}
}

// TestTumblingWindow_StateSurvivesRunsAndATakeover runs on kinesis-local and
// dynalite: the state a run leaves in the table is what the loop's next
// run, and then another owner after a takeover, resume the window with.
func TestTumblingWindow_StateSurvivesRunsAndATakeover(t *testing.T) {
	e := newEnv(t, 1)
	shard := e.shards[0]
	e.setStart(t, shard, "horizon")
	// Keep clear of a 15-minute window's end, so all of it is one window.
	if left := MaxTumblingWindow - time.Duration(time.Now().UnixMilli()%MaxTumblingWindow.Milliseconds())*time.Millisecond; left < 20*time.Second {
		time.Sleep(left + time.Second)
	}
	tgt := &windowCounter{}
	o := e.opts(tgt)
	o.TumblingWindow = MaxTumblingWindow
	o.BatchSize = 2
	counted := func(n int) func() bool {
		return func() bool {
			w, err := e.store.GetWindow(t.Context(), e.stream, shard)
			return err == nil && string(w.State) == `{"count":"`+strconv.Itoa(n)+`"}`
		}
	}

	e.putN(t, "a", 3)
	st := runUntil(t, o, e.state(shard, "A"), counted(3))
	e.putN(t, "b", 2)
	st = runUntil(t, o, st, counted(5)) // the loop's next runs
	if st.Checkpoint == "" || !st.Continue {
		t.Fatalf("state %+v", st)
	}
	// A takeover: A's row is released, B (a loop of its own, with nothing
	// in its payload) takes it and resumes after the checkpoint with the
	// state that belongs to it.
	row := e.row(t, shard)
	if err := e.store.Release(t.Context(), e.stream, shard, row.Owner, lease.Handover{}); err != nil {
		t.Fatal(err)
	}
	e.putN(t, "c", 1)
	runUntil(t, o, e.state(shard, "B"), counted(6))

	var ins []string
	for _, c := range tgt.all() {
		if c.final {
			t.Fatalf("a final invocation in one open window: %+v", c)
		}
		ins = append(ins, c.in["count"])
	}
	// Batches of at most 2: 3 records (0, 2), 2 more (3), then B's one (5).
	want := []string{"", "2", "3", "5"}
	if len(ins) != len(want) {
		t.Fatalf("states in %q, want %q", ins, want)
	}
	for i := range want {
		if ins[i] != want[i] {
			t.Fatalf("states in %q, want %q", ins, want)
		}
	}
}

// failingWindows is a memory store whose window checkpoints fail (before
// the write) while fail is set.
type failingWindows struct {
	*lease.MemoryStore
	mu   sync.Mutex
	fail bool
}

func (f *failingWindows) CheckpointWindow(ctx context.Context, stream, shardID, owner string, w lease.Window) error {
	f.mu.Lock()
	fail := f.fail
	f.mu.Unlock()
	if fail {
		return errors.New("store unavailable")
	}
	return f.MemoryStore.CheckpointWindow(ctx, stream, shardID, owner, w)
}

// TestTumblingWindow_ARunEndingBehindItsWindowHandsOnNoIterator: a run whose
// last window checkpoints failed ends with records settled past the
// checkpoint, their fold only in its memory. The next run resumes with the
// window written at the checkpoint, so it must read those records again
// (not continue from the run's iterator past them): else the window loses
// them.
func TestTumblingWindow_ARunEndingBehindItsWindowHandsOnNoIterator(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemStream(t)
		st := &failingWindows{MemoryStore: m.store}
		tgt := &windowCounter{}
		o := memWindowOpts(m, tgt, MaxTumblingWindow) // virtual time starts on a 15-minute boundary
		o.Store = st
		o.RetryMin, o.RetryMax = time.Second, time.Second
		m.put(t, []string{"a"}, 2)
		out, err := Run(t.Context(), o, m.state("A"))
		if err != nil {
			t.Fatal(err)
		}
		// Two more records, whose window checkpoints fail to the run's end.
		st.mu.Lock()
		st.fail = true
		st.mu.Unlock()
		m.put(t, []string{"b"}, 2)
		if out, err = Run(t.Context(), o, out); err != nil {
			t.Fatal(err)
		}
		if row, _ := m.store.Get(t.Context(), m.stream, m.shard); row.Checkpoint != m.seqs[1] {
			t.Fatalf("checkpoint %s, want the second record's (the later writes failed)", row.Checkpoint)
		}
		st.mu.Lock()
		st.fail = false
		st.mu.Unlock()
		m.put(t, []string{"c"}, 1)
		if _, err = Run(t.Context(), o, out); err != nil {
			t.Fatal(err)
		}
		w, err := m.store.GetWindow(t.Context(), m.stream, m.shard)
		if err != nil {
			t.Fatal(err)
		}
		var state map[string]string
		_ = json.Unmarshal(w.State, &state)
		// Records 2 and 3 are folded again from the checkpointed state (2):
		// at least once, 5 folds in all, 4 of them distinct.
		if w.Seq != m.seqs[4] || state["count"] != "5" {
			t.Fatalf("window on the row %+v (state %s), want the fifth record's with a count of 5 (records 2 and 3 folded again after the failed writes); invocations %+v", w.Seq, w.State, tgt.all())
		}
	})
}

// unreadableWindows is a memory store whose recorded window cannot be read
// while unreadable is set (as a DynamoDB row naming a chunk item that is
// gone).
type unreadableWindows struct {
	*lease.MemoryStore
	mu         sync.Mutex
	unreadable bool
}

func (u *unreadableWindows) GetWindow(ctx context.Context, stream, shardID string) (lease.Window, error) {
	u.mu.Lock()
	unreadable := u.unreadable
	u.mu.Unlock()
	if unreadable {
		return lease.Window{}, fmt.Errorf("get window of %s: chunk 0 of version 0123 is missing: %w", lease.Key(stream, shardID), lease.ErrWindowUnreadable)
	}
	return u.MemoryStore.GetWindow(ctx, stream, shardID)
}

// lostWindows counts WindowStateLost.
type lostWindows struct {
	NopHooks
	mu sync.Mutex
	n  int
}

func (l *lostWindows) WindowStateLost(stream, shardID string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if errors.Is(err, lease.ErrWindowUnreadable) {
		l.n++
	}
}

// TestTumblingWindow_AnUnreadableWindowRestartsItAndTheShardReadsOn: a run
// that finds the recorded window unreadable does not fail to start (every
// later run would fail the same way): it counts the loss and opens the
// window the next record falls in afresh, with the same bounds and an
// empty state, as the trigger does when it loses a window's state.
func TestTumblingWindow_AnUnreadableWindowRestartsItAndTheShardReadsOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemStream(t)
		st := &unreadableWindows{MemoryStore: m.store}
		hooks := &lostWindows{}
		tgt := &windowCounter{}
		o := memWindowOpts(m, tgt, MaxTumblingWindow) // virtual time starts on a 15-minute boundary
		o.Store, o.Hooks = st, hooks
		m.put(t, []string{"a"}, 2)
		out, err := Run(t.Context(), o, m.state("A"))
		if err != nil {
			t.Fatal(err)
		}
		st.mu.Lock()
		st.unreadable = true
		st.mu.Unlock()
		m.put(t, []string{"b"}, 1)
		if out, err = Run(t.Context(), o, out); err != nil {
			t.Fatalf("run over an unreadable window = %v, want it to read on", err)
		}
		if out.Checkpoint != m.seqs[2] {
			t.Fatalf("checkpoint %s, want the third record's", out.Checkpoint)
		}
		calls := tgt.all()
		last := calls[len(calls)-1]
		if last.final || len(last.data) != 1 || last.data[0] != "b|2" || last.in["count"] != "" || !last.start.Equal(calls[0].start) || !last.end.Equal(calls[0].end) {
			t.Fatalf("invocation after the unreadable window = %+v, want record b|2 with an empty state in the window %s-%s", last, calls[0].start, calls[0].end)
		}
		hooks.mu.Lock()
		n := hooks.n
		hooks.mu.Unlock()
		if n != 1 {
			t.Fatalf("WindowStateLost called %d times, want once", n)
		}
		w, err := m.store.GetWindow(t.Context(), m.stream, m.shard)
		if err != nil {
			t.Fatal(err)
		}
		if w.Seq != m.seqs[2] || string(w.State) != `{"count":"1"}` {
			t.Fatalf("window on the row %s %s, want the third record's with a count of 1", w.Seq, w.State)
		}
	})
}

// restamp is a Kinesis whose reads stamp the records whose data starts with
// "late" as arrived at at: a record Kinesis stamped inside a window that
// became readable only after the reader had seen the tip past it.
type restamp struct {
	KinesisAPI KinesisAPI
	at         time.Time
}

// DescribeStreamSummary passes on.
func (k *restamp) DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	return k.KinesisAPI.DescribeStreamSummary(ctx, in, optFns...)
}

func (k *restamp) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, fns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	out, err := k.KinesisAPI.GetRecords(ctx, in, fns...)
	if err != nil || out == nil {
		return out, err
	}
	cp := *out
	cp.Records = slices.Clone(out.Records)
	for i, r := range cp.Records {
		if bytes.HasPrefix(r.Data, []byte("late")) {
			cp.Records[i].ApproximateArrivalTimestamp = aws.Time(k.at)
		}
	}
	return &cp, nil
}

func (k *restamp) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	return k.KinesisAPI.GetShardIterator(ctx, in, optFns...)
}

// TestTumblingWindow_ALateRecordInAClosedWindowGoesToTheNextWindow: a window
// closed at the tip is never reopened. A record stamped inside it that is
// read afterwards (in the same run, or in the next one, which loads the
// closed window from the row) goes to the window that starts at the closed
// one's end, with that window's state: the handler sees each window's
// bounds in one stretch of invocations ending in its one final invocation.
func TestTumblingWindow_ALateRecordInAClosedWindowGoesToTheNextWindow(t *testing.T) {
	for _, nextRun := range []bool{false, true} {
		t.Run(fmt.Sprintf("nextRun=%v", nextRun), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const w = 2 * time.Second
				t0 := time.Now().Truncate(w)
				m := newMemStream(t)
				m.put(t, []string{"a"}, 2)
				tgt := &windowCounter{}
				o := memWindowOpts(m, tgt, w)
				o.Kinesis = &restamp{KinesisAPI: m.k, at: t0.Add(w / 2)}
				var logs logBuffer
				o.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
				if nextRun {
					o.RunLength = 5 * time.Second
				}
				type result struct {
					st  State
					err error
				}
				done := make(chan result, 1)
				go func() {
					st, err := Run(t.Context(), o, m.state("A"))
					done <- result{st, err}
				}()
				// The first window is closed at the tip (a second past its end).
				for len(tgt.finals()) == 0 {
					time.Sleep(100 * time.Millisecond)
				}
				if !nextRun {
					m.put(t, []string{"late", "a"}, 2)
				}
				res := <-done
				if res.err != nil {
					t.Fatal(res.err)
				}
				if nextRun {
					m.put(t, []string{"late", "a"}, 2)
					o.RunLength = 10 * time.Second
					if res.st, res.err = Run(t.Context(), o, res.st); res.err != nil {
						t.Fatal(res.err)
					}
				}
				calls := tgt.all()
				// Each window's invocations are one stretch, its records
				// counted in order from {}, closed by one final invocation.
				seen := map[time.Time]bool{}
				var delivered []string
				for i := 0; i < len(calls); {
					start, n := calls[i].start, 0
					if seen[start] {
						t.Fatalf("window %s seen again at invocation %d: %+v", start, i, calls)
					}
					seen[start] = true
					for ; i < len(calls) && calls[i].start.Equal(start) && !calls[i].final; i++ {
						if calls[i].in["count"] != countOrEmpty(n) {
							t.Fatalf("invocation %d of window %s got count %q, want %q: %+v", i, start, calls[i].in["count"], countOrEmpty(n), calls)
						}
						n += len(calls[i].data)
						delivered = append(delivered, calls[i].data...)
						if start.Equal(t0.Add(w)) && slices.Contains(calls[i].data, "late|2") {
							seen[time.Time{}] = true // the late record went to the next window
						}
					}
					if i == len(calls) || !calls[i].start.Equal(start) || calls[i].in["count"] != strconv.Itoa(n) {
						t.Fatalf("window %s: want a final invocation with count %d after its %d records: %+v", start, n, n, calls)
					}
					i++
				}
				if want := []string{"a|0", "a|1", "late|2", "a|3"}; !slices.Equal(delivered, want) {
					t.Fatalf("delivered %q, want %q", delivered, want)
				}
				if !seen[time.Time{}] {
					t.Fatalf("the late record was not delivered in the window after the closed one (%s): %+v", t0.Add(w), calls)
				}
				late := 0.0
				for _, l := range logs.lines(t, "INFO") {
					if n, ok := l["window_late_records"].(float64); ok {
						late += n
					}
				}
				if late != 1 {
					t.Fatalf("window_late_records logged %v in all, want 1", late)
				}
			})
		})
	}
}

// TestTumblingWindow_PlaceAndCut: where a record's window goes given the
// shard's last window (a closed window is never reopened: its records go to
// the next one), and how a batch is cut with that rule.
func TestTumblingWindow_PlaceAndCut(t *testing.T) {
	const w = 2 * time.Second
	t0 := time.Unix(1800000000, 0).UTC() // aligned on 2 s
	at := func(d time.Duration) unit {
		return unit{kin: types.Record{ApproximateArrivalTimestamp: aws.Time(t0.Add(d))}}
	}
	open := winState{open: true, start: t0, end: t0.Add(w), state: emptyState}
	closed := winState{open: true, start: t0, end: t0.Add(w), closed: true}
	for _, c := range []struct {
		name  string
		win   winState
		us    []unit
		start time.Time // place of us[0]'s window
		cut   int
	}{
		{"no window yet", winState{}, []unit{at(time.Second), at(3 * time.Second)}, t0, 1},
		{"open: its own record", open, []unit{at(time.Second), at(1500 * time.Millisecond)}, t0, 2},
		{"open: an earlier record keeps its own start (enterWindow puts it in the open window)", open, []unit{at(-time.Second)}, t0.Add(-w), 1},
		{"closed: a late record goes to the next window, with the next window's records", closed, []unit{at(time.Second), at(3 * time.Second)}, t0.Add(w), 2},
		{"closed: a record stamped before it too", closed, []unit{at(-3 * time.Second), at(2 * time.Second)}, t0.Add(w), 2},
		{"closed: the window after the next is cut off", closed, []unit{at(time.Second), at(4 * time.Second)}, t0.Add(w), 1},
		{"closed: a later record keeps its own window", closed, []unit{at(5 * time.Second)}, t0.Add(2 * w), 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &run{o: Options{Mapping: Mapping{TumblingWindow: w}, Clock: time.Now}, win: c.win}
			if got := c.win.place(r.windowStart(c.us[0])); !got.Equal(c.start) {
				t.Errorf("place = %s, want %s", got, c.start)
			}
			if got := r.windowCut(c.us); got != c.cut {
				t.Errorf("windowCut = %d, want %d", got, c.cut)
			}
		})
	}
}
