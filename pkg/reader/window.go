package reader

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/shardloop/shardloop/pkg/lease"
)

// Tumbling windows (Options.TumblingWindow), as Lambda's Kinesis trigger has
// them (TumblingWindowInSeconds): each record of a shard belongs to the
// window of its arrival time, [k·W, (k+1)·W) since the Unix epoch (or,
// read after that window was closed, to the next one: winState.place); the
// target gets the window's state with each batch and answers the next one;
// a batch never spans two windows; when the window is over, a final
// invocation (isFinalInvokeForWindow, no records) hands the target the last
// state, which is then dropped. docs/failure-policy.md has the rules.
//
// The state lives beside the lease row (lease.HolderStore.CheckpointWindow),
// written in the conditional write that moves the checkpoint to the last
// record folded into it, so after a takeover the new owner resumes with the
// state that matches its checkpoint. None of it rides in the loop's payload.

// MaxTumblingWindow is the longest TumblingWindow, as Lambda's (900 s).
const MaxTumblingWindow = 900 * time.Second

// MaxWindowState is the largest state a target may return for a window, as
// Lambda's trigger allows (1 MB a shard). A larger one ends the window
// early (isWindowTerminatedEarly): its final invocation gets that state, and
// the window goes on with a fresh one.
const MaxWindowState = lease.MaxWindowState

// ErrNoState: the target answered a windowed batch without a state. Lambda's
// trigger counts such an answer a failed invocation, and so does the reader.
var ErrNoState = errors.New("target answered a tumbling window without a state")

// Window is a tumbling window's bounds: Start included, End excluded, by the
// records' ApproximateArrivalTimestamp.
type Window struct {
	Start, End time.Time
}

// WindowBatch is what a WindowTarget receives: a batch of one window (no
// records in a final invocation) and the state the previous invocation of
// the window returned ({} for the window's first).
type WindowBatch struct {
	Batch
	Window Window
	State  json.RawMessage
	// Final is set on the window's last invocation (Lambda's
	// isFinalInvokeForWindow): the window is over and its state is dropped
	// once this invocation succeeds. It carries no records.
	Final bool
	// TerminatedEarly is set with Final when the window ends before its End
	// (Lambda's isWindowTerminatedEarly): the shard ended (a split or a
	// merge; the children start windows of their own), or the state grew
	// past MaxWindowState (the window then goes on with a fresh state).
	TerminatedEarly bool
}

// WindowTarget receives the batches of tumbling windows. DeliverWindow
// returns what Target.Deliver does, and the window's new state: a JSON
// object, not nil whenever settled > 0 or err is nil (nil is ErrNoState).
// With a partial success the state is that of the settled records.
type WindowTarget interface {
	DeliverWindow(ctx context.Context, b WindowBatch) (settled int, state json.RawMessage, err error)
}

// WindowFunc is an in-process WindowTarget: a Go function. As a plain Target
// it refuses every batch.
type WindowFunc func(ctx context.Context, b WindowBatch) (int, json.RawMessage, error)

// DeliverWindow implements WindowTarget.
func (f WindowFunc) DeliverWindow(ctx context.Context, b WindowBatch) (int, json.RawMessage, error) {
	return f(ctx, b)
}

// Deliver implements Target: a WindowFunc needs Options.TumblingWindow.
func (f WindowFunc) Deliver(context.Context, Batch) (int, error) {
	return 0, errors.New("reader: a WindowFunc target needs Options.TumblingWindow")
}

var (
	_ WindowTarget = WindowFunc(nil)
	_ WindowTarget = (*LambdaTarget)(nil)
)

// emptyState is a fresh window's state.
var emptyState = json.RawMessage(`{}`)

