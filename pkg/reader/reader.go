package reader

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/shards"
)

// StreamName returns the stream name of an ARN
// (arn:aws:kinesis:<region>:<account>:stream/<name>), or s itself. The ARN
// is parsed by shards.StreamName, the one parser of stream ARNs.
func StreamName(s string) string {
	if name, err := shards.StreamName(s); err == nil {
		return name
	}
	return s
}

// Run reads one shard for one bounded run: it takes (or renews) the lease
// for st.Owner, renews it in the background, reads with GetRecords,
// delivers the records to the target through ParallelizationFactor lanes
// and checkpoints what settled, until the run's length or ctx's deadline
// (less Margin), the shard's end, a lost lease, or too many read errors. It
// returns the state for the next run, with Continue, ContinueAsNew and
// Reason set.
//
// The error is non-nil only when the run could not start (invalid options
// or state, or a take that failed for a reason other than ErrHeld); the
// state returned with it is st unchanged, so running it again is safe.
func Run(ctx context.Context, opts Options, st State) (State, error) {
	o := opts
	o.setDefaults()
	if err := o.validate(); err != nil {
		return st, err
	}
	if st.Stream == "" {
		st.Stream = StreamName(st.StreamARN)
	}
	switch {
	case st.Stream == "":
		return st, &InvalidError{Field: "state stream", Value: "", Want: "a stream name or streamArn"}
	case st.ShardID == "":
		return st, &InvalidError{Field: "state shardId", Value: "", Want: "a shard id"}
	case st.Owner == "":
		return st, &InvalidError{Field: "state owner", Value: "", Want: "an owner id"}
	}
	in := st
	r := &run{o: o, in: st, start: o.Clock(), factor: o.ParallelizationFactor}
	r.log = o.Logger.With("stream", st.Stream, "shard_id", st.ShardID, "owner", st.Owner)
	r.in.Continue, r.in.ContinueAsNew, r.in.Reason = false, false, ""
	r.in.Iteration++

	// Each run writes as a run owner of its own in the loop owner's
	// family. It takes the row at once when the loop's previous run handed
	// it back with nothing running; a row an earlier run still holds (it
	// crashed, or runs on beside this retried one) it waits out as any
	// taker would (take).
	h, row, watch, err := r.take(ctx, st.Owner+lease.RunSeparator+runID(), st.Watch)
	r.in.Watch = nil
	if err != nil {
		return in, fmt.Errorf("reader: take lease %s: %w", lease.Key(st.Stream, st.ShardID), err)
	}
	if h == nil {
		out := r.in
		if watch != nil {
			out.Continue, out.Reason, out.Watch = true, ReasonWaiting, watch
			if out.Iteration >= o.MaxIterations {
				out.ContinueAsNew, out.Iteration = true, 0
			}
			return out, nil
		}
		o.Hooks.LeaseLost(st.Stream, st.ShardID, st.Owner)
		out.Reason, out.Watch = ReasonLeaseLost, nil
		return out, nil
	}
	defer h.Close()
	r.holder = h
	r.written = st.Checkpoint
	r.cur = &cursor{r: r, iter: st.Iterator, firstSeq: st.FirstSequence, after: st.Checkpoint, errors: st.ReadErrors, row: row}
	if st.IteratorIssuedAt != 0 {
		r.cur.issued = time.UnixMilli(st.IteratorIssuedAt)
	}
	if !o.noReadPacing {
		r.cur.pace = newPacer(ShardReadsPerSecond, ShardReadBytes)
	}
	r.ahead = aheadOf(st)
	// Nothing checkpointed yet under the row's start, and the loop settled
	// records past it under that very start (its first records failing):
	// the loop reopens at the start, but keeps what it settled.
	keepAhead := startPending(row) && st.SettledTo != "" && st.SettledUnder == startOf(row) && effectiveCheckpoint(row) == st.Checkpoint
	if eff := effectiveCheckpoint(row); eff != st.Checkpoint || startPending(row) {
		// A fresh loop, another owner's checkpoint, or a start not yet
		// applied (a generation, a pin, a reset): the row decides; what this
		// loop carried no longer applies. Until the first checkpoint under a
		// start, every run opens at the start: nothing was settled, so
		// nothing is delivered twice that was not already unsettled.
		if st.Iterator != "" || st.Checkpoint != "" {
			r.log.Info("checkpoint on the row differs from the loop's; reopening from the row", "seq", eff, "loop_checkpoint", st.Checkpoint)
		}
		r.written, r.cur.after, r.cur.iter, r.cur.issued, r.cur.firstSeq = eff, eff, "", time.Time{}, ""
		if !keepAhead {
			r.ahead = ahead{}
		}
	}
	earlier := st.Incarnation != 0 && row.Incarnation != 0 && row.Incarnation != st.Incarnation
	if earlier {
		// The row is a shard of the stream created again (shard ids are
		// used anew): this loop read the earlier one. Its position means
		// nothing there, and the new shard's parents, which the row does
		// not name, may not be read yet.
		r.log.Warn("the shard's row was written for a stream created again since this loop began; releasing it unread",
			"loop_incarnation", st.Incarnation, "row_incarnation", row.Incarnation)
	}
	// A row that names no incarnation, held by a loop that knows its own,
	// was taken afresh: the coordinator deleted the loop's row meanwhile
	// (as stale, when the stream was deleted). It is judged by the loop's
	// incarnation: a loop of a deleted stream must not read the shard of
	// that id of the stream created again, whose parents the fresh row does
	// not name (the simulator's world 4246); and, the stream not described,
	// it is released unread all the same.
	inc, fresh := row.Incarnation, row.Incarnation == 0 && st.Incarnation != 0
	if fresh {
		inc = st.Incarnation
	}
	if row.Incarnation != 0 && !earlier {
		r.in.Incarnation = row.Incarnation
	}
	if earlier || r.streamGone(h.Context(), inc, fresh) {
		if err := h.Release(context.WithoutCancel(ctx), ""); err != nil {
			r.log.Warn("release failed; the lease will expire", "err", err)
		}
		if o.Nudge != nil {
			o.Nudge(ctx)
		}
		out := r.in
		out.Reason = ReasonStreamGone
		return out, nil
	}
	if o.TumblingWindow > 0 {
		if err := r.loadWindow(ctx); err != nil {
			return in, err
		}
	}
	r.carriedIn = map[string]Failure{}
	r.carriedLane = map[string]int{}
	for i, l := range st.Lanes {
		if l.FailingSeq != "" {
			r.carriedIn[l.FailingSeq] = l.Failure
			if st.Factor == r.factor {
				r.carriedLane[l.FailingSeq] = i
			}
		}
	}
	if st.FailingSeq != "" {
		r.carriedIn[st.FailingSeq] = st.Failure
	}
	r.startRowFailures(row)
	return r.loop(ctx), nil
}

