package sim

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/shardloop/shardloop/pkg/coordinator"
	"github.com/shardloop/shardloop/pkg/runner"
)

// local is a deployment of local runners: Runners processes of `shardloop
// run` (pkg/runner: a coordinator and a goroutine per loop), each on a host
// of its own, sharing the table. A redeploy stops them (as Ctrl-C: loops
// end keeping their leases) and starts them again with the new start.
type local struct {
	w *World
	d Deployment

	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	start   string
	procs   []*proc
	clocks  []hostClock
	stopped bool
	wg      sync.WaitGroup
}

// proc is one runner process.
type proc struct {
	r      *runner.Runner
	cancel context.CancelFunc
	done   chan struct{}
}

func newLocal(w *World, d Deployment) *local {
	l := &local{w: w, d: d, procs: make([]*proc, max(1, d.Runners))}
	l.ctx, l.cancel = context.WithCancel(w.ctx)
	for range l.procs {
		l.clocks = append(l.clocks, w.newHost(d.Name))
	}
	return l
}

func (l *local) deploy(start string, stagger time.Duration) {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return
	}
	l.start = start
	old := l.procs
	if stagger > 0 {
		l.mu.Unlock()
		l.wg.Go(func() { l.roll(len(old), stagger) })
		return
	}
	l.procs = make([]*proc, len(old))
	l.mu.Unlock()
	for _, p := range old {
		stopProc(p)
	}
	for i := range old {
		l.startProc(i)
	}
}

// roll restarts the n processes one at a time, stagger apart, with the
// start current when each restarts: until the last one has, processes of
// both configurations share the stream, and their coordinators race to
// apply (or keep) the generation.
func (l *local) roll(n int, stagger time.Duration) {
	for i := range n {
		if i > 0 {
			select {
			case <-l.ctx.Done():
				return
			case <-time.After(stagger):
			}
		}
		l.mu.Lock()
		p := l.procs[i]
		l.procs[i] = nil
		l.mu.Unlock()
		stopProc(p)
		l.startProc(i)
	}
}

// startProc starts runner process i with the current start.
func (l *local) startProc(i int) {
	w := l.w
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped || l.procs[i] != nil {
		return
	}
	clock := l.clocks[i]
	r, err := runner.New(runner.Options{
		// Stamped as `shardloop run` stamps it: Kinesis's clock (the
		// world's own) when the process starts, to the second of its Date.
		Subscriptions:  []coordinator.Subscription{{Stream: streamName, Start: l.start, DeployedAt: time.Now().Truncate(time.Second)}},
		Store:          &store{t: w.table, dep: l.d.Name},
		Kinesis:        w.net,
		Reader:         w.readerOptions(l.d.Name, clock, nil, nil, w.newTarget(l.d.Name)),
		RelistInterval: w.cfg.Reader.Relist,
		Logger:         slog.New(slog.DiscardHandler),
	})
	if err != nil {
		w.chk.mu.Lock()
		w.chk.fail(shardKey{}, "%s: runner.New: %v", l.d.Name, err)
		w.chk.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(withHost(l.ctx, clock.name))
	p := &proc{r: r, cancel: cancel, done: make(chan struct{})}
	l.procs[i] = p
	go func() {
		defer close(p.done)
		_ = r.Run(ctx)
	}()
}

func stopProc(p *proc) {
	if p == nil {
		return
	}
	p.cancel()
	<-p.done
}

func (l *local) kill(shardID string) bool {
	l.mu.Lock()
	procs := append([]*proc(nil), l.procs...)
	l.mu.Unlock()
	killed := false
	for _, p := range procs {
		if p != nil && p.r.Kill(streamName, shardID) != "" {
			killed = true
		}
	}
	return killed
}

// crash kills process pick with every loop in it, as a crash would (no
// release, nothing more written), and starts it again after pause.
func (l *local) crash(pick float64, pause time.Duration) {
	l.mu.Lock()
	i := int(pick*float64(len(l.procs))) % len(l.procs)
	p := l.procs[i]
	l.procs[i] = nil
	l.mu.Unlock()
	if p == nil {
		return
	}
	for _, lp := range p.r.Loops() {
		if !lp.Done {
			p.r.Kill(lp.Stream, lp.ShardID)
		}
	}
	stopProc(p)
	l.w.tr.add("", "", "%s: runner process %d crashed; restarts in %s", l.d.Name, i, pause)
	l.wg.Go(func() {
		select {
		case <-l.ctx.Done():
		case <-time.After(pause):
			l.startProc(i)
		}
	})
}

func (l *local) stop() {
	l.mu.Lock()
	l.stopped = true
	procs := l.procs
	l.mu.Unlock()
	for _, p := range procs {
		stopProc(p)
	}
	l.cancel()
	l.wg.Wait()
}
