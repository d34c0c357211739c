package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/internal/handlers"
	"github.com/shardloop/shardloop/internal/kinesismem"
	"github.com/shardloop/shardloop/pkg/filter"
	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/reader"
	"github.com/shardloop/shardloop/pkg/shards"
)

// streamName is the one stream of every world.
const streamName = "orders"

// World is one running world.
type World struct {
	cfg   Config
	began time.Time
	rnd   *streams
	tr    *tracer
	chk   *checker
	kin   *kinesismem.Client
	net   *network
	table *table

	ctx  context.Context
	deps []driver
	bg   sync.WaitGroup // the world's own helpers
	// shape is held while the stream is created and its incarnation
	// registered, and while its shape is noted, so that a shape is always
	// noted under the incarnation it was listed from.
	shape sync.Mutex

	hf hostFaults

	timers timerPool // for sleep

	// lags is each shard's last MillisBehindLatest (hooks), for
	// reader.Options.Lag.
	lags lags

	mu      sync.Mutex
	inc     int   // the stream's current incarnation
	created int64 // its creation time, Unix ms
	prod    *producer
	starts  []string // each deployment's start as configured now
	// resolved is each deployment's start as its coordinators take it now
	// (resolveStart).
	resolved []string
	hosts    int
	names    map[shardKey]string // shardName's, joined once: most trace events name a shard
	// deployedAt is when a deployment was last deployed, recordedAt when a
	// generation was last recorded (the drain's configuring).
	deployedAt, recordedAt time.Time
}

// driver runs one deployment.
type driver interface {
	// deploy (re)deploys with the start position (resolved: no offsets,
	// "sequence:<shard>:<seq>"). A stagger above zero is a rolling
	// redeploy (local runners: one process restarted at a time, that long
	// apart, the others running on with the start they had).
	deploy(start string, stagger time.Duration)
	// kill kills the loop of a shard, if one runs; it reports whether one did.
	kill(shardID string) bool
	// crash kills a whole process (local runners) and restarts it after pause.
	crash(pick float64, pause time.Duration)
	// stop ends everything and waits for it.
	stop()
}

// Result is what a world found.
type Result struct {
	Config     Config
	Violations []Violation
	Stats      Stats
	Simulated  time.Duration
	trace      *tracer
	parents    map[string][]string
}

// Failed reports whether an invariant broke.
func (r *Result) Failed() bool { return len(r.Violations) > 0 }

// Trace returns the world's event trace up to the first violation (and a
// few seconds after it): the events of the shard it names and of that
// shard's parents, and the world's own events; at most limit lines, the
// last ones.
func (r *Result) Trace(limit int) []string {
	if len(r.Violations) == 0 {
		return r.trace.lines(nil, time.Duration(math.MaxInt64), limit)
	}
	v := r.Violations[0]
	var keep func(string) bool
	if v.Shard != "" {
		involved := map[string]bool{v.Shard: true}
		inc, _, _ := strings.Cut(v.Shard, "/")
		for _, p := range r.parents[v.Shard] {
			involved[inc+"/"+p] = true
		}
		keep = func(s string) bool { return involved[s] }
	}
	return r.trace.lines(keep, v.At+5*time.Second, limit)
}

