package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// ErrLapsed: the holder's deadline passed without a successful renewal. A
// taker watching the row may take it from then on, so the holder must not
// deliver or checkpoint again. It is not ErrNotOwner: the row may still
// name the holder.
var ErrLapsed = errors.New("lease lapsed: no renewal succeeded in time")

// HolderOptions configure Hold.
type HolderOptions struct {
	Store           HolderStore
	Stream, ShardID string
	// Owner is the id the holder writes as.
	Owner string
	// Duration is the lease's length, the time a taker watches an unchanged
	// counter before it takes the shard. Default DefaultDuration.
	Duration time.Duration
	// RenewInterval between renewals; each renewal call is bounded by it.
	// Default DefaultRenewInterval.
	RenewInterval time.Duration
	// Margin is kept off the deadline for clock drift and for the time it
	// takes to act on it. Default Duration/10.
	Margin time.Duration
	// MaxRun is how long one invocation the holder starts (Begin) may run
	// from its start whatever its caller does: a Lambda function's
	// configured timeout, since a synchronous invocation cannot be
	// cancelled. The holder records it on the row as its fence (and a
	// tenth more, for clocks: see recorded) while invocations may be
	// running, so a taker waits it out. 0 (default): an
	// invocation ends when its context does (an in-process target), and the
	// row never needs a fence.
	MaxRun time.Duration
	// Fence, when positive and below MaxRun, is the fence recorded instead
	// of MaxRun: the holder then starts an invocation only while it would
	// end, by MaxRun, within its deadline plus Fence (Begin renews first
	// when it would not). MaxRun - Fence may be at most Duration - Margin -
	// RenewInterval. 0: MaxRun.
	Fence time.Duration
	// Clock returns the holder's time. Default time.Now.
	Clock func() time.Time
	// Logger gets renewal warnings. Default discards.
	Logger *slog.Logger
	// Lag, when set, tells how far behind the tip of its shard the reader
	// is (ok false: not known): each checkpoint the holder writes, alone or
	// carried by a renewal, records it in the same write (Lease.MillisBehind;
	// a negative lag, clock skew at the peer, as 0). It must be fast and
	// safe for concurrent use, for example metrics.Recorder.Lag, fed by the
	// reader's MillisBehindLatest hook, which runs before the batch it read
	// is delivered and checkpointed. nil: no lag is recorded.
	Lag func(stream, shardID string) (millis int64, ok bool)
}

