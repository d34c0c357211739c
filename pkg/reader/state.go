package reader

import (
	"crypto/rand"
	"encoding/hex"
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
	// ReasonReleased: Options.Yield was closed; the run let its deliveries
	// in flight settle, checkpointed what settled and released the lease,
	// so another owner may take the shard at once. The loop ends.
	ReasonReleased Reason = "released"
	// ReasonWaiting: the shard's row is held by an earlier run of this loop
	// that did not hand it back (it crashed, or it still runs beside this
	// retried one), so invocations it started may still be running: the
	// run watched the row without delivering, as any taker would, until
	// its length. The loop goes on (continue=true); the next run watches
	// on from where this one stopped (State.Watch).
	ReasonWaiting Reason = "waiting"
	// ReasonStreamGone: the stream the shard's row was written for is gone:
	// Kinesis no longer knows it, or a stream of that name was created since
	// (its creation time is not the row's incarnation). The lease was
	// released, for the coordinator to replace the row under the stream
	// that exists. The loop ends.
	ReasonStreamGone Reason = "stream_gone"
)

// State is what one run hands the next: the Step Functions payload of a
// shard loop. It is a plain value: a run reads it at its start and builds
// the next one at its end; nothing else of a run is in it. The JSON names
// are fixed; docs/state.md describes each field.
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
	Checkpoint string `json:"checkpoint"`
	// Incarnation is the creation time (Unix ms) of the stream whose row
	// this loop has held, from its row: a run that finds the row written
	// for another stream of the name (deleted and created again, its shard
	// ids used anew) releases it unread and ends the loop (stream_gone).
	// 0 until a run has read it.
	Incarnation   int64  `json:"incarnation,omitempty"`
	Iteration     int    `json:"iteration"`
	Continue      bool   `json:"continue"`
	ContinueAsNew bool   `json:"continueAsNew"`
	Reason        Reason `json:"reason"`

	// ReadErrors counts consecutive failed reads, across runs.
	ReadErrors int `json:"readErrors"`
	// Records and Batches count what this loop delivered.
	Records int64 `json:"records"`
	Batches int64 `json:"batches"`

	// Failure carries the retry count of the failing delivery lowest in the
	// shard (with one lane, the only one) across runs. Zero when nothing is
	// failing.
	Failure
	// GivenUp counts the Kinesis records this loop gave up under the
	// failure policy.
	GivenUp int64 `json:"givenUp"`

	// Factor is the parallelization factor of the run that wrote Lanes and
	// SettledTo (which lane a record goes to depends on it). 0 or 1 with
	// one lane.
	Factor int `json:"factor"`
	// SettledTo and Lanes say, when lanes ended a run apart (factor > 1),
	// which records after Checkpoint the loop already settled: every record
	// up to SettledTo except those of a lane at or after that lane's
	// Pending. The next run reads them again from the checkpoint and
	// delivers only the others, so a lane held back by a failing record
	// costs no duplicates in the other lanes. "" and empty otherwise.
	SettledTo string `json:"settledTo"`
	// Lanes holds one entry per lane (Factor of them) when SettledTo is
	// set or a lane carries a failure; empty otherwise.
	Lanes []LaneState `json:"lanes"`
	// SettledUnder is the row's start (position, generation and its order)
	// when SettledTo was written before any checkpoint under that start: a
	// later run applies SettledTo only while the row's start is the same.
	// "" when the row's checkpoint is past its start.
	SettledUnder string `json:"settledUnder"`

	// Watch is the watch of the row a run ended in (ReasonWaiting): the
	// next run goes on with it rather than wait from the start. null
	// otherwise.
	Watch *Watch `json:"watch"`
}

// Watch is how long a run of the loop watched the row stand still: its
// owner and counter as seen, and for how long (the watching host's clock,
// as a duration, since no two hosts' clocks agree: the time between two
// runs only adds to it).
type Watch struct {
	Owner    string `json:"owner"`
	Counter  int64  `json:"counter"`
	WaitedMs int64  `json:"waitedMs"`
}

// Failure is the retry count of a failing delivery, carried across runs:
// the delivery of records FailingSeq to FailingLast failed FailedAttempts
// times, the last time with FailedError (at most MaxFailedError bytes).
// The count applies only to those records: records read after FailingLast
// are delivered on their own. With BisectBatchOnFunctionError, it is the half the
// halving had come down to (splits count no attempt: FailedAttempts may be
// 0), which the next run delivers first and goes on halving.
type Failure struct {
	FailingSeq     string `json:"failingSeq"`
	FailedAttempts int    `json:"failedAttempts"`
	FailingLast    string `json:"failingLast"`
	FailedError    string `json:"failedError"`
}

// MaxFailedError bounds Failure.FailedError, so that the payload stays small
// whatever the target answers.
const MaxFailedError = 512

// LaneState is what one lane had not settled when a run ended.
type LaneState struct {
	// Pending is the lane's first record not settled, at or before
	// State.SettledTo; "" when the lane settled every record of its own up
	// to SettledTo.
	Pending string `json:"pending"`
	// Failure is the lane's failing delivery, if any.
	Failure
}

// runID returns a fresh id for one run: 48 random bits in hex.
func runID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// seqLess reports whether sequence number a comes before b. Sequence
// numbers are decimal strings without leading zeros (tests pad them to one
// width), so the shorter is the smaller.
func seqLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}