// run is one bounded run. Its parts each have one job: the lease.Holder
// holds the lease (every delivery checks Holder.Valid and uses its context,
// every checkpoint goes through Holder.Checkpoint), the cursor reads, the
// lanes deliver, and the ledger applies the checkpoint rule. The run's own
// goroutine (schedule) is the only one that routes records, starts reads
// and checkpoints; the others tell it what happened.
type run struct {
	o      Options
	in     State // the payload as the run began (iteration counted): never changed
	log    *slog.Logger
	start  time.Time
	factor int

	holder *lease.Holder
	cur    *cursor
	lanes  []*lane
	ahead  ahead // what the previous run settled past the checkpoint

	// carriedIn are the failures the state carried in, by FailingSeq;
	// carriedLane their lanes when the state's factor is this run's.
	carriedIn   map[string]Failure
	carriedLane map[string]int
	// rowFails is what the run records on the row of its failing
	// deliveries (failing.go).
	rowFails rowFailures

	cutAt  time.Time       // ctx ends here (zero without a deadline): a delivery must end before
	ctx    context.Context // cancelled when the lease is lost or lapses, or at the hard deadline
	cancel context.CancelFunc
	idle   context.Context // of the lanes' waits: ctx, also cancelled when Yield is closed

	stopMu sync.Mutex
	stopAt time.Time   // no new read or batch after this
	halt   atomic.Bool // the run takes no more batches (read errors, or nothing more fits)

	stopRenew func() // stops the renewing goroutine and waits for it; idempotent

	delivered, batches, givenUp atomic.Int64

	laneEvents chan laneEvent
	quit       chan struct{} // closed when schedule returns: senders give up

	// Owned by schedule (and the steps after it).
	led     ledger
	book    []laneBook
	reads   []readMark
	written string // the checkpoint on the row, as far as this run knows
	// routedTo is the last record this run routed (took): what a hand-on
	// may say it settled up to.
	routedTo string
	// readRecords and readBytes are what this run read (data and partition
	// keys), for the size of the next read.
	readRecords, readBytes int64
	want                   string // the checkpoint the ledger allows
	failedAt               string // the last checkpoint write that failed (not a lost lease)
	settledIn              map[string]bool
	cursorBusy             bool // a read was asked for and its answer not taken

	// Tumbling windows (window.go), owned by schedule: the lane's window as
	// of its last event, the generations of it written and last failed, and
	// Kinesis's time of the last read that found the shard at its tip.
	win                   winState
	winWritten, winFailed int
	tipAt                 time.Time
}

