// Package runner drives shardloop in one process: a coordinator and one
// goroutine per shard loop, in place of the EventBridge schedule and Step
// Functions. The goroutines run the same reader.Run as the shardreader
// Lambda, iteration after iteration, with the loop state passed along as the
// state machine would pass it. It backs `shardloop run`, `make demo` and the
// end-to-end tests.
//
// When Run's context ends, every loop yields (reader.Options.Yield): its
// delivery in flight settles, it checkpoints and releases its lease, so a
// runner started next takes the shards at once. With Options.Balance, runners
// that share a lease table divide each stream's shards evenly and hand them
// over the same way when one joins or leaves (see Balance).
package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/shardloop/shardloop/internal/killswitch"
	"github.com/shardloop/shardloop/pkg/coordinator"
	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/reader"
	"github.com/shardloop/shardloop/pkg/shards"
)

// KinesisAPI is what the coordinator and the readers call on Kinesis.
type KinesisAPI interface {
	coordinator.KinesisAPI
	reader.KinesisAPI
}

// Store is what a runner uses of the lease table: its coordinator's part
// (lease.CoordinatorStore), its loops' (reader.Store) and, when it
// balances, the heartbeats (lease.HeartbeatStore). lease.MemoryStore and
// lease.DynamoStore are Stores.
type Store interface {
	lease.CoordinatorStore
	reader.Store
	lease.HeartbeatStore
}

// Options configure a Runner.
type Options struct {
	Subscriptions []coordinator.Subscription
	Store         Store
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
	// StopTimeout bounds the graceful stop once Run's context ends: each
	// loop's delivery in flight settles, then it checkpoints and releases
	// its lease. A loop still running after StopTimeout is abandoned: its
	// delivery is cancelled, nothing more is written, and its lease lapses
	// (the next owner takes the shard after a lease duration). Default
	// DefaultStopTimeout.
	StopTimeout time.Duration
	// Balance, when set, shares each stream's shards with the other runners
	// on the same lease table (see Balance). nil: this runner takes every
	// shard it can, as the coordinator Lambda does.
	Balance *Balance
	Logger  *slog.Logger
}

// DefaultStopTimeout is Options.StopTimeout's default.
const DefaultStopTimeout = 30 * time.Second

// Runner is a coordinator plus its loops in one process.
type Runner struct {
	opts     Options
	coord    *coordinator.Coordinator
	log      *slog.Logger
	bal      *balancer // nil without Options.Balance
	clock    func() time.Time
	leaseFor time.Duration
	observer *lease.Observer // the coordinator's

	mu       sync.Mutex
	loops    map[string]*loop // by owner
	wg       sync.WaitGroup
	base     context.Context
	stopping bool // Run's context ended: no new loop starts
}

type loop struct {
	info      LoopInfo
	cancel    context.CancelFunc
	killed    *killswitch.Switch
	yield     chan struct{}
	yieldOnce sync.Once
}

// yieldNow asks the loop to give its shard up; r.mu is held.
func (lp *loop) yieldNow() {
	lp.yieldOnce.Do(func() {
		lp.info.Yielded = true
		close(lp.yield)
	})
}

// LoopInfo describes one running or finished loop.
type LoopInfo struct {
	coordinator.Loop
	Started    time.Time
	Iterations int
	Reason     string // of the last iteration
	Done       bool
	Killed     bool
	// Yielded: the loop was asked to give its shard up (a handoff to
	// another runner, or the runner's stop); it ends with reason released.
	Yielded bool
}