func (o *HolderOptions) setDefaults() {
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	if o.RenewInterval == 0 {
		o.RenewInterval = DefaultRenewInterval
	}
	if o.Margin == 0 {
		o.Margin = o.Duration / 10
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// fence is the fence the holder records while invocations may run.
func (o *HolderOptions) fence() time.Duration {
	if o.Fence > 0 && o.Fence < o.MaxRun {
		return o.Fence
	}
	return o.MaxRun
}

// recorded is the fence the holder writes for invocations that may run
// for f more on its clock: f and a tenth of MaxRun. The holder measures f
// on its own clock, a taker waits it out on its own, and the function's
// timeout runs on neither: a tenth, as the lease keeps a tenth (Margin) and
// a lane waits a tenth more after a call that broke, covers clocks that run
// a few percent apart.
func (o *HolderOptions) recorded(f time.Duration) time.Duration { return f + o.MaxRun/10 }

func (o *HolderOptions) validate() error {
	switch {
	case o.Store == nil:
		return &InvalidError{Field: "Store", Value: "nil", Want: "a lease store"}
	case o.Duration < 0 || o.Margin < 0 || o.RenewInterval <= 0 || o.RenewInterval >= o.Duration-o.Margin:
		return &InvalidError{Field: "RenewInterval", Value: o.RenewInterval.String(),
			Want: fmt.Sprintf("a positive duration shorter than the lease (%s) less its margin (%s)", o.Duration, o.Margin)}
	case o.MaxRun < 0:
		return &InvalidError{Field: "MaxRun", Value: o.MaxRun.String(), Want: "a non-negative duration"}
	case o.Fence < 0 || o.MaxRun-o.fence() > o.Duration-o.Margin-o.RenewInterval:
		return &InvalidError{Field: "Fence", Value: o.Fence.String(),
			Want: fmt.Sprintf("0 (MaxRun) or at least MaxRun (%s) less the lease (%s), its margin (%s) and a renew interval (%s)", o.MaxRun, o.Duration, o.Margin, o.RenewInterval)}
	}
	return checkOwned(o.Stream, o.ShardID, o.Owner)
}

// Holder holds one lease for one reader run. Its deadline runs from the
// send time of its last successful take or renewal: Duration - Margin after
// it. A taker judges the lease lapsed only after seeing its counter unchanged
// for Duration (plus the row's fence) on its own clock (Observer), and it
// cannot have first seen that counter before the renewal that wrote it was
// sent; so a holder that starts invocations only before its deadline never
// has one running while another owner delivers, whatever the skew between
// their clocks, and however long a renewal took to answer.
//
// The fence. An invocation of the user's function may run MaxRun from its
// start whatever the caller does, so a renewal records on the row a fence
// of MaxRun while invocations may start or be running: a taker then waits
// a lease plus the fence. A renewal sent when nothing has run for a whole
// renew interval records none (or what an invocation given up on may still
// run), so a holder that dies idle costs a taker no more than the lease;
// the first invocation after that (Begin) waits for a renewal that records
// the fence again: one write, paid only after an idle interval.
//
// Context is cancelled the moment the lease is lost (a renewal, checkpoint or
// pin refused with ErrNotOwner) or the deadline passes; Valid tells whether a
// delivery may start. Checkpoint and Pin refuse to write past the deadline.
// The holder's writes are sent one at a time, in order; renewals are
// numbered (Renewal.Seq), so the store never lands an older one over a newer
// one, and every checkpoint the holder has tried to write raises the floor
// of what a later renewal carries. A Holder is safe for concurrent use.
type Holder struct {
	o HolderOptions

	ctx    context.Context
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	deadline time.Time
	err      error       // why the lease is no longer held; nil while it is
	timer    *time.Timer // fires at the deadline
	settled  string      // the last checkpoint Settle recorded
	written  string      // the last checkpoint known to be on the row
	floor    string      // the highest checkpoint a write has tried (it may have landed): renewals carry none below it
	failing  string      // the last Failing SetFailing recorded
	onRow    string      // the Failing known to be on the row

	seq       int64     // the last renewal's number
	armed     bool      // the row records the fence: invocations may start without a write
	lastRenew time.Time // when the last renewal was sent
	lastStart time.Time // when the last invocation started
	running   map[*invocation]struct{}
	busyUntil time.Time // invocations given up on may run until then

	// writing holds a token while a write is on its way to the store: the
	// holder's writes land in the order they were sent, so a slow renewal
	// carrying an older checkpoint cannot land after a newer checkpoint (or
	// SHARD_END) and move the row back. A channel, so a wait gives up with
	// its context.
	writing chan struct{}
}

type invocation struct{ start time.Time }

// Hold takes the lease for o.Owner with opts and returns its Holder, with
// the row as taken. A take refused because another owner holds the row
// fails with ErrHeld. ctx is the parent of the holder's Context. The take
// records no fence (opts should not add one): the first invocation arms it.
func Hold(ctx context.Context, o HolderOptions, opts ...TakeOption) (*Holder, Lease, error) {
	o.setDefaults()
	if err := o.validate(); err != nil {
		return nil, Lease{}, err
	}
	sent := o.Clock()
	row, err := o.Store.Take(ctx, o.Stream, o.ShardID, o.Owner, opts...)
	if err != nil {
		return nil, Lease{}, err
	}
	h := &Holder{o: o, writing: make(chan struct{}, 1), running: map[*invocation]struct{}{}}
	h.ctx, h.cancel = context.WithCancelCause(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.deadline = sent.Add(o.Duration - o.Margin)
	h.lastRenew = sent
	h.armed = row.Fence >= o.recorded(o.fence())
	h.failing, h.onRow = row.Failing, row.Failing
	h.timer = time.AfterFunc(max(h.deadline.Sub(o.Clock()), 0), h.checkDeadline)
	return h, row, nil
}

// Context is cancelled when the lease is lost or lapses, with the reason as
// its cause (context.Cause), and when the parent given to Hold ends.
func (h *Holder) Context() context.Context { return h.ctx }

// Deadline is the time after which the holder may no longer act, unless a
// renewal moves it.
func (h *Holder) Deadline() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.deadline
}

// Valid returns nil while the lease is held and its deadline has not
// passed; else why not (ErrLapsed, ErrNotOwner, or the release).
func (h *Holder) Valid() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.validLocked()
}

func (h *Holder) validLocked() error {
	if h.err != nil {
		return h.err
	}
	if now := h.o.Clock(); !now.Before(h.deadline) {
		h.loseLocked(fmt.Errorf("%w: the deadline %s passed (%s ago)", ErrLapsed, h.deadline.UTC().Format(time.RFC3339Nano), now.Sub(h.deadline).Round(time.Millisecond)))
		return h.err
	}
	return nil
}

// Err is why the lease is no longer held, nil while it is (without looking
// at the clock; Valid does).
func (h *Holder) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

func (h *Holder) checkDeadline() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return
	}
	if left := h.deadline.Sub(h.o.Clock()); left > 0 {
		h.timer.Reset(left) // a renewal moved the deadline
		return
	}
	_ = h.validLocked()
}