// Run runs the world of cfg to its end. It must run inside a
// testing/synctest bubble: it reads and sleeps on virtual time only, and
// returns once every goroutine it started has ended.
func Run(cfg Config) *Result {
	began := time.Now()
	w := &World{cfg: cfg, began: began, rnd: newStreams(cfg.Seed)}
	budgets := cfg.Budgets
	budgets.Stop = cmp.Or(budgets.Stop, DefaultBudgets.Stop)
	budgets.Events = cmp.Or(budgets.Events, DefaultBudgets.Events)
	w.tr = newTracer(began)
	// The world's own schedule ends by production, the drain and the
	// deployments' stop; a world still running past them hangs in the code
	// under test (its events, or its stop, wait on something that never
	// ends, while virtual time moves on), and fails with its seed.
	ended := make(chan struct{})
	go func() {
		// A re-creation may wait past production, by slowMore at most
		// past its drain wait.
		limit := cfg.Produce + slowMore + cfg.Drain + budgets.Stop
		select {
		case <-ended:
		case <-time.After(limit):
			panic(fmt.Sprintf("sim: world %d ran past its virtual-time budget: still running %s after it began (production %s, a slow re-creation %s, drain at most %s, stop %s)",
				cfg.Seed, limit, cfg.Produce, slowMore, cfg.Drain, budgets.Stop))
		}
	}()
	w.tr.budget = func(n int) {
		if n > budgets.Events {
			panic(fmt.Sprintf("sim: world %d ran past its memory budget: its trace holds over %d events (a runaway loop?)", cfg.Seed, budgets.Events))
		}
	}
	w.chk = newChecker(w.tr)
	// Every record written is registered by its sequence number: a map
	// sized for them all does not grow (its rehashing was 3 % of a world).
	w.chk.bySeq = make(map[string]*rec, int(cfg.Rate*cfg.Produce.Seconds())+1)
	w.chk.window = cfg.Reader.TumblingWindow
	w.chk.quotedPad, w.chk.noContent = strconv.Quote(strings.Repeat("x", cfg.DataSize)), cfg.ReaderHook != nil
	if len(cfg.Reader.Filters) > 0 {
		set, err := filter.Compile(cfg.Reader.Filters)
		if err != nil {
			panic(fmt.Sprintf("sim: the world's filters do not compile: %v", err))
		}
		w.chk.filters = set
	}
	k, err := kinesismem.New(kinesismem.Options{ReshardDelay: cfg.ReshardDelay})
	if err != nil {
		panic(err) // the options are constant
	}
	w.kin = k
	w.net = &network{w: w, inner: k, shards: map[string]string{}}
	mem, err := lease.NewMemoryStore(func(o *lease.Options) { o.Duration = cfg.Reader.Lease })
	if err != nil {
		panic(err)
	}
	w.table = &table{w: w, inner: mem, lastCkpts: map[string][]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	w.ctx = ctx
	w.starts, w.resolved = make([]string, len(cfg.Deployments)), make([]string, len(cfg.Deployments))

	w.createStream(cfg.Shards)
	w.prod = &producer{w: w, next: make([]int, cfg.Keys), wake: make(chan struct{}, 1)}
	var prodWG sync.WaitGroup
	prodCtx, stopProd := context.WithCancel(ctx)
	prodWG.Go(func() { w.prod.run(prodCtx) })

	for _, d := range cfg.Deployments {
		if d.Lambda {
			w.deps = append(w.deps, newLambda(w, d))
		} else {
			w.deps = append(w.deps, newLocal(w, d))
		}
	}
	for _, e := range cfg.Events {
		if e.At >= cfg.Produce || time.Since(began) >= cfg.Produce {
			continue // a re-creation's wait may run past production
		}
		time.Sleep(time.Until(began.Add(e.At)))
		w.apply(e)
	}
	time.Sleep(time.Until(began.Add(cfg.Produce)))
	stopProd()
	prodWG.Wait()
	w.tr.add("", "", "production ends: %d records", w.chk.stats.Produced)

	drainEnd := time.Now().Add(cfg.Drain)
	for !w.drained(ctx) && time.Now().Before(drainEnd) {
		time.Sleep(2 * time.Second)
	}
	w.tr.add("", "", "drained after %s", time.Since(began.Add(cfg.Produce)).Round(time.Second))
	for _, d := range w.deps {
		d.stop()
	}
	cancel()
	w.bg.Wait()
	close(ended)
	w.chk.finish()
	parents := map[string][]string{}
	for k, s := range w.chk.sh {
		parents[k.String()] = s.parents
	}
	return &Result{Config: cfg, Violations: w.chk.violations, Stats: w.chk.stats, Simulated: time.Since(began), trace: w.tr, parents: parents}
}

// drained reports whether the world is drained: every record owed
// settled, and no host still frozen (nor woken less than half a minute
// ago): a pass that sleeps mid-way sends the rest of its starts when it
// wakes, and what they owe counts (world 1188, whose superseded horizon
// starts landed after the drain). Nor while a deploy is on its way to the
// table (configuring): a generation recorded after the drain owes what it
// owes too (world 1,007,781, whose latest redeploy was recorded after it).
func (w *World) drained(ctx context.Context) bool {
	return w.chk.drained(w.incNow()) && !time.Now().Before(w.hf.frozenUntil().Add(30*time.Second)) && !w.configuring(ctx)
}

// deployWait bounds how long the drain waits for a deploy's generation to
// be recorded: a deploy whose configuration the table has seen, or an older
// one, records none.
const deployWait = 2 * time.Minute

// configuring reports whether a deploy is still on its way to the table:
// no generation recorded since (for at most deployWait), or the one
// recorded for the current stream not yet applied.
func (w *World) configuring(ctx context.Context) bool {
	w.mu.Lock()
	deployed, recorded := w.deployedAt, w.recordedAt
	w.mu.Unlock()
	if deployed.After(recorded) && time.Since(deployed) < deployWait {
		return true
	}
	g, err := w.table.inner.GetGeneration(ctx, streamName)
	if err != nil || g.Applied {
		return false
	}
	w.chk.mu.Lock()
	defer w.chk.mu.Unlock()
	return w.chk.incOf(g.Incarnation) == w.chk.cur
}

// closed reports whether a shard of the current incarnation is closed.
func (w *World) closed(shardID string) bool {
	inc := w.incNow()
	w.chk.mu.Lock()
	defer w.chk.mu.Unlock()
	s := w.chk.sh[shardKey{inc, shardID}]
	return s != nil && s.closed
}

func (w *World) incNow() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.inc
}

