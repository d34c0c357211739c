package reader

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/pkg/lease"
)

// Kind says which of the four positions a Position is.
type Kind string

// The position kinds.
const (
	Latest    Kind = "latest"    // after the newest record: only what arrives next
	Horizon   Kind = "horizon"   // the oldest record still kept
	Timestamp Kind = "timestamp" // the first record that arrived at or after a time
	Sequence  Kind = "sequence"  // one record of one shard
)

// Position is a place on a stream: latest, horizon, timestamp(ms) or
// sequence(shard, seq). Its text form (String, ParsePosition) is what the
// lease rows record as the subscription's start:
//
//	latest
//	horizon
//	timestamp:<unix milliseconds>
//	sequence:<shard id>:<sequence number>
type Position struct {
	Kind Kind
	// At is the arrival time for Timestamp, millisecond precision.
	At time.Time
	// ShardID and Seq name one record for Sequence.
	ShardID string
	Seq     string
}

const positionForms = `"latest", "horizon", "timestamp:<unix ms>" or "sequence:<shard id>:<sequence number>"`

// ParsePosition reads the text form of a position.
func ParsePosition(s string) (Position, error) {
	kind, rest, hasRest := strings.Cut(s, ":")
	switch Kind(kind) {
	case Latest, Horizon:
		if hasRest {
			return Position{}, &InvalidError{Field: "position", Value: s, Want: positionForms + ` (no ":" after ` + kind + ")"}
		}
		return Position{Kind: Kind(kind)}, nil
	case Timestamp:
		ms, err := strconv.ParseInt(rest, 10, 64)
		if err != nil || ms < 0 {
			return Position{}, &InvalidError{Field: "position timestamp", Value: s, Want: "timestamp:<unix milliseconds>, a non-negative integer"}
		}
		return Position{Kind: Timestamp, At: time.UnixMilli(ms).UTC()}, nil
	case Sequence:
		shard, seq, ok := strings.Cut(rest, ":")
		if !ok || shard == "" {
			return Position{}, &InvalidError{Field: "position shard id", Value: s, Want: "sequence:<shard id>:<sequence number>"}
		}
		if !isDecimal(seq) {
			return Position{}, &InvalidError{Field: "position sequence number", Value: s, Want: "sequence:<shard id>:<sequence number>, a decimal sequence number"}
		}
		return Position{Kind: Sequence, ShardID: shard, Seq: seq}, nil
	}
	return Position{}, &InvalidError{Field: "position", Value: s, Want: positionForms}
}

// ParseUserPosition reads a position as people write it: every form
// ParsePosition reads, and timestamp:<RFC 3339 time> (any offset; what is
// finer than a millisecond is dropped). String of the result is the text
// form ParsePosition reads, the one lease rows record.
func ParseUserPosition(s string) (Position, error) {
	rest, isTime := strings.CutPrefix(s, string(Timestamp)+":")
	if !isTime || isDecimal(rest) {
		return ParsePosition(s)
	}
	t, err := time.Parse(time.RFC3339Nano, rest)
	if err != nil || t.UnixMilli() < 0 {
		return Position{}, &InvalidError{Field: "position timestamp", Value: s, Want: "timestamp:<unix milliseconds> or timestamp:<RFC 3339 time>, e.g. timestamp:2026-01-02T15:04:05Z, not before 1970"}
	}
	return Position{Kind: Timestamp, At: time.UnixMilli(t.UnixMilli()).UTC()}, nil
}

// String returns the text form that ParsePosition reads.
func (p Position) String() string {
	switch p.Kind {
	case Timestamp:
		return "timestamp:" + strconv.FormatInt(p.At.UnixMilli(), 10)
	case Sequence:
		return "sequence:" + p.ShardID + ":" + p.Seq
	}
	return string(p.Kind)
}

