package reader

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/shards"
)

// Reason says why a run ended.
type Reason string

// The reasons a run ends.
const (
	// ReasonContinue: the run reached its length or deadline; the loop goes
	// on (continue=true) and keeps the lease.
	ReasonContinue Reason = "continue"
	// ReasonShardEnd: the shard was read to its end; SHARD_END was
	// checkpointed and the lease released. The loop ends.
	ReasonShardEnd Reason = "shard_end"
	// ReasonLeaseLost: another owner holds the lease (at the start, or a
	// renewal was refused). Nothing more was written. The loop ends.
	ReasonLeaseLost Reason = "lease_lost"
	// ReasonReadErrors: MaxReadErrors consecutive read errors; the lease
	// was released for the coordinator to take again. The loop ends.
	ReasonReadErrors Reason = "read_errors"
	// ReasonReleased: Options.Yield was closed; the run let its delivery in
	// flight settle, checkpointed what settled and released the lease, so
	// another owner may take the shard at once. The loop ends.
	ReasonReleased Reason = "released"
)

// State is what one run hands the next: the Step Functions payload of a
// shard loop. The JSON names are fixed; docs/state.md describes each field.
type State struct {
	Stream    string `json:"stream"`
	StreamARN string `json:"streamArn"`
	ShardID   string `json:"shardId"`
	Owner     string `json:"owner"`
	// Iterator is the shard iterator whose next GetRecords returns the first
	// record not yet delivered; empty when there is none to reuse.
	Iterator string `json:"iterator"`
	// IteratorIssuedAt is when Iterator was issued, Unix milliseconds.
	IteratorIssuedAt int64 `json:"iteratorIssuedAt"`
	// FirstSequence is the first record this loop read, for reopening while
	// nothing is checkpointed.
	FirstSequence string `json:"firstSequence"`
	// Checkpoint is the last checkpoint this loop knows on the row.
	Checkpoint    string `json:"checkpoint"`
	Iteration     int    `json:"iteration"`
	Continue      bool   `json:"continue"`
	ContinueAsNew bool   `json:"continueAsNew"`
	Reason        Reason `json:"reason"`

	// ReadErrors counts consecutive failed reads, across runs.
	ReadErrors int `json:"readErrors"`
	// Records and Batches count what this loop delivered.
	Records int64 `json:"records"`
	Batches int64 `json:"batches"`

	// FailingSeq and FailedAttempts carry a failing batch's retry count
	// across runs: the delivery starting at FailingSeq failed FailedAttempts
	// times. Empty and 0 when nothing is failing.
	FailingSeq     string `json:"failingSeq"`
	FailedAttempts int    `json:"failedAttempts"`
	// FailingLast is the last record of the delivery that failed: a later
	// run that reads more records after it applies the carried count to
	// those records only, never to records that have not failed.
	FailingLast string `json:"failingLast"`
	// FailedError is the last failed delivery's error (at most 512 bytes),
	// for the on-failure record of a batch given up in a later run.
	FailedError string `json:"failedError"`
	// GivenUp counts the Kinesis records this loop gave up under the
	// failure policy.
	GivenUp int64 `json:"givenUp"`
}

// runID returns a fresh id for one run: 48 random bits in hex.
func runID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// kplMagic starts every record the Kinesis Producer Library aggregated.
var kplMagic = []byte{0xF3, 0x89, 0x9A, 0xC2}