// validateWindow checks TumblingWindow and what it cannot be combined with.
func (o *Options) validateWindow() error {
	if o.TumblingWindow == 0 {
		return nil
	}
	bad := func(field string, v any, want string) error {
		return &InvalidError{Field: field, Value: fmt.Sprint(v), Want: want}
	}
	switch {
	case o.TumblingWindow < time.Second || o.TumblingWindow > MaxTumblingWindow || o.TumblingWindow%time.Second != 0:
		return bad("TumblingWindow", o.TumblingWindow, "0 (none) or whole seconds from 1s to "+MaxTumblingWindow.String()+", as Lambda's TumblingWindowInSeconds (1 to 900)")
	case o.ParallelizationFactor != 1:
		return bad("ParallelizationFactor", o.ParallelizationFactor, "1 with TumblingWindow: a window's state is one per shard, and Lambda's trigger refuses a ParallelizationFactor above 1 with TumblingWindowInSeconds")
	}
	if _, ok := o.Target.(WindowTarget); !ok {
		return bad("Target", fmt.Sprintf("%T", o.Target), "a WindowTarget (LambdaTarget or WindowFunc) with TumblingWindow")
	}
	return nil
}

// winState is a shard's window as the run knows it. Its state is never
// changed in place: a copy of a winState is a snapshot.
type winState struct {
	open       bool // a window was seen (loaded or opened): there is something to write
	start, end time.Time
	state      json.RawMessage
	closed     bool // its final invocation succeeded
	gen        int  // bumped on every change, to tell what was written
}

// place is the start of the window a record whose own window starts at
// start is delivered in. A window is never reopened once its final
// invocation succeeded: a record stamped inside (or before) a closed window
// that is read only afterwards (Kinesis stamps arrival on its side, so such
// a record can become readable after a read saw the tip past the window's
// end) goes to the next window, the one starting at the closed one's end,
// as Lambda's trigger starts a new window with a fresh state after
// isFinalInvokeForWindow. Any other record stays in its own window.
func (w winState) place(start time.Time) time.Time {
	if w.open && w.closed && start.Before(w.end) {
		return w.end
	}
	return start
}

func (w winState) lease(seq string) lease.Window {
	return lease.Window{Seq: seq, Start: w.start, End: w.end, State: w.state, Closed: w.closed}
}

func (r *run) windowed() bool { return r.o.TumblingWindow > 0 }

// windowStart is the start of the window a unit's arrival time falls in.
func (r *run) windowStart(u unit) time.Time {
	at := r.o.Clock()
	if t := u.kin.ApproximateArrivalTimestamp; t != nil {
		at = *t
	}
	w := r.o.TumblingWindow.Milliseconds()
	ms := at.UnixMilli()
	k := ms / w
	if ms < 0 && ms%w != 0 {
		k--
	}
	return time.UnixMilli(k * w).UTC()
}

// windowCut is how many leading units of us one batch may take: a batch
// never spans two windows (a unit that arrived before the first's window
// goes with it).
func (r *run) windowCut(us []unit) int {
	if !r.windowed() || len(us) == 0 {
		return len(us)
	}
	first := r.win.place(r.windowStart(us[0]))
	for i, u := range us[1:] {
		if r.win.place(r.windowStart(u)).After(first) {
			return i + 1
		}
	}
	return len(us)
}

