package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/shards"
)

// WatchOutcome says how a Watch ended.
type WatchOutcome string

// The outcomes of a Watch.
const (
	// WatchTaken: the lease lapsed (or was released) and this coordinator
	// took the shard and started a loop for it (WatchResult.Started).
	WatchTaken WatchOutcome = "taken"
	// WatchOther: another loop holds the shard: it was taken over already,
	// by this coordinator or another one (WatchResult.Owner).
	WatchOther WatchOutcome = "other"
	// WatchFinished: the shard was read to its end; there is nothing to take.
	WatchFinished WatchOutcome = "finished"
	// WatchNotLeasable: the lease lapsed but the pass did not take the
	// shard: it waits on a parent, its row is of an earlier incarnation, or
	// the stream no longer lists it (WatchResult.Reason says which, when
	// known).
	WatchNotLeasable WatchOutcome = "not_leasable"
	// WatchUnfinished: the watched loop still held the lease (it renewed)
	// when the watch had to end, at its context's deadline. A later pass
	// takes the shard once the lease lapses.
	WatchUnfinished WatchOutcome = "unfinished"
)

// WatchResult is what a Watch found.
type WatchResult struct {
	// Loop is the loop watched.
	Loop    Loop
	Outcome WatchOutcome
	// Started is the loop this coordinator started for the shard (WatchTaken).
	Started Loop
	// Owner is the row's owner when the watch ended (WatchOther).
	Owner string
	// Reason is why the shard was not taken (WatchNotLeasable), when a pass
	// said; zero when the stream no longer lists the shard.
	Reason shards.Reason
	// Took is how long the watch lasted on the coordinator's clock.
	Took time.Duration
}

