package faults

import (
	"context"
	"errors"
	"time"

	"github.com/shardloop/shardloop/pkg/lease"
)

// StoreRates are the shares of lease writes (Take, Renew, Checkpoint,
// Release) that fail, and of renewals that are slow. Reads, SetStart, Pin,
// Delete, the generation record, window checkpoints, heartbeats and resets
// always go through.
type StoreRates struct {
	// Before: the write is not made and the caller gets an error, as on a
	// network failure before the request left.
	Before float64
	// After: the write is made, then its answer is lost: the caller gets an
	// error although the row changed (a take it thinks failed, a checkpoint
	// written twice).
	After float64
	// SlowRenew: a renewal that succeeds takes SlowMin to SlowMax (defaults
	// 2 s and 5 s) longer, as SDK retries under DynamoDB throttling do; half
	// of them wait before the write reaches the table, half after it.
	SlowRenew        float64
	SlowMin, SlowMax time.Duration
}

// Store wraps a lease.Store and makes lease writes fail. The store is a
// field, not embedded: every method of lease.Store is this type's own (the
// ones it does not fault pass the call on as it is), so a method added to
// the interface breaks its build rather than passing through unfaulted
// unseen.
type Store struct {
	Store lease.Store
	Rates StoreRates
	In    *Injector
}

var _ lease.Store = (*Store)(nil)

// Counter names of lease store faults.
const (
	StoreBefore    = "lease.write_failed"
	StoreAfter     = "lease.answer_lost"
	StoreSlowRenew = "lease.slow_renew"
)

// errUnavailable is the cause of an injected store failure: neither
// ErrHeld nor ErrNotOwner, so callers treat it as a transient error.
var errUnavailable = errors.New("lease store unavailable")

// fail decides the fate of one write; do makes it.
func (s *Store) fail(op string, do func() error) error {
	switch s.In.pick(chance{StoreBefore, s.Rates.Before}, chance{StoreAfter, s.Rates.After}) {
	case 0:
		s.In.count(StoreBefore)
		return &Error{Op: "lease." + op, Kind: StoreBefore, Err: errUnavailable}
	case 1:
		if err := do(); err != nil {
			return err
		}
		s.In.count(StoreAfter)
		return &Error{Op: "lease." + op, Kind: StoreAfter, After: true, Err: errUnavailable}
	}
	return do()
}

// Take implements lease.HolderStore.
func (s *Store) Take(ctx context.Context, stream, shardID, owner string, opts ...lease.TakeOption) (lease.Lease, error) {
	var l lease.Lease
	err := s.fail("Take", func() (err error) { l, err = s.Store.Take(ctx, stream, shardID, owner, opts...); return err })
	return l, err
}

// Renew implements lease.HolderStore: a renewal (carrying a checkpoint or not)
// fails, is slow or loses its answer.
func (s *Store) Renew(ctx context.Context, stream, shardID, owner string, rn lease.Renewal) (lease.Lease, error) {
	do := func(ctx context.Context) (lease.Lease, error) { return s.Store.Renew(ctx, stream, shardID, owner, rn) }
	if s.In.pick(chance{StoreSlowRenew, s.Rates.SlowRenew}) == 0 {
		s.In.count(StoreSlowRenew)
		return s.slow(ctx, do)
	}
	var l lease.Lease
	err := s.fail("Renew", func() (err error) { l, err = do(ctx); return err })
	return l, err
}

