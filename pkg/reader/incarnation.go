package reader

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// streamGone reports whether the stream of incarnation inc (the creation
// time, in milliseconds, the row or the loop's state names) is gone:
// Kinesis does not know the stream, or a stream of that name was created
// since. A loop of a deleted stream must not read the one created again
// under the old row: its checkpoint names records of another stream, and
// the new stream's start was never applied to that row. One
// DescribeStreamSummary a run; when it fails otherwise, the run reads on
// (a throttled describe must not stop a shard), unless fresh: a row taken
// afresh, after the coordinator deleted it, says nothing of the stream it
// is for, and is released unread for the coordinator to judge.
func (r *run) streamGone(ctx context.Context, inc int64, fresh bool) bool {
	if inc == 0 {
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
	case err != nil && fresh:
		r.log.Warn("describe stream failed, and the shard's row was taken afresh: releasing it unread, for the coordinator", "err", err)
		return true
	case err != nil:
		r.log.Info("describe stream failed; reading on", "err", err)
		return false
	case out.StreamDescriptionSummary == nil || out.StreamDescriptionSummary.StreamCreationTimestamp == nil:
		return false
	}
	if created := out.StreamDescriptionSummary.StreamCreationTimestamp.UnixMilli(); created != inc {
		r.log.Warn("the stream was created again since the shard's row was written; releasing the lease",
			"row_incarnation", inc, "stream_created", created)
		return true
	}
	return false
}
