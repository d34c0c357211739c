package reader

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/pkg/lease"
)

// streamGone reports whether the stream that row was written for is gone:
// Kinesis does not know the stream, or a stream of that name was created
// since (its creation time, in milliseconds, is not the row's
// incarnation). A loop of a deleted stream must not read the one created
// again under the old row: its checkpoint names records of another stream,
// and the new stream's start was never applied to that row. One
// DescribeStreamSummary a run; when it fails otherwise, the run reads on
// (a throttled describe must not stop a shard).
func (r *run) streamGone(ctx context.Context, row lease.Lease) bool {
	if row.Incarnation == 0 {
		return false
	}
	in := &kinesis.DescribeStreamSummaryInput{}
	if r.in.StreamARN != "" {
		in.StreamARN = aws.String(r.in.StreamARN)
	} else {
		in.StreamName = aws.String(r.in.Stream)
	}
	out, err := r.o.Kinesis.DescribeStreamSummary(ctx, in)
	var nf *types.ResourceNotFoundException
	switch {
	case errors.As(err, &nf):
		r.log.Warn("the stream no longer exists; releasing the lease", "err", err)
		return true
	case err != nil:
		r.log.Info("describe stream failed; reading on", "err", err)
		return false
	case out.StreamDescriptionSummary == nil || out.StreamDescriptionSummary.StreamCreationTimestamp == nil:
		return false
	}
	if created := out.StreamDescriptionSummary.StreamCreationTimestamp.UnixMilli(); created != row.Incarnation {
		r.log.Warn("the stream was created again since the shard's row was written; releasing the lease",
			"row_incarnation", row.Incarnation, "stream_created", created)
		return true
	}
	return false
}