// lose records why the lease is no longer held; the first reason wins.
func (h *Holder) lose(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.loseLocked(err)
}

func (h *Holder) loseLocked(err error) {
	if h.err != nil {
		return
	}
	h.err = err
	h.timer.Stop()
	h.cancel(err)
}

// Begin is called before each invocation of the target: it returns nil when
// one may start now, having made sure the row records the fence that covers
// it (with a renewal, when the last one recorded none), and the function to
// call when the invocation is over: ended is true when its answer came back
// (the function is no longer running), false when the caller gave up on it
// (its context ended, or the call failed without an answer): then it may run
// on for MaxRun from its start, and the holder's releases and renewals keep
// a fence over it. Begin fails when the lease is no longer valid, or when the
// renewal it needed failed (ctx ended, the store unreachable): then no
// invocation may start now.
func (h *Holder) Begin(ctx context.Context) (end func(ended bool), err error) {
	if inv, err := h.start(); inv != nil || err != nil {
		return h.ender(inv), err
	}
	// The row records no fence: renew with one first.
	if err := h.lockWrite(ctx); err != nil {
		return nil, err
	}
	defer h.unlockWrite()
	if inv, err := h.start(); inv != nil || err != nil {
		return h.ender(inv), err // armed meanwhile
	}
	callCtx, cancel := context.WithTimeout(ctx, h.o.RenewInterval)
	defer cancel()
	if err := h.renewLocked(callCtx, true); err != nil {
		return nil, err
	}
	inv, err := h.start()
	if inv == nil && err == nil {
		err = fmt.Errorf("renew %s: the fence was not recorded, or the invocation would outrun the lease and its fence", Key(h.o.Stream, h.o.ShardID))
	}
	return h.ender(inv), err
}

// start registers an invocation starting now, when the lease is valid and
// the row records the fence; nil (and no error) when it needs arming.
func (h *Holder) start() (*invocation, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.validLocked(); err != nil {
		return nil, err
	}
	now := h.o.Clock()
	if h.o.MaxRun > 0 && (!h.armed || now.Add(h.o.MaxRun).After(h.deadline.Add(h.o.fence()))) {
		return nil, nil // arm the fence, or renew to move the deadline
	}
	inv := &invocation{start: now}
	h.running[inv] = struct{}{}
	h.lastStart = inv.start
	return inv, nil
}

func (h *Holder) ender(inv *invocation) func(bool) {
	if inv == nil {
		return nil
	}
	return func(ended bool) {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.running, inv)
		if !ended {
			// A call may send more than one request (a batch split to fit
			// Lambda's payload limit): the last may have started just now.
			if until := h.o.Clock().Add(h.o.MaxRun); until.After(h.busyUntil) {
				h.busyUntil = until
			}
		}
	}
}

