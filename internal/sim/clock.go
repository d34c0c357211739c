package sim

import (
	"context"
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

// sleep waits d of virtual time or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
