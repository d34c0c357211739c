package reader

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// lane delivers the records of its partition keys, one batch at a time, in
// order, under the failure policy. A run has ParallelizationFactor lanes;
// they deliver concurrently, each to the target with at most one batch in
// flight, so one key's records never overlap at the target.
//
// A lane knows nothing of reads, checkpoints or the lease's renewals: it
// gets a batch, tells the run which of its units settled (in order) and
// when the batch is over, and checks the lease (Holder.Valid) before every
// delivery, which it makes with the run's context (the holder's).
type lane struct {
	r    *run
	id   int
	work chan []unit

	// fail is the lane's failing delivery now (FailingSeq "" when none);
	// read by the run once the lane has stopped.
	fail Failure
	// win is the lane's tumbling window (window.go), with TumblingWindow.
	win winState
	// runningUntil is when the last invocation the lane gave up on could
	// have ended (call): it starts no other before.
	runningUntil time.Time
}

// laneEvent is what a lane tells the run.
type laneEvent struct {
	lane    int
	settled []unit // units settled, in order, from the front of the lane's batch
	failing bool   // a delivery of the batch failed (the lane is retrying)
	done    bool   // the batch is over
	ok      bool   // ... with every unit settled
	// win is the lane's tumbling window after the units settled (or its
	// final invocation); nil without windows.
	win *winState
}

func (l *lane) loop() {
	for b := range l.work {
		ok := l.deliver(b)
		l.send(laneEvent{lane: l.id, done: true, ok: ok})
	}
}

func (l *lane) send(ev laneEvent) {
	select {
	case l.r.laneEvents <- ev:
	case <-l.r.quit:
	}
}

// span is a stretch of the lane's batch still to deliver: us[lo:hi].
type span struct{ lo, hi int }

