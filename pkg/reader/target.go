package reader

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// Batch is what a target receives: records of one shard, in order.
type Batch struct {
	Stream    string
	StreamARN string
	ShardID   string
	Records   []types.Record
	// Subs is nil unless the batch holds user records of de-aggregated KPL
	// records (Options.Deaggregate); then Subs[i] describes Records[i]. A
	// user record carries its parent's SequenceNumber, arrival time and
	// encryption, and its own partition key and data.
	Subs []Sub
}

// Sub tells a user record of a de-aggregated KPL record from a plain one.
type Sub struct {
	// Aggregated: Records[i] is a user record of an aggregate.
	Aggregated bool
	// SubSequenceNumber is its index in the aggregate, from 0.
	SubSequenceNumber int64
	// ExplicitHashKey is its explicit hash key, if the producer set one.
	ExplicitHashKey string
}

// Sub returns what Subs says of record i (the zero Sub for a plain record).
func (b Batch) Sub(i int) Sub {
	if i < len(b.Subs) {
		return b.Subs[i]
	}
	return Sub{}
}

// Target receives batches of records.
//
// Deliver returns how many leading records of the batch settled (0 to
// len(b.Records)) and an error when delivery failed. The reader checkpoints
// the settled records and delivers the rest again, with backoff, until they
// settle; it never checkpoints past an unsettled record. A count below
// len(b.Records) with a nil error is a partial success (batchItemFailures);
// with an error, the first n records still count as settled (a split batch
// whose first request succeeded). The user records of one KPL aggregate
// settle together: a count that ends inside an aggregate settles only the
// records before it.
//
// Deliver must return when ctx ends; the reader cancels ctx when it loses
// the lease or reaches its deadline.
type Target interface {
	Deliver(ctx context.Context, b Batch) (settled int, err error)
}

// FuncTarget is an in-process target: a Go function.
type FuncTarget func(ctx context.Context, b Batch) (settled int, err error)

// Deliver implements Target.
func (f FuncTarget) Deliver(ctx context.Context, b Batch) (int, error) { return f(ctx, b) }

var _ Target = FuncTarget(nil)
