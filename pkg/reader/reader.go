package reader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/pkg/lease"
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

	// OpenedAt is when the loop opened the shard at LATEST, Unix
	// milliseconds; 0 otherwise.
	OpenedAt int64 `json:"openedAt"`
	// ReadErrors counts consecutive failed reads, across runs.
	ReadErrors int `json:"readErrors"`
	// Records and Batches count what this loop delivered.
	Records int64 `json:"records"`
	Batches int64 `json:"batches"`
}

// kplMagic starts every record the Kinesis Producer Library aggregated.
var kplMagic = []byte{0xF3, 0x89, 0x9A, 0xC2}

// IsAggregated reports whether data is a KPL-aggregated record.
func IsAggregated(data []byte) bool { return bytes.HasPrefix(data, kplMagic) }

// clockSkew is taken off OpenedAt when a LATEST opening with nothing read
// is reopened AT_TIMESTAMP: arrival times are the server's clock, so a
// record that arrived just after the LATEST iterator was issued must not
// look older. A record from the skew window before it may be delivered too.
const clockSkew = time.Second

// StreamName returns the stream name of an ARN
// (arn:aws:kinesis:<region>:<account>:stream/<name>), or s itself.
func StreamName(s string) string {
	if strings.HasPrefix(s, "arn:") {
		if _, name, ok := strings.Cut(s, ":stream/"); ok {
			return name
		}
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

	row, err := o.Store.Take(ctx, st.Stream, st.ShardID, st.Owner)
	if errors.Is(err, lease.ErrHeld) {
		r.log.Warn("lease held by another owner", "err", err)
		o.Hooks.LeaseLost(st.Stream, st.ShardID, st.Owner)
		r.st.Reason = ReasonLeaseLost
		return r.st, nil
	}
	if err != nil {
		return in, fmt.Errorf("reader: take lease %s: %w", lease.Key(st.Stream, st.ShardID), err)
	}
	if eff := effectiveCheckpoint(row); eff != r.st.Checkpoint {
		// A fresh loop, another owner's checkpoint, or a new start: the row
		// decides; what this loop carried no longer applies.
		if r.st.Iterator != "" || r.st.Checkpoint != "" {
			r.log.Info("checkpoint on the row differs from the loop's; reopening from the row", "seq", eff, "loop_checkpoint", r.st.Checkpoint)
		}
		r.st.Checkpoint, r.st.Iterator, r.st.IteratorIssuedAt, r.st.FirstSequence, r.st.OpenedAt = eff, "", 0, "", 0
	}
	r.row = row
	return r.loop(ctx), nil
}

type run struct {
	o     Options
	st    State
	row   lease.Lease
	log   *slog.Logger
	start time.Time

	stopAt time.Time       // no new read or delivery after this
	ctx    context.Context // cancelled when the lease is lost or at the hard deadline
	cancel context.CancelFunc

	stopRenew func() // stops the renewing goroutine and waits for it; idempotent

	mu      sync.Mutex // orders checkpoints against losing the lease
	lost    bool
	pending string // settled but not yet checkpointed (a store error)
}

func (r *run) loop(parent context.Context) State {
	r.stopAt = r.start.Add(r.o.RunLength)
	hard, hasDeadline := parent.Deadline()
	if hasDeadline {
		r.stopAt = minTime(r.stopAt, hard.Add(-r.o.Margin))
		r.ctx, r.cancel = context.WithDeadline(parent, hard.Add(-r.o.Margin/2))
	} else {
		r.ctx, r.cancel = context.WithCancel(parent)
	}
	defer r.cancel()

	if r.st.Checkpoint == lease.ShardEnd {
		return r.shardEnd(parent, false)
	}

	var wg sync.WaitGroup
	renewDone := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.renew(renewDone)
	}()
	r.stopRenew = sync.OnceFunc(func() {
		close(renewDone)
		wg.Wait()
	})
	defer r.stopRenew()

	for {
		if r.isLost() {
			return r.leaseLost()
		}
		if !r.o.Clock().Before(r.stopAt) || r.ctx.Err() != nil {
			return r.finish()
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
		if len(out.Records) > 0 && r.st.FirstSequence == "" {
			r.st.FirstSequence = aws.ToString(out.Records[0].SequenceNumber)
		}
		if !r.deliver(out.Records) {
			// Stopped with records unsettled: reopen after the checkpoint.
			r.st.Iterator, r.st.IteratorIssuedAt = "", 0
			continue
		}
		if out.NextShardIterator == nil {
			return r.shardEnd(parent, true)
		}
		r.st.Iterator, r.st.IteratorIssuedAt = *out.NextShardIterator, issued.UnixMilli()
		if len(out.Records) == 0 {
			r.wait(r.o.PollInterval)
		}
	}
}

// position is where to reopen when there is no iterator to use: after
// this loop's checkpoint; else at the first record it read; else, after a
// LATEST opening with nothing read, AT_TIMESTAMP of that opening (reopening
// LATEST would skip what arrived since); else by the opening rule.
func (r *run) position() (Opening, error) {
	switch {
	case r.st.Checkpoint != "":
		return Opening{Type: types.ShardIteratorTypeAfterSequenceNumber, Seq: r.st.Checkpoint, Why: FromCheckpoint}, nil
	case r.st.FirstSequence != "":
		return Opening{Type: types.ShardIteratorTypeAtSequenceNumber, Seq: r.st.FirstSequence, Why: "first_read"}, nil
	case r.st.OpenedAt != 0:
		return Opening{Type: types.ShardIteratorTypeAtTimestamp, At: time.UnixMilli(r.st.OpenedAt).Add(-clockSkew), Why: "latest_opened"}, nil
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
	now := r.o.Clock()
	if op.Type == types.ShardIteratorTypeLatest {
		r.st.OpenedAt = now.UnixMilli()
	}
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

// readFailed handles a failed read. ok=false means the run is over.
func (r *run) readFailed(parent context.Context, what string, err error) (stop State, ok bool) {
	if r.isLost() || r.ctx.Err() != nil {
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

// deliver hands records to the target until every one settled, checkpointing
// as they do. It returns false when the run must stop (lease lost, deadline)
// with records unsettled. Aggregated records are reported, not delivered;
// the checkpoint moves past them.
func (r *run) deliver(records []types.Record) bool {
	if len(records) == 0 {
		return true
	}
	began := r.o.Clock()
	// ckpt[i] is the checkpoint once send[:i+1] settled: the record just
	// before the next deliverable one, so skipped records are passed too.
	var send []types.Record
	var ckpt []string
	for _, rec := range records {
		seq := aws.ToString(rec.SequenceNumber)
		if IsAggregated(rec.Data) {
			e := &AggregatedRecordError{Stream: r.st.Stream, ShardID: r.st.ShardID, Seq: seq}
			r.log.Error("aggregated record skipped; checkpoint moves past it", "seq", seq, "err", e)
			r.o.Hooks.AggregatedRecord(e)
		} else {
			send = append(send, rec)
			ckpt = append(ckpt, "")
		}
		if len(ckpt) > 0 {
			ckpt[len(ckpt)-1] = seq
		}
	}
	last := aws.ToString(records[len(records)-1].SequenceNumber)
	if len(send) == 0 {
		return r.checkpoint(last)
	}
	ckpt[len(ckpt)-1] = last

	done, attempt := 0, 0
	for done < len(send) {
		if r.isLost() || r.ctx.Err() != nil || (attempt > 0 && !r.o.Clock().Before(r.stopAt)) {
			return false
		}
		b := Batch{Stream: r.st.Stream, StreamARN: r.st.StreamARN, ShardID: r.st.ShardID, Records: send[done:]}
		n, err := r.o.Target.Deliver(r.ctx, b)
		n = max(0, min(n, len(b.Records)))
		if n > 0 {
			done += n
			attempt = 0
			r.st.Records += int64(n)
			r.o.Hooks.RecordsDelivered(r.st.Stream, r.st.ShardID, n)
			if !r.checkpoint(ckpt[done-1]) {
				return false
			}
		}
		if done == len(send) {
			break
		}
		if r.isLost() {
			return false
		}
		if err == nil {
			err = fmt.Errorf("reader: target settled %d of %d records: %w", n, len(b.Records), ErrPartial)
		}
		attempt++
		wait := backoff(r.o.RetryMin, r.o.RetryMax, attempt)
		r.log.Warn("target failed; retrying the unsettled records", "seq", aws.ToString(send[done].SequenceNumber), "attempt", attempt, "wait", wait, "err", err)
		r.o.Hooks.TargetError(r.st.Stream, r.st.ShardID, err)
		r.wait(wait)
	}
	r.st.Batches++
	r.o.Hooks.Batch(r.st.Stream, r.st.ShardID, len(records), r.o.Clock().Sub(began))
	return true
}

// checkpoint writes seq unless the lease is lost. A store error other than
// ErrNotOwner leaves seq pending for the next checkpoint (the records are
// settled; only the row lags); it returns false only when the lease is lost.
func (r *run) checkpoint(seq string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lost {
		return false
	}
	_, err := r.o.Store.Checkpoint(r.ctx, r.st.Stream, r.st.ShardID, r.st.Owner, seq)
	switch {
	case err == nil:
		r.st.Checkpoint, r.pending = seq, ""
		return true
	case errors.Is(err, lease.ErrNotOwner):
		r.loseLocked(err)
		return false
	}
	r.log.Warn("checkpoint failed; will write it with the next one", "seq", seq, "err", err)
	r.pending = seq
	return true
}

// renew renews the lease every RenewInterval until done.
func (r *run) renew(done <-chan struct{}) {
	t := time.NewTicker(r.o.RenewInterval)
	defer t.Stop()
	lastOK := r.o.Clock()
	for {
		select {
		case <-done:
			return
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		_, err := r.o.Store.Renew(r.ctx, r.st.Stream, r.st.ShardID, r.st.Owner)
		switch {
		case err == nil:
			lastOK = r.o.Clock()
		case errors.Is(err, lease.ErrNotOwner):
			r.lose(err)
			return
		case r.ctx.Err() != nil:
			return
		case r.o.Clock().Sub(lastOK) >= r.o.LeaseDuration:
			r.lose(fmt.Errorf("no renewal succeeded for %s: %w", r.o.LeaseDuration, err))
			return
		default:
			r.log.Warn("renew failed; retrying", "err", err)
		}
	}
}

func (r *run) lose(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loseLocked(err)
}

func (r *run) loseLocked(err error) {
	if r.lost {
		return
	}
	r.lost = true
	r.cancel()
	r.log.Warn("lease lost; stopping without writing", "err", err)
	r.o.Hooks.LeaseLost(r.st.Stream, r.st.ShardID, r.st.Owner)
}

func (r *run) isLost() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lost
}

func (r *run) leaseLost() State {
	r.st.Reason, r.st.Continue = ReasonLeaseLost, false
	r.st.Iterator, r.st.IteratorIssuedAt = "", 0
	return r.st
}

// finish ends a run that continues.
func (r *run) finish() State {
	if p := r.pending; p != "" {
		r.checkpoint(p)
	}
	if r.isLost() {
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
			if r.isLost() {
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
	r.mu.Lock()
	lost := r.lost
	r.mu.Unlock()
	if !lost {
		if err := r.o.Store.Release(context.WithoutCancel(parent), r.st.Stream, r.st.ShardID, r.st.Owner); err != nil {
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
		_ = r.o.Sleep(r.ctx, d)
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
