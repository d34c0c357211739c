// Package kinesistest is the conformance suite for Kinesis implementations:
// the same cases run against kinesis-local and against the in-memory model
// (internal/kinesismem), so the model is held to a real protocol peer.
//
// Where kinesis-local is known to differ from AWS, the model follows AWS:
// a case that depends on such a behaviour names the difference as a Quirk,
// and is skipped on a target that has it. That is the only kind of skip.
package kinesistest

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// API is the part of the Kinesis client the suite drives; *kinesis.Client
// satisfies it.
type API interface {
	CreateStream(ctx context.Context, in *kinesis.CreateStreamInput, optFns ...func(*kinesis.Options)) (*kinesis.CreateStreamOutput, error)
	DeleteStream(ctx context.Context, in *kinesis.DeleteStreamInput, optFns ...func(*kinesis.Options)) (*kinesis.DeleteStreamOutput, error)
	DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
	PutRecord(ctx context.Context, in *kinesis.PutRecordInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordOutput, error)
	PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error)
	SplitShard(ctx context.Context, in *kinesis.SplitShardInput, optFns ...func(*kinesis.Options)) (*kinesis.SplitShardOutput, error)
	MergeShards(ctx context.Context, in *kinesis.MergeShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.MergeShardsOutput, error)
	UpdateShardCount(ctx context.Context, in *kinesis.UpdateShardCountInput, optFns ...func(*kinesis.Options)) (*kinesis.UpdateShardCountOutput, error)
}

var _ API = (*kinesis.Client)(nil)

// Quirk is a known way a target differs from AWS.
type Quirk uint

const (
	// QuirkEndingSequence: a closed shard's EndingSequenceNumber is
	// 9223372036854775807, which is not one of the shard's sequence numbers
	// (smaller than its StartingSequenceNumber) and which GetShardIterator
	// refuses. On AWS it is a sequence number of the shard, at or after its
	// last record.
	QuirkEndingSequence Quirk = 1 << iota
	// QuirkTrimHorizonFilter: ListShards with ShardFilter AT_TRIM_HORIZON
	// also lists shards created after the trim horizon (children of a
	// split); AWS lists the shards open at the trim horizon.
	QuirkTrimHorizonFilter
	// QuirkMalformedIterator: a malformed ShardIterator gets HTTP 500 (the
	// SDK's UnknownError, retried); AWS answers InvalidArgumentException.
	QuirkMalformedIterator
	// QuirkForeignSequence: a sequence number of another shard is accepted
	// (or, depending on what the shards hold, refused with
	// ResourceNotFoundException); AWS answers InvalidArgumentException
	// ("Invalid StartingSequenceNumber. It encodes shardId-…").
	QuirkForeignSequence
	// QuirkSequenceWithoutSequenceType: a StartingSequenceNumber sent with
	// TRIM_HORIZON, LATEST or AT_TIMESTAMP is ignored; AWS refuses it with
	// InvalidArgumentException.
	QuirkSequenceWithoutSequenceType
	// QuirkSplitKey: SplitShard accepts a NewStartingHashKey equal to the
	// shard's starting hash key (leaving a child with an empty range) and
	// answers HTTP 500 to a non-numeric one; AWS refuses both with
	// InvalidArgumentException (the key must be greater than the starting
	// hash key plus one and less than the ending hash key).
	QuirkSplitKey
	// QuirkPutRecordsCount: PutRecords accepts 0 or more than 500 entries;
	// AWS refuses them.
	QuirkPutRecordsCount
	// QuirkRecordSize: the 1 MiB record limit counts the data only; on AWS
	// it applies to the data plus the partition key.
	QuirkRecordSize
	// QuirkMaxResults: ListShards answers HTTP 500 to MaxResults 0 and
	// accepts more than 10,000; AWS refuses both.
	QuirkMaxResults
	// QuirkUpdateShardCount: UpdateShardCount does not reshard to uniform
	// ranges (2 to 3 shards gave shards starting at 0, 2^126-1 and 2^127-1).
	QuirkUpdateShardCount
	// QuirkFutureTimestamp: an AT_TIMESTAMP iterator with a Timestamp in the
	// future is refused only on a shard that holds records; AWS refuses it
	// on any shard ("The timestampInMillis parameter cannot be greater than
	// the currentTimestampInMillis").
	QuirkFutureTimestamp
)

// KinesisLocal is the set of quirks of kinesis-local 0.6.2.
const KinesisLocal = QuirkEndingSequence | QuirkTrimHorizonFilter | QuirkMalformedIterator |
	QuirkForeignSequence | QuirkSequenceWithoutSequenceType | QuirkSplitKey | QuirkPutRecordsCount |
	QuirkRecordSize | QuirkMaxResults | QuirkUpdateShardCount | QuirkFutureTimestamp

// Target is one implementation under test.
type Target struct {
	API API
	// Quirks are the target's known differences from AWS; the cases that
	// depend on them are skipped.
	Quirks Quirk
	// Name returns a stream name not used before on the target.
	Name func(t testing.TB) string
	// Timeout bounds waits for a stream's status (default 30 s).
	Timeout time.Duration
}

// Run runs every case as a subtest, each on a Target from newTarget.
func Run(t *testing.T, newTarget func(t *testing.T) Target) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tg := newTarget(t)
			if skip := tg.Quirks & c.needs; skip != 0 {
				t.Skipf("the target differs from AWS here: %s", quirkNames(skip))
			}
			if tg.Timeout == 0 {
				tg.Timeout = 30 * time.Second
			}
			c.run(t, &kit{Target: tg, ctx: t.Context()})
		})
	}
}

func quirkNames(q Quirk) string {
	names := map[Quirk]string{
		QuirkEndingSequence:              "EndingSequenceNumber is not a sequence number of the shard",
		QuirkTrimHorizonFilter:           "ShardFilter AT_TRIM_HORIZON lists children",
		QuirkMalformedIterator:           "a malformed iterator gets HTTP 500",
		QuirkForeignSequence:             "another shard's sequence number is not refused as invalid",
		QuirkSequenceWithoutSequenceType: "StartingSequenceNumber with TRIM_HORIZON is accepted",
		QuirkSplitKey:                    "SplitShard does not check NewStartingHashKey",
		QuirkPutRecordsCount:             "PutRecords does not check its entry count",
		QuirkRecordSize:                  "the record size limit leaves out the partition key",
		QuirkMaxResults:                  "ListShards does not check MaxResults",
		QuirkUpdateShardCount:            "UpdateShardCount does not reshard to uniform ranges",
		QuirkFutureTimestamp:             "a future AT_TIMESTAMP is accepted on an empty shard",
	}
	s := ""
	for bit := Quirk(1); bit != 0 && bit <= q; bit <<= 1 {
		if q&bit != 0 {
			if s != "" {
				s += "; "
			}
			s += names[bit]
		}
	}
	return s
}
