package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/shardloop/shardloop/internal/killswitch"
	"github.com/shardloop/shardloop/pkg/coordinator"
	"github.com/shardloop/shardloop/pkg/reader"
)

// lambdaDep is a deployment of the Lambda shape, modelled on what AWS does
// with template/statemachine.asl.json and the two functions:
//
//   - EventBridge invokes the coordinator once a minute; each invocation
//     runs coordinator.Run for a 55 s window (70 s timeout), on a warm
//     instance (its coordinator, with what its lease.Observer watched,
//     kept from the last invocation) or a cold one. A reader's nudge is an
//     asynchronous invocation running one Pass (retried twice after a
//     minute when it fails). Invocations overlap: the schedule's with
//     nudges', and a deploy's new version with the old one's still running.
//   - The coordinator's Starter is StartExecution named after the owner:
//     idempotent (an execution of that name, running or not, counts as
//     started); it may fail before starting, or after (the answer lost).
//   - An execution loops Read → Decide. Read invokes the shardreader
//     (reader.Run with the state) with the ASL's retry policy: a refused
//     invocation (throttled) is retried; so is one whose invocation failed
//     while the function goes on running, so the retry overlaps it; a
//     function error or crash fails the execution. ContinueAsNew starts a
//     new execution with the state. An execution may fail between states.
//   - Each shardreader invocation runs on an instance with a clock of its
//     own and a deadline of RunLength + 60 s; past it the function is
//     frozen (writes and delivers nothing more).
type lambdaDep struct {
	w      *World
	d      Deployment
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	tgt    reader.Target

	mu      sync.Mutex
	version int
	start   string
	// deployedAt is when the current version was deployed.
	deployedAt time.Time
	scheduled  bool
	stopped    bool
	coordIdle  []*coordInst
	readIdle   []*readInst
	execs      map[string]bool // execution names ever used
	live       map[int64]*liveInv
	nextInv    int64
}

type coordInst struct {
	host    string
	c       *coordinator.Coordinator
	version int
	expires time.Time
}

type readInst struct {
	clock   hostClock
	expires time.Time
}

type liveInv struct {
	shardID string
	ks      *killswitch.Switch
	cancel  context.CancelFunc
}

const (
	coordinatorWindow  = 55 * time.Second
	coordinatorTimeout = 70 * time.Second
	schedulePeriod     = time.Minute
)

func newLambda(w *World, d Deployment) *lambdaDep {
	l := &lambdaDep{w: w, d: d, execs: map[string]bool{}, live: map[int64]*liveInv{}, tgt: w.newTarget(d.Name)}
	l.ctx, l.cancel = context.WithCancel(w.ctx)
	return l
}

func (l *lambdaDep) rs(what string) *stream { return l.w.rnd.get("lambda:", l.d.Name, ":", what) }

// deploy publishes a new version with start; the schedule begins with the
// first deploy.
// deploy makes a new version current; a Lambda deployment is never
// rolling (stagger is ignored): invocations of the old version run on to
// their end beside the new one's anyway.
func (l *lambdaDep) deploy(start string, _ time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return
	}
	l.version++
	l.start = start
	l.deployedAt = time.Now().Truncate(time.Millisecond) // the function's LastModified, on AWS's clock
	if !l.scheduled {
		l.scheduled = true
		l.wg.Go(l.schedule)
	}
}

// schedule invokes the coordinator now and every minute.
func (l *lambdaDep) schedule() {
	for {
		l.wg.Go(func() { l.invokeCoordinator(false, 0) })
		if l.w.sleep(l.ctx, schedulePeriod) != nil {
			return
		}
	}
}