// IsAggregated reports whether data is a KPL-aggregated record.
func IsAggregated(data []byte) bool { return bytes.HasPrefix(data, kplMagic) }

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
// delivers each batch to the target and checkpoints it, until the run's
// length or ctx's deadline (less Margin), the shard's end, a lost lease, or
// too many read errors. It returns the state for the next run, with
// Continue, ContinueAsNew and Reason set.
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
	r := &run{o: o, st: st, start: o.Clock()}
	r.log = o.Logger.With("stream", st.Stream, "shard_id", st.ShardID, "owner", st.Owner)
	r.st.Continue, r.st.ContinueAsNew, r.st.Reason = false, false, ""
	r.st.Iteration++

	// Each run writes as a run owner of its own in the loop owner's family:
	// a previous run still going (a retried invocation overlapping the
	// first) loses the row at its next renew or checkpoint.
	r.owner = st.Owner + lease.RunSeparator + runID()
	h, row, err := lease.Hold(ctx, lease.HolderOptions{
		Store: o.Store, Stream: st.Stream, ShardID: st.ShardID, Owner: r.owner,
		Duration: o.LeaseDuration, RenewInterval: o.RenewInterval, Clock: o.Clock, Logger: r.log,
	}, lease.WithOwnerFamily(st.Owner))
	if errors.Is(err, lease.ErrHeld) {
		r.log.Warn("lease held by another owner", "err", err)
		o.Hooks.LeaseLost(st.Stream, st.ShardID, st.Owner)
		r.st.Reason = ReasonLeaseLost
		return r.st, nil
	}
	if err != nil {
		return in, fmt.Errorf("reader: take lease %s: %w", lease.Key(st.Stream, st.ShardID), err)
	}
	defer h.Close()
	r.holder = h
	if eff := effectiveCheckpoint(row); eff != r.st.Checkpoint || startPending(row) {
		// A fresh loop, another owner's checkpoint, or a start not yet
		// applied (a generation, a pin, a reset): the row decides; what this
		// loop carried no longer applies. Until the first checkpoint under a
		// start, every run opens at the start: nothing was settled, so
		// nothing is delivered twice that was not already unsettled.
		if r.st.Iterator != "" || r.st.Checkpoint != "" {
			r.log.Info("checkpoint on the row differs from the loop's; reopening from the row", "seq", eff, "loop_checkpoint", r.st.Checkpoint)
		}
		r.st.Checkpoint, r.st.Iterator, r.st.IteratorIssuedAt, r.st.FirstSequence = eff, "", 0, ""
	}
	r.row = row
	return r.loop(ctx), nil
}

type run struct {
	o     Options
	st    State
	owner string // this run's owner on the row: st.Owner + "/" + a run id
	row   lease.Lease
	log   *slog.Logger
	start time.Time

	holder *lease.Holder   // the lease: its deadline, checkpoints, pins
	stopAt time.Time       // no new read or delivery after this
	cutAt  time.Time       // ctx ends here (zero without a deadline): a delivery must end before
	ctx    context.Context // cancelled when the lease is lost or lapses, or at the hard deadline
	cancel context.CancelFunc
	idle   context.Context // of waits: r.ctx, also cancelled when Yield is closed

	stopRenew func() // stops the renewing goroutine and waits for it; idempotent

	pending string // settled but not yet checkpointed (a store error)
}

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
				stopIdle()
			case <-done:
				stopIdle()
			}
		})
	}

	if r.st.Checkpoint == lease.ShardEnd {
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

	for {
		if r.lost() {
			return r.leaseLost()
		}
		if !r.o.Clock().Before(r.stopAt) || r.ctx.Err() != nil {
			// Also after a yield: a delivery cut by ctx may still be running
			// at the target, so the lease is kept, to lapse.
			return r.finish()
		}
		if r.yielded() {
			r.st.Iterator, r.st.IteratorIssuedAt = "", 0 // the next owner opens after the checkpoint
			return r.release(parent, ReasonReleased)
		}
		if r.st.Iterator != "" && r.o.Clock().Sub(time.UnixMilli(r.st.IteratorIssuedAt)) > IteratorMaxAge {
			r.log.Info("stored iterator too old; reopening")
			r.st.Iterator = ""
		}
		if r.st.Iterator == "" {
			if stop, ok := r.reopen(parent); !ok {
				return stop
			}
			continue
		}
		issued := r.o.Clock()
		out, err := r.o.Kinesis.GetRecords(r.ctx, &kinesis.GetRecordsInput{
			ShardIterator: aws.String(r.st.Iterator),
			Limit:         aws.Int32(r.o.BatchSize),
			StreamARN:     nonEmpty(r.st.StreamARN),
		})
		if err != nil {
			if stop, ok := r.readFailed(parent, "get records", err); !ok {
				return stop
			}
			continue
		}
		r.st.ReadErrors = 0
		if out.MillisBehindLatest != nil {
			r.o.Hooks.MillisBehindLatest(r.st.Stream, r.st.ShardID, *out.MillisBehindLatest)
		}
		recs, next := out.Records, out.NextShardIterator
		if len(recs) > 0 && r.st.FirstSequence == "" {
			r.st.FirstSequence = aws.ToString(recs[0].SequenceNumber)
		}
		if r.o.BatchingWindow > 0 && len(recs) > 0 && len(recs) < int(r.o.BatchSize) && next != nil {
			recs, next, issued = r.fill(recs, next, issued)
		}
		if !r.deliver(recs) {
			// Stopped with records unsettled: reopen after the checkpoint.
			r.st.Iterator, r.st.IteratorIssuedAt = "", 0
			continue
		}
		if next == nil {
			return r.shardEnd(parent, true)
		}
		r.st.Iterator, r.st.IteratorIssuedAt = *next, issued.UnixMilli()
		if len(recs) == 0 {
			r.wait(r.o.PollInterval)
		}
	}
}

