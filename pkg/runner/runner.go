// Package runner drives shardloop in one process: a coordinator and one
// goroutine per shard loop, in place of the EventBridge schedule and Step
// Functions. The goroutines run the same reader.Run as the shardreader
// Lambda, iteration after iteration, with the loop state passed along as the
// state machine would pass it. It backs `shardloop run`, `make demo` and the
// end-to-end tests.
package runner

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/shardloop/shardloop/pkg/coordinator"
	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/reader"
)

// KinesisAPI is what the coordinator and the readers call on Kinesis.
type KinesisAPI interface {
	coordinator.KinesisAPI
	reader.KinesisAPI
}

// Options configure a Runner.
type Options struct {
	Subscriptions []coordinator.Subscription
	Store         lease.Store
	Kinesis       KinesisAPI
	// Reader is the template of every loop's reader options; its Kinesis,
	// Store and Nudge are set by the runner. Reader.Target is required.
	Reader reader.Options
	// RelistInterval is how often the coordinator passes unprompted, as the
	// deployment's one-minute schedule does; default 1 min. Between those
	// passes it runs only for events, as a deployment without a window:
	// a reader's nudge (SHARD_END, a release) and a loop killed (Kill, as a
	// failed execution), whose shard it watches until the lease lapses.
	RelistInterval time.Duration
	Logger         *slog.Logger
}

// Runner is a coordinator plus its loops in one process.
type Runner struct {
	opts  Options
	coord *coordinator.Coordinator
	log   *slog.Logger

	mu    sync.Mutex
	loops map[string]*loop // by owner
	wg    sync.WaitGroup
	base  context.Context
}

type loop struct {
	info   LoopInfo
	cancel context.CancelFunc
	killed *killSwitch
}

// LoopInfo describes one running or finished loop.
type LoopInfo struct {
	coordinator.Loop
	Started    time.Time
	Iterations int
	Reason     string // of the last iteration
	Done       bool
	Killed     bool
}