// acquireCoordinator returns a warm instance of the current version, or a
// new one after a cold start.
func (l *lambdaDep) acquireCoordinator() (*coordInst, error) {
	w := l.w
	l.mu.Lock()
	now := time.Now()
	for len(l.coordIdle) > 0 {
		c := l.coordIdle[len(l.coordIdle)-1]
		l.coordIdle = l.coordIdle[:len(l.coordIdle)-1]
		if c.version == l.version && now.Before(c.expires) {
			l.mu.Unlock()
			return c, nil
		}
	}
	version, start, deployedAt := l.version, l.start, l.deployedAt
	l.mu.Unlock()
	clock := w.newHost(l.d.Name + "-coordinator")
	c, err := coordinator.New(coordinator.Config{
		Subscriptions:  []coordinator.Subscription{{Stream: streamName, Start: start, DeployedAt: deployedAt}},
		RelistInterval: w.cfg.Reader.Relist,
		LeaseDuration:  w.cfg.Reader.Lease,
		Clock:          clock.Now,
		Logger:         slog.New(slog.DiscardHandler),
	}, &store{t: w.table, dep: l.d.Name}, w.net, coordinator.StarterFunc(l.startExecution))
	if err != nil {
		return nil, err
	}
	rs := l.rs("coordinator")
	if err := l.w.sleep(l.ctx, rs.latency(w.cfg.Faults.ColdStart, 2*w.cfg.Faults.ColdStart)); err != nil {
		return nil, err
	}
	return &coordInst{host: clock.name, c: c, version: version, expires: time.Now().Add(rs.dur(5*time.Minute, 30*time.Minute))}, nil
}

func (l *lambdaDep) releaseCoordinator(c *coordInst) {
	l.mu.Lock()
	l.coordIdle = append(l.coordIdle, c)
	l.mu.Unlock()
}

// invokeCoordinator is one coordinator invocation: a window for the
// schedule, one pass for a nudge.
func (l *lambdaDep) invokeCoordinator(nudge bool, attempt int) {
	w := l.w
	inst, err := l.acquireCoordinator()
	if err != nil {
		if l.ctx.Err() == nil {
			w.chk.mu.Lock()
			w.chk.fail(shardKey{}, "%s: coordinator.New: %v", l.d.Name, err)
			w.chk.mu.Unlock()
		}
		return
	}
	ctx, cancel := context.WithTimeout(withHost(l.ctx, inst.host), coordinatorTimeout)
	defer cancel()
	rs := l.rs("coordinator:" + inst.host)
	if rs.hit(w.cfg.Faults.Crash) {
		// The invocation dies part way (an out-of-memory, a host failure).
		t := time.AfterFunc(rs.dur(0, coordinatorWindow), cancel)
		defer t.Stop()
	}
	if nudge {
		_, err = inst.c.Pass(ctx)
	} else {
		err = inst.c.Run(ctx, coordinatorWindow)
	}
	l.releaseCoordinator(inst)
	if nudge && err != nil && attempt < 2 && l.ctx.Err() == nil {
		// Lambda retries a failed asynchronous invocation, a minute later.
		l.wg.Go(func() {
			if l.w.sleep(l.ctx, time.Minute) == nil {
				l.invokeCoordinator(true, attempt+1)
			}
		})
	}
}

// nudge is the shardreader's asynchronous invocation of the coordinator.
func (l *lambdaDep) nudge() {
	if l.rs("nudge").hit(l.w.cfg.Faults.NudgeLost) || l.ctx.Err() != nil {
		return
	}
	l.wg.Go(func() { l.invokeCoordinator(true, 0) })
}

var errStart = errors.New("sim: StartExecution failed (injected)")

// startExecution is the coordinator's Starter: StartExecution named after
// the owner.
func (l *lambdaDep) startExecution(ctx context.Context, loop coordinator.Loop) error {
	w := l.w
	rs := l.rs("sfn")
	if err := l.w.sleep(ctx, rs.latency(20*time.Millisecond, 500*time.Millisecond)); err != nil {
		return err
	}
	if rs.hit(w.cfg.Faults.StartBefore) {
		return errStart
	}
	st := loop.State()
	l.begin(loop.Owner, st)
	if rs.hit(w.cfg.Faults.StartAfter) {
		return fmt.Errorf("%w after the execution started", errStart)
	}
	return nil
}

// begin starts the execution name with st, unless one of that name exists.
func (l *lambdaDep) begin(name string, st reader.State) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.execs[name] || l.stopped {
		return false
	}
	l.execs[name] = true
	l.wg.Go(func() { l.execution(name, st) })
	return true
}

