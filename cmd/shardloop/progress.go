package main

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardloop/shardloop/pkg/metrics"
	"github.com/shardloop/shardloop/pkg/runner"
)

// DefaultProgressEvery is how often `shardloop run` logs its progress line.
const DefaultProgressEvery = 30 * time.Second

// runProgress counts what the runner's loops deliver and how far behind the
// tip each shard's last read was, for run's periodic progress line; every
// hook also goes to the metrics recorder it wraps.
type runProgress struct {
	*metrics.Recorder
	delivered atomic.Int64
	mu        sync.Mutex
	behind    map[string]int64 // shard id → the last read's MillisBehindLatest
}

func newRunProgress(rec *metrics.Recorder) *runProgress {
	return &runProgress{Recorder: rec, behind: map[string]int64{}}
}

func (p *runProgress) RecordsDelivered(stream, shardID string, n int) {
	p.delivered.Add(int64(n))
	p.Recorder.RecordsDelivered(stream, shardID, n)
}

func (p *runProgress) MillisBehindLatest(stream, shardID string, ms int64) {
	p.mu.Lock()
	p.behind[shardID] = ms
	p.mu.Unlock()
	p.Recorder.MillisBehindLatest(stream, shardID, ms)
}

// progressLine is one progress report: what was delivered since the last
// one and in all, and of the shards this runner holds, how far behind the
// tip the most lagging one was at its last read.
type progressLine struct {
	delivered, since int64
	perSecond        float64
	held             int
	maxLag           time.Duration
	lagging          string // its shard id; "" when no held shard has read yet
}

// line reports progress over the last `over`, for the shards held.
func (p *runProgress) line(last int64, over time.Duration, held []string) progressLine {
	l := progressLine{delivered: p.delivered.Load(), held: len(held)}
	l.since = l.delivered - last
	if over > 0 {
		l.perSecond = float64(l.since) / over.Seconds()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range held {
		if ms, ok := p.behind[id]; ok && (l.lagging == "" || time.Duration(ms)*time.Millisecond > l.maxLag) {
			l.maxLag, l.lagging = time.Duration(ms)*time.Millisecond, id
		}
	}
	return l
}

// heldShards returns the shards whose loops run on r.
func heldShards(r *runner.Runner) []string {
	var ids []string
	for _, l := range r.Loops() {
		if !l.Done {
			ids = append(ids, l.ShardID)
		}
	}
	return ids
}

// reportProgress logs a progress line every `every` until ctx ends.
func reportProgress(ctx context.Context, log *slog.Logger, every time.Duration, p *runProgress, held func() []string) {
	t := time.NewTicker(every)
	defer t.Stop()
	var last int64
	prev := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			l := p.line(last, now.Sub(prev), held())
			last, prev = l.delivered, now
			attrs := []any{"delivered", l.delivered, "delivered_since_last", l.since, "records_per_s", round1(l.perSecond), "shards_held", l.held}
			if l.lagging != "" {
				attrs = append(attrs, "max_lag", l.maxLag.Round(time.Millisecond).String(), "max_lag_shard", l.lagging)
			}
			log.InfoContext(ctx, "progress", attrs...)
		}
	}
}

func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }
