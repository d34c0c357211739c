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
	Store           Store
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
	// Clock returns the holder's time. Default time.Now.
	Clock func() time.Time
	// Logger gets renewal warnings. Default discards.
	Logger *slog.Logger
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

func (o *HolderOptions) validate() error {
	switch {
	case o.Store == nil:
		return &InvalidError{Field: "Store", Value: "nil", Want: "a lease store"}
	case o.Duration < 0 || o.Margin < 0 || o.RenewInterval <= 0 || o.RenewInterval >= o.Duration-o.Margin:
		return &InvalidError{Field: "RenewInterval", Value: o.RenewInterval.String(),
			Want: fmt.Sprintf("a positive duration shorter than the lease (%s) less its margin (%s)", o.Duration, o.Margin)}
	}
	return checkOwned(o.Stream, o.ShardID, o.Owner)
}

// Holder holds one lease for one reader run. Its deadline runs from the
// send time of its last successful take or renewal: Duration - Margin after
// it. A taker judges the lease lapsed only after seeing its counter unchanged
// for Duration on its own clock (Observer), and it cannot have first seen
// that counter before the renewal that wrote it was sent; so a holder that
// acts only before its deadline never delivers while another owner does,
// whatever the skew between their clocks, and however long a renewal took
// to answer.
//
// Context is cancelled the moment the lease is lost (a renewal, checkpoint or
// pin refused with ErrNotOwner) or the deadline passes; Valid tells whether a
// delivery may start. Checkpoint and Pin refuse to write past the deadline.
// A Holder is safe for concurrent use.
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

	// writing holds a token while a write is on its way to the store: the
	// holder's writes land in the order they were sent, so a slow renewal
	// carrying an older checkpoint cannot land after a newer checkpoint (or
	// SHARD_END) and move the row back. A channel, so a wait gives up with
	// its context.
	writing chan struct{}
}

// Hold takes the lease for o.Owner with opts and returns its Holder, with
// the row as taken. A take refused because another owner holds the row
// fails with ErrHeld. ctx is the parent of the holder's Context.
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
	h := &Holder{o: o, writing: make(chan struct{}, 1)}
	h.ctx, h.cancel = context.WithCancelCause(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.deadline = sent.Add(o.Duration - o.Margin)
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

// KeepAlive renews the lease every RenewInterval until ctx ends or the lease
// is lost or lapses. Each renewal is bounded by RenewInterval; a success
// moves the deadline to its send time + Duration - Margin, whenever its answer
// arrives. A refusal (ErrNotOwner) loses the lease at once; other errors are
// retried at the next tick, and if none succeeds the deadline ends the lease.
func (h *Holder) KeepAlive(ctx context.Context) {
	t := time.NewTicker(h.o.RenewInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.ctx.Done():
			return
		case <-t.C:
		}
		callCtx, cancel := context.WithTimeout(h.ctx, h.o.RenewInterval)
		sent, seq, err := h.renew(callCtx)
		cancel()
		switch {
		case err == nil:
			h.mu.Lock()
			if h.err == nil {
				if d := sent.Add(h.o.Duration - h.o.Margin); d.After(h.deadline) {
					h.deadline = d
				}
				if seq != "" {
					h.written = seq
				}
			}
			h.mu.Unlock()
		case errors.Is(err, ErrNotOwner):
			h.lose(fmt.Errorf("renew: %w", err))
			return
		case h.ctx.Err() != nil:
			return
		default:
			h.o.Logger.Warn("renew failed; retrying at the next interval", "err", err, "deadline", h.Deadline())
		}
	}
}

// renew sends one renewal, carrying the settled checkpoint when one waits
// and the store can write both at once (a RenewCheckpointer); it returns
// when it was sent and the checkpoint it wrote, if any.
func (h *Holder) renew(ctx context.Context) (time.Time, string, error) {
	if err := h.lockWrite(ctx); err != nil {
		return time.Time{}, "", err
	}
	defer h.unlockWrite()
	sent := h.o.Clock()
	h.mu.Lock()
	seq := h.settled
	if seq == h.written {
		seq = ""
	}
	h.mu.Unlock()
	if rc, ok := h.o.Store.(RenewCheckpointer); ok && seq != "" {
		_, err := rc.RenewCheckpoint(ctx, h.o.Stream, h.o.ShardID, h.o.Owner, seq, nil)
		return sent, seq, err
	}
	_, err := h.o.Store.Renew(ctx, h.o.Stream, h.o.ShardID, h.o.Owner)
	return sent, "", err
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
// matches ErrLapsed.
func (h *Holder) Checkpoint(ctx context.Context, seq string) (Lease, error) {
	h.mu.Lock()
	before := h.settled
	h.mu.Unlock()
	l, err := h.write(ctx, func() (Lease, error) { return h.o.Store.Checkpoint(ctx, h.o.Stream, h.o.ShardID, h.o.Owner, seq) })
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

// CheckpointWindow writes w.Seq as the checkpoint together with the
// tumbling window w (Store.CheckpointWindow), under the same rules as
// Checkpoint.
func (h *Holder) CheckpointWindow(ctx context.Context, w Window) error {
	h.mu.Lock()
	before := h.settled
	h.mu.Unlock()
	_, err := h.write(ctx, func() (Lease, error) {
		return Lease{}, h.o.Store.CheckpointWindow(ctx, h.o.Stream, h.o.ShardID, h.o.Owner, w)
	})
	if err == nil {
		h.mu.Lock()
		h.written = w.Seq
		if h.settled == before {
			h.settled = w.Seq
		}
		h.mu.Unlock()
	}
	return err
}

// Settle records seq as settled, to be written with the next renewal in one
// lease write (coalescing checkpoints with renewals, so a busy shard costs
// the writes an idle one does). It writes nothing itself; Flush writes what
// is settled at once. When the store cannot renew and checkpoint in one
// write (not a RenewCheckpointer), the next renewal writes none and Flush
// must. A lease lost before the write costs what settled since the last one
// (delivered again by the next owner: at most one renew interval more).
func (h *Holder) Settle(seq string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil {
		h.settled = seq
	}
}

// Coalesces reports whether Settle's checkpoints ride on the renewals: the
// store writes both in one (a RenewCheckpointer).
func (h *Holder) Coalesces() bool {
	_, ok := h.o.Store.(RenewCheckpointer)
	return ok
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
// and ends the holder; later writes fail.
func (h *Holder) Release(ctx context.Context) error {
	if err := h.lockWrite(ctx); err != nil {
		h.lose(errReleased)
		return err
	}
	defer h.unlockWrite()
	err := h.o.Store.Release(ctx, h.o.Stream, h.o.ShardID, h.o.Owner)
	h.lose(errReleased)
	return err
}

var errReleased = errors.New("lease released")

// Close ends the holder without writing: its Context is cancelled and its
// timer stopped. Call it when the run is over.
func (h *Holder) Close() { h.lose(errClosed) }

var errClosed = errors.New("lease holder closed")
