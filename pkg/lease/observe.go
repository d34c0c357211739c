package lease

import (
	"sync"
	"time"
)

// Observer judges whether leases have lapsed the way the Kinesis Client
// Library does, without trusting any other host's clock: a lease whose row
// names an owner has lapsed once this observer has seen the row with the
// same owner and counter for a full lease duration on its own clock. Its
// holder renews (and so bumps the counter) well inside that time while it
// lives, and stops delivering before the duration has passed since the send
// time of its last successful renewal (Holder), which is never later than the
// moment this observer first saw the counter that renewal wrote. A take or a
// delete of a lapsed lease is then made conditional on that counter
// (IfCounter, Delete), so a renewal that lands in between wins.
//
// A lease covers what its holder may still have running, not only the row:
// an invocation of the user's function cannot be cancelled, so the row
// records a fence (Lease.Fence), how long such invocations may run past the
// holder's deadline, and a held row lapses only after a lease duration plus
// its fence. A row released (or handed back to the observer's own loop,
// ObserveAs) with a fence lapses after the fence alone; with none it is
// free at once. An Observer is safe for concurrent use.
type Observer struct {
	duration time.Duration

	mu   sync.Mutex
	seen map[string]seen // by lease key
}

type seen struct {
	owner   string
	counter int64
	since   time.Time
}

// Verdict is what an Observer concludes about one row.
type Verdict struct {
	// Free: the row names no owner and no fence; it may be taken at once.
	Free bool
	// Lapsed: the owner and counter have not changed for as long as the
	// row requires (a lease duration plus its fence for a held row, its
	// fence for a released one).
	Lapsed bool
	// Counter is the counter the verdict is about: pass it to IfCounter or
	// Delete.
	Counter int64
	// LapsesAt is when the lease lapses if nothing changes (zero for a free
	// row); a watcher should look again just after it.
	LapsesAt time.Time
}

// Available reports whether the row may be taken (with IfCounter(Counter)).
func (v Verdict) Available() bool { return v.Free || v.Lapsed }

// NewObserver returns an Observer for leases of duration d (default
// DefaultDuration when d is 0).
func NewObserver(d time.Duration) *Observer {
	if d <= 0 {
		d = DefaultDuration
	}
	return &Observer{duration: d, seen: map[string]seen{}}
}

// Observe records row as read at now (the observer's clock, read after the
// row arrived) and returns the verdict for a taker from outside the row's
// loop (a coordinator, another runner).
func (o *Observer) Observe(row Lease, now time.Time) Verdict { return o.ObserveAs(row, now, "") }

// ObserveAs is Observe for a taker of loop family (a run of the loop
// taking the row with WithOwnerFamily): a row its loop holds between runs
// (handed back, or taken by the coordinator for it) is to that taker as a
// released one; a row a run of the loop still holds is held.
func (o *Observer) ObserveAs(row Lease, now time.Time, family string) Verdict {
	released := row.Owner == "" || (family != "" && row.Owner == family)
	if released && row.Fence <= 0 {
		o.mu.Lock()
		delete(o.seen, row.Key())
		o.mu.Unlock()
		return Verdict{Free: true, Counter: row.Counter}
	}
	wait := max(row.Fence, 0)
	if !released {
		wait += o.duration
	}
	return o.observe(row.Key(), row.Owner, row.Counter, now, wait)
}

// Resume makes the observer's watch of row (its owner and counter) begin
// waited before now, unless it already began earlier: a watch carried over
// from an earlier observer as a duration (on any host: the time between the
// two observers only adds to it).
func (o *Observer) Resume(row Lease, now time.Time, waited time.Duration) {
	if row.Owner == "" && row.Fence <= 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	since := now.Add(-waited)
	s, ok := o.seen[row.Key()]
	if ok && s.owner == row.Owner && s.counter == row.Counter && !s.since.After(since) {
		return
	}
	o.seen[row.Key()] = seen{owner: row.Owner, counter: row.Counter, since: since}
}

// Waited is how long, by now, the observer has watched row's owner and
// counter stand still; 0 when it is not watching them.
func (o *Observer) Waited(row Lease, now time.Time) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	s, ok := o.seen[row.Key()]
	if !ok || s.owner != row.Owner || s.counter != row.Counter || now.Before(s.since) {
		return 0
	}
	return now.Sub(s.since)
}

// ObserveRunner records a runner's heartbeat row of stream as read at now
// and returns the verdict: Lapsed once the row's counter has stood still for
// a lease duration on this observer's clock (the runner is gone; pass
// Counter to Store.Leave to remove it). It is never Free. A runner listed
// without a row (Counter 0) lapses the same way.
func (o *Observer) ObserveRunner(stream string, hb Heartbeat, now time.Time) Verdict {
	return o.observe(runnerKey(stream, hb.Runner), hb.Runner, hb.Counter, now, o.duration)
}

func (o *Observer) observe(key, owner string, counter int64, now time.Time, wait time.Duration) Verdict {
	o.mu.Lock()
	defer o.mu.Unlock()
	s, ok := o.seen[key]
	if !ok || s.owner != owner || s.counter != counter || now.Before(s.since) {
		s = seen{owner: owner, counter: counter, since: now}
		o.seen[key] = s
	}
	at := s.since.Add(wait)
	return Verdict{Lapsed: !now.Before(at), Counter: counter, LapsesAt: at}
}

// Forget drops what the observer remembers of a row (a shard gone from the
// stream), so memory stays bounded by the rows still watched.
func (o *Observer) Forget(stream, shardID string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.seen, Key(stream, shardID))
}

// ForgetRunner drops what the observer remembers of a runner's heartbeat
// row (a runner that left).
func (o *Observer) ForgetRunner(stream, runner string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.seen, runnerKey(stream, runner))
}