// New validates the options.
func New(opts Options) (*Runner, error) {
	if opts.Reader.Target == nil {
		return nil, errors.New("runner: Reader.Target: want a target")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Runner{opts: opts, log: opts.Logger, loops: map[string]*loop{}}
	c, err := coordinator.New(coordinator.Config{
		Subscriptions:  opts.Subscriptions,
		RelistInterval: opts.RelistInterval,
		LeaseDuration:  opts.Reader.LeaseDuration,
		Clock:          opts.Reader.Clock,
		Name:           "shardloop run",
		Logger:         opts.Logger,
	}, opts.Store, opts.Kinesis, coordinator.StarterFunc(r.start))
	if err != nil {
		return nil, err
	}
	r.coord = c
	return r, nil
}

// Coordinator returns the runner's coordinator.
func (r *Runner) Coordinator() *coordinator.Coordinator { return r.coord }

// Run runs the coordinator until ctx ends, then waits for every loop to
// return. Loops end with ctx too, keeping their leases (they expire), as a
// stopped process would.
func (r *Runner) Run(ctx context.Context) error {
	r.mu.Lock()
	r.base = ctx
	r.mu.Unlock()
	var err error
	for ctx.Err() == nil {
		// The coordinator as a deployment without a window runs it: a pass
		// every RelistInterval, and at events (coordinator.Serve).
		err = r.coord.Serve(ctx, r.opts.RelistInterval)
		if err != nil && ctx.Err() == nil {
			r.log.ErrorContext(ctx, "coordinator run failed", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
	r.wg.Wait()
	return nil
}

// start is the local Starter: one goroutine per loop.
func (r *Runner) start(_ context.Context, l coordinator.Loop) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.base == nil || r.base.Err() != nil {
		return errors.New("runner is not running")
	}
	if _, dup := r.loops[l.Owner]; dup {
		return nil
	}
	ctx, cancel := context.WithCancel(r.base)
	lp := &loop{info: LoopInfo{Loop: l, Started: time.Now()}, cancel: cancel, killed: &killSwitch{}}
	r.loops[l.Owner] = lp
	r.wg.Go(func() { r.run(ctx, lp) })
	return nil
}

func (r *Runner) run(ctx context.Context, lp *loop) {
	defer lp.cancel()
	opts := r.opts.Reader
	opts.Kinesis = r.opts.Kinesis
	opts.Store = deadStore{Store: r.opts.Store, ks: lp.killed}
	opts.Target = deadTarget{Target: r.opts.Reader.Target, ks: lp.killed}
	opts.Nudge = func(context.Context) { r.coord.Nudge() }
	st := reader.State{Stream: lp.info.Stream, StreamARN: lp.info.StreamARN, ShardID: lp.info.ShardID, Owner: lp.info.Owner}
	ctx = context.WithValue(ctx, loopKey{}, lp.info.Owner)
	log := r.log.With("stream", st.Stream, "shard_id", st.ShardID, "owner", st.Owner)
	for ctx.Err() == nil && !lp.killed.dead() {
		next, err := reader.Run(ctx, opts, st)
		if err != nil {
			if ctx.Err() != nil || lp.killed.dead() {
				break
			}
			// An invocation error: Step Functions would retry the task with
			// the same input after a pause.
			log.ErrorContext(ctx, "reader run failed; retrying", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		st = next
		r.mu.Lock()
		lp.info.Iterations++
		lp.info.Reason = string(st.Reason)
		r.mu.Unlock()
		if !st.Continue {
			break
		}
		// On ContinueAsNew Step Functions would start a fresh execution with
		// this state (iteration already 0); locally the goroutine goes on.
	}
	r.mu.Lock()
	lp.info.Done = true
	r.mu.Unlock()
	log.InfoContext(ctx, "loop ended", "reason", st.Reason)
	// As a Step Functions execution that ends makes the coordinator look
	// again: a loop that died or lost its lease leaves a shard to take over
	// once its lease lapses, which the coordinator then watches for.
	if ctx.Err() == nil {
		r.coord.Nudge()
	}
}

// loopKey keys the owner of the loop a reader run works for in its context.
type loopKey struct{}

// LoopOwner returns the owner id of the loop whose reader run ctx belongs
// to (the reader hands its context down to the target, the lease store and
// the Kinesis client): which loop made a call, for harnesses that check who
// delivered what. ok is false outside a runner's loop.
func LoopOwner(ctx context.Context) (owner string, ok bool) {
	owner, ok = ctx.Value(loopKey{}).(string)
	return owner, ok
}

// Kill ends a shard's running loop as a crash would: from now on it writes
// nothing to the lease store and delivers nothing, and it never releases
// its lease, which then expires and is taken over. It returns the owner
// killed, or "" when no loop of that shard runs.
func (r *Runner) Kill(stream, shardID string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for owner, lp := range r.loops {
		if lp.info.Stream == stream && lp.info.ShardID == shardID && !lp.info.Done {
			lp.killed.kill()
			lp.info.Killed = true
			lp.cancel()
			r.coord.Failed(lp.info.Loop) // as the execution's status change does: watch the shard, take it once the lease lapses
			return owner
		}
	}
	return ""
}

// Loops returns every loop started so far, oldest first.
func (r *Runner) Loops() []LoopInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]LoopInfo, 0, len(r.loops))
	for _, lp := range r.loops {
		out = append(out, lp.info)
	}
	slices.SortFunc(out, func(a, b LoopInfo) int { return a.Started.Compare(b.Started) })
	return out
}

// killSwitch marks a loop dead.
type killSwitch struct {
	mu sync.Mutex
	d  bool
}

func (k *killSwitch) kill() { k.mu.Lock(); k.d = true; k.mu.Unlock() }
func (k *killSwitch) dead() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.d
}

// errKilled is what a killed loop's writes fail with.
var errKilled = errors.New("loop killed")

// deadStore refuses every write of a killed loop, as a dead process makes none.
type deadStore struct {
	lease.Store
	ks *killSwitch
}

func (d deadStore) Take(ctx context.Context, stream, shardID, owner string, opts ...lease.TakeOption) (lease.Lease, error) {
	if d.ks.dead() {
		return lease.Lease{}, errKilled
	}
	return d.Store.Take(ctx, stream, shardID, owner, opts...)
}

func (d deadStore) Renew(ctx context.Context, stream, shardID, owner string) (lease.Lease, error) {
	if d.ks.dead() {
		return lease.Lease{}, errKilled
	}
	return d.Store.Renew(ctx, stream, shardID, owner)
}

func (d deadStore) Checkpoint(ctx context.Context, stream, shardID, owner, seq string) (lease.Lease, error) {
	if d.ks.dead() {
		return lease.Lease{}, errKilled
	}
	return d.Store.Checkpoint(ctx, stream, shardID, owner, seq)
}

func (d deadStore) Release(ctx context.Context, stream, shardID, owner string) error {
	if d.ks.dead() {
		return errKilled
	}
	return d.Store.Release(ctx, stream, shardID, owner)
}

// deadTarget delivers nothing more once its loop is killed.
type deadTarget struct {
	reader.Target
	ks *killSwitch
}

func (d deadTarget) Deliver(ctx context.Context, b reader.Batch) (int, error) {
	if d.ks.dead() {
		return 0, errKilled
	}
	return d.Target.Deliver(ctx, b)
}