// fenceFromLocked is the fence a write records from t (the release's send
// time, a renewal's deadline) over the invocations the holder started: until
// each may have ended (runningUntilLocked) and a tenth of MaxRun more, as
// recorded gives, or 0 when that is not after t. The tenth counts in the
// comparison too: an invocation given up on whose timeout has just passed on
// this holder's clock, if it runs a few percent fast, may still run.
func (h *Holder) fenceFromLocked(t time.Time) time.Duration {
	until := h.runningUntilLocked()
	if until.IsZero() {
		return 0
	}
	return max(0, h.o.recorded(until.Sub(t)))
}

// runningUntilLocked is when every invocation the holder started may have
// ended: those still running (which may send a request until now) and
// those given up on alike.
func (h *Holder) runningUntilLocked() time.Time {
	until := h.busyUntil
	if end := h.o.Clock().Add(h.o.MaxRun); len(h.running) > 0 && end.After(until) {
		until = end
	}
	return until
}

// KeepAlive renews the lease every RenewInterval (from the last renewal
// sent, Begin's included) until ctx ends or the lease is lost or lapses.
// Each renewal is bounded by RenewInterval; a success moves the deadline to
// its send time + Duration - Margin, whenever its answer arrives. A refusal
// (ErrNotOwner) loses the lease at once; other errors are retried at the
// next interval, and if none succeeds the deadline ends the lease.
func (h *Holder) KeepAlive(ctx context.Context) {
	t := time.NewTimer(h.o.RenewInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.ctx.Done():
			return
		case <-t.C:
		}
		h.mu.Lock()
		next := h.lastRenew.Add(h.o.RenewInterval)
		h.mu.Unlock()
		if left := next.Sub(h.o.Clock()); left > 0 {
			t.Reset(left) // Begin renewed meanwhile
			continue
		}
		err := h.renew(ctx)
		t.Reset(h.o.RenewInterval)
		switch {
		case err == nil:
		case errors.Is(err, ErrNotOwner):
			return
		case h.ctx.Err() != nil || ctx.Err() != nil:
			return
		default:
			h.o.Logger.Warn("renew failed; retrying at the next interval", "err", err, "deadline", h.Deadline())
		}
	}
}

// renew sends one renewal, bounded by RenewInterval.
func (h *Holder) renew(ctx context.Context) error {
	if err := h.lockWrite(ctx); err != nil {
		return err
	}
	defer h.unlockWrite()
	callCtx, cancel := context.WithTimeout(h.ctx, h.o.RenewInterval)
	defer cancel()
	return h.renewLocked(callCtx, false)
}

// renewLocked sends a renewal while the caller holds the write token. It
// records the fence when arm is set, when an invocation is running, or when
// one started since the last renewal; otherwise none (but what invocations
// given up on may still run), and from its sending invocations need Begin to
// arm again. It carries the settled checkpoint (not below the floor) when
// the row does not have it.
func (h *Holder) renewLocked(ctx context.Context, arm bool) error {
	h.mu.Lock()
	if err := h.validLocked(); err != nil {
		h.mu.Unlock()
		return err
	}
	sent := h.o.Clock()
	h.seq++
	rn := Renewal{Seq: h.seq}
	deadline := sent.Add(h.o.Duration - h.o.Margin)
	fenced := h.o.MaxRun > 0 && (arm || len(h.running) > 0 || h.lastStart.After(h.lastRenew))
	if fenced {
		rn.Fence = h.o.recorded(h.o.fence())
	} else {
		h.armed = h.o.MaxRun == 0
		rn.Fence = h.fenceFromLocked(deadline)
	}
	h.lastRenew = sent
	if seq := h.carryLocked(); seq != "" {
		rn.Checkpoint = seq
		h.raiseFloorLocked(seq)
	}
	rn.Failing = h.failingLocked()
	h.mu.Unlock()
	if rn.Checkpoint != "" {
		rn.MillisBehind = h.lag()
	}

	_, err := h.o.Store.Renew(ctx, h.o.Stream, h.o.ShardID, h.o.Owner, rn)
	if errors.Is(err, ErrBehind) {
		h.resync(ctx) // the row is past what this renewal carried
	}
	if errors.Is(err, ErrNotOwner) {
		h.lose(fmt.Errorf("renew: %w", err))
	}
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil {
		if deadline.After(h.deadline) {
			h.deadline = deadline
		}
		if fenced {
			h.armed = true
		}
		if rn.Checkpoint != "" {
			h.written = rn.Checkpoint
		}
		if rn.Failing != nil {
			h.onRow = *rn.Failing
		}
	}
	return nil
}