// Watch waits for the lease of a loop that died to lapse, then takes the
// shard: what the coordinator does when a shard loop's Step Functions
// execution ended FAILED, TIMED_OUT or ABORTED. loop names the stream,
// the shard and the loop's owner (the execution's input says them).
//
// Leases lapse by observation on this coordinator's clock: Watch reads the
// shard's row, and while the row is held by the loop (any of its runs) it
// reads it again just after the moment its counter will have stood still
// for a lease duration (lease.Observer), which is a lease duration after the
// first read unless an earlier pass of this coordinator saw the same
// counter. Once the row is free or lapsed, one pass over the stream takes it
// (conditional on the counter seen, so a renewal in between wins) and starts
// a new loop, as any pass would; the pass takes any other leasable shard too.
// A loop that still renews (the run of a stopped execution goes on to its
// end) is watched until it stops, or until ctx's deadline is too near for
// another read and pass: then the outcome is WatchUnfinished and a later
// pass (the schedule) takes the shard. Watch returns at once when another
// loop holds the row or the shard is read to its end.
//
// The error is one of reading the row or of the pass, after retries; an
// unknown stream or an empty shard or owner is an ErrInvalidConfig-matching
// *ConfigError.
func (c *Coordinator) Watch(ctx context.Context, loop Loop) (WatchResult, error) {
	begin := c.cfg.Clock()
	res := WatchResult{Loop: loop}
	done := func(o WatchOutcome) (WatchResult, error) {
		res.Outcome, res.Took = o, c.cfg.Clock().Sub(begin)
		return res, nil
	}
	sub, ok := c.subscription(loop.Stream)
	switch {
	case !ok:
		return res, &ConfigError{Field: "Loop.Stream", Reason: fmt.Sprintf("%q is not a stream this coordinator reads", loop.Stream)}
	case loop.ShardID == "":
		return res, &ConfigError{Field: "Loop.ShardID", Reason: "want the shard of the loop"}
	case loop.Owner == "":
		return res, &ConfigError{Field: "Loop.Owner", Reason: "want the owner of the loop"}
	}
	name, _ := shards.StreamName(sub.Stream)
	log := c.cfg.Logger.With("stream", name, "shard_id", loop.ShardID, "owner", loop.Owner)
	failures, passes := 0, 0
	retry := func(err error) error {
		failures++
		if failures >= watchAttempts || ctx.Err() != nil {
			return err
		}
		log.WarnContext(ctx, "watch: retrying", "err", err)
		return c.sleep(ctx, watchRetryWait)
	}
	for {
		row, err := c.store.Get(ctx, name, loop.ShardID)
		if err != nil && !errors.Is(err, lease.ErrNotFound) {
			if err := retry(fmt.Errorf("watch %s: read lease: %w", lease.Key(name, loop.ShardID), err)); err != nil {
				return res, err
			}
			continue
		}
		found := err == nil
		now := c.cfg.Clock() // read after the row arrived
		switch {
		case found && row.Finished():
			return done(WatchFinished)
		case found && row.Held() && lease.LoopOwner(row.Owner) != lease.LoopOwner(loop.Owner):
			res.Owner = row.Owner
			return done(WatchOther)
		}
		if found {
			if v := c.observer.Observe(row, now); !v.Available() {
				wait := max(v.LapsesAt.Sub(now)+expiryGrace, minWait)
				if d, ok := ctx.Deadline(); ok && now.Add(wait+watchMargin).After(d) {
					log.InfoContext(ctx, "watch: the loop still holds the lease; a later pass takes the shard once it lapses", "lapses_at", v.LapsesAt)
					return done(WatchUnfinished)
				}
				if err := c.sleep(ctx, wait); err != nil {
					return res, err
				}
				continue
			}
		}
		// Free, lapsed or without a row: a pass decides and takes.
		if passes++; passes > watchAttempts {
			return done(WatchNotLeasable) // the passes keep losing it, or it keeps changing hands
		}
		pr, err := c.passStream(ctx, sub)
		if err != nil && !slices.ContainsFunc(pr.Started, func(l Loop) bool { return l.ShardID == loop.ShardID }) {
			if err := retry(fmt.Errorf("watch %s: %w", lease.Key(name, loop.ShardID), err)); err != nil {
				return res, err
			}
			continue
		}
		for _, l := range pr.Started {
			if l.ShardID == loop.ShardID {
				res.Started = l
				log.InfoContext(ctx, "watch: took over the shard", "new_owner", l.Owner, "after", c.cfg.Clock().Sub(begin))
				return done(WatchTaken)
			}
		}
		why, waiting := pr.Waiting[loop.ShardID]
		switch {
		case waiting && why.Kind == shards.Held:
			continue // renewed or taken in between: the next read says which
		case waiting:
			res.Reason = why
			return done(WatchNotLeasable)
		case pr.Lost > 0:
			continue // another coordinator's take may have been this shard's
		default:
			return done(WatchNotLeasable) // not listed
		}
	}
}

// Watch bounds: the attempts at a failed read or pass, the wait between
// them, and the time a watch keeps before its deadline for a last read and
// pass.
const (
	watchAttempts  = 5
	watchRetryWait = time.Second
	watchMargin    = 3 * time.Second
)