// New validates the options.
func New(opts Options) (*Runner, error) {
	if opts.Reader.Target == nil {
		return nil, errors.New("runner: Reader.Target: want a target")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.StopTimeout == 0 {
		opts.StopTimeout = DefaultStopTimeout
	}
	if opts.StopTimeout < 0 {
		return nil, fmt.Errorf("runner: StopTimeout %s: want a positive duration", opts.StopTimeout)
	}
	r := &Runner{opts: opts, log: opts.Logger, loops: map[string]*loop{}, clock: opts.Reader.Clock, leaseFor: opts.Reader.LeaseDuration}
	if r.clock == nil {
		r.clock = time.Now
	}
	if r.leaseFor == 0 {
		r.leaseFor = lease.DefaultDuration
	}
	// One observer judges lapses for the coordinator's passes and watches,
	// the balancer's looks (which read the rows other runners hold) and the
	// loops' own lease writes (killswitch.Store), each of which answers with the
	// row as written: when a loop stops renewing, the coordinator knows its
	// last renewal, and takes the shard again a lease after it.
	r.observer = lease.NewObserver(r.leaseFor)
	cfg := coordinator.Config{
		Observer:       r.observer,
		Subscriptions:  opts.Subscriptions,
		RelistInterval: opts.RelistInterval,
		LeaseDuration:  opts.Reader.LeaseDuration,
		Clock:          opts.Reader.Clock,
		Name:           "shardloop run",
		Logger:         opts.Logger,
	}
	if opts.Balance != nil {
		b := *opts.Balance
		renew := opts.Reader.RenewInterval
		if renew == 0 {
			renew = lease.DefaultRenewInterval
		}
		b.setDefaults(renew)
		if err := b.validate(r.leaseFor); err != nil {
			return nil, err
		}
		var streams []string
		for _, s := range opts.Subscriptions {
			name, err := shards.StreamName(s.Stream)
			if err != nil {
				return nil, fmt.Errorf("runner: Subscriptions: %w", err)
			}
			streams = append(streams, name)
		}
		r.bal = newBalancer(r, b, streams, r.observer)
		cfg.Claim = r.bal.claim
		cfg.NewOwner = func(shardID string) string { return lease.RunnerOwner(coordinator.OwnerID(shardID), b.ID) }
		cfg.Name = "shardloop run " + b.ID
	}
	c, err := coordinator.New(cfg, opts.Store, opts.Kinesis, coordinator.StarterFunc(r.start))
	if err != nil {
		return nil, err
	}
	r.coord = c
	return r, nil
}

// ID is the runner's id with Options.Balance (the end of its loops' owner
// ids), "" without.
func (r *Runner) ID() string {
	if r.bal == nil {
		return ""
	}
	return r.bal.o.ID
}

// Coordinator returns the runner's coordinator.
func (r *Runner) Coordinator() *coordinator.Coordinator { return r.coord }

// Run runs the coordinator until ctx ends, then stops gracefully: the
// coordinator takes nothing more, every loop yields (its delivery in flight
// settles, it checkpoints and releases its lease) and Run returns once they
// all have, or after StopTimeout, abandoning those still running (their
// leases lapse). With Balance, the runner's heartbeat rows are removed
// too, so the other runners take its shards at once.
func (r *Runner) Run(ctx context.Context) error {
	// Loops outlive ctx until they have released their leases.
	base, abandon := context.WithCancel(context.WithoutCancel(ctx))
	defer abandon()
	r.mu.Lock()
	r.base, r.stopping = base, false
	r.mu.Unlock()
	var balDone chan struct{}
	if r.bal != nil {
		// Beat and look once before the first pass, so that it takes no
		// more than this runner's share.
		r.bal.beatAll(ctx)
		r.bal.lookAll(ctx)
		balCtx, stopBal := context.WithCancel(ctx)
		defer stopBal()
		balDone = make(chan struct{})
		go func() { defer close(balDone); r.bal.run(balCtx) }()
	}
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
	r.stop(base, abandon, balDone)
	return nil
}

// stop yields every loop and waits for them, up to StopTimeout.
func (r *Runner) stop(base context.Context, abandon context.CancelFunc, balDone chan struct{}) {
	if balDone != nil {
		<-balDone
	}
	r.mu.Lock()
	r.stopping = true
	n := 0
	for _, lp := range r.loops {
		if !lp.info.Done {
			lp.yieldNow()
			n++
		}
	}
	r.mu.Unlock()
	if n > 0 {
		r.log.Info("stopping: every loop finishes its delivery, checkpoints and releases its lease", "loops", n, "stop_timeout", r.opts.StopTimeout)
	}
	if r.bal != nil {
		// Once the leases are released, so that the others, counting this
		// runner out, find its rows free.
		defer func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(base), r.bal.callTimeout())
			r.bal.leave(ctx)
			cancel()
		}()
	}
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	t := time.NewTimer(r.opts.StopTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		r.log.Warn("stop timeout: abandoning the loops still delivering; their leases lapse", "stop_timeout", r.opts.StopTimeout)
		abandon()
		<-done
	}
}

// active returns the shards of stream this runner's loops hold and keep:
// running and not yielding.
func (r *Runner) active(stream string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for _, lp := range r.loops {
		if lp.info.Stream == stream && !lp.info.Done && !lp.info.Yielded && !lp.info.Killed {
			ids = append(ids, lp.info.ShardID)
		}
	}
	slices.Sort(ids)
	return ids
}

