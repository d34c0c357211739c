package sim

import (
	"context"
	"sync"
	"time"
)

// hostClock is one host's clock: virtual time (time.Now inside a synctest
// bubble) offset by a skew and running at 1+drift the rate of virtual
// time since the world began. It is what the code under test is given as
// its Clock; timers and sleeps still run on virtual time, as a host's
// timers run on its monotonic clock whatever its wall clock says.
type hostClock struct {
	name  string
	base  time.Time
	skew  time.Duration
	drift float64
}

// Now is the host's time.
func (c hostClock) Now() time.Time {
	t := time.Now()
	return t.Add(c.skew + time.Duration(float64(t.Sub(c.base))*c.drift)).Round(0)
}

// sleep waits d of virtual time or until ctx ends, on a timer of the
// world's: every simulated latency is a sleep, and a timer made for each
// was the largest part of what a world allocated.
func (w *World) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := w.timers.get(d)
	defer w.timers.put(t)
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// timerPool keeps a world's stopped timers for its sleeps to use again.
// It belongs to one world: a timer made in a synctest bubble may not be
// used outside it, so a pool shared by worlds (sync.Pool) would not do.
// Since Go 1.23 a timer stopped or reset delivers no stale tick, so a
// timer reused fires only at its new time.
type timerPool struct {
	mu   sync.Mutex
	free []*time.Timer
}

// get returns a timer that fires after d.
func (p *timerPool) get(d time.Duration) *time.Timer {
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		t := p.free[n-1]
		p.free = p.free[:n-1]
		p.mu.Unlock()
		t.Reset(d)
		return t
	}
	p.mu.Unlock()
	return time.NewTimer(d)
}

// put stops t and keeps it for a later get.
func (p *timerPool) put(t *time.Timer) {
	t.Stop()
	p.mu.Lock()
	p.free = append(p.free, t)
	p.mu.Unlock()
}
