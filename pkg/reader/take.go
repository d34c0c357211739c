package reader

import (
	"context"
	"errors"
	"time"

	"github.com/shardloop/shardloop/pkg/lease"
)

// take takes the shard's lease for owner, a run of the loop r.in.Owner,
// and returns its holder with the row as taken. The loop's coordinator
// took the row for it, or its previous run handed it back: then the take
// succeeds at once. When the row is still held by an earlier run of the
// loop (it crashed, or it runs on beside this run, a retried invocation),
// or was handed back with invocations that may still run, this run is a
// taker like any other: it watches the row on its own clock until its
// counter has stood still for as long as the row requires (a lease plus
// its fence: lease.Observer), delivering nothing, and takes it then. A
// watch that outlasts the run is handed to the next run (the returned
// Watch, h nil). A row held by another loop, or a revoked child, is not
// this loop's to wait for: h and the watch are nil (the loop ends,
// ReasonLeaseLost).
func (r *run) take(ctx context.Context, owner string, carried *Watch) (h *lease.Holder, row lease.Lease, watch *Watch, err error) {
	o, loop := r.o, r.in.Owner
	hold := lease.HolderOptions{
		Store: o.Store, Stream: r.in.Stream, ShardID: r.in.ShardID, Owner: owner,
		Duration: o.LeaseDuration, RenewInterval: o.RenewInterval, MaxRun: o.TargetTimeout, Fence: o.Fence, Clock: o.Clock, Logger: r.log,
		Lag: o.Lag,
	}
	obs := lease.NewObserver(o.LeaseDuration)
	opts := []lease.TakeOption{lease.WithOwnerFamily(loop)}
	var lastTry int64 = -1 // the counter an IfCounter take was last refused on
	waited := func(cur lease.Lease, now time.Time) *Watch {
		return &Watch{Owner: cur.Owner, Counter: cur.Counter, WaitedMs: obs.Waited(cur, now).Milliseconds()}
	}
	var since time.Time // when this run first found the row held
	for {
		h, row, err := lease.Hold(ctx, hold, opts...)
		if err == nil {
			if since.IsZero() {
				return h, row, nil, nil
			}
			r.log.Info("took the shard after waiting out its previous holder", "waited", o.Clock().Sub(since).Round(time.Millisecond))
			return h, row, nil, nil
		}
		if !errors.Is(err, lease.ErrHeld) {
			return nil, lease.Lease{}, nil, err
		}
		cur, found, err := r.heldRow(ctx, err)
		if err != nil {
			return nil, lease.Lease{}, nil, err
		}
		if !found {
			continue // deleted meanwhile: take it afresh
		}
		if !lease.InFamily(cur.Owner, loop) || (cur.Revoked && len(cur.ParentShardIDs) > 0) {
			r.log.Warn("lease held by another owner", "holder", cur.Owner)
			return nil, lease.Lease{}, nil, nil
		}
		now := o.Clock()
		if carried != nil && carried.Owner == cur.Owner && carried.Counter == cur.Counter {
			obs.Resume(cur, now, time.Duration(carried.WaitedMs)*time.Millisecond)
		}
		carried = nil
		v := obs.ObserveAs(cur, now, loop)
		if v.Available() {
			if v.Counter == lastTry {
				// Refused on a counter it watched stand still: the row is
				// not this loop's to take (a start recorded meanwhile would
				// have moved the counter).
				r.log.Warn("lease not takeable by this loop", "holder", cur.Owner, "counter", cur.Counter)
				return nil, lease.Lease{}, nil, nil
			}
			lastTry = v.Counter
			opts = []lease.TakeOption{lease.WithOwnerFamily(loop), lease.IfCounter(v.Counter)}
			continue
		}
		if since.IsZero() {
			since = now
			r.log.Info("an earlier run of this loop may still be delivering; waiting it out before delivering",
				"holder", cur.Owner, "fence", cur.Fence, "lapses_at", v.LapsesAt)
		}
		stop := r.start.Add(o.RunLength)
		if dl, ok := ctx.Deadline(); ok {
			stop = minTime(stop, dl.Add(-o.Margin))
		}
		if !now.Before(stop) {
			return nil, lease.Lease{}, waited(cur, now), nil
		}
		wait := min(v.LapsesAt.Sub(now), o.PollInterval, stop.Sub(now))
		if err := o.sleep(ctx, max(wait, time.Millisecond)); err != nil {
			return nil, lease.Lease{}, waited(cur, now), nil
		}
	}
}

// heldRow is the row a refused take found: the refusal's, or read again
// (found false when it is gone).
func (r *run) heldRow(ctx context.Context, refusal error) (lease.Lease, bool, error) {
	var ce *lease.ConflictError
	if errors.As(refusal, &ce) && ce.Current != nil {
		return *ce.Current, true, nil
	}
	row, err := r.o.Store.Get(ctx, r.in.Stream, r.in.ShardID)
	if errors.Is(err, lease.ErrNotFound) {
		return lease.Lease{}, false, nil
	}
	return row, err == nil, err
}