// holding counts the loops of stream that hold a lease: running, yielding
// ones included until they have released it.
func (r *Runner) holding(stream string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, lp := range r.loops {
		if lp.info.Stream == stream && !lp.info.Done && !lp.info.Killed {
			n++
		}
	}
	return n
}

// yieldShards asks the running loops of these shards of stream to give
// them up.
func (r *Runner) yieldShards(stream string, ids []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, lp := range r.loops {
		if lp.info.Stream == stream && !lp.info.Done && slices.Contains(ids, lp.info.ShardID) {
			lp.yieldNow()
		}
	}
}

// start is the local Starter: one goroutine per loop.
func (r *Runner) start(_ context.Context, l coordinator.Loop) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.base == nil || r.base.Err() != nil || r.stopping {
		return errors.New("runner is not running")
	}
	if _, dup := r.loops[l.Owner]; dup {
		return nil
	}
	ctx, cancel := context.WithCancel(r.base)
	lp := &loop{info: LoopInfo{Loop: l, Started: time.Now()}, cancel: cancel, killed: &killswitch.Switch{}, yield: make(chan struct{})}
	r.loops[l.Owner] = lp
	r.wg.Go(func() { r.run(ctx, lp) })
	return nil
}

func (r *Runner) run(ctx context.Context, lp *loop) {
	defer lp.cancel()
	opts := r.opts.Reader
	opts.Kinesis = r.opts.Kinesis
	opts.Store = killswitch.Store{Store: r.opts.Store, Dead: lp.killed.Dead, Err: errKilled, Wrote: r.saw}
	opts.Target = deadTarget{Target: r.opts.Reader.Target, ks: lp.killed}
	if _, ok := r.opts.Reader.Target.(reader.WindowTarget); ok {
		opts.Target = deadWindowTarget{opts.Target.(deadTarget)}
	}
	opts.Nudge = func(context.Context) { r.coord.Nudge() }
	opts.Yield = lp.yield
	st := lp.info.Loop.State()
	ctx = context.WithValue(ctx, loopKey{}, lp.info.Owner)
	log := r.log.With("stream", st.Stream, "shard_id", st.ShardID, "owner", st.Owner)
	for ctx.Err() == nil && !lp.killed.Dead() {
		next, err := reader.Run(ctx, opts, st)
		if err != nil {
			if ctx.Err() != nil || lp.killed.Dead() || lp.yielding() {
				break // a run that could not start holds nothing to release
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
	// again. A loop that lost its lease may have left its row naming it (its
	// renewals failed): the coordinator pursues the shard until the lease
	// lapses on its clock and takes it, or finds another owner holds it (a
	// Watch, as after a failed execution). One that released its lease, or
	// read its shard to the end, leaves a row a pass acts on at once. A loop
	// that yielded gave its shard to another runner: nothing to look for.
	switch {
	case ctx.Err() != nil || st.Reason == reader.ReasonReleased:
	case st.Reason == reader.ReasonLeaseLost:
		r.coord.Failed(lp.info.Loop)
	default:
		r.coord.Nudge()
	}
}

// yielding reports whether the loop was asked to give its shard up.
func (lp *loop) yielding() bool {
	select {
	case <-lp.yield:
		return true
	default:
		return false
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
			lp.killed.Kill()
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

// errKilled is what a killed loop's writes fail with.
var errKilled = errors.New("loop killed")

// saw records a row a loop's lease write answered with in the coordinator's
// observer, on the runner's clock read after the answer arrived.
func (r *Runner) saw(row lease.Lease) { r.observer.Observe(row, r.clock()) }

// deadTarget delivers nothing more once its loop is killed.
type deadTarget struct {
	reader.Target
	ks *killswitch.Switch
}

func (d deadTarget) Deliver(ctx context.Context, b reader.Batch) (int, error) {
	if d.ks.Dead() {
		return 0, errKilled
	}
	return d.Target.Deliver(ctx, b)
}

// deadWindowTarget is a deadTarget over a reader.WindowTarget.
type deadWindowTarget struct{ deadTarget }

func (d deadWindowTarget) DeliverWindow(ctx context.Context, b reader.WindowBatch) (int, json.RawMessage, error) {
	if d.ks.Dead() {
		return 0, nil, errKilled
	}
	return d.Target.(reader.WindowTarget).DeliverWindow(ctx, b)
}
