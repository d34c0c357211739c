package kinesismem

import "time"

// window admits at most n calls in any one second: a call is refused while
// the n-th latest admitted call is less than a second old. It is how the
// model counts GetRecords and GetShardIterator calls (5 a second a shard).
type window struct {
	times []time.Time // the latest admitted calls, oldest first
}

func (w *window) allow(now time.Time, n int) bool {
	if len(w.times) == n {
		if now.Sub(w.times[0]) < time.Second {
			return false
		}
		copy(w.times, w.times[1:])
		w.times = w.times[:n-1]
	}
	w.times = append(w.times, now)
	return true
}

// bucket is a token bucket holding at most one second of its rate, full at
// first. Takes may overdraw it: a large read is served and the debt is
// repaid before the next one, as Kinesis blocks a shard's reads for seconds
// after a 10 MB answer.
type bucket struct {
	tokens float64
	at     time.Time
	init   bool
}

func (b *bucket) fill(now time.Time, rate float64) {
	if !b.init {
		b.tokens, b.at, b.init = rate, now, true
		return
	}
	if dt := now.Sub(b.at).Seconds(); dt > 0 {
		b.tokens = min(rate, b.tokens+dt*rate)
	}
	b.at = now
}

// available reports whether the bucket holds at least need tokens (need 0:
// whether it is out of debt).
func (b *bucket) available(now time.Time, rate, need float64) bool {
	b.fill(now, rate)
	if need == 0 {
		return b.tokens > 0
	}
	return b.tokens >= need
}

func (b *bucket) take(n float64) { b.tokens -= n }