// shardName names a shard of the current incarnation in the trace.
func (w *World) shardName(shardID string) string {
	if shardID == "" || strings.HasPrefix(shardID, "#") {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	k := shardKey{w.inc, shardID}
	name, ok := w.names[k]
	if !ok {
		name = strconv.Itoa(w.inc) + "/" + shardID
		if w.names == nil {
			w.names = map[shardKey]string{}
		}
		w.names[k] = name
	}
	return name
}

// createStream creates the stream (again) and registers its incarnation.
func (w *World) createStream(n int) {
	ctx := context.Background()
	w.shape.Lock()
	if _, err := w.kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(streamName), ShardCount: aws.Int32(int32(n))}); err != nil {
		panic(fmt.Sprintf("sim: create stream: %v", err))
	}
	out, err := w.kin.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(streamName)})
	if err != nil {
		panic(fmt.Sprintf("sim: describe stream: %v", err))
	}
	created := aws.ToTime(out.StreamDescriptionSummary.StreamCreationTimestamp).UnixMilli()
	inc := w.chk.incarnation(created)
	w.mu.Lock()
	w.inc, w.created = inc, created
	w.mu.Unlock()
	w.shape.Unlock()
	w.noteShape()
	w.tr.add("", "", "stream created with %d shards (incarnation %d)", n, inc)
}

// noteShape tells the checker the stream's shards as listed. A stream
// deleted meanwhile (a re-creation after a reshard) has no shape to note:
// the one created next is noted when it is.
func (w *World) noteShape() []shards.Shard {
	w.shape.Lock()
	defer w.shape.Unlock()
	ls, err := shards.List(context.Background(), w.kin, streamName)
	var gone *types.ResourceNotFoundException
	if errors.As(err, &gone) {
		return nil
	}
	if err != nil {
		panic(fmt.Sprintf("sim: list shards: %v", err))
	}
	inc := w.incNow()
	for _, s := range ls {
		w.chk.shardShape(inc, s.ID, s.Parents(), s.Closed())
	}
	return ls
}

// apply makes one event of the timeline happen.
func (w *World) apply(e Event) {
	switch e.Kind {
	case Deploy, Redeploy:
		d := w.cfg.Deployments[e.Deployment]
		start := d.Start
		if e.Kind == Redeploy {
			start = e.Start
		}
		resolved := w.resolveStart(start)
		w.mu.Lock()
		w.starts[e.Deployment], w.resolved[e.Deployment] = start, resolved
		w.deployedAt = time.Now()
		w.mu.Unlock()
		if e.Pause > 0 {
			w.tr.add("", "", "%s %s with start %q, rolling: a process every %s", e.Kind, d.Name, resolved, e.Pause)
		} else {
			w.tr.add("", "", "%s %s with start %q", e.Kind, d.Name, resolved)
		}
		w.deps[e.Deployment].deploy(resolved, e.Pause)
	case Split, Merge:
		w.reshard(e)
	case Kill:
		ls := w.openShards()
		if len(ls) == 0 {
			return
		}
		s := ls[int(e.Pick*float64(len(ls)))%len(ls)]
		if w.deps[e.Deployment].kill(s.ID) {
			w.tr.add(w.shardName(s.ID), "", "%s: its loop killed", w.cfg.Deployments[e.Deployment].Name)
		}
	case Crash:
		w.deps[e.Deployment].crash(e.Pick, e.Pause)
	case Recreate:
		w.recreate(e)
	case Supersede:
		w.supersede(e)
	case Strike:
		w.armStrike(e)
	case Partition, Pause:
		dep := w.cfg.Deployments[e.Deployment].Name
		host := w.hf.pickHost(dep, e.Pick)
		if host == "" {
			return
		}
		if e.Kind == Pause {
			w.freeze(host, e.Pause)
			w.tr.add("", "", "host %s frozen for %s", host, e.Pause)
			return
		}
		w.partition(host, e.Start, e.Pause)
		w.tr.add("", "", "host %s cut off from the %s for %s", host, e.Start, e.Pause)
	}
}