// deliver hands us to the target until every unit settled or was given up
// under the failure policy (plan.go says what to deliver or give up next),
// reporting each settled stretch as it settles. It returns false when the
// run must stop (lease lost, deadline, the run's length with the batch in
// trouble) with units unsettled.
func (l *lane) deliver(us []unit) bool {
	r := l.r
	if r.windowed() {
		if !l.enterWindow(us) {
			return false
		}
		if len(us) == 0 {
			return true
		}
	}
	began := r.o.Clock()

	carried := func(s span) (int, error) { return l.carried(us, s.lo, s.hi) }
	p := newPlan(r.o.BisectBatchOnFunctionError, r.o.retryLimit(), carried, l.spans(us)...)
	expired := func(s span) int { return r.expired(us[s.lo:s.hi]) }
	failing := false
	for {
		st := p.next(expired)
		if st.kind == stepDone {
			break
		}
		if r.stop(r.ctx, true, p.troubled()) {
			return false
		}
		switch st.kind {
		case stepGiveUpAge, stepGiveUpRetries:
			cond := ConditionRecordAgeExceeded
			if st.kind == stepGiveUpRetries {
				cond = ConditionRetryAttemptsExhausted
			}
			if !l.giveUp(us[st.span.lo:st.span.hi], cond, st.lastErr, st.attempts) {
				return false
			}
			p.gaveUp(st.span.hi - st.span.lo)
			continue
		}

		if !r.fits() {
			r.log.Info("the target's timeout would outlast this run; leaving the batch to the next run", "target_timeout", r.o.TargetTimeout)
			r.haltNow() // nothing more fits in this run
			return false
		}
		cur := st.span
		b := r.batch(us[cur.lo:cur.hi])
		n, err := l.invoke(b)
		if errors.Is(err, errStillRunning) {
			return false
		}
		if errors.Is(err, errNotStarted) {
			// No invocation started: the lease is gone, or the renewal
			// recording its fence failed (tried again shortly, within the
			// run's length: past it the wait is cut to nothing, and the
			// batch is left to the next run).
			if r.stop(r.ctx, false, true) {
				return false
			}
			r.log.Warn("an invocation waits for the lease to record its fence", "err", err)
			r.wait(r.o.RetryMin)
			continue
		}
		k, nrec := settledUnits(us[cur.lo:cur.hi], max(0, min(n, len(b.Records))))
		r.failedInvoke(len(b.Records) - nrec)
		if k > 0 {
			r.delivered.Add(int64(nrec))
			r.o.Hooks.RecordsDelivered(r.in.Stream, r.in.ShardID, nrec)
			l.settled(us[cur.lo : cur.lo+k])
			p.delivered(k)
		}
		if k == cur.hi-cur.lo {
			continue
		}
		if r.lost() {
			return false
		}
		if err == nil {
			err = fmt.Errorf("reader: target settled %d of %d records: %w", nrec, len(b.Records), ErrPartial)
		}
		r.o.Hooks.TargetError(r.in.Stream, r.in.ShardID, err)
		if !failing {
			failing = true
			l.send(laneEvent{lane: l.id, failing: true})
		}
		first := us[cur.lo+k].seq()
		f := p.failed(err)
		if f.split {
			half := p.cur
			// Where the halving got to, carried to the next run should this
			// one end first (a split counts no attempt).
			l.setFail(Failure{FailingSeq: us[half.lo].seq(), FailedAttempts: p.attempts, FailingLast: us[half.hi-1].seq(), FailedError: truncate(err.Error(), MaxFailedError)})
			r.writeFailing()
			r.log.Warn("target failed; delivering the first half on its own", "seq", first, "records", half.hi-half.lo, "lane", l.id, "err", err)
			r.wait(r.o.RetryMin)
			continue
		}
		l.setFail(Failure{FailingSeq: first, FailedAttempts: f.attempts, FailingLast: us[cur.hi-1].seq(), FailedError: truncate(err.Error(), MaxFailedError)})
		r.writeFailing()
		if f.spent {
			continue // given up by the plan's next step
		}
		wait := backoff(r.o.RetryMin, r.o.RetryMax, f.fails)
		r.log.Warn("target failed; retrying the unsettled records", "seq", first, "attempt", f.attempts, "wait", wait, "lane", l.id, "err", err)
		r.wait(wait)
	}
	r.batches.Add(1)
	kin := 0
	for _, u := range us {
		kin += u.n
	}
	r.o.Hooks.Batch(r.in.Stream, r.in.ShardID, kin, r.o.Clock().Sub(began))
	return true
}

// errNotStarted: no invocation of the target started (Holder.Begin
// refused it: the lease is no longer valid, or the renewal that records its
// fence failed). It counts as no attempt.
var errNotStarted = errors.New("invocation not started")

// errStillRunning: the lane gave up on an invocation that may still be
// running (its call failed without the function's answer), and the run
// must stop before that one could have ended. It counts as no attempt; the
// run's hand-back records the fence over it, so the loop's next run waits
// it out too.
var errStillRunning = fmt.Errorf("%w: an invocation given up on may still run", errNotStarted)

// call makes one invocation of the target for the lane under the lease's
// fence: Begin first (the row then records how long the invocation may
// run, so a new owner waits it out), do with the run's context, then the
// invocation's end: over when the function answered, given up on (it may
// run on for its timeout) when the run's context ended first or the call
// failed without the function's answer. It fails with errNotStarted when
// Begin refused.
//
// A lane never invokes while an invocation it gave up on may still run:
// the retry of a call that broke (a connection reset after the request
// left) would otherwise run beside it at the function, with the same keys.
// It waits until TargetTimeout (and a tenth) from when the call gave up on
// it, and fails with errStillRunning when the run must stop first.
func (l *lane) call(do func(ctx context.Context) error) error {
	r := l.r
	for {
		left := l.runningUntil.Sub(r.o.Clock())
		if left <= 0 {
			break
		}
		if r.stop(r.ctx, true, true) {
			return errStillRunning
		}
		r.log.Info("waiting for an invocation given up on to end before the next", "wait", left, "lane", l.id)
		r.wait(left)
	}
	end, err := r.holder.Begin(r.ctx)
	if err != nil {
		return fmt.Errorf("%w: %w", errNotStarted, err)
	}
	err = do(r.ctx)
	ended := r.ctx.Err() == nil && answered(err)
	end(ended)
	if ended {
		return err
	}
	var wait time.Duration
	if r.o.TargetTimeout > 0 {
		// From now, not from the call's start: a call may send more than
		// one request (a batch split to fit Lambda's payload limit), the
		// last just now. A tenth more, as the lease keeps a tenth: this
		// host's clock and the one that ends the function may run at
		// different rates.
		wait = r.o.TargetTimeout + r.o.TargetTimeout/10
		l.runningUntil = r.o.Clock().Add(wait)
	}
	if h, ok := r.o.Hooks.(InvocationGivenUp); ok {
		h.InvocationGivenUp(r.in.Stream, r.in.ShardID, wait)
	}
	return err
}

