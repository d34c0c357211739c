package faults

import (
	"context"
	"errors"

	"github.com/shardloop/shardloop/pkg/lease"
)

// StorePartitioned counts the lease store calls a Partition refused.
const StorePartitioned = "lease.partitioned"

// errPartitioned is the cause of a call a Partition refused.
var errPartitioned = errors.New("lease table unreachable from this host")

// Partition cuts one host off the lease table for a while, as a network
// partition does, longer than a lease if need be: while Down reports true,
// every call fails before it is sent. The store is a field, not embedded:
// every method of lease.Store is this type's own, so a method added to the
// interface breaks its build rather than passing through a partition.
type Partition struct {
	Store lease.Store
	Down  func() bool
	In    *Injector
}

var _ lease.Store = (*Partition)(nil)

func (p *Partition) cut(op string) error {
	if p.Down == nil || !p.Down() {
		return nil
	}
	p.In.count(StorePartitioned)
	return &Error{Op: "lease." + op, Kind: StorePartitioned, Err: errPartitioned}
}

// Take implements lease.Store.
func (p *Partition) Take(ctx context.Context, stream, shardID, owner string, opts ...lease.TakeOption) (lease.Lease, error) {
	if err := p.cut("Take"); err != nil {
		return lease.Lease{}, err
	}
	return p.Store.Take(ctx, stream, shardID, owner, opts...)
}

// Renew implements lease.Store.
func (p *Partition) Renew(ctx context.Context, stream, shardID, owner string, rn lease.Renewal) (lease.Lease, error) {
	if err := p.cut("Renew"); err != nil {
		return lease.Lease{}, err
	}
	return p.Store.Renew(ctx, stream, shardID, owner, rn)
}

// Checkpoint implements lease.Store.
func (p *Partition) Checkpoint(ctx context.Context, stream, shardID, owner, seq string, opts ...lease.CheckpointOption) (lease.Lease, error) {
	if err := p.cut("Checkpoint"); err != nil {
		return lease.Lease{}, err
	}
	return p.Store.Checkpoint(ctx, stream, shardID, owner, seq, opts...)
}

// Pin implements lease.Store.
func (p *Partition) Pin(ctx context.Context, stream, shardID, owner, start string) (lease.Lease, error) {
	if err := p.cut("Pin"); err != nil {
		return lease.Lease{}, err
	}
	return p.Store.Pin(ctx, stream, shardID, owner, start)
}

// Release implements lease.Store.
func (p *Partition) Release(ctx context.Context, stream, shardID, owner string, ho lease.Handover) error {
	if err := p.cut("Release"); err != nil {
		return err
	}
	return p.Store.Release(ctx, stream, shardID, owner, ho)
}

// Get implements lease.Store.
func (p *Partition) Get(ctx context.Context, stream, shardID string) (lease.Lease, error) {
	if err := p.cut("Get"); err != nil {
		return lease.Lease{}, err
	}
	return p.Store.Get(ctx, stream, shardID)
}

// GetMany implements lease.Store.
func (p *Partition) GetMany(ctx context.Context, stream string, shardIDs []string) (map[string]lease.Lease, error) {
	if err := p.cut("GetMany"); err != nil {
		return nil, err
	}
	return p.Store.GetMany(ctx, stream, shardIDs)
}

// List implements lease.Store.
func (p *Partition) List(ctx context.Context, stream string) ([]lease.Lease, error) {
	if err := p.cut("List"); err != nil {
		return nil, err
	}
	return p.Store.List(ctx, stream)
}

// SetStart implements lease.Store.
func (p *Partition) SetStart(ctx context.Context, stream, shardID string, start lease.Start) (bool, error) {
	if err := p.cut("SetStart"); err != nil {
		return false, err
	}
	return p.Store.SetStart(ctx, stream, shardID, start)
}

// Delete implements lease.Store.
func (p *Partition) Delete(ctx context.Context, stream, shardID string, counter, incarnation int64) error {
	if err := p.cut("Delete"); err != nil {
		return err
	}
	return p.Store.Delete(ctx, stream, shardID, counter, incarnation)
}

// Reset implements lease.Store.
func (p *Partition) Reset(ctx context.Context, stream, shardID, start string, force bool) (lease.Lease, error) {
	if err := p.cut("Reset"); err != nil {
		return lease.Lease{}, err
	}
	return p.Store.Reset(ctx, stream, shardID, start, force)
}

// GetGeneration implements lease.Store.
func (p *Partition) GetGeneration(ctx context.Context, stream string) (lease.Generation, error) {
	if err := p.cut("GetGeneration"); err != nil {
		return lease.Generation{}, err
	}
	return p.Store.GetGeneration(ctx, stream)
}

// PutGeneration implements lease.Store.
func (p *Partition) PutGeneration(ctx context.Context, stream string, g lease.Generation, prevOrder int64) error {
	if err := p.cut("PutGeneration"); err != nil {
		return err
	}
	return p.Store.PutGeneration(ctx, stream, g, prevOrder)
}

// Beat implements lease.Store.
func (p *Partition) Beat(ctx context.Context, stream string, hb lease.Heartbeat) (lease.Heartbeat, error) {
	if err := p.cut("Beat"); err != nil {
		return lease.Heartbeat{}, err
	}
	return p.Store.Beat(ctx, stream, hb)
}

// Runners implements lease.Store.
func (p *Partition) Runners(ctx context.Context, stream string) ([]lease.Heartbeat, error) {
	if err := p.cut("Runners"); err != nil {
		return nil, err
	}
	return p.Store.Runners(ctx, stream)
}

// Leave implements lease.Store.
func (p *Partition) Leave(ctx context.Context, stream, runner string, counter int64) error {
	if err := p.cut("Leave"); err != nil {
		return err
	}
	return p.Store.Leave(ctx, stream, runner, counter)
}

// CheckpointWindow implements lease.Store.
func (p *Partition) CheckpointWindow(ctx context.Context, stream, shardID, owner string, w lease.Window) error {
	if err := p.cut("CheckpointWindow"); err != nil {
		return err
	}
	return p.Store.CheckpointWindow(ctx, stream, shardID, owner, w)
}

// GetWindow implements lease.Store.
func (p *Partition) GetWindow(ctx context.Context, stream, shardID string) (lease.Window, error) {
	if err := p.cut("GetWindow"); err != nil {
		return lease.Window{}, err
	}
	return p.Store.GetWindow(ctx, stream, shardID)
}