// resolveStart turns a configured start into the text form a coordinator
// takes: offsets become Unix milliseconds, "sequence" a written record
// ("sequence-closed" one of a closed shard, when one was written).
func (w *World) resolveStart(start string) string {
	switch {
	case strings.HasPrefix(start, "timestamp:"):
		d, err := time.ParseDuration(strings.TrimPrefix(start, "timestamp:"))
		if err != nil {
			return start
		}
		return "timestamp:" + strconv.FormatInt(time.Now().Add(d).UnixMilli(), 10)
	case start == "sequence", start == "sequence-closed":
		x := w.pickRecord(start == "sequence-closed")
		if x == nil {
			return "latest" // nothing written yet
		}
		return "sequence:" + x.shard.key.id + ":" + x.seq
	}
	return start
}

// pickRecord picks a written record of the current incarnation: of a
// closed shard, when closed and one was written.
func (w *World) pickRecord(closed bool) *rec {
	inc := w.incNow()
	c := w.chk
	c.mu.Lock()
	defer c.mu.Unlock()
	var all, ofClosed []*rec
	for _, s := range c.sh {
		if s.key.inc == inc && len(s.recs) > 0 {
			all = append(all, s.recs...)
			if s.closed {
				ofClosed = append(ofClosed, s.recs...)
			}
		}
	}
	if closed && len(ofClosed) > 0 {
		all = ofClosed
	}
	if len(all) == 0 {
		return nil
	}
	// Ranked by sequence number, so the pick does not depend on map order.
	sortRecs(all)
	return all[w.rnd.get("world:sequence").intN(len(all))]
}

func (w *World) openShards() []shards.Shard {
	var open []shards.Shard
	for _, s := range w.noteShape() {
		if !s.Closed() {
			open = append(open, s)
		}
	}
	return open
}

// newest is the index of the shard of the highest id in ss (the ids
// count up).
func newest(ss []shards.Shard) int {
	i := 0
	for j := range ss {
		if ss[j].ID > ss[i].ID {
			i = j
		}
	}
	return i
}

// reshard splits an open shard in the middle of its range, or merges two
// adjacent open shards.
func (w *World) reshard(e Event) {
	ctx := context.Background()
	open := w.openShards()
	var err error
	switch {
	case len(open) == 0: // the stream deleted meanwhile
		return
	case e.Kind == Split:
		s := open[int(e.Pick*float64(len(open)))%len(open)]
		if e.Newest {
			s = open[newest(open)]
		}
		mid := midHashKey(s.HashKeyStart, s.HashKeyEnd)
		_, err = w.kin.SplitShard(ctx, &kinesis.SplitShardInput{StreamName: aws.String(streamName), ShardToSplit: aws.String(s.ID), NewStartingHashKey: aws.String(mid)})
		if err == nil {
			w.tr.add(w.shardName(s.ID), "", "split")
		}
	case len(open) >= 2:
		sortByHash(open)
		i := int(e.Pick*float64(len(open)-1)) % (len(open) - 1)
		if e.Newest { // the newest and its neighbour below (a split's upper child and its sibling), else above
			i = max(newest(open)-1, 0)
		}
		_, err = w.kin.MergeShards(ctx, &kinesis.MergeShardsInput{StreamName: aws.String(streamName), ShardToMerge: aws.String(open[i].ID), AdjacentShardToMerge: aws.String(open[i+1].ID)})
		if err == nil {
			w.tr.add(w.shardName(open[i].ID), "", "merged with %s", open[i+1].ID)
			w.tr.add(w.shardName(open[i+1].ID), "", "merged with %s", open[i].ID)
		}
	}
	if err != nil {
		w.tr.add("", "", "%s refused: %v", e.Kind, err)
		return
	}
	w.bg.Go(func() {
		// The new shards appear once the stream is ACTIVE again.
		time.Sleep(w.cfg.ReshardDelay + time.Millisecond)
		w.noteShape()
	})
	w.noteShape()
}