// minReadGap keeps the reads of a batching window within the shard's 5
// GetRecords calls per second.
const minReadGap = 200 * time.Millisecond

// fill gathers a batch for BatchingWindow: after a read that returned
// fewer than BatchSize records (recs, read with an iterator issued at
// first), it reads again every PollInterval (at least 200 ms apart) with the
// next iterator, until BatchSize records or MaxBatchBytes are gathered, the
// window since the first read has passed or the next read would end past
// it, the shard ends, a read fails (the main loop retries it), or the run
// must stop. It returns the records, the next iterator and when it was
// issued.
func (r *run) fill(recs []types.Record, next *string, first time.Time) ([]types.Record, *string, time.Time) {
	until := minTime(first.Add(r.o.BatchingWindow), r.stopAt)
	issued := first
	size := 0
	for _, rec := range recs {
		size += len(rec.Data) + len(aws.ToString(rec.PartitionKey))
	}
	gap := max(r.o.PollInterval, minReadGap)
	for len(recs) < int(r.o.BatchSize) && size < MaxBatchBytes && next != nil {
		if !r.o.Clock().Add(gap).Before(until) {
			break
		}
		r.wait(gap)
		if r.lost() || r.ctx.Err() != nil || r.yielded() {
			break
		}
		at := r.o.Clock()
		out, err := r.o.Kinesis.GetRecords(r.ctx, &kinesis.GetRecordsInput{
			ShardIterator: next,
			Limit:         aws.Int32(r.o.BatchSize - int32(len(recs))),
			StreamARN:     nonEmpty(r.st.StreamARN),
		})
		if err != nil {
			r.log.Debug("read in a batching window failed; delivering what was gathered", "err", err)
			break
		}
		if out.MillisBehindLatest != nil {
			r.o.Hooks.MillisBehindLatest(r.st.Stream, r.st.ShardID, *out.MillisBehindLatest)
		}
		for _, rec := range out.Records {
			size += len(rec.Data) + len(aws.ToString(rec.PartitionKey))
		}
		recs = append(recs, out.Records...)
		next, issued = out.NextShardIterator, at
	}
	return recs, next, issued
}

// position is where to reopen when there is no iterator to use: after
// this loop's checkpoint; else at the first record it read; else by the
// opening rule on the row (which holds the pin of a tip opening).
func (r *run) position() (Opening, error) {
	switch {
	case r.st.Checkpoint != "":
		return Opening{Type: types.ShardIteratorTypeAfterSequenceNumber, Seq: r.st.Checkpoint, Why: FromCheckpoint}, nil
	case r.st.FirstSequence != "":
		return Opening{Type: types.ShardIteratorTypeAtSequenceNumber, Seq: r.st.FirstSequence, Why: "first_read"}, nil
	}
	return Open(r.row)
}