// laneBook is what the schedule knows of one lane.
type laneBook struct {
	q       []unit // routed to the lane and not settled, in order
	sent    int    // leading units of q in the lane's batch now
	busy    bool
	failing bool // its batch failed a delivery and is being retried
	stopped bool // its batch ended unsettled: it takes no more
	late    bool // it started a batch past the run's length
}

func (b *laneBook) idle() bool { return !b.busy && !b.stopped && len(b.q) == 0 }

// readMark is one read's place in the ledger, for handing its iterator on.
type readMark struct {
	first   int // ledger index of its first entry
	iter    string
	issued  time.Time
	touched bool // some unit of it went to a lane
}

// outcome is how schedule ended.
type outcome int

const (
	outContinue   outcome = iota // the run's length, its deadline, or a halt: the loop goes on
	outLost                      // the lease was lost or lapsed
	outShardEnd                  // the shard was read to its end and everything settled
	outReadErrors                // too many read errors (or a start that does not parse)
	outReleased                  // Options.Yield was closed: give the shard up
)

// What a read told about the shard, for the pipelining rule.
type readKind int

const (
	readNone    readKind = iota // no read yet
	readEmpty                   // the last read returned nothing
	readTip                     // it returned records, at the tip
	readBacklog                 // it returned records and more wait
)

// Bounds of what a run holds (docs/failure-policy.md, "Parallel delivery").
const (
	// MaxAheadRecords bounds the records a run holds past its checkpoint,
	// settled or not: reads pause at it. A record holding the checkpoint
	// back (one lane retrying it) makes the others deliver at most this
	// many records that a takeover would deliver again.
	MaxAheadRecords = 10000
	// MinReadLimit is the fewest records a read asks for while the
	// read-ahead budget has room for them (the GetRecords limit of the
	// seed's design), and what the first read of a run asks for.
	MinReadLimit = 1000
)