// Past its drain wait, a re-creation waits on while the incarnation still
// settles what it owes: fewer records owed at the end of each slowWindow,
// for at most slowMore. With production paused what is owed only falls,
// so a world that stalls fails one window after its wait, and one whose
// function is slow (batches of one, calls that time out often) is not
// failed for its pace (world 9248: records five minutes behind, settling
// one every few seconds).
const (
	slowWindow = 2 * time.Minute
	slowMore   = 10 * time.Minute
)

// waitDrained waits for every record owed of incarnation inc to settle: up
// to wait, and past it as long as they still settle (above). It returns
// how long it waited and whether the incarnation drained.
func (w *World) waitDrained(inc int, wait time.Duration) (time.Duration, bool) {
	began := time.Now()
	until := began.Add(wait)
	for !w.chk.drained(inc) && time.Now().Before(until) {
		time.Sleep(time.Second)
	}
	owed := w.chk.owedCount(inc)
	for owed > 0 && time.Since(began) < wait+slowMore {
		until := time.Now().Add(slowWindow)
		for !w.chk.drained(inc) && time.Now().Before(until) {
			time.Sleep(time.Second)
		}
		was := owed
		if owed = w.chk.owedCount(inc); owed >= was {
			break
		}
	}
	return time.Since(began).Round(time.Second), owed == 0
}

// recreate waits for the stream to drain, moves sequence starts to a new
// timestamp start (their record goes with the stream), deletes the stream
// and creates it again.
func (w *World) recreate(e Event) {
	w.prod.pause(true)
	inc := w.incNow()
	if waited, ok := w.waitDrained(inc, w.cfg.drainWait()); !ok {
		lost := w.chk.owedUnsettled(5)
		w.chk.mu.Lock()
		for _, x := range lost {
			w.chk.fail(x.shard.key, "record %s (key %d #%d) still not settled after %s, before the stream is deleted", short(x.seq), x.key, x.n, waited)
		}
		w.chk.mu.Unlock()
	}
	moved := map[int]bool{}
	for i := range w.deps {
		w.mu.Lock()
		st := w.starts[i]
		w.mu.Unlock()
		if strings.HasPrefix(st, "sequence") {
			// A start not seen before (a rollback to a superseded one would
			// be stale and change nothing).
			w.apply(Event{Kind: Redeploy, Deployment: i, Start: "timestamp:+0s"})
			moved[i] = true
		}
	}
	w.raceDeletion(e, moved)
	ctx := context.Background()
	for {
		_, err := w.kin.DeleteStream(ctx, &kinesis.DeleteStreamInput{StreamName: aws.String(streamName)})
		var inUse *types.ResourceInUseException
		if errors.As(err, &inUse) {
			time.Sleep(500 * time.Millisecond) // UPDATING after a reshard
			continue
		}
		if err != nil {
			panic(fmt.Sprintf("sim: delete stream: %v", err))
		}
		break
	}
	w.chk.deleted(inc)
	w.tr.add("", "", "stream deleted (incarnation %d)", inc)
	time.Sleep(2 * time.Second)
	w.createStream(max(1, e.Shards))
	w.prod.restart()
	w.prod.pause(false)
	if e.Start == "freeze" {
		// The new stream splits twice while the host sleeps: a child's
		// shard id may be one the frozen loops held a row for in the old
		// stream, whose row the new stream's coordinators clean up.
		rs := w.rnd.get("recreate")
		after, picks := rs.dur(500*time.Millisecond, max(time.Second, e.Pause/2)), []float64{rs.float(), rs.float()}
		w.bg.Go(func() {
			for _, p := range picks { // two splits, for more ids the old stream's rows may share
				time.Sleep(after)
				w.reshard(Event{Kind: Split, Pick: p})
			}
		})
	}
}