// SetFailing records what the next renewal (or the release) writes as the
// row's Failing (Lease.Failing), when the row does not have it yet: the
// reader's record of its failing deliveries, for whoever reads the shard
// next. It writes nothing itself.
func (h *Holder) SetFailing(f string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failing = f
}

// WriteFailing writes now, with a renewal, the Failing SetFailing last
// recorded, when the row does not have it yet: the count of a delivery that
// just failed reaches the row before the run could die, not only with the
// next renewal. It is bounded by RenewInterval and writes nothing when the
// row is up to date.
func (h *Holder) WriteFailing(ctx context.Context) error {
	h.mu.Lock()
	pending := h.failingLocked() != nil
	h.mu.Unlock()
	if !pending {
		return h.Valid()
	}
	return h.renew(ctx)
}

// failingLocked is the Failing the next write carries: nil when the row has
// it already.
func (h *Holder) failingLocked() *string {
	if h.failing == h.onRow {
		return nil
	}
	f := h.failing
	return &f
}

// carryLocked is the checkpoint the next renewal carries: the settled one,
// unless the row has it, or a write of this holder tried a later one (it
// may have landed, its answer lost): a renewal never carries a checkpoint
// below one the holder tried to write.
func (h *Holder) carryLocked() string {
	seq := h.settled
	if seq == h.written || (h.floor != "" && checkpointOrder(seq) < checkpointOrder(h.floor)) {
		return ""
	}
	return seq
}

func (h *Holder) raiseFloorLocked(seq string) {
	if h.floor == "" || checkpointOrder(seq) > checkpointOrder(h.floor) {
		h.floor = seq
	}
}

// resync reads the row after a checkpoint refused as behind it: the row's
// checkpoint is what is written, and the floor of later ones.
func (h *Holder) resync(ctx context.Context) {
	row, err := h.o.Store.Get(context.WithoutCancel(ctx), h.o.Stream, h.o.ShardID)
	if err != nil || row.Owner != h.o.Owner || row.Checkpoint == "" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.written = row.Checkpoint
	h.raiseFloorLocked(row.Checkpoint)
}