// execution is one Step Functions execution of the shard loop.
func (l *lambdaDep) execution(name string, st reader.State) {
	w := l.w
	f := &w.cfg.Faults
	rs := l.rs("execution:" + st.ShardID)
	sh := w.shardName(st.ShardID)
	w.tr.add(sh, st.Owner, "execution %s started", l.alias(name))
	for l.ctx.Err() == nil {
		if rs.hit(f.ExecutionFail) {
			w.tr.add(sh, st.Owner, "execution failed (injected)")
			return
		}
		next, ok := l.read(st, rs)
		if !ok {
			return
		}
		st = next
		if !st.Continue {
			w.tr.add(sh, st.Owner, "loop done: %s", st.Reason)
			return
		}
		if l.w.sleep(l.ctx, rs.latency(30*time.Millisecond, 300*time.Millisecond)) != nil {
			return
		}
		if st.ContinueAsNew {
			// The ContinueAsNew task: StartExecution of a name derived from
			// this one, retried; a retry that finds it started is done.
			child := name + "+"
			for attempt := 0; attempt < 6; attempt++ {
				if attempt > 0 && l.w.sleep(l.ctx, time.Duration(1<<attempt)*time.Second/2) != nil {
					return
				}
				if rs.hit(f.StartBefore) {
					continue
				}
				l.begin(child, st)
				w.tr.add(sh, st.Owner, "continued as new")
				return
			}
			w.tr.add(sh, st.Owner, "ContinueAsNew failed every attempt; the loop ends")
			return
		}
	}
}

func (l *lambdaDep) alias(name string) string {
	n := 0
	for len(name) > 0 && name[len(name)-1] == '+' {
		name, n = name[:len(name)-1], n+1
	}
	return "#" + strconv.Itoa(n+1)
}

// read is the Read task: invoke the shardreader with st, with the ASL's
// retry of Lambda service errors (2 s, backoff 2, up to 30 s, full jitter,
// 6 retries). ok is false when the execution fails.
func (l *lambdaDep) read(st reader.State, rs *stream) (reader.State, bool) {
	w := l.w
	f := &w.cfg.Faults
	sh := w.shardName(st.ShardID)
	for attempt := 0; attempt <= 6; attempt++ {
		if attempt > 0 {
			backoff := min(2*time.Second<<(attempt-1), 30*time.Second)
			if l.w.sleep(l.ctx, rs.dur(0, backoff)) != nil {
				return st, false
			}
		}
		switch x := rs.float(); {
		case x < f.InvokeBefore:
			w.tr.add(sh, st.Owner, "Read refused by Lambda (throttled, injected); retrying")
			continue
		case x < f.InvokeBefore+f.InvokeAfter:
			// The invocation runs, but the state machine sees a service
			// error: it retries while the first still runs.
			first := st
			l.wg.Go(func() { l.invoke(first) })
			if l.w.sleep(l.ctx, rs.dur(0, w.cfg.Reader.RunLength)) != nil {
				return st, false
			}
			w.tr.add(sh, st.Owner, "Read failed while the invocation runs (injected); retrying")
			continue
		}
		out, err := l.invoke(st)
		if err != nil {
			w.tr.add(sh, st.Owner, "Read failed: %v; the execution fails", err)
			return st, false
		}
		return out, true
	}
	w.tr.add(sh, st.Owner, "Read retries exhausted; the execution fails")
	return st, false
}

var errCrashed = errors.New("sim: the shardreader invocation crashed")

// invoke is one shardreader invocation.
func (l *lambdaDep) invoke(st reader.State) (reader.State, error) {
	w := l.w
	inst, err := l.acquireReader()
	if err != nil {
		return st, err
	}
	defer l.releaseReader(inst)
	l.mu.Lock()
	l.nextInv++
	inv := &invocation{id: l.nextInv, owner: st.Owner, dep: l.d.Name, run: "inv" + strconv.FormatInt(l.nextInv, 10)}
	l.mu.Unlock()
	timeout := w.cfg.Reader.RunLength + time.Minute
	ctx, cancel := context.WithTimeout(withHost(l.ctx, inst.clock.name), timeout)
	defer cancel()
	ks := &killswitch.Switch{}
	ctx = context.WithValue(withInvocation(ctx, inv), killSwitchKey{}, ks)
	die := func() { ks.Kill(); cancel() }
	frozen := time.AfterFunc(timeout, ks.Kill) // Lambda freezes the function at its timeout
	defer frozen.Stop()
	rs := l.rs("invoke:" + st.ShardID)
	if rs.hit(w.cfg.Faults.Crash) {
		t := time.AfterFunc(rs.dur(0, w.cfg.Reader.RunLength), func() {
			w.tr.add(w.shardName(st.ShardID), st.Owner, "shardreader invocation crashed (injected)")
			die()
		})
		defer t.Stop()
	}
	l.mu.Lock()
	l.live[inv.id] = &liveInv{shardID: st.ShardID, ks: ks, cancel: die}
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.live, inv.id)
		l.mu.Unlock()
	}()

	// The store as the shardreader handler builds it: the table, its
	// reader recording the lag with each checkpoint (readerOptions).
	// Once the invocation is dead no write starts, and a call in flight
	// (store.call checks killedOf under the table's lock) does not land.
	ls := killswitch.Store{Store: &store{t: w.table, dep: l.d.Name}, Dead: ks.Dead, Err: errDead}
	o := w.readerOptions(l.d.Name, inst.clock, deadKinesis{api: w.net, ks: ks}, ls, deadTarget{t: l.tgt, ks: ks})
	o.Nudge = func(context.Context) { l.nudge() }
	out, err := reader.Run(ctx, o, st)
	if ks.Dead() {
		return st, errCrashed
	}
	return out, err
}