// supersede freezes the hosts of e's deployment that write the start it
// is configured with now, from the first such write for e.Pause, and
// deploys deployment e.By again with e.Start once one froze (after a
// minute and a half when none did, and then not at all).
func (w *World) supersede(e Event) {
	dep := w.cfg.Deployments[e.Deployment].Name
	w.mu.Lock()
	at := w.resolved[e.Deployment]
	w.mu.Unlock()
	select {
	case <-w.armStartPause(dep, at, e.Pause):
	case <-time.After(90 * time.Second):
		w.disarmStartPause(dep)
		w.tr.add("", "", "no host of %s wrote start %s to pause", dep, at)
		return
	}
	if e.Overlap > 0 {
		// The passes applying the newer start pause too, as their first
		// write leaves, until just after the older one's hosts wake: they
		// decided on rows that the older start's late writes then change.
		until := w.pausedUntil(dep).Add(e.Overlap)
		w.armStartPauseUntil(w.cfg.Deployments[e.By].Name, until)
		w.tr.add("", "", "the hosts of %s that write a start freeze until %s after those of %s wake", w.cfg.Deployments[e.By].Name, e.Overlap, dep)
	}
	w.apply(Event{Kind: Redeploy, Deployment: e.By, Start: e.Start})
}

// raceDeletion sets up e's race (Event.Start) and returns when the
// deletion may go ahead: at once for "freeze", which freezes a host of
// the deployment for e.Pause from now; for "describe" and "start" once a
// host of the deployment has met the moment and frozen (or after a
// minute and a quarter, when none did). "start" first deploys the deployment again with
// a start of this moment, unless moved says it was just moved so.
func (w *World) raceDeletion(e Event, moved map[int]bool) {
	var met <-chan struct{}
	switch e.Start {
	case "":
		return
	case "freeze":
		if host := w.hf.pickHost(w.cfg.Deployments[e.Deployment].Name, e.Pick); host != "" {
			w.freeze(host, e.Pause)
			w.tr.add("", "", "race at the re-creation: host %s frozen for %s as the stream is deleted", host, e.Pause)
		}
		return
	case "start":
		met = w.armRace(e)
		if !moved[e.Deployment] {
			w.apply(Event{Kind: Redeploy, Deployment: e.Deployment, Start: "timestamp:+0s"})
		}
	default:
		met = w.armRace(e)
	}
	select {
	case <-met:
	case <-time.After(schedulePeriod + 15*time.Second): // a Lambda coordinator's next window begins within it
		w.disarmRace()
		w.tr.add("", "", "race at the re-creation: no host met its %s", e.Start)
	}
}

// readerOptions are a deployment's reader options on a host.
func (w *World) readerOptions(dep string, clock hostClock, kin reader.KinesisAPI, st reader.Store, tgt reader.Target) reader.Options {
	rc := w.cfg.Reader
	o := reader.Options{
		Kinesis: kin, Store: st, Target: tgt,
		Mapping: reader.Mapping{
			BatchSize:                  rc.BatchSize,
			MaximumRetryAttempts:       reader.RetryAttempts(rc.MaxRetryAttempts),
			BisectBatchOnFunctionError: rc.Bisect,
			MaximumRecordAge:           rc.MaxRecordAge,
			ParallelizationFactor:      rc.ParallelizationFactor,
			MaximumBatchingWindow:      rc.BatchingWindow,
			FilterCriteria:             rc.Filters,
			TumblingWindow:             rc.TumblingWindow,
		},
		PollInterval: rc.Poll, RunLength: rc.RunLength,
		MaxIterations: rc.MaxIterations, RenewInterval: rc.Renew, LeaseDuration: rc.Lease,
		TargetTimeout: w.targetTimeout(dep), Fence: w.fence(dep), Clock: clock.Now,
		Logger: slog.New(slog.DiscardHandler),
		Hooks:  hooks{w: w},
		Lag:    w.lag, // as the shardreader handler and cmd/shardloop run do
	}
	if rc.MaxRetryAttempts >= 0 || rc.MaxRecordAge > 0 {
		o.OnFailure = &destination{w: w, dep: dep}
	}
	if w.cfg.Sabotage == Unfiltered {
		o.FilterCriteria = nil
	}
	if w.cfg.ReaderHook != nil {
		w.cfg.ReaderHook(dep, &o)
	}
	return o
}

// runsOn reports whether a deployment's target runs each invocation to its
// own end whatever the caller does: a Lambda function (the Lambda shape's
// target, or one behind reader.LambdaTarget), or a target whose timeout
// the reader was told. Otherwise it is an in-process function that stops
// when its context ends, as reader.Options.TargetTimeout 0 promises.
func (w *World) runsOn(dep string) bool {
	if w.cfg.Reader.TargetTimeout > 0 || w.cfg.Reader.LambdaTarget {
		return true
	}
	for _, d := range w.cfg.Deployments {
		if d.Name == dep {
			return d.Lambda
		}
	}
	return false
}