func (r *run) loop(parent context.Context) State {
	r.stopAt = r.start.Add(r.o.RunLength)
	hard, hasDeadline := parent.Deadline()
	if hasDeadline {
		r.stopAt = minTime(r.stopAt, hard.Add(-r.o.Margin))
		r.cutAt = hard.Add(-r.o.Margin / 2)
		r.ctx, r.cancel = context.WithDeadline(r.holder.Context(), r.cutAt)
	} else {
		r.ctx, r.cancel = context.WithCancel(r.holder.Context())
	}
	defer r.cancel()
	r.idle = r.ctx
	if r.o.Yield != nil {
		var stopIdle context.CancelFunc
		r.idle, stopIdle = context.WithCancel(r.ctx)
		var wg sync.WaitGroup
		done := make(chan struct{})
		defer wg.Wait()
		defer close(done)
		wg.Go(func() {
			select {
			case <-r.o.Yield:
			case <-done:
			}
			stopIdle()
		})
	}

	if r.written == lease.ShardEnd {
		return r.shardEnd(parent, false)
	}

	var wg sync.WaitGroup
	renewCtx, stop := context.WithCancel(r.ctx)
	wg.Go(func() { r.holder.KeepAlive(renewCtx) })
	r.stopRenew = sync.OnceFunc(func() {
		stop()
		wg.Wait()
	})
	defer r.stopRenew()

	switch r.schedule() {
	case outLost:
		return r.leaseLost()
	case outShardEnd:
		return r.shardEnd(parent, true)
	case outReadErrors:
		if r.cur.gone {
			return r.release(parent, ReasonStreamGone)
		}
		return r.release(parent, ReasonReadErrors)
	case outReleased:
		return r.release(parent, ReasonReleased)
	}
	return r.finish()
}

// schedule runs the run: it asks the cursor for reads, routes their records
// to the lanes by partition key, hands each idle lane a batch of its
// records, and checkpoints as the ledger allows, until the run must end.
// Every goroutine it starts has ended when it returns.
func (r *run) schedule() outcome {
	r.laneEvents = make(chan laneEvent)
	r.quit = make(chan struct{})
	r.book = make([]laneBook, r.factor)
	r.settledIn = map[string]bool{}
	r.want = r.written
	// Records the previous run settled ahead are read again only to be
	// passed: as many a call as Kinesis gives (within the budget).
	catchingUp := func() bool {
		return r.ahead.to != "" && (r.cur.lastRead == "" || seqLess(r.cur.lastRead, r.ahead.to))
	}

	// The cursor's waits (poll interval, pacing, errors) end when the run
	// halts; its calls do not: one in flight completes.
	waits, cutWaits := context.WithCancel(r.idle)
	defer cutWaits()
	reqs := make(chan int32, 1)
	outs := make(chan readOut)
	ckDone := make(chan ckResult, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		for lim := range reqs {
			out := r.cur.read(waits, lim)
			select {
			case outs <- out:
			case <-r.quit:
				return
			}
		}
	})
	for i := range r.factor {
		l := &lane{r: r, id: i, work: make(chan []unit, 1), win: r.win}
		r.lanes = append(r.lanes, l)
		wg.Go(l.loop)
	}
	ckBusy := false
	defer func() {
		close(r.quit)
		close(reqs)
		for _, l := range r.lanes {
			close(l.work)
		}
		cutWaits()
		wg.Wait()
		select {
		case res := <-ckDone:
			r.checkpointed(res)
		default:
		}
	}()
	coalesce := !r.o.EagerCheckpoints && !r.windowed()
	checkpoint := func() {
		if coalesce {
			// The next renewal writes what settled (Holder.Settle); what it
			// wrote is what the row has.
			if w := r.holder.Written(); w != "" && w != r.written {
				r.checkpointed(ckResult{seq: w})
			}
			if r.want != r.written && !r.lost() {
				r.holder.Settle(r.want)
			}
			return
		}
		if ckBusy || !r.ckDue() || r.lost() {
			return
		}
		ckBusy = true
		seq, w := r.want, r.win
		wg.Go(func() {
			err := r.writeCheckpoint(r.ctx, seq, w)
			ckDone <- ckResult{seq: seq, gen: w.gen, err: err}
		})
	}

	stopTimer := time.NewTimer(max(r.stopTime().Sub(r.o.Clock()), 0))
	defer stopTimer.Stop()
	yield := r.o.Yield // nil once seen closed
	last := readNone
	ended, failedReads, readsCut := false, false, false
	for {
		if r.lost() {
			return outLost
		}
		if r.ctx.Err() != nil {
			return outContinue // the hard deadline: cut
		}
		halted := r.halted()
		if halted && !readsCut {
			cutWaits() // a wait of the cursor in progress ends now
			readsCut = true
		}
		if !r.halt.Load() && !r.yielded() {
			// Past the run's length each lane starts one more batch at most
			// (what a read that was a batch gave it before), so a run does not
			// outlast its length by delivering all it read ahead: the rest is
			// read again by the next run (from the checkpoint, or with the
			// iterator of the first read no batch came from). Lanes in
			// trouble stop retrying.
			r.dispatch(halted)
		}
		// The cursor's fields are read only while it is idle: a read in
		// flight writes them on the cursor's goroutine.
		if !r.cursorBusy && !ended && !halted {
			if limit := r.readLimit(catchingUp()); r.gate(last, limit).open() {
				reqs <- limit
				r.cursorBusy = true
			}
		}
		if !r.cursorBusy && r.lanesIdle() {
			switch {
			case failedReads:
				return outReadErrors
			case ended && r.led.empty():
				return outShardEnd
			case r.yielded():
				return outReleased
			case halted:
				return outContinue
			}
		}
		select {
		case out := <-outs:
			r.cursorBusy = false
			switch {
			case out.stop != "":
				failedReads = true
				r.halt.Store(true)
			case out.none:
			default:
				if !out.tipAt.IsZero() {
					r.tipAt = out.tipAt
				}
				r.took(out)
				if out.end {
					ended = true
				}
				switch {
				case len(out.recs) == 0:
					last = readEmpty
				case out.behind:
					last = readBacklog
				default:
					last = readTip
				}
			}
		case ev := <-r.laneEvents:
			r.laneEvent(ev)
		case res := <-ckDone:
			ckBusy = false
			r.checkpointed(res)
		case <-yield:
			yield = nil // halted now: the loop's head stops reads and waits
		case <-stopTimer.C:
			if left := r.stopTime().Sub(r.o.Clock()); left > 0 {
				stopTimer.Reset(left) // an injected clock behind the timer's
			}
		case <-r.ctx.Done():
		}
		checkpoint()
	}
}

