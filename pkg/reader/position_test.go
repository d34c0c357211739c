package reader

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/pkg/lease"
)

func TestParsePosition_RoundTripsEveryForm(t *testing.T) {
	for _, s := range []string{"latest", "horizon", "timestamp:0", "timestamp:1700000000123", "sequence:shardId-000000000001:49590338271490256608559692538361571095921575989136588898"} {
		p, err := ParsePosition(s)
		if err != nil {
			t.Fatalf("ParsePosition(%q): %v", s, err)
		}
		if got := p.String(); got != s {
			t.Errorf("ParsePosition(%q).String() = %q", s, got)
		}
	}
	p, _ := ParsePosition("timestamp:1700000000123")
	if !p.At.Equal(time.UnixMilli(1700000000123)) {
		t.Errorf("timestamp At = %v", p.At)
	}
}

func TestParsePosition_ErrorsNameTheFieldAndTheForms(t *testing.T) {
	for _, tc := range []struct{ in, field string }{
		{"", "position"},
		{"LATEST", "position"},
		{"trim_horizon", "position"},
		{"latest:1", "position"},
		{"timestamp:", "position timestamp"},
		{"timestamp:-5", "position timestamp"},
		{"timestamp:2024-01-01", "position timestamp"},
		{"sequence:", "position shard id"},
		{"sequence:shardId-1", "position shard id"},
		{"sequence:shardId-1:", "position sequence number"},
		{"sequence:shardId-1:12a", "position sequence number"},
	} {
		_, err := ParsePosition(tc.in)
		var ie *InvalidError
		if !errors.As(err, &ie) || !errors.Is(err, ErrInvalid) {
			t.Errorf("ParsePosition(%q) = %v, want an InvalidError", tc.in, err)
			continue
		}
		if ie.Field != tc.field {
			t.Errorf("ParsePosition(%q) field = %q, want %q", tc.in, ie.Field, tc.field)
		}
		if !strings.Contains(err.Error(), "timestamp:") && !strings.Contains(err.Error(), "sequence:") {
			t.Errorf("ParsePosition(%q) error %q does not show the expected form", tc.in, err)
		}
	}
}

func TestOpen_Rule(t *testing.T) {
	const shard = "shardId-000000000001"
	row := func(f func(*lease.Lease)) lease.Lease {
		l := lease.Lease{Stream: "s", ShardID: shard}
		f(&l)
		return l
	}
	ts := time.UnixMilli(1700000000000)
	for _, tc := range []struct {
		name string
		row  lease.Lease
		want Opening
	}{
		{"no checkpoint, no start opens at the tip", row(func(l *lease.Lease) {}),
			Opening{Type: types.ShardIteratorTypeLatest, Why: FromTip}},
		{"checkpoint opens after its record", row(func(l *lease.Lease) { l.Checkpoint = "100" }),
			Opening{Type: types.ShardIteratorTypeAfterSequenceNumber, Seq: "100", Why: FromCheckpoint}},
		{"child without checkpoint opens at its oldest record", row(func(l *lease.Lease) { l.ParentShardIDs = []string{"p"} }),
			Opening{Type: types.ShardIteratorTypeTrimHorizon, Why: FromChild}},
		{"child with checkpoint opens after it", row(func(l *lease.Lease) { l.ParentShardIDs = []string{"p", "q"}; l.Checkpoint = "7" }),
			Opening{Type: types.ShardIteratorTypeAfterSequenceNumber, Seq: "7", Why: FromCheckpoint}},
		{"SHARD_END means nothing to read", row(func(l *lease.Lease) { l.Checkpoint = lease.ShardEnd }),
			Opening{ShardEnd: true, Why: FromShardEnd}},
		{"SHARD_END wins over an unapplied start", row(func(l *lease.Lease) { l.Checkpoint = lease.ShardEnd; l.Start = "horizon" }),
			Opening{ShardEnd: true, Why: FromShardEnd}},
		{"unapplied horizon start overrides the checkpoint", row(func(l *lease.Lease) { l.Checkpoint = "100"; l.Start = "horizon" }),
			Opening{Type: types.ShardIteratorTypeTrimHorizon, Why: FromStart}},
		{"unapplied latest start overrides the checkpoint", row(func(l *lease.Lease) { l.Checkpoint = "100"; l.Start = "latest" }),
			Opening{Type: types.ShardIteratorTypeLatest, Why: FromStart}},
		{"unapplied timestamp start", row(func(l *lease.Lease) { l.Start = "timestamp:1700000000000" }),
			Opening{Type: types.ShardIteratorTypeAtTimestamp, At: ts, Why: FromStart}},
		{"unapplied sequence start on its own shard opens at that record", row(func(l *lease.Lease) { l.Checkpoint = "1"; l.Start = "sequence:" + shard + ":55" }),
			Opening{Type: types.ShardIteratorTypeAtSequenceNumber, Seq: "55", Why: FromStart}},
		{"sequence start of another shard: checkpoint applies", row(func(l *lease.Lease) { l.Checkpoint = "9"; l.Start = "sequence:other:55" }),
			Opening{Type: types.ShardIteratorTypeAfterSequenceNumber, Seq: "9", Why: FromCheckpoint}},
		{"sequence start of another shard, no checkpoint: tip, not horizon", row(func(l *lease.Lease) { l.Start = "sequence:other:55" }),
			Opening{Type: types.ShardIteratorTypeLatest, Why: FromTip}},
		{"applied start: the checkpoint decides", row(func(l *lease.Lease) { l.Checkpoint = "100"; l.Start = "horizon"; l.StartApplied = true }),
			Opening{Type: types.ShardIteratorTypeAfterSequenceNumber, Seq: "100", Why: FromCheckpoint}},
		{"applied start without checkpoint: a child still opens at horizon", row(func(l *lease.Lease) { l.Start = "latest"; l.StartApplied = true; l.ParentShardIDs = []string{"p"} }),
			Opening{Type: types.ShardIteratorTypeTrimHorizon, Why: FromChild}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Open(tc.row)
			if err != nil {
				t.Fatal(err)
			}
			if got.Type != tc.want.Type || got.Seq != tc.want.Seq || !got.At.Equal(tc.want.At) || got.ShardEnd != tc.want.ShardEnd || got.Why != tc.want.Why {
				t.Errorf("Open = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestOpen_BadStartIsInvalid(t *testing.T) {
	_, err := Open(lease.Lease{Stream: "s", ShardID: "a", Start: "yesterday"})
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("Open with a bad start = %v, want ErrInvalid", err)
	}
}

func TestStreamName_FromARN(t *testing.T) {
	if got := StreamName("arn:aws:kinesis:us-east-1:123456789012:stream/orders"); got != "orders" {
		t.Errorf("StreamName(arn) = %q", got)
	}
	if got := StreamName("orders"); got != "orders" {
		t.Errorf("StreamName(name) = %q", got)
	}
}