// targetTimeout is the TargetTimeout a deployment's readers run with: the
// function's own timeout for a target that runs on (as the shardreader
// handler reads it from the function's configuration), else the world's.
func (w *World) targetTimeout(dep string) time.Duration {
	if w.cfg.Reader.TargetTimeout == 0 && w.runsOn(dep) {
		return w.cfg.Reader.FunctionTimeout
	}
	return w.cfg.Reader.TargetTimeout
}

// fence is the Fence a deployment's readers run with: their target's
// timeout less the world's FenceCut (keeping at least half a second), as
// the shardreader handler and shardloop run derive it from a smaller
// timeout set for the target (handlers.FenceFor); 0 (the whole timeout)
// when the world cuts none or the timeout is unknown.
func (w *World) fence(dep string) time.Duration {
	tt, cut := w.targetTimeout(dep), w.cfg.Reader.FenceCut
	if tt == 0 || cut <= 0 {
		return 0
	}
	f, err := handlers.FenceFor(tt, tt-min(cut, tt-500*time.Millisecond), w.cfg.Reader.RunLength)
	if err != nil {
		panic(fmt.Sprintf("sim: a world drew a fence its handler would refuse: %v", err))
	}
	return f
}

// newTarget is a deployment's target.
func (w *World) newTarget(dep string) reader.Target {
	t := &target{w: w, dep: dep, runsOn: w.runsOn(dep)}
	if w.cfg.Reader.LambdaTarget {
		lt, err := reader.NewLambdaTarget(function{t: t}, "target-"+dep, func(o *reader.LambdaOptions) { o.Region = "us-east-1" })
		if err != nil {
			panic(err)
		}
		t.lam = lt
	}
	return t
}

// newHost returns the clock of a new host of a deployment.
func (w *World) newHost(dep string) hostClock {
	w.mu.Lock()
	w.hosts++
	name := dep + "#" + strconv.Itoa(w.hosts)
	w.mu.Unlock()
	w.hf.noteHost(name)
	rs := w.rnd.get("host:" + name)
	c := hostClock{name: name, base: w.began}
	if s := w.cfg.Clocks.Skew; s > 0 {
		c.skew = rs.dur(-s, s)
	}
	if d := w.cfg.Clocks.Drift; d > 0 {
		c.drift = (2*rs.float() - 1) * d
	}
	return c
}

// producer writes keyed records, each key's in order.
type producer struct {
	w *World

	mu     sync.Mutex
	next   []int // per key, the next record's number
	paused bool
	inc    int
	wake   chan struct{}
}

func (p *producer) pause(on bool) {
	p.mu.Lock()
	p.paused = on
	p.mu.Unlock()
	if !on {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

// restart numbers each key's records from 0 again, for a new incarnation.
func (p *producer) restart() {
	p.mu.Lock()
	clear(p.next)
	p.mu.Unlock()
}

const tick = 500 * time.Millisecond

func (p *producer) run(ctx context.Context) {
	w := p.w
	rs := w.rnd.get("producer")
	pad := strconv.Quote(strings.Repeat("x", w.cfg.DataSize))
	owed := 0.0
	perm := make([]int, len(p.next))
	keyNames := make([]*string, len(p.next)) // each key's PartitionKey, made once
	for i := range perm {
		perm[i] = i
		keyNames[i] = aws.String("k" + strconv.Itoa(i))
	}
	for ctx.Err() == nil {
		if err := w.sleep(ctx, tick); err != nil {
			return
		}
		p.mu.Lock()
		paused := p.paused
		p.mu.Unlock()
		if paused {
			select {
			case <-ctx.Done():
				return
			case <-p.wake:
			}
			continue
		}
		owed += w.cfg.Rate * tick.Seconds()
		n := min(int(math.Floor(owed)), len(p.next), 500)
		owed -= float64(n)
		if n == 0 {
			continue
		}
		// n distinct keys, each at most once in the request.
		for i := range n {
			j := i + rs.intN(len(perm)-i)
			perm[i], perm[j] = perm[j], perm[i]
		}
		keys := perm[:n]
		p.mu.Lock()
		entries := make([]types.PutRecordsRequestEntry, n)
		nums := make([]int, n)
		// The records' data in one buffer, each capped at its own end.
		data := make([]byte, 0, n*recordDataCap(pad))
		for i, k := range keys {
			nums[i] = p.next[k]
			from := len(data)
			data = appendRecordData(data, k, nums[i], pad)
			entries[i] = types.PutRecordsRequestEntry{
				PartitionKey: keyNames[k],
				Data:         data[from:len(data):len(data)],
			}
		}
		p.mu.Unlock()
		inc := w.incNow()
		arrival := time.UnixMilli(time.Now().UnixMilli())
		out, err := w.kin.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(streamName), Records: entries})
		if err != nil {
			continue // the stream is being re-created, or ctx ended: the same keys are written again
		}
		p.mu.Lock()
		for i, r := range out.Records {
			if r.ErrorCode != nil {
				continue // throttled: the key's record is written again next time
			}
			w.chk.produced(inc, keys[i], nums[i], aws.ToString(r.ShardId), aws.ToString(r.SequenceNumber), arrival, entries[i])
			p.next[keys[i]]++
		}
		p.mu.Unlock()
	}
}