func (l *lambdaDep) acquireReader() (*readInst, error) {
	w := l.w
	l.mu.Lock()
	now := time.Now()
	for len(l.readIdle) > 0 {
		r := l.readIdle[len(l.readIdle)-1]
		l.readIdle = l.readIdle[:len(l.readIdle)-1]
		if now.Before(r.expires) {
			l.mu.Unlock()
			return r, nil
		}
	}
	l.mu.Unlock()
	rs := l.rs("reader")
	if err := l.w.sleep(l.ctx, rs.latency(w.cfg.Faults.ColdStart, 2*w.cfg.Faults.ColdStart)); err != nil {
		return nil, err
	}
	return &readInst{clock: w.newHost(l.d.Name + "-reader"), expires: time.Now().Add(rs.dur(5*time.Minute, 30*time.Minute))}, nil
}

func (l *lambdaDep) releaseReader(r *readInst) {
	l.mu.Lock()
	l.readIdle = append(l.readIdle, r)
	l.mu.Unlock()
}

// kill crashes the invocations reading a shard: their executions fail.
func (l *lambdaDep) kill(shardID string) bool {
	l.mu.Lock()
	var dying []*liveInv
	for _, v := range l.live {
		if v.shardID == shardID {
			dying = append(dying, v)
		}
	}
	l.mu.Unlock()
	for _, v := range dying {
		v.cancel()
	}
	return len(dying) > 0
}

func (l *lambdaDep) crash(float64, time.Duration) {}

func (l *lambdaDep) stop() {
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
	l.cancel()
	l.wg.Wait()
}

var errDead = errors.New("sim: the invocation is dead")

type killSwitchKey struct{}

// killedOf is the kill switch of the invocation ctx's calls are made for,
// nil for none. It survives context.WithoutCancel, so that a write a dead
// invocation started (a release, a last renewal) is not made either.
func killedOf(ctx context.Context) *killswitch.Switch {
	ks, _ := ctx.Value(killSwitchKey{}).(*killswitch.Switch)
	return ks
}

// deadTarget delivers nothing once its invocation is dead.
type deadTarget struct {
	t  reader.Target
	ks *killswitch.Switch
}

func (d deadTarget) Deliver(ctx context.Context, b reader.Batch) (int, error) {
	if d.ks.Dead() {
		return 0, errDead
	}
	return d.t.Deliver(ctx, b)
}

func (d deadTarget) DeliverWindow(ctx context.Context, b reader.WindowBatch) (int, json.RawMessage, error) {
	if d.ks.Dead() {
		return 0, nil, errDead
	}
	return d.t.(reader.WindowTarget).DeliverWindow(ctx, b)
}

// deadKinesis reads nothing once its invocation is dead.
type deadKinesis struct {
	api reader.KinesisAPI
	ks  *killswitch.Switch
}

func (d deadKinesis) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	if d.ks.Dead() {
		return nil, errDead
	}
	return d.api.GetShardIterator(ctx, in, optFns...)
}

func (d deadKinesis) DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	if d.ks.Dead() {
		return nil, errDead
	}
	return d.api.DescribeStreamSummary(ctx, in, optFns...)
}

func (d deadKinesis) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	if d.ks.Dead() {
		return nil, errDead
	}
	return d.api.GetRecords(ctx, in, optFns...)
}