// readLimit is what the next read asks for (see readSize), from the
// records this run read so far and the data it holds unsettled; catchingUp:
// the records are ones an earlier run settled, passed at once.
func (r *run) readLimit(catchingUp bool) int32 {
	var avg float64
	if r.readRecords > 0 {
		avg = float64(r.readBytes) / float64(r.readRecords)
	}
	return int32(readSize(avg, r.o.ReadAheadBytes-r.led.bytes, catchingUp))
}

// readSize is what one read asks for, by the average size avg of the
// records read so far (data and partition key; 0 before the first) and the
// room left in the read-ahead budget: as many records as keep every lane fed
// within the shard's limits (ShardReadsPerSecond reads of them carry
// ShardReadBytes a second, all a shard serves), at least MinReadLimit and at
// most MaxBatchSize; when catching up, MaxBatchSize. Then no more than fit
// in room at avg (at least one). A read is not a batch: batches are cut from
// what was read. Before any record was read, MinReadLimit.
func readSize(avg float64, room int, catchingUp bool) int {
	if avg <= 0 {
		return MinReadLimit
	}
	n := MaxBatchSize
	if !catchingUp {
		n = min(max(int(math.Ceil(float64(ShardReadBytes)/ShardReadsPerSecond/avg)), MinReadLimit), MaxBatchSize)
	}
	if fit := int(float64(room) / avg); fit < n {
		n = max(fit, 1)
	}
	return n
}

// gate gathers what decides whether the cursor reads now.
func (r *run) gate(last readKind, limit int32) readGate {
	g := readGate{last: last, limit: int(limit), heldRecords: r.led.records, heldBytes: r.led.bytes, budget: r.o.ReadAheadBytes}
	// A lane starves when less than a batch, or half its part of a read,
	// waits for it: the next read then lands before it runs dry.
	low := max(int(r.o.BatchSize), int(limit)/(2*r.factor))
	for i := range r.book {
		b := &r.book[i]
		g.idleLane = g.idleLane || b.idle()
		if b.failing || b.stopped {
			continue
		}
		waiting := len(b.q) - b.sent
		g.starving = g.starving || waiting < low
		g.queued += waiting
	}
	return g
}