// WatchAll watches each loop (see Watch) at once and returns the results in
// the order of loops, with the errors joined.
func (c *Coordinator) WatchAll(ctx context.Context, loops []Loop) ([]WatchResult, error) {
	out := make([]WatchResult, len(loops))
	errs := make([]error, len(loops))
	var wg sync.WaitGroup
	for i, l := range loops {
		wg.Go(func() { out[i], errs[i] = c.Watch(ctx, l) })
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// Once runs one pass, then watches the loops whose leases the pass found
// revoked until those lapse, and takes their shards: a revoked holder (a new
// start generation, a reset) stops at its next renewal and ends its loop
// without an execution failure, so no other event would bring the
// coordinator back for it. It is what a scheduled invocation and a nudge do
// when the coordinator has no window.
func (c *Coordinator) Once(ctx context.Context) (PassResult, []WatchResult, error) {
	res, err := c.Pass(ctx)
	revoked := res.Revoked()
	if len(revoked) == 0 {
		return res, nil, err
	}
	watched, werr := c.WatchAll(ctx, revoked)
	return res, watched, errors.Join(err, werr)
}

// Revoked returns the loops of every stream of the pass whose leases were
// revoked and had not lapsed yet.
func (r PassResult) Revoked() []Loop {
	var out []Loop
	for _, s := range r.Streams {
		out = append(out, s.Revoked...)
	}
	return out
}

// Failed tells a running Serve that loop's execution ended FAILED,
// TIMED_OUT or ABORTED (a killed loop, locally): Serve watches its shard
// and takes it once its lease lapses (see Watch). It never blocks; reports
// wait for a Serve to start.
func (c *Coordinator) Failed(loop Loop) {
	c.mu.Lock()
	c.failed = append(c.failed, loop)
	c.mu.Unlock()
	select {
	case c.failedSignal <- struct{}{}:
	default:
	}
}

// DefaultSchedule is how often Serve passes without an event: the
// deployment's EventBridge schedule.
const DefaultSchedule = time.Minute

// Serve runs the coordinator as a deployment without a window runs it,
// until ctx ends: one pass now and every `every` (the schedule; default
// DefaultSchedule), one pass at each Nudge (a reader at SHARD_END, or that
// released its lease), and a Watch for each loop reported to Failed (the
// execution-status rule), each in a goroutine of its own; after each pass,
// a Watch of the loops it found revoked (see Once). Between these it never
// relists: a loop that dies unreported is taken over by a scheduled pass
// once its lease has lapsed, which needs two scheduled passes that see the
// same counter. Serve returns nil once ctx ends and every watch has
// returned.
func (c *Coordinator) Serve(ctx context.Context, every time.Duration) error {
	if every <= 0 {
		every = DefaultSchedule
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	type key struct{ stream, shard, owner string }
	var mu sync.Mutex
	watching := map[key]bool{}
	watch := func(l Loop) {
		k := key{l.Stream, l.ShardID, lease.LoopOwner(l.Owner)}
		mu.Lock()
		defer mu.Unlock()
		if watching[k] {
			return // a watch of this loop runs already
		}
		watching[k] = true
		wg.Go(func() {
			defer func() { mu.Lock(); delete(watching, k); mu.Unlock() }()
			r, err := c.Watch(ctx, l)
			if err != nil && ctx.Err() == nil {
				c.cfg.Logger.ErrorContext(ctx, "watch failed", "stream", l.Stream, "shard_id", l.ShardID, "owner", l.Owner, "err", err)
				return
			}
			c.cfg.Logger.DebugContext(ctx, "watch done", "stream", l.Stream, "shard_id", l.ShardID, "owner", l.Owner, "outcome", r.Outcome, "took", r.Took)
		})
	}
	pass := func() {
		res, err := c.Pass(ctx)
		if err != nil && ctx.Err() == nil {
			c.cfg.Logger.ErrorContext(ctx, "coordinator pass failed", "err", err)
		}
		for _, l := range res.Revoked() {
			watch(l)
		}
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	pass()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			pass()
		case <-c.nudge:
			pass()
		case <-c.failedSignal:
			c.mu.Lock()
			failed := c.failed
			c.failed = nil
			c.mu.Unlock()
			for _, l := range failed {
				watch(l)
			}
		}
	}
}

// subscription returns the subscription of a stream given by name or ARN.
func (c *Coordinator) subscription(stream string) (Subscription, bool) {
	want, err := shards.StreamName(stream)
	if err != nil {
		return Subscription{}, false
	}
	for _, s := range c.cfg.Subscriptions {
		if name, _ := shards.StreamName(s.Stream); name == want {
			return s, true
		}
	}
	return Subscription{}, false
}

// sleep waits d or until ctx ends (then its error).
func (c *Coordinator) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