// slow runs the write do with a delay before or after it.
func (s *Store) slow(ctx context.Context, do func(context.Context) (lease.Lease, error)) (lease.Lease, error) {
	lo, hi := s.Rates.SlowMin, s.Rates.SlowMax
	if lo == 0 {
		lo = 2 * time.Second
	}
	if hi < lo {
		hi = max(lo, 5*time.Second)
	}
	d := lo + time.Duration(s.In.intN(int(hi-lo)+1))
	after := s.In.intN(2) == 0
	if !after {
		if err := sleep(ctx, d); err != nil {
			return lease.Lease{}, err
		}
	}
	l, err := do(ctx)
	if err == nil && after {
		err = sleep(ctx, d)
	}
	return l, err
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Checkpoint implements lease.HolderStore.
func (s *Store) Checkpoint(ctx context.Context, stream, shardID, owner, seq string, opts ...lease.CheckpointOption) (lease.Lease, error) {
	var l lease.Lease
	err := s.fail("Checkpoint", func() (err error) { l, err = s.Store.Checkpoint(ctx, stream, shardID, owner, seq, opts...); return err })
	return l, err
}

// Release implements lease.HolderStore.
func (s *Store) Release(ctx context.Context, stream, shardID, owner string, ho lease.Handover) error {
	return s.fail("Release", func() error { return s.Store.Release(ctx, stream, shardID, owner, ho) })
}

// The calls a Store passes on as they are: reads, and the writes
// StoreRates does not cover.

// CheckpointWindow implements lease.HolderStore; it is not faulted.
func (s *Store) CheckpointWindow(ctx context.Context, stream, shardID, owner string, w lease.Window) error {
	return s.Store.CheckpointWindow(ctx, stream, shardID, owner, w)
}

// Pin implements lease.HolderStore; it is not faulted.
func (s *Store) Pin(ctx context.Context, stream, shardID, owner, start string) (lease.Lease, error) {
	return s.Store.Pin(ctx, stream, shardID, owner, start)
}

// Get implements lease.HolderStore.
func (s *Store) Get(ctx context.Context, stream, shardID string) (lease.Lease, error) {
	return s.Store.Get(ctx, stream, shardID)
}

// GetMany implements lease.CoordinatorStore.
func (s *Store) GetMany(ctx context.Context, stream string, shardIDs []string) (map[string]lease.Lease, error) {
	return s.Store.GetMany(ctx, stream, shardIDs)
}

// List implements lease.CoordinatorStore.
func (s *Store) List(ctx context.Context, stream string) ([]lease.Lease, error) {
	return s.Store.List(ctx, stream)
}

// SetStart implements lease.CoordinatorStore; it is not faulted.
func (s *Store) SetStart(ctx context.Context, stream, shardID string, st lease.Start) (bool, error) {
	return s.Store.SetStart(ctx, stream, shardID, st)
}

// Delete implements lease.CoordinatorStore; it is not faulted.
func (s *Store) Delete(ctx context.Context, stream, shardID string, counter, incarnation int64) error {
	return s.Store.Delete(ctx, stream, shardID, counter, incarnation)
}

// GetGeneration implements lease.CoordinatorStore.
func (s *Store) GetGeneration(ctx context.Context, stream string) (lease.Generation, error) {
	return s.Store.GetGeneration(ctx, stream)
}

// PutGeneration implements lease.CoordinatorStore; it is not faulted.
func (s *Store) PutGeneration(ctx context.Context, stream string, g lease.Generation, prevOrder int64) error {
	return s.Store.PutGeneration(ctx, stream, g, prevOrder)
}

// Beat implements lease.HeartbeatStore; it is not faulted.
func (s *Store) Beat(ctx context.Context, stream string, hb lease.Heartbeat) (lease.Heartbeat, error) {
	return s.Store.Beat(ctx, stream, hb)
}

// Runners implements lease.HeartbeatStore.
func (s *Store) Runners(ctx context.Context, stream string) ([]lease.Heartbeat, error) {
	return s.Store.Runners(ctx, stream)
}

// Leave implements lease.HeartbeatStore; it is not faulted.
func (s *Store) Leave(ctx context.Context, stream, runner string, counter int64) error {
	return s.Store.Leave(ctx, stream, runner, counter)
}

// GetWindow implements lease.WindowReader.
func (s *Store) GetWindow(ctx context.Context, stream, shardID string) (lease.Window, error) {
	return s.Store.GetWindow(ctx, stream, shardID)
}

// Reset implements lease.AdminStore; it is not faulted.
func (s *Store) Reset(ctx context.Context, stream, shardID, start string, force bool) (lease.Lease, error) {
	return s.Store.Reset(ctx, stream, shardID, start, force)
}