// loadWindow reads the shard's window from the store at the start of a
// run: it applies only when it belongs to the checkpoint the run resumes
// after; otherwise (another's checkpoint, or a window that cannot be read)
// the next record opens a fresh window.
func (r *run) loadWindow(ctx context.Context) error {
	w, err := r.o.Store.GetWindow(ctx, r.in.Stream, r.in.ShardID)
	switch {
	case errors.Is(err, lease.ErrNotFound):
		return nil
	case errors.Is(err, lease.ErrWindowUnreadable):
		// The state is lost, not the records: go on as the trigger does
		// when it loses a window's state, with the window the next record
		// falls in (the same bounds, windows being aligned) opened afresh.
		r.log.Warn("the recorded tumbling window cannot be read; the next record opens its window with an empty state", "seq", r.written, "window_state_lost", 1, "err", err)
		if h, ok := r.o.Hooks.(WindowStateLost); ok {
			h.WindowStateLost(r.in.Stream, r.in.ShardID, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reader: read the tumbling window of %s: %w", lease.Key(r.in.Stream, r.in.ShardID), err)
	case w.Seq != r.written || r.written == "":
		r.log.Info("the recorded tumbling window belongs to another checkpoint; the next record opens a fresh window", "window_seq", w.Seq, "seq", r.written)
		return nil
	}
	r.win = winState{open: true, start: w.Start.UTC(), end: w.End.UTC(), state: w.State, closed: w.Closed, gen: 1}
	r.winWritten = 1
	return nil
}

// WindowStateLost is an optional part of Hooks: a run found the shard's
// recorded tumbling window unreadable (lease.ErrWindowUnreadable) and went
// on with the window opened afresh, its state lost. Alarm on it: the
// handler sees the window's later records without what it folded before.
type WindowStateLost interface {
	WindowStateLost(stream, shardID string, err error)
}

// windowDue reports whether the open window's final invocation is due on an
// idle lane: the shard was read to its tip after the window's end (by
// Kinesis's clock), so no record of it can still arrive.
func (r *run) windowDue(b *laneBook) bool {
	return r.windowed() && !b.busy && !b.stopped && len(b.q) == 0 && r.win.open && !r.win.closed &&
		!r.tipAt.IsZero() && !r.tipAt.Before(r.win.end.Add(windowGrace)) && !r.halted()
}

// windowGrace is how long past a window's end, by Kinesis's clock, a read at
// the tip must come before the window is closed on time: room for a record
// accepted just before the end to become readable.
const windowGrace = time.Second

// behind reports whether the row lacks what settled: the checkpoint, or
// the window that goes with it.
func (r *run) behind() bool {
	if r.want != r.written {
		return true
	}
	return r.windowed() && r.win.open && r.want != "" && r.win.gen != r.winWritten
}

// ckDue reports whether a checkpoint write should start now: the row is
// behind, and not with what the last failed write tried.
func (r *run) ckDue() bool {
	if r.want == "" {
		return false
	}
	if r.want != r.written && r.want != r.failedAt {
		return true
	}
	return r.windowed() && r.win.open && r.win.gen != r.winWritten && r.win.gen != r.winFailed
}

// writeCheckpoint writes seq, with the window w when windows are on: one
// conditional write holds both.
func (r *run) writeCheckpoint(ctx context.Context, seq string, w winState) error {
	if r.windowed() && w.open && seq != lease.ShardEnd {
		return r.holder.CheckpointWindow(ctx, w.lease(seq))
	}
	_, err := r.holder.Checkpoint(ctx, seq)
	return err
}

// windowWritten takes the window part of a checkpoint write's answer.
func (r *run) windowWritten(res ckResult) {
	if !r.windowed() {
		return
	}
	if res.err == nil {
		r.winWritten, r.winFailed = max(r.winWritten, res.gen), 0
	} else if !r.lost() {
		r.winFailed = res.gen
	}
}

// closeAtShardEnd makes the final invocation of a window still open when the
// shard ended (isWindowTerminatedEarly), before SHARD_END is written; false
// when the run must stop first (the next run sees the end again).
func (r *run) closeAtShardEnd() bool {
	if !r.windowed() || !r.win.open || r.win.closed || len(r.lanes) == 0 {
		return true
	}
	l := r.lanes[0]
	l.win = r.win
	if !l.final(true) {
		return false
	}
	r.win = l.win
	return true
}

// snapshot is the lane's window for a lane event; nil without windows.
func (l *lane) snapshot() *winState {
	if !l.r.windowed() {
		return nil
	}
	w := l.win
	return &w
}

// enterWindow readies the lane's window for us: when us begins a later
// window, the open one gets its final invocation first and a fresh window
// opens with an empty state (a record of a closed window begins the next
// one: place); an empty us asks for the final invocation that
// is due (windowDue). False when the run must stop first.
func (l *lane) enterWindow(us []unit) bool {
	w := &l.win
	if len(us) == 0 {
		if !w.open || w.closed {
			return true
		}
		if !l.final(false) {
			return false
		}
		l.send(laneEvent{lane: l.id, win: l.snapshot()})
		return true
	}
	start := w.place(l.r.windowStart(us[0]))
	if w.open && w.closed {
		late := 0
		for _, u := range us {
			if l.r.windowStart(u).Before(w.end) {
				late++
			}
		}
		if late > 0 {
			l.r.log.Info("records stamped in a closed tumbling window go to the next window", "window_start", start, "closed_window_start", w.start, "window_late_records", late)
		}
	}
	if w.open && !w.closed && !start.After(w.start) {
		return true // the same window (a record stamped before it goes with it)
	}
	if w.open && !w.closed {
		if !l.final(false) {
			return false
		}
		l.send(laneEvent{lane: l.id, win: l.snapshot()})
	}
	*w = winState{open: true, start: start, end: start.Add(l.r.o.TumblingWindow), state: emptyState, gen: w.gen + 1}
	return true
}

// windowBatch is b with the lane's window around it.
func (l *lane) windowBatch(b Batch, final, early bool) WindowBatch {
	return WindowBatch{Batch: b, Window: Window{Start: l.win.start, End: l.win.end}, State: l.win.state, Final: final, TerminatedEarly: early}
}

func hasState(s json.RawMessage) bool {
	s = bytes.TrimSpace(s)
	return len(s) > 0 && !bytes.Equal(s, []byte("null"))
}

// invoke delivers b: to Target.Deliver, or with windows to the
// WindowTarget with the window's state, keeping the state it returns. A
// settled count without a state is a failed delivery (ErrNoState); a state
// over MaxWindowState ends the window early.
func (l *lane) invoke(b Batch) (int, error) {
	r := l.r
	var n int
	var state json.RawMessage
	err := l.call(func(ctx context.Context) (err error) {
		r.invoked(b)
		if !r.windowed() {
			n, err = r.o.Target.Deliver(ctx, b)
			return err
		}
		n, state, err = r.o.Target.(WindowTarget).DeliverWindow(ctx, l.windowBatch(b, false, false))
		return err
	})
	if !r.windowed() || errors.Is(err, errNotStarted) {
		return n, err
	}
	n = max(0, min(n, len(b.Records)))
	if n == 0 && err != nil {
		return 0, err
	}
	if !hasState(state) {
		return 0, fmt.Errorf("reader: %w (settled %d of %d records)", ErrNoState, n, len(b.Records))
	}
	if n == 0 {
		return 0, err // nothing settled: the window's state stays as it was
	}
	if len(state) > MaxWindowState {
		// As Lambda's trigger: the window ends early with this state, and goes
		// on with a fresh one. The records settle only once that final
		// invocation succeeded.
		r.log.Warn("window state over 1 MB; ending the window early", "bytes", len(state), "window_start", l.win.start)
		prev := l.win
		l.win.state = state
		if !l.final(true) {
			l.win = prev
			return 0, fmt.Errorf("reader: the final invocation of a window whose state exceeded %d bytes failed", MaxWindowState)
		}
		state = emptyState
		l.win.closed = false
	}
	l.win.state = state
	l.win.gen++
	return n, err
}

// final makes the open window's final invocation (no records, its state,
// isFinalInvokeForWindow), retrying with backoff until it succeeds, as
// Lambda's trigger suspends the shard until it does; false when the run
// must stop first (the next run makes it again). On success the window is
// closed and its state dropped.
func (l *lane) final(early bool) bool {
	r := l.r
	for try := 1; ; try++ {
		if r.stop(r.ctx, true, try > 1) {
			return false
		}
		if !r.fits() {
			r.haltNow()
			return false
		}
		var state json.RawMessage
		err := l.call(func(ctx context.Context) (err error) {
			_, state, err = r.o.Target.(WindowTarget).DeliverWindow(ctx, l.windowBatch(r.batch(nil), true, early))
			return err
		})
		if errors.Is(err, errNotStarted) {
			if r.lost() || r.ctx.Err() != nil {
				return false
			}
			r.wait(r.o.RetryMin)
			continue
		}
		if err == nil && !hasState(state) {
			err = fmt.Errorf("reader: %w (final invocation)", ErrNoState)
		}
		if err == nil {
			l.win.closed, l.win.state = true, nil
			l.win.gen++
			r.log.Info("window closed", "window_start", l.win.start, "window_end", l.win.end, "terminated_early", early)
			return true
		}
		if r.lost() {
			return false
		}
		r.o.Hooks.TargetError(r.in.Stream, r.in.ShardID, err)
		wait := backoff(r.o.RetryMin, r.o.RetryMax, try)
		r.log.Warn("final invocation of a window failed; retrying, nothing after it is delivered", "window_start", l.win.start, "attempt", try, "wait", wait, "err", err)
		r.wait(wait)
	}
}
