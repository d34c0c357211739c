package reader

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/shards"
)

// cursor is where a run reads its shard: the iterator and its age, the
// reopening rules (never at LATEST; the tip pinned on the row first), the
// batching window, the pacing of reads within the shard's limits, and the
// handling of read errors. It knows nothing of lanes or checkpoints: each
// call of read returns what one read (or one batching window) returned.
//
// A cursor is used by one goroutine at a time; the run reads its fields
// only once that goroutine is done.
type cursor struct {
	r *run

	iter     string    // the iterator of the next read; "" to reopen
	issued   time.Time // when iter was issued
	firstSeq string    // the first record this loop read
	lastRead string    // the last record this run read
	after    string    // the loop's checkpoint at the start: reopen after it while nothing was read
	errors   int       // consecutive read errors, across runs
	// shrink halves the limit of the reads that follow a read that timed
	// out, once per timeout; one halving is undone by a read answered
	// growBackAfter or more after the last change (shrunk).
	shrink int
	shrunk time.Time
	row    lease.Lease
	pace   pacer
	// gone: a read found the stream deleted (ResourceNotFoundException).
	gone bool
	// pinAt is the tip this run pinned, or tried to (see pin).
	pinAt time.Time
}

// readOut is what one read returned.
type readOut struct {
	recs []types.Record
	// iterIn and issuedIn are the iterator the read began with: the one to
	// hand on when none of its records were delivered.
	iterIn   string
	issuedIn time.Time
	// behind: the shard holds more than the read returned (a full read, or
	// MillisBehindLatest > 0), so reading ahead of the lanes pays.
	behind bool
	end    bool // the shard is read to its end: no next iterator
	// tipAt is Kinesis's time of a read that returned nothing at the tip
	// (the Date of its answer; the host's clock when there is none), for
	// closing a tumbling window; zero otherwise.
	tipAt time.Time
	stop  Reason // ReasonReadErrors: the run must end and let the lease go
	none  bool   // nothing was read: the run is stopping
}

