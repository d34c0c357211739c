// Package killswitch stops a reader's lease writes at once, as a crash
// would, for the local runner's killed loops and the simulator's dead
// invocations: one wrapper of what a reader writes, so that neither can
// forget a write method the other covers.
package killswitch

import (
	"context"
	"sync"

	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/reader"
)

// Switch is thrown once and stays thrown. The zero value is not thrown; a
// Switch is safe for concurrent use.
type Switch struct {
	mu     sync.Mutex
	thrown bool
}

// Kill throws the switch.
func (s *Switch) Kill() {
	s.mu.Lock()
	s.thrown = true
	s.mu.Unlock()
}

// Dead reports whether the switch was thrown.
func (s *Switch) Dead() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.thrown
}

// Store is a reader.Store whose writes fail with Err, without starting,
// once Dead reports true; its reads pass (a dead process's reads were never
// refused, only its writes). It implements reader.Store whole: a method
// added to that interface breaks this build instead of passing through a
// dead writer.
type Store struct {
	Store reader.Store
	// Dead reports whether the writer is dead (Switch.Dead, for example).
	Dead func() bool
	// Err is what a refused write fails with.
	Err error
	// Wrote, when not nil, is given each row a successful Take, Renew,
	// Checkpoint or Pin answered with.
	Wrote func(lease.Lease)
}

var _ reader.Store = Store{}

func (d Store) wrote(row lease.Lease, err error) (lease.Lease, error) {
	if err == nil && d.Wrote != nil {
		d.Wrote(row)
	}
	return row, err
}

// Take implements lease.HolderStore.
func (d Store) Take(ctx context.Context, stream, shardID, owner string, opts ...lease.TakeOption) (lease.Lease, error) {
	if d.Dead() {
		return lease.Lease{}, d.Err
	}
	return d.wrote(d.Store.Take(ctx, stream, shardID, owner, opts...))
}

// Renew implements lease.HolderStore.
func (d Store) Renew(ctx context.Context, stream, shardID, owner string, rn lease.Renewal) (lease.Lease, error) {
	if d.Dead() {
		return lease.Lease{}, d.Err
	}
	return d.wrote(d.Store.Renew(ctx, stream, shardID, owner, rn))
}

// Checkpoint implements lease.HolderStore.
func (d Store) Checkpoint(ctx context.Context, stream, shardID, owner, seq string, opts ...lease.CheckpointOption) (lease.Lease, error) {
	if d.Dead() {
		return lease.Lease{}, d.Err
	}
	return d.wrote(d.Store.Checkpoint(ctx, stream, shardID, owner, seq, opts...))
}

// CheckpointWindow implements lease.HolderStore.
func (d Store) CheckpointWindow(ctx context.Context, stream, shardID, owner string, w lease.Window) error {
	if d.Dead() {
		return d.Err
	}
	return d.Store.CheckpointWindow(ctx, stream, shardID, owner, w)
}

// Pin implements lease.HolderStore.
func (d Store) Pin(ctx context.Context, stream, shardID, owner, start string) (lease.Lease, error) {
	if d.Dead() {
		return lease.Lease{}, d.Err
	}
	return d.wrote(d.Store.Pin(ctx, stream, shardID, owner, start))
}

// Release implements lease.HolderStore.
func (d Store) Release(ctx context.Context, stream, shardID, owner string, ho lease.Handover) error {
	if d.Dead() {
		return d.Err
	}
	return d.Store.Release(ctx, stream, shardID, owner, ho)
}

// Get implements lease.HolderStore; it reads whether or not the writer is
// dead.
func (d Store) Get(ctx context.Context, stream, shardID string) (lease.Lease, error) {
	return d.Store.Get(ctx, stream, shardID)
}

// GetWindow implements lease.WindowReader; it reads whether or not the
// writer is dead.
func (d Store) GetWindow(ctx context.Context, stream, shardID string) (lease.Window, error) {
	return d.Store.GetWindow(ctx, stream, shardID)
}