// InvocationGivenUp is an optional part of Hooks: a call to the target
// ended without the function's answer (a timeout, a broken connection, the
// run's deadline), so its invocation may still be running, and the lane
// starts nothing more until wait (the target's timeout and a tenth; 0 when
// the reader does not know it) has passed. Each one holds its lane up to
// the function's timeout: frequent ones slow the shard down.
type InvocationGivenUp interface {
	InvocationGivenUp(stream, shardID string, wait time.Duration)
}

// answered reports whether a target's error says its function ran to an
// answer (or never ran): an error it returned, an answer that was not a
// valid response, a record too large to send, an Invoke Lambda refused or
// that never left (ErrNotRun). Any other error (a timeout, a broken
// connection) leaves the function perhaps running.
func answered(err error) bool {
	return err == nil || errors.Is(err, ErrFunction) || errors.Is(err, ErrBadResponse) || errors.Is(err, ErrRecordTooLarge) ||
		errors.Is(err, ErrNotRun)
}

// carried is the failed-delivery count (and its last error) a delivery of
// us[lo:hi] starts with: the one the lane or the loop's state carries for
// the same first unit (and, when bisecting, only for a single unit: splits
// do not count).
func (l *lane) carried(us []unit, lo, hi int) (int, error) {
	f, ok := l.failureOf(us[lo].seq())
	if !ok || (l.r.o.BisectBatchOnFunctionError && hi-lo > 1) {
		return 0, nil
	}
	var err error
	if f.FailedAttempts > 0 && f.FailedError != "" {
		err = errors.New(f.FailedError)
	}
	return f.FailedAttempts, err
}

// failureOf returns the failure carried for the delivery starting at seq:
// the lane's own, else one the loop's state carried in.
func (l *lane) failureOf(seq string) (Failure, bool) {
	if l.fail.FailingSeq == seq {
		return l.fail, true
	}
	f, ok := l.r.carriedIn[seq]
	return f, ok
}

// spans is how the lane delivers us: whole, or, where a failure carried
// from an earlier run begins at one of its units, the units before it, then
// those that failed then (with bisection, the half it had come down to, so
// that the halving goes on from there), then what was read after them. The
// failing record need not head the batch: a new loop reads from the
// checkpoint, and what its dead predecessor settled past it in this lane,
// while other lanes held the checkpoint back, went with its state
// (the simulator's world 2,003,478, where every loop halved from a whole
// batch again).
func (l *lane) spans(us []unit) []span {
	if l.fail.FailingSeq == "" && len(l.r.carriedIn) == 0 {
		return []span{{0, len(us)}} // nothing carried: no lookup per unit
	}
	for k := range us {
		f, ok := l.failureOf(us[k].seq())
		if !ok || (f.FailedAttempts == 0 && !l.r.o.BisectBatchOnFunctionError) {
			continue
		}
		var out []span
		if k > 0 {
			out = append(out, span{0, k})
		}
		end := l.carriedEnd(us, k, len(us))
		out = append(out, span{k, end})
		if end < len(us) {
			out = append(out, span{end, len(us)})
		}
		return out
	}
	return []span{{0, len(us)}}
}