// read returns the next records: it reopens when there is no iterator (or
// it is too old), waits for the pacer, retries throttled and failed reads,
// and gathers a batching window. After a read that returned nothing it
// waits one poll interval before returning. limit is the GetRecords limit;
// after a read that timed out (an answer too big to arrive in time), the
// reads ask for half as many, once more per timeout, and grow back a
// halving a minute while they are answered.
//
// Its calls use the run's context: a call in flight when the run halts
// completes (an iterator opened then is handed on). Its waits end when
// waits does (the run halting).
func (c *cursor) read(waits context.Context, limit int32) readOut {
	r := c.r
	ctx := r.ctx
	for {
		if r.stop(ctx, true, true) {
			return readOut{none: true}
		}
		if c.iter != "" && r.o.Clock().Sub(c.issued) > IteratorMaxAge {
			r.log.Info("stored iterator too old; reopening")
			c.iter = ""
		}
		if c.iter == "" {
			switch c.reopen(waits) {
			case opened, again:
				continue
			case atEnd:
				return readOut{end: true}
			default:
				return readOut{stop: ReasonReadErrors}
			}
		}
		if !c.paced(waits) {
			continue
		}
		iterIn, issuedIn := c.iter, c.issued
		issued := r.o.Clock()
		lim := max(limit>>c.shrink, 1)
		out, err := r.o.Kinesis.GetRecords(ctx, &kinesis.GetRecordsInput{
			ShardIterator: aws.String(c.iter),
			Limit:         aws.Int32(lim),
			StreamARN:     nonEmpty(r.in.StreamARN),
		})
		if err != nil {
			c.pace.done(r.o.Clock(), 0)
			if timedOut(err) && ctx.Err() == nil && lim > 1 {
				c.shrink, c.shrunk = c.shrink+1, r.o.Clock()
				r.log.Warn("read timed out; asking for fewer records", "limit", lim, "next_limit", max(limit>>c.shrink, 1), "err", err)
			}
			if c.readFailed(waits, "get records", err) == stop {
				return readOut{stop: ReasonReadErrors}
			}
			continue
		}
		if c.shrink > 0 && r.o.Clock().Sub(c.shrunk) >= growBackAfter {
			c.shrink, c.shrunk = c.shrink-1, r.o.Clock()
		}
		limit = lim
		c.pace.done(r.o.Clock(), size(out.Records))
		c.errors = 0
		if out.MillisBehindLatest != nil {
			r.o.Hooks.MillisBehindLatest(r.in.Stream, r.in.ShardID, *out.MillisBehindLatest)
		}
		recs, next := out.Records, out.NextShardIterator
		behind := len(recs) >= int(limit) || aws.ToInt64(out.MillisBehindLatest) > 0
		if len(recs) > 0 && c.firstSeq == "" {
			c.firstSeq = aws.ToString(recs[0].SequenceNumber)
		}
		if fill := r.windowFill(); r.o.MaximumBatchingWindow > 0 && len(recs) > 0 && len(recs) < int(fill) && next != nil {
			recs, next, issued = c.fill(waits, recs, next, issued, fill)
			behind = behind || len(recs) >= int(fill)
		}
		if len(recs) > 0 {
			c.lastRead = aws.ToString(recs[len(recs)-1].SequenceNumber)
		}
		if next == nil {
			c.iter = ""
			return readOut{recs: recs, iterIn: iterIn, issuedIn: issuedIn, end: true}
		}
		c.iter, c.issued = *next, issued
		var tipAt time.Time
		if len(recs) == 0 && aws.ToInt64(out.MillisBehindLatest) == 0 {
			if at, known := shards.ServerTime(out.ResultMetadata); known {
				tipAt = at
			} else {
				tipAt = r.o.Clock()
			}
		}
		if len(recs) == 0 {
			r.waitCtx(waits, r.o.PollInterval)
		}
		return readOut{recs: recs, iterIn: iterIn, issuedIn: issuedIn, behind: behind, tipAt: tipAt}
	}
}

// growBackAfter: a read answered this long after the reads' limit was last
// halved (or grown back) grows it back one halving, so that a shard whose
// reads timed out under a passing load reads at full size again, at most one
// probe (one timeout) a minute.
const growBackAfter = time.Minute

// timedOut reports whether err is an attempt that got no answer in time
// (the attempt timeout of the Kinesis client, a network timeout), which a
// smaller answer may beat.
func timedOut(err error) bool {
	var t interface{ Timeout() bool }
	return (errors.As(err, &t) && t.Timeout()) || errors.Is(err, context.DeadlineExceeded)
}

// windowFill is how many records a batching window gathers: a batch, or
// with N lanes 2 × N batches (at most MaxBatchSize), so that every lane gets
// one.
func (r *run) windowFill() int32 {
	if r.factor <= 1 {
		return r.o.BatchSize
	}
	return int32(min(2*int(r.o.BatchSize)*r.factor, MaxBatchSize))
}

// size is what records weigh against the shard's read limit.
func size(recs []types.Record) int {
	n := 0
	for _, rec := range recs {
		n += recordSize(rec)
	}
	return n
}

// paced waits until the pacer allows the next call; false when the wait
// was cut short (the caller looks at why).
func (c *cursor) paced(ctx context.Context) bool {
	d := c.pace.delay(c.r.o.Clock())
	if d <= 0 {
		return true
	}
	c.r.waitCtx(ctx, d)
	return c.pace.delay(c.r.o.Clock()) <= 0
}

// minReadGap keeps the reads of a batching window within the shard's 5
// GetRecords calls per second.
const minReadGap = 200 * time.Millisecond