// reopen gets a new iterator. ok=false means the run is over with stop.
func (r *run) reopen(parent context.Context) (stop State, ok bool) {
	op, err := r.position()
	if err != nil {
		// A start that does not parse cannot be read past: stop the loop
		// loudly and let the lease go, rather than guess a position.
		r.log.Error("cannot open shard", "err", err)
		return r.release(parent, ReasonReadErrors), false
	}
	if op.Type == types.ShardIteratorTypeLatest {
		// Never read from a bare LATEST: pin the opening first, so that every
		// later reader (after a crash before the first checkpoint) opens at or
		// before this point rather than at a later tip.
		if op, stop, ok = r.pin(parent); !ok || op.Type == "" {
			return stop, ok // the run is over, or the pin was not written: the loop's head decides
		}
	}
	now := r.o.Clock()
	out, err := r.o.Kinesis.GetShardIterator(r.ctx, op.input(r.st.Stream, r.st.StreamARN, r.st.ShardID))
	if err != nil {
		return r.readFailed(parent, "get shard iterator "+op.String(), err)
	}
	r.st.ReadErrors = 0
	if out.ShardIterator == nil {
		// A closed shard opened past its last record.
		return r.shardEnd(parent, true), false
	}
	r.st.Iterator, r.st.IteratorIssuedAt = *out.ShardIterator, now.UnixMilli()
	r.log.Info("opened shard", "at", op.String(), "why", op.Why)
	return State{}, true
}

// pin records where a shard opens at its tip on the row, before anything
// is read: the time of Kinesis's answer to a LATEST GetShardIterator, less a
// second (its Date header is rounded down), as an AT_TIMESTAMP position,
// which it returns. The host's clock is never used for it. ok=false means
// the run is over with stop; an empty Opening with ok=true means the pin
// could not be written now (counted like a read error; the loop retries).
func (r *run) pin(parent context.Context) (op Opening, stop State, ok bool) {
	out, err := r.o.Kinesis.GetShardIterator(r.ctx, Opening{Type: types.ShardIteratorTypeLatest}.input(r.st.Stream, r.st.StreamARN, r.st.ShardID))
	if err != nil {
		stop, ok = r.readFailed(parent, "get shard iterator LATEST (to pin the tip)", err)
		return Opening{}, stop, ok
	}
	at, known := shards.ServerTime(out.ResultMetadata)
	if !known {
		at = r.o.Clock() // a client without HTTP responses (tests)
	}
	at = at.Add(-time.Second).Truncate(time.Millisecond)
	pos := Position{Kind: Timestamp, At: at}.String()
	row, err := r.holder.Pin(r.ctx, pos)
	switch {
	case err == nil:
		r.row = row
		r.log.Info("pinned the tip opening on the row", "at", pos)
		return Opening{Type: types.ShardIteratorTypeAtTimestamp, At: at, Why: FromTip}, State{}, true
	case r.lost():
		return Opening{}, State{}, true // the loop's head ends the run
	}
	stop, ok = r.readFailed(parent, "pin the tip opening on the lease row", err)
	return Opening{}, stop, ok
}

// readFailed handles a failed read. ok=false means the run is over.
func (r *run) readFailed(parent context.Context, what string, err error) (stop State, ok bool) {
	if r.lost() || r.ctx.Err() != nil {
		return State{}, true // the loop's head decides
	}
	var expired *types.ExpiredIteratorException
	var throttled *types.ProvisionedThroughputExceededException
	switch {
	case errors.As(err, &expired):
		r.log.Info("iterator expired; reopening", "err", err)
		r.st.Iterator, r.st.IteratorIssuedAt = "", 0
		return State{}, true
	case errors.As(err, &throttled):
		r.log.Warn("read throttled; waiting one poll interval", "op", what, "err", err)
		r.o.Hooks.ReadError(r.st.Stream, r.st.ShardID, err, true)
		r.wait(r.o.PollInterval)
		return State{}, true
	}
	r.st.ReadErrors++
	r.log.Error("read failed", "op", what, "consecutive", r.st.ReadErrors, "err", err)
	r.o.Hooks.ReadError(r.st.Stream, r.st.ShardID, err, false)
	if r.st.ReadErrors >= r.o.MaxReadErrors {
		return r.release(parent, ReasonReadErrors), false
	}
	r.wait(r.o.ReadErrorWait)
	return State{}, true
}