// readGate is what the pipelining rule looks at.
type readGate struct {
	last                   readKind
	limit                  int  // records a read asks for
	idleLane               bool // some lane has nothing to deliver
	starving               bool // some lane not retrying has less than a batch (or half its part of a read) waiting
	queued                 int  // read and waiting for the lanes that are not retrying
	heldRecords, heldBytes int  // the ledger: records past the checkpoint, data not settled
	budget                 int  // Options.ReadAheadBytes
}

// open says whether to read now. Never past MaxAheadRecords held past the
// checkpoint, or the read-ahead budget of data not settled. While the shard
// has a backlog, read ahead of the lanes (pipelined) while a lane that is
// not retrying starves, and less than one read's worth waits in all. At the
// tip (the last read returned little or nothing), read only once a lane is
// idle: as often as a strictly sequential reader would, so an idle or slow
// shard spends no more of its shared reads than with one lane. (The poll
// interval after an empty read is the cursor's.)
func (g readGate) open() bool {
	if g.heldRecords >= MaxAheadRecords || g.heldBytes >= g.budget {
		return false
	}
	switch g.last {
	case readNone:
		return true
	case readBacklog:
		return g.starving && g.queued < g.limit
	}
	return g.idleLane
}

// took routes what one read returned: each unit gets its ledger entry and
// goes to the lane of its partition key, unless the previous run already
// settled it (State.SettledTo).
func (r *run) took(out readOut) {
	if len(out.recs) == 0 {
		return
	}
	r.routedTo = aws.ToString(out.recs[len(out.recs)-1].SequenceNumber)
	mark := readMark{first: r.led.head() + len(r.led.entries), iter: out.iterIn, issued: out.issuedIn}
	r.polled(len(out.recs))
	r.readRecords += int64(len(out.recs))
	r.readBytes += int64(size(out.recs))
	us, lead := r.units(out.recs)
	if lead > 0 {
		// The records before the first unit (all of them when there is
		// none) are passed at once: settled, they hold no checkpoint back.
		r.led.add(entry{ckpt: *out.recs[lead-1].SequenceNumber, records: lead, settled: true})
	}
	for _, u := range us {
		done := r.ahead.settled(u.seq(), u.key())
		u.idx = r.led.add(entry{ckpt: u.ckpt, records: u.n, bytes: u.size(), settled: done})
		if !done {
			l := laneOf(u.key(), r.factor)
			r.book[l].q = append(r.book[l].q, u)
		}
	}
	r.reads = append(r.reads, mark)
	r.advance()
}

// dispatch hands each idle lane its next batch: up to BatchSize of its
// units, in order; past the run's length (late), to a lane that has not
// started one since.
func (r *run) dispatch(late bool) {
	for i := range r.book {
		b := &r.book[i]
		if r.windowDue(b) {
			b.sent, b.busy, b.failing = 0, true, false
			r.lanes[i].work <- []unit{} // the window's final invocation
			continue
		}
		if b.busy || b.stopped || len(b.q) == 0 || (late && b.late) {
			continue
		}
		n := r.windowCut(b.q[:min(len(b.q), int(r.o.BatchSize))])
		batch := slices.Clone(b.q[:n])
		b.sent, b.busy, b.failing, b.late = n, true, false, late
		for _, u := range batch {
			r.touch(u.idx)
		}
		r.lanes[i].work <- batch
	}
}

// touch marks the read holding ledger entry idx as delivered from.
func (r *run) touch(idx int) {
	k, found := slices.BinarySearchFunc(r.reads, idx, func(m readMark, idx int) int { return m.first - idx })
	if !found {
		k--
	}
	if k >= 0 && k < len(r.reads) {
		r.reads[k].touched = true
	}
}

func (r *run) laneEvent(ev laneEvent) {
	b := &r.book[ev.lane]
	if ev.win != nil {
		r.win = *ev.win
	}
	if n := len(ev.settled); n > 0 {
		for _, u := range ev.settled {
			r.led.settle(u.idx)
			if _, ok := r.carriedIn[u.seq()]; ok {
				r.settledIn[u.seq()] = true
			}
		}
		b.q = b.q[n:]
		b.sent -= n
		r.advance()
	}
	if ev.failing {
		b.failing = true
	}
	if ev.done {
		b.busy, b.failing = false, false
		if !ev.ok {
			b.stopped = true
		}
	}
}