// fill gathers a batch for MaximumBatchingWindow: after a read that returned
// fewer than limit records (windowFill; recs, read with an iterator issued
// at first), it reads again every PollInterval (at least 200 ms apart) with
// the next iterator, until limit records that pass the filters or
// MaxBatchBytes are gathered, the window since the first read has passed or
// the next read would end past it, the shard ends, a read fails (the next
// read retries it), or the run must stop. It returns the records, the next iterator and
// when it was issued.
func (c *cursor) fill(waits context.Context, recs []types.Record, next *string, first time.Time, limit int32) ([]types.Record, *string, time.Time) {
	r := c.r
	ctx := r.ctx
	until := minTime(first.Add(r.o.MaximumBatchingWindow), r.stopTime())
	issued := first
	total := size(recs)
	gap := max(r.o.PollInterval, minReadGap)
	passed := r.passing(recs) // filtered-out records do not fill a batch
	for passed < int(limit) && total < MaxBatchBytes && next != nil {
		if !r.o.Clock().Add(gap).Before(until) {
			break
		}
		r.waitCtx(waits, gap)
		if r.stop(ctx, true, true) || !c.paced(waits) {
			break
		}
		at := r.o.Clock()
		out, err := r.o.Kinesis.GetRecords(ctx, &kinesis.GetRecordsInput{
			ShardIterator: next,
			Limit:         aws.Int32(limit - int32(passed)),
			StreamARN:     nonEmpty(r.in.StreamARN),
		})
		if err != nil {
			c.pace.done(r.o.Clock(), 0)
			r.log.Debug("read in a batching window failed; delivering what was gathered", "err", err)
			break
		}
		c.pace.done(r.o.Clock(), size(out.Records))
		if out.MillisBehindLatest != nil {
			r.o.Hooks.MillisBehindLatest(r.in.Stream, r.in.ShardID, *out.MillisBehindLatest)
		}
		total += size(out.Records)
		passed += r.passing(out.Records)
		recs = append(recs, out.Records...)
		next, issued = out.NextShardIterator, at
	}
	return recs, next, issued
}

// What a reopening came to.
type reopened int

const (
	opened reopened = iota // a new iterator
	again                  // nothing yet (a failed call, waited out, or the run stopping): try again
	atEnd                  // a closed shard opened past its last record
	stop                   // the run must end: too many read errors, or a start that does not parse
)

// position is where to reopen when there is no iterator to use: after the
// last record this run read; else after the loop's checkpoint; else at the
// first record it read; else by the opening rule on the row (which holds
// the pin of a tip opening).
func (c *cursor) position() (Opening, error) {
	switch {
	case c.lastRead != "":
		return Opening{Type: types.ShardIteratorTypeAfterSequenceNumber, Seq: c.lastRead, Why: "last_read"}, nil
	case c.after != "":
		return Opening{Type: types.ShardIteratorTypeAfterSequenceNumber, Seq: c.after, Why: FromCheckpoint}, nil
	case c.firstSeq != "":
		return Opening{Type: types.ShardIteratorTypeAtSequenceNumber, Seq: c.firstSeq, Why: "first_read"}, nil
	}
	return Open(c.row)
}

// reopen gets a new iterator; waits is for its waits.
func (c *cursor) reopen(waits context.Context) reopened {
	r := c.r
	ctx := r.ctx
	op, err := c.position()
	if err != nil {
		// A start that does not parse cannot be read past: stop the loop
		// loudly and let the lease go, rather than guess a position.
		r.log.Error("cannot open shard", "err", err)
		return stop
	}
	if op.Type == types.ShardIteratorTypeLatest {
		// Never read from a bare LATEST: pin the opening first, so that every
		// later reader (after a crash before the first checkpoint) opens at or
		// before this point rather than at a later tip.
		var res reopened
		if op, res = c.pin(waits); res != opened {
			return res
		}
	}
	now := r.o.Clock()
	out, err := r.o.Kinesis.GetShardIterator(ctx, op.input(r.in.Stream, r.in.StreamARN, r.in.ShardID))
	if err != nil {
		return c.readFailed(waits, "get shard iterator "+op.String(), err)
	}
	c.errors = 0
	if out.ShardIterator == nil {
		return atEnd // a closed shard opened past its last record
	}
	c.iter, c.issued = *out.ShardIterator, now
	r.log.Info("opened shard", "at", op.String(), "why", op.Why)
	return opened
}