// unit is what settles as one: a Kinesis record, or every user record of a
// de-aggregated one. Checkpoints, bisection and giving up work on units.
type unit struct {
	kin  types.Record   // the Kinesis record
	recs []types.Record // what the target gets
	subs []Sub          // nil for a plain record
	ckpt string         // the checkpoint once this unit settled
}

func (u unit) seq() string { return aws.ToString(u.kin.SequenceNumber) }

// units turns a GetRecords batch into units. Aggregated records that are
// not delivered (de-aggregation off, or corrupt) are reported and passed:
// ckpt of the unit before the next deliverable one covers them.
func (r *run) units(records []types.Record) []unit {
	var us []unit
	for i, rec := range records {
		seq := aws.ToString(rec.SequenceNumber)
		switch {
		case !IsAggregated(rec.Data):
			us = append(us, unit{kin: rec, recs: records[i : i+1 : i+1]})
		case r.o.Deaggregate:
			urs, err := Deaggregate(rec.Data)
			if err != nil {
				r.aggregated(seq, err)
				break
			}
			if len(urs) == 0 {
				break // an empty aggregate: nothing to deliver
			}
			u := unit{kin: rec, recs: make([]types.Record, len(urs)), subs: make([]Sub, len(urs))}
			for j, ur := range urs {
				u.recs[j] = types.Record{
					Data: ur.Data, PartitionKey: aws.String(ur.PartitionKey), SequenceNumber: rec.SequenceNumber,
					ApproximateArrivalTimestamp: rec.ApproximateArrivalTimestamp, EncryptionType: rec.EncryptionType,
				}
				u.subs[j] = Sub{Aggregated: true, SubSequenceNumber: int64(j), ExplicitHashKey: ur.ExplicitHashKey}
			}
			us = append(us, u)
		default:
			r.aggregated(seq, nil)
		}
		if len(us) > 0 {
			us[len(us)-1].ckpt = seq
		}
	}
	return us
}

func (r *run) aggregated(seq string, err error) {
	e := &AggregatedRecordError{Stream: r.st.Stream, ShardID: r.st.ShardID, Seq: seq, Err: err}
	r.log.Error("aggregated record skipped; checkpoint moves past it", "seq", seq, "err", e)
	r.o.Hooks.AggregatedRecord(e)
}

// batch is what the target gets for us.
func (r *run) batch(us []unit) Batch {
	b := Batch{Stream: r.st.Stream, StreamARN: r.st.StreamARN, ShardID: r.st.ShardID}
	subs := false
	for _, u := range us {
		b.Records = append(b.Records, u.recs...)
		subs = subs || u.subs != nil
	}
	if subs {
		b.Subs = make([]Sub, 0, len(b.Records))
		for _, u := range us {
			if u.subs != nil {
				b.Subs = append(b.Subs, u.subs...)
			} else {
				b.Subs = append(b.Subs, Sub{})
			}
		}
	}
	return b
}

// settledUnits is how many leading units n settled records cover whole, and
// how many records they hold.
func settledUnits(us []unit, n int) (units, records int) {
	for _, u := range us {
		if records+len(u.recs) > n {
			break
		}
		records += len(u.recs)
		units++
	}
	return units, records
}

