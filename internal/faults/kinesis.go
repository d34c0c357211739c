package faults

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// KinesisAPI is what the wrapper forwards: every call the coordinator and
// the readers make (runner.KinesisAPI).
type KinesisAPI interface {
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
	DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
	CreateStream(ctx context.Context, in *kinesis.CreateStreamInput, optFns ...func(*kinesis.Options)) (*kinesis.CreateStreamOutput, error)
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
}

// KinesisRates are the shares of read calls that fail.
type KinesisRates struct {
	// Throttle: GetRecords and GetShardIterator fail with
	// ProvisionedThroughputExceededException (before the call).
	Throttle float64
	// Expired: GetRecords fails with ExpiredIteratorException (before the
	// call), as if the iterator had outlived its 5 minutes.
	Expired float64
	// Other: GetRecords and GetShardIterator fail with
	// InternalFailureException; half of them after the call was served (the
	// answer lost), which a reader must survive by retrying the same iterator.
	Other float64
	// ListShards: ListShards fails with LimitExceededException.
	ListShards float64
}

// Kinesis wraps a Kinesis client and injects read failures.
type Kinesis struct {
	API   KinesisAPI
	Rates KinesisRates
	In    *Injector
}

var _ KinesisAPI = (*Kinesis)(nil)

// Counter names of Kinesis faults.
const (
	KinesisThrottle   = "kinesis.throttle"
	KinesisExpired    = "kinesis.expired_iterator"
	KinesisOther      = "kinesis.internal_failure"
	KinesisListShards = "kinesis.list_shards_limit"
)

func injected(msg string) *string { return aws.String("injected by internal/faults: " + msg) }

// ListShards implements KinesisAPI.
func (k *Kinesis) ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	if k.In.pick(chance{KinesisListShards, k.Rates.ListShards}) == 0 {
		k.In.count(KinesisListShards)
		return nil, &Error{Op: "ListShards", Kind: KinesisListShards, Err: &types.LimitExceededException{Message: injected("rate exceeded")}}
	}
	return k.API.ListShards(ctx, in, optFns...)
}

// DescribeStreamSummary implements KinesisAPI; it never fails by injection.
func (k *Kinesis) DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	return k.API.DescribeStreamSummary(ctx, in, optFns...)
}

// CreateStream implements KinesisAPI; it never fails by injection.
func (k *Kinesis) CreateStream(ctx context.Context, in *kinesis.CreateStreamInput, optFns ...func(*kinesis.Options)) (*kinesis.CreateStreamOutput, error) {
	return k.API.CreateStream(ctx, in, optFns...)
}

// GetShardIterator implements KinesisAPI.
func (k *Kinesis) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	switch k.In.pick(chance{KinesisThrottle, k.Rates.Throttle}, chance{KinesisOther, k.Rates.Other}) {
	case 0:
		k.In.count(KinesisThrottle)
		return nil, &Error{Op: "GetShardIterator", Kind: KinesisThrottle, Err: &types.ProvisionedThroughputExceededException{Message: injected("rate exceeded for shard")}}
	case 1:
		k.In.count(KinesisOther)
		after := k.In.intN(2) == 0
		if after {
			if _, err := k.API.GetShardIterator(ctx, in, optFns...); err != nil {
				return nil, err
			}
		}
		return nil, &Error{Op: "GetShardIterator", Kind: KinesisOther, After: after, Err: &types.InternalFailureException{Message: injected("internal failure")}}
	}
	return k.API.GetShardIterator(ctx, in, optFns...)
}

// GetRecords implements KinesisAPI.
func (k *Kinesis) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	switch k.In.pick(chance{KinesisThrottle, k.Rates.Throttle}, chance{KinesisExpired, k.Rates.Expired}, chance{KinesisOther, k.Rates.Other}) {
	case 0:
		k.In.count(KinesisThrottle)
		return nil, &Error{Op: "GetRecords", Kind: KinesisThrottle, Err: &types.ProvisionedThroughputExceededException{Message: injected("rate exceeded for shard")}}
	case 1:
		k.In.count(KinesisExpired)
		return nil, &Error{Op: "GetRecords", Kind: KinesisExpired, Err: &types.ExpiredIteratorException{Message: injected("iterator expired")}}
	case 2:
		k.In.count(KinesisOther)
		after := k.In.intN(2) == 0
		if after {
			if _, err := k.API.GetRecords(ctx, in, optFns...); err != nil {
				return nil, err
			}
		}
		return nil, &Error{Op: "GetRecords", Kind: KinesisOther, After: after, Err: &types.InternalFailureException{Message: injected("internal failure")}}
	}
	return k.API.GetRecords(ctx, in, optFns...)
}