// pin records where a shard opens at its tip on the row, before anything
// is read: the time of Kinesis's answer to a LATEST GetShardIterator, less a
// second (its Date header is rounded down), as an AT_TIMESTAMP position,
// which it returns. The host's clock is never used for it. Anything but
// opened means the pin was not written now (a failure counted like a read
// error, or the run stopping).
func (c *cursor) pin(waits context.Context) (Opening, reopened) {
	r := c.r
	ctx := r.ctx
	// A pin once sent is sent again as it was: its write may have landed
	// with its answer lost, and a later tip would skip what arrived between.
	if c.pinAt.IsZero() {
		out, err := r.o.Kinesis.GetShardIterator(ctx, Opening{Type: types.ShardIteratorTypeLatest}.input(r.in.Stream, r.in.StreamARN, r.in.ShardID))
		if err != nil {
			return Opening{}, c.readFailed(waits, "get shard iterator LATEST (to pin the tip)", err)
		}
		at, known := shards.ServerTime(out.ResultMetadata)
		if !known {
			at = r.o.Clock() // a client without HTTP responses (tests)
		}
		c.pinAt = shards.TipPinnedAt(at)
	}
	at := c.pinAt
	pos := Position{Kind: Timestamp, At: at}.String()
	row, err := r.holder.Pin(ctx, pos)
	switch {
	case err == nil:
		c.row = row
		r.log.Info("pinned the tip opening on the row", "at", pos)
		return Opening{Type: types.ShardIteratorTypeAtTimestamp, At: at, Why: FromTip}, opened
	case r.lost():
		return Opening{}, again // the run ends
	}
	return Opening{}, c.readFailed(waits, "pin the tip opening on the lease row", err)
}

// readFailed handles a failed read: a throttled one waits one poll
// interval, an expired iterator is dropped (the next read reopens), any
// other error counts, waits ReadErrorWait, and the MaxReadErrors-th in a
// row stops the run. Its waits end with waits.
func (c *cursor) readFailed(waits context.Context, what string, err error) reopened {
	r := c.r
	if r.lost() || r.ctx.Err() != nil {
		return again // the caller sees why
	}
	var expired *types.ExpiredIteratorException
	var throttled *types.ProvisionedThroughputExceededException
	var gone *types.ResourceNotFoundException
	switch {
	case errors.As(err, &gone):
		// The stream was deleted: nothing more to read under this row (a
		// stream created again under its name is another incarnation, for
		// the coordinator to take afresh).
		r.log.Warn("the stream is gone; ending the run", "op", what, "err", err)
		r.o.Hooks.ReadError(r.in.Stream, r.in.ShardID, err, false)
		c.gone = true
		return stop
	case errors.As(err, &expired):
		r.log.Info("iterator expired; reopening", "err", err)
		c.iter = ""
		return again
	case errors.As(err, &throttled):
		r.log.Warn("read throttled; waiting one poll interval", "op", what, "err", err)
		r.o.Hooks.ReadError(r.in.Stream, r.in.ShardID, err, true)
		r.waitCtx(waits, r.o.PollInterval)
		return again
	}
	c.errors++
	r.log.Error("read failed", "op", what, "consecutive", c.errors, "err", err)
	r.o.Hooks.ReadError(r.in.Stream, r.in.ShardID, err, false)
	if c.errors >= r.o.MaxReadErrors {
		return stop
	}
	r.waitCtx(waits, r.o.ReadErrorWait)
	return again
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return aws.String(s)
}