// deliver hands records to the target until every one settled or was given
// up under the failure policy, checkpointing as they do. It returns false
// when the run must stop (lease lost, deadline) with records unsettled.
// Aggregated records are de-aggregated (Options.Deaggregate) or reported
// and passed.
//
// The failure policy (docs/failure-policy.md): the records not yet settled
// of a failed delivery are delivered again after a backoff. With
// BisectOnError, a failed delivery of more than one unit is split in halves
// instead, each delivered on its own (the first, then the second), without
// counting a retry. Each failed delivery that is not split counts an attempt
// for what is left; past MaxRetryAttempts retries it is given up. Records
// older than MaxRecordAge are given up before any delivery.
func (r *run) deliver(records []types.Record) bool {
	if len(records) == 0 {
		return true
	}
	began := r.o.Clock()
	us := r.units(records)
	last := aws.ToString(records[len(records)-1].SequenceNumber)
	if len(us) == 0 {
		return r.checkpoint(last)
	}
	us[len(us)-1].ckpt = last

	limit := r.o.retryLimit()
	done, end := 0, len(us) // delivering us[done:end]
	var halves []int        // ends of the halves still to deliver after this one
	attempts := r.carried(us, done, end)
	if attempts > 0 {
		// A count carried from an earlier run covers the records that failed
		// then; what was read after them is delivered on its own afterwards.
		if k := r.carriedEnd(us, done, end); k < end {
			halves, end = append(halves, end), k
		}
	}
	fails := 0 // failed deliveries since the last progress, for the backoff
	var lastErr error
	if attempts > 0 && r.st.FailedError != "" {
		lastErr = errors.New(r.st.FailedError)
	}
	for done < len(us) {
		if done >= end { // this window is settled: the next half, or the rest
			end = len(us)
			if k := len(halves); k > 0 {
				end, halves = halves[k-1], halves[:k-1]
			}
			attempts, lastErr = r.carried(us, done, end), nil
			if attempts > 0 && r.st.FailedError != "" {
				lastErr = errors.New(r.st.FailedError)
			}
		}
		troubled := fails > 0 || len(halves) > 0 || attempts > 0
		if r.lost() || r.ctx.Err() != nil || r.yielded() || (troubled && !r.o.Clock().Before(r.stopAt)) {
			return false
		}
		if k := r.expired(us[done:end]); k > 0 {
			if !r.giveUp(us[done:done+k], ConditionRecordAgeExceeded, lastErr, attempts) {
				return false
			}
			done += k
			continue
		}
		if limit >= 0 && attempts > limit {
			if !r.giveUp(us[done:end], ConditionRetryAttemptsExhausted, lastErr, attempts) {
				return false
			}
			done = end
			continue
		}

		if !r.fits() {
			r.log.Info("the target's timeout would outlast this run; leaving the batch to the next run", "target_timeout", r.o.TargetTimeout)
			r.stopAt = r.o.Clock() // nothing more fits in this run
			return false
		}
		b := r.batch(us[done:end])
		n, err := r.o.Target.Deliver(r.ctx, b)
		k, nrec := settledUnits(us[done:end], max(0, min(n, len(b.Records))))
		if k > 0 {
			r.settled(us[done : done+k])
			done += k
			fails = 0
			r.st.Records += int64(nrec)
			r.o.Hooks.RecordsDelivered(r.st.Stream, r.st.ShardID, nrec)
			if !r.checkpoint(us[done-1].ckpt) {
				return false
			}
		}
		if done >= end {
			continue
		}
		if r.lost() {
			return false
		}
		if err == nil {
			err = fmt.Errorf("reader: target settled %d of %d records: %w", nrec, len(b.Records), ErrPartial)
		}
		lastErr = err
		fails++
		r.o.Hooks.TargetError(r.st.Stream, r.st.ShardID, err)
		if r.o.BisectOnError && end-done > 1 {
			mid := done + (end-done+1)/2
			halves = append(halves, end)
			end = mid
			attempts = r.carried(us, done, end)
			r.log.Warn("target failed; delivering the first half on its own", "seq", us[done].seq(), "records", mid-done, "err", err)
			r.wait(r.o.RetryMin)
			continue
		}
		attempts++
		r.st.FailingSeq, r.st.FailedAttempts, r.st.FailedError = us[done].seq(), attempts, err.Error()
		r.st.FailingLast = us[end-1].seq()
		if len(r.st.FailedError) > 512 {
			r.st.FailedError = r.st.FailedError[:512]
		}
		if limit >= 0 && attempts > limit {
			continue // given up at the top of the loop
		}
		wait := backoff(r.o.RetryMin, r.o.RetryMax, fails)
		r.log.Warn("target failed; retrying the unsettled records", "seq", us[done].seq(), "attempt", attempts, "wait", wait, "err", err)
		r.wait(wait)
	}
	r.st.Batches++
	r.o.Hooks.Batch(r.st.Stream, r.st.ShardID, len(records), r.o.Clock().Sub(began))
	return true
}

