package reader

import "time"

// A shard's read limits (shared by every consumer of the shard): GetRecords
// calls a second and bytes a second.
const (
	ShardReadsPerSecond = 5
	ShardReadBytes      = 2 << 20 // 2 MiB
)

// pacer keeps one reader's GetRecords calls within a shard's limits: at
// most calls in any one second, and bytes a second on average (a token
// bucket holding one second of it, which a large answer may overdraw: the
// next call waits until the debt is repaid, as Kinesis makes it). It counts
// a call when its answer arrives, which is after Kinesis counted it, so a
// reader paced by it is never the cause of its own throttling, whatever the
// latency of the calls. The zero pacer (calls 0) never waits.
type pacer struct {
	calls int
	rate  float64 // bytes a second

	answers []time.Time // the latest calls' answers, oldest first, at most calls

	tokens float64
	at     time.Time
	filled bool
}

func newPacer(calls int, bytesPerSecond float64) pacer {
	return pacer{calls: calls, rate: bytesPerSecond}
}

// delay is how long to wait from now before the next call.
func (p *pacer) delay(now time.Time) time.Duration {
	if p.calls == 0 {
		return 0
	}
	var d time.Duration
	if len(p.answers) == p.calls {
		d = max(d, p.answers[0].Add(time.Second).Sub(now))
	}
	if p.filled {
		p.fill(now)
		if p.tokens <= 0 {
			d = max(d, time.Duration((-p.tokens/p.rate)*float64(time.Second))+time.Millisecond)
		}
	}
	return max(d, 0)
}

// done records a call answered at now that returned n bytes (records' data
// and partition keys; 0 for a failed call).
func (p *pacer) done(now time.Time, n int) {
	if p.calls == 0 {
		return
	}
	if len(p.answers) == p.calls {
		copy(p.answers, p.answers[1:])
		p.answers = p.answers[:p.calls-1]
	}
	p.answers = append(p.answers, now)
	if !p.filled {
		p.tokens, p.at, p.filled = p.rate, now, true
	}
	p.fill(now)
	p.tokens -= float64(n)
}

func (p *pacer) fill(now time.Time) {
	if dt := now.Sub(p.at).Seconds(); dt > 0 {
		p.tokens = min(p.rate, p.tokens+dt*p.rate)
		p.at = now
	}
}