func (h *Holder) lockWrite(ctx context.Context) error {
	select {
	case h.writing <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (h *Holder) unlockWrite() { <-h.writing }

// Checkpoint writes seq while the lease is valid. A refusal (ErrNotOwner)
// loses the lease; past the deadline nothing is written and the error
// matches ErrLapsed. A checkpoint the row is already past (ErrBehind: an
// earlier write of this holder landed with its answer lost) is not an
// error: the row has as much.
func (h *Holder) Checkpoint(ctx context.Context, seq string) (Lease, error) {
	return h.checkpoint(ctx, seq, func() (Lease, error) {
		var opts []CheckpointOption
		if ms := h.lag(); ms != nil {
			opts = append(opts, WithMillisBehind(*ms))
		}
		return h.o.Store.Checkpoint(ctx, h.o.Stream, h.o.ShardID, h.o.Owner, seq, opts...)
	})
}

// lag is the reader's lag a checkpoint records (HolderOptions.Lag), nil
// when not known.
func (h *Holder) lag() *int64 {
	if h.o.Lag == nil {
		return nil
	}
	ms, ok := h.o.Lag(h.o.Stream, h.o.ShardID)
	if !ok {
		return nil
	}
	ms = max(ms, 0)
	return &ms
}

// CheckpointWindow writes w.Seq as the checkpoint together with the
// tumbling window w (Store.CheckpointWindow), under the same rules as
// Checkpoint.
func (h *Holder) CheckpointWindow(ctx context.Context, w Window) error {
	_, err := h.checkpoint(ctx, w.Seq, func() (Lease, error) {
		return Lease{}, h.o.Store.CheckpointWindow(ctx, h.o.Stream, h.o.ShardID, h.o.Owner, w)
	})
	return err
}

func (h *Holder) checkpoint(ctx context.Context, seq string, do func() (Lease, error)) (Lease, error) {
	h.mu.Lock()
	before := h.settled
	h.mu.Unlock()
	l, err := h.write(ctx, func() (Lease, error) {
		h.mu.Lock()
		h.raiseFloorLocked(seq)
		h.mu.Unlock()
		return do()
	})
	var ce *ConflictError
	if errors.Is(err, ErrBehind) && errors.As(err, &ce) && ce.Current != nil &&
		checkpointOrder(ce.Current.Checkpoint) >= checkpointOrder(seq) {
		l, err = *ce.Current, nil
		seq = ce.Current.Checkpoint
		h.mu.Lock()
		h.raiseFloorLocked(seq)
		h.mu.Unlock()
	}
	if err == nil {
		h.mu.Lock()
		h.written = seq
		if h.settled == before { // else a Settle during the write is newer
			h.settled = seq
		}
		h.mu.Unlock()
	}
	return l, err
}

// Settle records seq as settled, to be written with the next renewal in one
// lease write (coalescing checkpoints with renewals, so a busy shard costs
// the writes an idle one does). It writes nothing itself; Flush writes what
// is settled at once. A lease lost before the write costs what settled since
// the last one (delivered again by the next owner: at most one renew
// interval more).
func (h *Holder) Settle(seq string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil {
		h.settled = seq
	}
}

// Written returns the last checkpoint this holder wrote (by Checkpoint,
// Flush or a renewal carrying it), or "".
func (h *Holder) Written() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.written
}

// Pending returns the settled checkpoint not yet written, or "".
func (h *Holder) Pending() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.settled == h.written {
		return ""
	}
	return h.settled
}

// Flush writes the settled checkpoint now if the row does not have it yet,
// as Checkpoint does: before a SHARD_END, at the end of a run, before a
// release.
func (h *Holder) Flush(ctx context.Context) error {
	if seq := h.Pending(); seq != "" {
		_, err := h.Checkpoint(ctx, seq)
		return err
	}
	return h.Valid()
}

// Pin records where the holder opened the shard at its tip (Store.Pin),
// under the same rules as Checkpoint.
func (h *Holder) Pin(ctx context.Context, start string) (Lease, error) {
	return h.write(ctx, func() (Lease, error) { return h.o.Store.Pin(ctx, h.o.Stream, h.o.ShardID, h.o.Owner, start) })
}

func (h *Holder) write(ctx context.Context, do func() (Lease, error)) (Lease, error) {
	if err := h.lockWrite(ctx); err != nil {
		return Lease{}, err
	}
	defer h.unlockWrite()
	if err := h.Valid(); err != nil {
		return Lease{}, err
	}
	l, err := do()
	if errors.Is(err, ErrNotOwner) {
		h.lose(err)
	}
	return l, err
}

// Release gives the lease up (whether or not its deadline passed: the
// release is conditional on the owner, so it cannot free another's lease)
// and ends the holder; later writes fail. With to set (the loop's owner) it
// hands the row back to that loop, whose next run takes it at once; empty,
// it frees the row for anyone. Either way it records as the row's fence how
// long invocations it started may still run, so a taker waits that out
// first (nothing, when every invocation's answer came back).
func (h *Holder) Release(ctx context.Context, to string) error {
	if err := h.lockWrite(ctx); err != nil {
		h.lose(errReleased)
		return err
	}
	defer h.unlockWrite()
	h.mu.Lock()
	now := h.o.Clock()
	ho := Handover{To: to, Failing: h.failingLocked()}
	ho.Fence = h.fenceFromLocked(now)
	h.mu.Unlock()
	err := h.o.Store.Release(ctx, h.o.Stream, h.o.ShardID, h.o.Owner, ho)
	h.lose(errReleased)
	return err
}

var errReleased = errors.New("lease released")

// Close ends the holder without writing: its Context is cancelled and its
// timer stopped. Call it when the run is over.
func (h *Holder) Close() { h.lose(errClosed) }

var errClosed = errors.New("lease holder closed")