// fits reports whether a delivery started now ends, by the target's own
// timeout, before the run's context is cut.
func (r *run) fits() bool {
	return r.o.TargetTimeout == 0 || r.cutAt.IsZero() || !r.o.Clock().Add(r.o.TargetTimeout).After(r.cutAt)
}

// carried is the failed-delivery count a delivery of us[done:end] starts
// with: the one the state carries when it names the same first record (and,
// when bisecting, only for a single unit: splits do not count).
func (r *run) carried(us []unit, done, end int) int {
	if r.st.FailingSeq == "" || r.st.FailingSeq != us[done].seq() || (r.o.BisectOnError && end-done > 1) {
		return 0
	}
	return r.st.FailedAttempts
}

// carriedEnd is where the failed delivery the state carries ended within
// us[done:end]: one past the unit whose sequence number is FailingLast, or
// end when it is not there.
func (r *run) carriedEnd(us []unit, done, end int) int {
	if r.st.FailingLast == "" {
		return end
	}
	for i := done; i < end; i++ {
		if us[i].seq() == r.st.FailingLast {
			return i + 1
		}
	}
	return end
}

// settled forgets a retry count carried for one of us.
func (r *run) settled(us []unit) {
	if r.st.FailingSeq == "" {
		return
	}
	for _, u := range us {
		if u.seq() == r.st.FailingSeq {
			r.st.FailingSeq, r.st.FailedAttempts, r.st.FailedError, r.st.FailingLast = "", 0, "", ""
			return
		}
	}
}

// expired counts the leading units older than MaxRecordAge.
func (r *run) expired(us []unit) int {
	if r.o.MaxRecordAge <= 0 {
		return 0
	}
	now := r.o.Clock()
	k := 0
	for _, u := range us {
		t := u.kin.ApproximateArrivalTimestamp
		if t == nil || now.Sub(*t) <= r.o.MaxRecordAge {
			break
		}
		k++
	}
	return k
}