// advance moves the checkpoint the ledger allows and forgets the reads it
// passed.
func (r *run) advance() {
	if ckpt, ok := r.led.advance(); ok {
		r.want = ckpt
	}
	k := 0
	for k+1 < len(r.reads) && r.reads[k+1].first <= r.led.head() {
		k++
	}
	if r.led.empty() {
		k = len(r.reads)
	}
	r.reads = r.reads[k:]
}

func (r *run) lanesIdle() bool {
	for i := range r.book {
		if r.book[i].busy {
			return false
		}
	}
	return true
}

type ckResult struct {
	seq string
	gen int // the window generation written with it
	err error
}

// checkpointed takes the answer to a checkpoint write. A store error other
// than a lost lease leaves the records settled and the row behind: the next
// checkpoint writes past them.
func (r *run) checkpointed(res ckResult) {
	r.windowWritten(res)
	switch {
	case res.err == nil:
		if r.written == "" || seqLess(r.written, res.seq) || r.written == lease.ShardEnd {
			r.written = res.seq
		}
		r.failedAt = ""
	case r.lost():
	default:
		r.log.Warn("checkpoint failed; will write it with the next one", "seq", res.seq, "err", res.err)
		r.failedAt = res.seq
	}
}

// flush writes the checkpoint the ledger allows when the row is behind it,
// with one bounded try even after the run's context ended (the hard
// deadline): the settled records deserve it.
func (r *run) flush() {
	if !r.behind() || r.lost() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), r.o.RenewInterval)
	defer cancel()
	err := r.writeCheckpoint(ctx, r.want, r.win)
	r.checkpointed(ckResult{seq: r.want, gen: r.win.gen, err: err})
}

// lost reports whether the lease was lost or lapsed: nothing more may be
// delivered or written.
func (r *run) lost() bool { return r.holder.Valid() != nil }

// halted is the run's stop condition, in one place: it reads no more once
// it reached its length (or its deadline less Margin), or it is ending for
// another reason (halt: too many read errors, nothing more fits before the
// deadline; or Options.Yield was closed), and lanes stop retrying. After
// the length, the records already read still get their first delivery;
// after a halt or a yield, no new delivery starts.
func (r *run) halted() bool {
	return r.halt.Load() || r.yielded() || !r.o.Clock().Before(r.stopTime())
}

// stop is the one test a run's loops make before each try (a read, a
// delivery, a give-up's send, a window's final invocation): stop when the
// lease is lost or ctx ended; when the run yields its shard, if onYield;
// when the run must halt (its length, a halt or a yield: halted), if onHalt.
// The loops differ only in those two: a batch that is not in trouble is
// delivered despite a halt (its records were read before it), and the first
// try of a give-up is made despite a yield (the batch settles before the
// lease goes).
func (r *run) stop(ctx context.Context, onYield, onHalt bool) bool {
	return r.lost() || ctx.Err() != nil || (onYield && r.yielded()) || (onHalt && r.halted())
}

// yielded reports whether Options.Yield was closed: no new delivery starts,
// and the run releases its lease once what is in flight settled.
func (r *run) yielded() bool {
	select {
	case <-r.o.Yield:
		return true
	default:
		return false
	}
}

func (r *run) stopTime() time.Time {
	r.stopMu.Lock()
	defer r.stopMu.Unlock()
	return r.stopAt
}

// haltNow stops the run taking batches from now.
func (r *run) haltNow() {
	r.stopMu.Lock()
	r.stopAt = minTime(r.stopAt, r.o.Clock())
	r.stopMu.Unlock()
	r.halt.Store(true)
}

// wait sleeps d, but not past the run's stop time nor after the lease is
// lost or a yield.
func (r *run) wait(d time.Duration) { r.waitCtx(r.idle, d) }