// carriedEnd is where the failed delivery carried for us[lo] ended within
// us[lo:hi]: one past the unit whose sequence number is its FailingLast,
// or hi when it is not there.
func (l *lane) carriedEnd(us []unit, lo, hi int) int {
	f, _ := l.failureOf(us[lo].seq())
	if f.FailingLast == "" {
		return hi
	}
	for i := lo; i < hi; i++ {
		if us[i].seq() == f.FailingLast {
			return i + 1
		}
	}
	return hi
}

// setFail makes f the lane's failing delivery, on the row too.
func (l *lane) setFail(f Failure) {
	was := l.fail
	l.fail = f
	l.r.noteFailure(was, f, nil)
}

// settled tells the run that us settled and forgets a retry count carried
// for one of them.
func (l *lane) settled(us []unit) {
	was := l.fail
	if l.fail.FailingSeq != "" {
		for _, u := range us {
			if u.seq() == l.fail.FailingSeq {
				l.fail = Failure{}
				break
			}
		}
	}
	l.r.noteFailure(was, l.fail, us)
	l.send(laneEvent{lane: l.id, settled: us, win: l.snapshot()})
}

// giveUp gives us up: it sends their on-failure record to the destination
// (retrying until it is accepted), or logs them at error level when there is
// none, reports them to Hooks.BatchGivenUp, and settles them. It returns
// false when the run must stop first: nothing was settled.
func (l *lane) giveUp(us []unit, cond string, lastErr error, attempts int) bool {
	r := l.r
	recs := make([]types.Record, len(us))
	for i, u := range us {
		recs[i] = u.kin
	}
	fr := newFailureRecord(r.o.Clock(), cond, recs, r.batch(nil), r.in.Owner, r.o.Target, lastErr, attempts)
	attrs := []any{"condition", cond, "first_seq", fr.KinesisBatchInfo.StartSequenceNumber, "last_seq", fr.KinesisBatchInfo.EndSequenceNumber,
		"records", len(recs), "attempts", attempts, "err", lastErr}
	if r.o.ParallelizationFactor > 1 {
		attrs = append(attrs, "lane", l.id)
	}
	if r.o.OnFailure != nil {
		for try := 1; ; try++ {
			if r.stop(r.ctx, try > 1, try > 1) {
				return false
			}
			err := r.o.OnFailure.Send(r.ctx, fr)
			if err == nil {
				break
			}
			wait := backoff(r.o.RetryMin, r.o.RetryMax, try)
			r.log.Error("on-failure destination refused the record of a given-up batch; retrying, nothing checkpointed past it",
				append(attrs, "send_err", err, "wait", wait)...)
			r.wait(wait)
		}
		r.log.Error("batch given up; its on-failure record was sent", append(attrs, "request_id", fr.RequestContext.RequestID)...)
	} else {
		r.log.Error("batch given up and skipped; no on-failure destination is set", attrs...)
	}
	r.givenUp.Add(int64(len(recs)))
	r.o.Hooks.BatchGivenUp(r.in.Stream, r.in.ShardID, len(recs), cond)
	r.gaveUp(len(recs))
	l.settled(us)
	return true
}

// expired counts the leading units older than MaximumRecordAge.
func (r *run) expired(us []unit) int {
	if r.o.MaximumRecordAge <= 0 {
		return 0
	}
	now := r.o.Clock()
	k := 0
	for _, u := range us {
		t := u.kin.ApproximateArrivalTimestamp
		if t == nil || now.Sub(*t) <= r.o.MaximumRecordAge {
			break
		}
		k++
	}
	return k
}

// fits reports whether a delivery started now ends, by the target's own
// timeout, before the run's context is cut.
func (r *run) fits() bool {
	return r.o.TargetTimeout == 0 || r.cutAt.IsZero() || !r.o.Clock().Add(r.o.TargetTimeout).After(r.cutAt)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func backoff(lo, hi time.Duration, attempt int) time.Duration {
	d := lo
	for i := 1; i < attempt && d < hi; i++ {
		d *= 2
	}
	return min(d, hi)
}