// giveUp gives us up: it sends their on-failure record to the destination
// (retrying until it is accepted), or logs them at error level when there is
// none, reports them to Hooks.BatchGivenUp, and checkpoints past them. It
// returns false when the run must stop first: nothing was checkpointed.
func (r *run) giveUp(us []unit, cond string, lastErr error, attempts int) bool {
	recs := make([]types.Record, len(us))
	for i, u := range us {
		recs[i] = u.kin
	}
	fr := newFailureRecord(r.o.Clock(), cond, recs, r.batch(nil), r.st.Owner, r.o.Target, lastErr, attempts)
	attrs := []any{"condition", cond, "first_seq", fr.KinesisBatchInfo.StartSequenceNumber, "last_seq", fr.KinesisBatchInfo.EndSequenceNumber,
		"records", len(recs), "attempts", attempts, "err", lastErr}
	if r.o.OnFailure != nil {
		for try := 1; ; try++ {
			if r.lost() || r.ctx.Err() != nil || (try > 1 && (r.yielded() || !r.o.Clock().Before(r.stopAt))) {
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
	r.settled(us)
	r.st.GivenUp += int64(len(recs))
	r.o.Hooks.BatchGivenUp(r.st.Stream, r.st.ShardID, len(recs), cond)
	return r.checkpoint(us[len(us)-1].ckpt)
}

// checkpoint writes seq while the lease holds (before its deadline). A
// store error other than a lost lease leaves seq pending for the next
// checkpoint (the records are settled; only the row lags); it returns false
// only when the lease is lost or lapsed.
func (r *run) checkpoint(seq string) bool { return r.checkpointCtx(r.ctx, seq) }

func (r *run) checkpointCtx(ctx context.Context, seq string) bool {
	_, err := r.holder.Checkpoint(ctx, seq)
	switch {
	case err == nil:
		r.st.Checkpoint, r.pending = seq, ""
		return true
	case r.lost():
		return false
	}
	r.log.Warn("checkpoint failed; will write it with the next one", "seq", seq, "err", err)
	r.pending = seq
	return true
}

// yielded reports whether Options.Yield was closed: no new delivery starts;
// the run releases its lease.
func (r *run) yielded() bool {
	select {
	case <-r.o.Yield:
		return true
	default:
		return false
	}
}

// lost reports whether the lease was lost or lapsed: nothing more may be
// delivered or written.
func (r *run) lost() bool { return r.holder.Valid() != nil }

// leaseLost ends a run whose lease was lost or lapsed, writing nothing.
func (r *run) leaseLost() State {
	r.log.Warn("lease lost; stopping without writing", "err", r.holder.Err())
	r.o.Hooks.LeaseLost(r.st.Stream, r.st.ShardID, r.st.Owner)
	r.st.Reason, r.st.Continue = ReasonLeaseLost, false
	r.st.Iterator, r.st.IteratorIssuedAt = "", 0
	return r.st
}

// finish ends a run that continues.
func (r *run) finish() State {
	if p := r.pending; p != "" {
		// The run's context may already be cancelled (the hard deadline);
		// the settled records deserve one more bounded try.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), r.o.RenewInterval)
		r.checkpointCtx(ctx, p)
		cancel()
	}
	if r.lost() {
		return r.leaseLost()
	}
	r.st.Reason, r.st.Continue = ReasonContinue, true
	if r.st.Iteration >= r.o.MaxIterations {
		r.st.ContinueAsNew, r.st.Iteration = true, 0
	}
	r.log.Info("run done", "reason", r.st.Reason, "records", r.st.Records, "seq", r.st.Checkpoint)
	return r.st
}

// shardEnd writes SHARD_END (every delivery has settled when it is
// called), releases the lease and nudges the coordinator.
func (r *run) shardEnd(parent context.Context, write bool) State {
	if write {
		for attempt := 1; ; attempt++ {
			if r.lost() {
				return r.leaseLost()
			}
			if !r.o.Clock().Before(r.stopAt) || r.ctx.Err() != nil {
				r.st.Iterator, r.st.IteratorIssuedAt = "", 0 // reopen after the checkpoint and see the end again
				return r.finish()
			}
			if r.checkpoint(lease.ShardEnd) && r.pending == "" {
				break
			}
			r.pending = ""
			if r.yielded() {
				r.st.Iterator, r.st.IteratorIssuedAt = "", 0
				return r.release(parent, ReasonReleased)
			}
			r.wait(backoff(r.o.RetryMin, r.o.RetryMax, attempt))
		}
		r.o.Hooks.ShardEnd(r.st.Stream, r.st.ShardID)
		r.log.Info("shard read to its end")
	}
	r.st.Iterator, r.st.IteratorIssuedAt = "", 0
	return r.release(parent, ReasonShardEnd)
}

// release gives the lease up and ends the loop with reason.
func (r *run) release(parent context.Context, reason Reason) State {
	if r.stopRenew != nil {
		r.stopRenew() // a renewal after the release would read as a lost lease
	}
	if p := r.pending; p != "" && p != lease.ShardEnd {
		r.checkpoint(p)
	}
	if !r.lost() {
		if err := r.holder.Release(context.WithoutCancel(parent)); err != nil {
			r.log.Warn("release failed; the lease will expire", "err", err)
		}
		if r.o.Nudge != nil {
			r.o.Nudge(parent)
		}
	}
	r.st.Reason, r.st.Continue = reason, false
	r.log.Info("run done", "reason", reason, "records", r.st.Records, "seq", r.st.Checkpoint)
	return r.st
}

// wait sleeps d, but not past the run's stop time nor after the lease is lost.
func (r *run) wait(d time.Duration) {
	if left := r.stopAt.Sub(r.o.Clock()); d > left {
		d = left
	}
	if d > 0 {
		_ = r.o.Sleep(r.idle, d)
	}
}

func backoff(lo, hi time.Duration, attempt int) time.Duration {
	d := lo
	for i := 1; i < attempt && d < hi; i++ {
		d *= 2
	}
	return min(d, hi)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return aws.String(s)
}