func (r *run) waitCtx(ctx context.Context, d time.Duration) {
	if left := r.stopTime().Sub(r.o.Clock()); d > left {
		d = left
	}
	if d > 0 {
		_ = r.o.sleep(ctx, d)
	}
}

// leaseLost ends a run whose lease was lost or lapsed, writing nothing.
func (r *run) leaseLost() State {
	r.log.Warn("lease lost; stopping without writing", "err", r.holder.Err())
	r.o.Hooks.LeaseLost(r.in.Stream, r.in.ShardID, r.in.Owner)
	return r.out(ReasonLeaseLost, false)
}

// finish ends a run that continues: it writes the checkpoint of what
// settled and hands the row back to its loop, recording as the fence what
// it gave up on that may still run, so the loop's next run takes it at
// once (after that fence).
func (r *run) finish() State {
	r.flush()
	if r.lost() {
		return r.leaseLost()
	}
	if r.stopRenew != nil {
		r.stopRenew() // a renewal after the handback would read as a lost lease
	}
	if err := r.releaseTo(r.ctx, r.in.Owner); err != nil {
		r.log.Warn("hand-back failed; the loop's next run waits the lease out", "err", err)
	}
	st := r.out(ReasonContinue, true)
	r.log.Info("run done", "reason", st.Reason, "records", st.Records, "seq", st.Checkpoint)
	return st
}

// shardEnd writes SHARD_END (every delivery has settled when it is
// called), releases the lease and nudges the coordinator.
func (r *run) shardEnd(parent context.Context, write bool) State {
	if write {
		if !r.closeAtShardEnd() {
			return r.finish() // the next run sees the end again and closes the window then
		}
		r.flush() // the last records' checkpoint first, as when reading one batch after another
		for attempt := 1; ; attempt++ {
			if r.lost() {
				return r.leaseLost()
			}
			if r.halted() || r.ctx.Err() != nil {
				// Reopen after the checkpoint and see the end again.
				return r.finish()
			}
			_, err := r.holder.Checkpoint(r.ctx, lease.ShardEnd)
			if err == nil {
				r.written, r.want = lease.ShardEnd, lease.ShardEnd
				break
			}
			if !r.lost() {
				r.log.Warn("checkpoint of SHARD_END failed; retrying", "err", err)
			}
			if r.yielded() {
				return r.release(parent, ReasonReleased)
			}
			r.wait(backoff(r.o.RetryMin, r.o.RetryMax, attempt))
		}
		r.o.Hooks.ShardEnd(r.in.Stream, r.in.ShardID)
		r.log.Info("shard read to its end")
	}
	return r.release(parent, ReasonShardEnd)
}

// release gives the lease up and ends the loop with reason.
func (r *run) release(parent context.Context, reason Reason) State {
	if r.stopRenew != nil {
		r.stopRenew() // a renewal after the release would read as a lost lease
	}
	if r.behind() && r.want != "" && !r.lost() {
		err := r.writeCheckpoint(r.ctx, r.want, r.win)
		r.checkpointed(ckResult{seq: r.want, gen: r.win.gen, err: err})
	}
	if !r.lost() {
		if err := r.releaseTo(parent, ""); err != nil {
			r.log.Warn("release failed; the lease will expire", "err", err)
		}
		if r.o.Nudge != nil {
			r.o.Nudge(parent)
		}
	}
	st := r.out(reason, false)
	r.log.Info("run done", "reason", reason, "records", st.Records, "seq", st.Checkpoint)
	return st
}

// releaseTo gives the lease up (Holder.Release), bounded by a renew
// interval even when ctx has ended: to the loop owner to (a hand-back), or
// to anyone.
func (r *run) releaseTo(ctx context.Context, to string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.o.RenewInterval)
	defer cancel()
	return r.holder.Release(ctx, to)
}

// startOf names the row's start: its position, generation and order.
func startOf(row lease.Lease) string {
	return row.Start + "|" + row.Generation + "|" + strconv.FormatInt(row.GenerationOrder, 10)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