// recordData is the data of key k's record n: JSON, for the filters
// (FilterPool) to match on: the key, the number, a type that alternates
// along the key, and padding.
func recordData(k, n int, pad string) []byte {
	return appendRecordData(nil, k, n, strconv.Quote(pad))
}

// recordDataCap is room enough for one record's data, given pad quoted.
func recordDataCap(quotedPad string) int {
	return len(`{"k":,"n":,"t":"a","p":}`) + 40 + len(quotedPad)
}

// appendRecordData appends recordData(k, n, pad) to b, given pad quoted
// (strconv.Quote): the producer and the content check make one for every
// record, and fmt's and the quoting's work per record was a few percent of
// a world's time.
func appendRecordData(b []byte, k, n int, quotedPad string) []byte {
	if b == nil {
		b = make([]byte, 0, recordDataCap(quotedPad))
	}
	b = append(b, `{"k":`...)
	b = strconv.AppendInt(b, int64(k), 10)
	b = append(b, `,"n":`...)
	b = strconv.AppendInt(b, int64(n), 10)
	if (k+n)%2 == 1 {
		b = append(b, `,"t":"b","p":`...)
	} else {
		b = append(b, `,"t":"a","p":`...)
	}
	b = append(b, quotedPad...)
	return append(b, '}')
}

// KnownBugs are the bugs the simulator found that are not fixed yet, by
// the name the checker gives the violations they cause. A world whose
// violations are all known bugs' does not fail TestSim (it is reported);
// with -sim.strict it does. Remove a bug here when its fix lands: its
// worlds are then ordinary failures again.
//
// B6 (staleGeneration) was fixed in pkg/shards.Decide, where a shard a new
// start re-opens waits for its descendants' revoked holders. B5's return in
// Lambda worlds (3002099) was the simulator's own Kinesis wrapper hiding
// DescribeStreamSummary from the reader; it is part of reader.KinesisAPI
// now, so no wrapper can hide it.
var KnownBugs = map[string]string{}

// Unknown returns the violations that are no known bug's.
func (r *Result) Unknown() []Violation {
	var out []Violation
	for _, v := range r.Violations {
		if _, known := KnownBugs[v.Bug]; !known || v.Bug == "" {
			out = append(out, v)
		}
	}
	return out
}

// lag is the reader's last lag on a shard, as metrics.Recorder.Lag is.
func (w *World) lag(_, shardID string) (int64, bool) { return w.lags.load(shardID) }

func (h hooks) MillisBehindLatest(_, shardID string, ms int64) { h.w.lags.store(shardID, ms) }

// lags are the shards' last lags. A map under a lock, not a sync.Map: every
// read stores one, and a sync.Map boxed its key and value each time.
type lags struct {
	mu sync.Mutex
	m  map[string]int64
}

func (l *lags) store(shardID string, ms int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]int64{}
	}
	l.m[shardID] = ms
}

func (l *lags) load(shardID string) (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ms, ok := l.m[shardID]
	return ms, ok
}

// hooks put what a reader reports of its reads in the trace.
type hooks struct {
	reader.NopHooks
	w *World
}

func (h hooks) ReadError(_, shardID string, err error, throttled bool) {
	what := "read failed"
	if throttled {
		what = "read throttled"
	}
	var expired *types.ExpiredIteratorException
	if errors.As(err, &expired) {
		what = "iterator expired"
	}
	h.w.tr.add(h.w.shardName(shardID), "", "%s", what)
}