func isDecimal(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// Why an Opening opens where it does.
const (
	FromStart      = "start"      // the subscription's start position, not yet applied
	FromCheckpoint = "checkpoint" // right after the last settled record
	FromChild      = "child"      // a child with no checkpoint: its oldest record
	FromTip        = "tip"        // no checkpoint, no start: LATEST
	FromShardEnd   = "shard_end"  // read to its end: nothing to open
)

// Opening is where a shard's iterator is placed: the iterator type and its
// sequence number or timestamp. ShardEnd means the shard was read to its
// end and there is nothing to open.
type Opening struct {
	Type types.ShardIteratorType
	Seq  string    // AT_SEQUENCE_NUMBER, AFTER_SEQUENCE_NUMBER
	At   time.Time // AT_TIMESTAMP
	// ShardEnd: the checkpoint is lease.ShardEnd; Type is empty.
	ShardEnd bool
	// Why is one of FromStart, FromCheckpoint, FromChild, FromTip,
	// FromShardEnd, for logs and tests.
	Why string
}

// Open decides where a shard opens from its lease row (SPEC §4):
//
//  1. A SHARD_END checkpoint: nothing to read (ShardEnd), whatever else the
//     row says; a finished shard is never read again.
//  2. A start position recorded at subscription startup and not yet applied
//     (row.Start != "" && !row.StartApplied) overrides any checkpoint:
//     latest → LATEST, horizon → TRIM_HORIZON, timestamp → AT_TIMESTAMP,
//     sequence on this shard → AT_SEQUENCE_NUMBER (the position names the
//     first record to read). A sequence start names one record of one
//     shard, so on every other shard it does not apply and the ordinary rule
//     below decides (checkpoint, else child → TRIM_HORIZON, else LATEST).
//  3. A checkpoint opens AFTER_SEQUENCE_NUMBER of it.
//  4. A child (the row names parents) with no checkpoint opens at
//     TRIM_HORIZON, so what was written before its reader started is read.
//  5. Anything else opens at LATEST.
//
// A row whose Start does not parse is an error matching ErrInvalid.
func Open(row lease.Lease) (Opening, error) {
	if row.Checkpoint == lease.ShardEnd {
		return Opening{ShardEnd: true, Why: FromShardEnd}, nil
	}
	if row.Start != "" && !row.StartApplied {
		p, err := ParsePosition(row.Start)
		if err != nil {
			return Opening{}, fmt.Errorf("open %s: start recorded on the lease row: %w", row.Key(), err)
		}
		switch p.Kind {
		case Latest:
			return Opening{Type: types.ShardIteratorTypeLatest, Why: FromStart}, nil
		case Horizon:
			return Opening{Type: types.ShardIteratorTypeTrimHorizon, Why: FromStart}, nil
		case Timestamp:
			return Opening{Type: types.ShardIteratorTypeAtTimestamp, At: p.At, Why: FromStart}, nil
		case Sequence:
			if p.ShardID == row.ShardID {
				return Opening{Type: types.ShardIteratorTypeAtSequenceNumber, Seq: p.Seq, Why: FromStart}, nil
			}
			// Another shard's record: fall through to the ordinary rule.
		}
	}
	switch {
	case row.Checkpoint != "":
		return Opening{Type: types.ShardIteratorTypeAfterSequenceNumber, Seq: row.Checkpoint, Why: FromCheckpoint}, nil
	case len(row.ParentShardIDs) > 0:
		return Opening{Type: types.ShardIteratorTypeTrimHorizon, Why: FromChild}, nil
	}
	return Opening{Type: types.ShardIteratorTypeLatest, Why: FromTip}, nil
}

// effectiveCheckpoint is the row's checkpoint when it, not the start,
// decides where the shard opens.
func effectiveCheckpoint(row lease.Lease) string {
	if row.Checkpoint == lease.ShardEnd {
		return row.Checkpoint
	}
	if o, err := Open(row); err == nil && o.Why == FromCheckpoint {
		return row.Checkpoint
	}
	return ""
}

// startPending reports whether the row's start position applies to its next
// opening (recorded, not yet followed by a checkpoint, and for this shard)
// and names a fixed place. A literal LATEST start does not: opening at the
// tip again in every run would skip what arrived in between, so a loop keeps
// what it carries (its first record read, or the time it opened) instead.
// The coordinator and reset record the tip as a timestamp for this reason.
func startPending(row lease.Lease) bool {
	o, err := Open(row)
	return err == nil && o.Why == FromStart && o.Type != types.ShardIteratorTypeLatest
}

// input builds the GetShardIterator request for this opening.
func (o Opening) input(stream, streamARN, shardID string) *kinesis.GetShardIteratorInput {
	in := &kinesis.GetShardIteratorInput{ShardId: aws.String(shardID), ShardIteratorType: o.Type}
	if streamARN != "" {
		in.StreamARN = aws.String(streamARN)
	} else {
		in.StreamName = aws.String(stream)
	}
	switch o.Type {
	case types.ShardIteratorTypeAtSequenceNumber, types.ShardIteratorTypeAfterSequenceNumber:
		in.StartingSequenceNumber = aws.String(o.Seq)
	case types.ShardIteratorTypeAtTimestamp:
		in.Timestamp = aws.Time(o.At)
	}
	return in
}

func (o Opening) String() string {
	switch {
	case o.ShardEnd:
		return "SHARD_END"
	case o.Seq != "":
		return string(o.Type) + " " + o.Seq
	case o.Type == types.ShardIteratorTypeAtTimestamp:
		return string(o.Type) + " " + o.At.UTC().Format(time.RFC3339Nano)
	}
	return string(o.Type)
}
