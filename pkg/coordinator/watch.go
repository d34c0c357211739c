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
	res, err := c.WatchAll(ctx, []Loop{loop})
	return res[0], err
}

// WatchAll watches loops (see Watch) together: those of one stream with one
// read of their rows per round and one pass per lapse, however many they
// are. It returns the results in the order of loops, with the errors joined.
func (c *Coordinator) WatchAll(ctx context.Context, loops []Loop) ([]WatchResult, error) {
	out := make([]WatchResult, len(loops))
	byStream := map[string][]int{}
	var order []string
	var errs []error
	for i, l := range loops {
		out[i].Loop = l
		sub, ok := c.subscription(l.Stream)
		switch {
		case !ok:
			errs = append(errs, &ConfigError{Field: "Loop.Stream", Reason: fmt.Sprintf("%q is not a stream this coordinator reads", l.Stream)})
			continue
		case l.ShardID == "":
			errs = append(errs, &ConfigError{Field: "Loop.ShardID", Reason: "want the shard of the loop"})
			continue
		case l.Owner == "":
			errs = append(errs, &ConfigError{Field: "Loop.Owner", Reason: "want the owner of the loop"})
			continue
		}
		name, _ := shards.StreamName(sub.Stream)
		if byStream[name] == nil {
			order = append(order, name)
		}
		byStream[name] = append(byStream[name], i)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, name := range order {
		idx := byStream[name]
		sub, _ := c.subscription(name)
		wg.Go(func() {
			ls := make([]Loop, len(idx))
			for j, i := range idx {
				ls[j] = loops[i]
			}
			res, err := c.watchStream(ctx, sub, name, ls)
			mu.Lock()
			defer mu.Unlock()
			for j, i := range idx {
				out[i] = res[j]
			}
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// watchStream watches loops of one stream until each has an outcome.
func (c *Coordinator) watchStream(ctx context.Context, sub Subscription, name string, loops []Loop) ([]WatchResult, error) {
	begin := c.cfg.Clock()
	res := make([]WatchResult, len(loops))
	open := make([]int, len(loops))
	for i, l := range loops {
		res[i].Loop, open[i] = l, i
	}
	log := c.cfg.Logger.With("stream", name)
	done := func(i int, o WatchOutcome) {
		res[i].Outcome, res[i].Took = o, c.cfg.Clock().Sub(begin)
		if o == WatchTaken {
			log.InfoContext(ctx, "watch: took over the shard", "shard_id", loops[i].ShardID, "owner", loops[i].Owner,
				"new_owner", res[i].Started.Owner, "after", res[i].Took)
		}
	}
	endAll := func(o WatchOutcome) {
		for _, i := range open {
			done(i, o)
		}
		open = nil
	}
	failures, stalls := 0, 0
	retry := func(err error) error {
		failures++
		if failures >= watchAttempts || ctx.Err() != nil {
			return err
		}
		log.WarnContext(ctx, "watch: retrying", "err", err)
		return c.sleep(ctx, watchRetryWait)
	}
	for len(open) > 0 {
		ids := make([]string, 0, len(open))
		for _, i := range open {
			ids = append(ids, loops[i].ShardID)
		}
		rows, err := c.store.GetMany(ctx, name, ids)
		if err != nil {
			if err := retry(fmt.Errorf("watch %s: read leases: %w", name, err)); err != nil {
				return res, err
			}
			continue
		}
		now := c.cfg.Clock() // read after the rows arrived
		var next time.Time
		available := false
		var keep []int
		for _, i := range open {
			row, found := rows[loops[i].ShardID]
			switch {
			case found && row.Finished():
				done(i, WatchFinished)
				continue
			case found && row.Held() && lease.LoopOwner(row.Owner) != lease.LoopOwner(loops[i].Owner):
				res[i].Owner = row.Owner
				done(i, WatchOther)
				continue
			}
			keep = append(keep, i)
			if !found {
				available = true // no row: a pass creates and takes it
				continue
			}
			if v := c.observer.Observe(row, now); v.Available() {
				available = true
			} else if next.IsZero() || v.LapsesAt.Before(next) {
				next = v.LapsesAt
			}
		}
		open = keep
		if len(open) == 0 {
			break
		}
		if !available {
			wait := max(next.Sub(now)+expiryGrace, minWait)
			if d, ok := ctx.Deadline(); ok && now.Add(wait+watchMargin).After(d) {
				log.InfoContext(ctx, "watch: a loop still holds its lease; a later pass takes the shard once it lapses", "shards", ids, "lapses_at", next)
				endAll(WatchUnfinished)
				break
			}
			if err := c.sleep(ctx, wait); err != nil {
				return res, err
			}
			continue
		}
		// Free, lapsed or without a row: a pass decides and takes.
		pr, perr := c.passStream(ctx, sub)
		progress := false
		keep = nil
		for _, i := range open {
			id := loops[i].ShardID
			if j := slices.IndexFunc(pr.Started, func(l Loop) bool { return l.ShardID == id }); j >= 0 {
				res[i].Started = pr.Started[j]
				done(i, WatchTaken)
				progress = true
				continue
			}
			why, waiting := pr.Waiting[id]
			switch {
			case waiting && (why.Kind == shards.Held || why.Kind == shards.Fenced):
				keep = append(keep, i) // renewed or taken in between: the next read says which
			case waiting:
				res[i].Reason = why
				done(i, WatchNotLeasable)
				progress = true
			case perr == nil && pr.Lost == 0:
				done(i, WatchNotLeasable) // not listed
				progress = true
			default:
				keep = append(keep, i) // the take failed or was lost: the next read says which
			}
		}
		open = keep
		if perr != nil {
			if err := retry(fmt.Errorf("watch %s: %w", name, perr)); err != nil {
				return res, err
			}
			continue
		}
		if !progress {
			if stalls++; stalls >= watchAttempts {
				endAll(WatchNotLeasable) // the passes keep losing them, or they keep changing hands
			}
		}
	}
	return res, nil
}

// Watch bounds: the attempts at a failed read or pass (and passes that
// take none of the watched shards), the wait between them, and the time a
// watch keeps before its deadline for a last read and pass.
const (
	watchAttempts  = 5
	watchRetryWait = time.Second
	watchMargin    = 3 * time.Second
)

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
