package kinesismem

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go/middleware"
)

// ListShards lists a stream's shards by shard id: open ones and closed ones
// until retention has passed since they closed. MaxResults is 1 to 10,000
// (default and at most 1,000 a page); NextToken resumes a listing for 300
// s and may not be sent with StreamName, StreamARN, ExclusiveStartShardId
// or StreamCreationTimestamp. Every ShardFilter type is applied as AWS
// documents it (AT_TRIM_HORIZON: the shards open at the trim horizon).
func (c *Client) ListShards(ctx context.Context, in *kinesis.ListShardsInput, _ ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	if in == nil {
		in = &kinesis.ListShardsInput{}
	}
	out := &kinesis.ListShardsOutput{}
	err := c.do(ctx, "ListShards", func(now time.Time) (*middleware.Metadata, error) {
		return &out.ResultMetadata, c.listShards(now, in, out)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *Client) listShards(now time.Time, in *kinesis.ListShardsInput, out *kinesis.ListShardsOutput) error {
	max := MaxListShardsResults
	if in.MaxResults != nil {
		max = int(*in.MaxResults)
		if max < 1 || max > 10000 {
			return invalid("MaxResults %d is not valid: want 1 to 10000", max)
		}
		max = min(max, MaxListShardsResults)
	}
	var (
		st  *stream
		tok listToken
	)
	if in.NextToken != nil {
		if in.StreamName != nil || in.StreamARN != nil || in.ExclusiveStartShardId != nil || in.StreamCreationTimestamp != nil {
			return invalid("Cannot define ExclusiveStartShardId, StreamCreationTimestamp, StreamName or StreamARN if NextToken is defined")
		}
		var ok bool
		if tok, ok = decodeListToken(*in.NextToken); !ok {
			return invalid("NextToken is improperly formatted")
		}
		if now.Sub(tok.Issued) > NextTokenLifetime {
			return &types.ExpiredNextTokenException{Message: msg("The NextToken was issued at %s, more than %s ago", tok.Issued.Format(time.RFC3339), NextTokenLifetime)}
		}
		if st = c.byID[tok.Stream]; st == nil {
			return notFound("The stream of this NextToken no longer exists.")
		}
	} else {
		var err error
		if st, err = c.stream(in.StreamName, in.StreamARN); err != nil {
			return err
		}
		if ts := in.StreamCreationTimestamp; ts != nil && !millis(*ts).Equal(millis(st.created)) {
			return notFound("Stream %s under account %s created at %s not found.", st.name, c.opts.Account, ts.UTC().Format(time.RFC3339Nano))
		}
		tok = listToken{Stream: st.id, After: aws.ToString(in.ExclusiveStartShardId)}
		if f := in.ShardFilter; f != nil {
			tok.FilterType, tok.FilterID = string(f.Type), aws.ToString(f.ShardId)
			if f.Timestamp != nil {
				tok.FilterTime = *f.Timestamp
			}
			if err := checkFilter(f); err != nil {
				return err
			}
		}
	}
	keep := c.filter(st, tok, now)
	for _, sh := range st.shards {
		if sh.id <= tok.After || st.expired(sh, now) || !keep(sh) {
			continue
		}
		if len(out.Shards) == max {
			next := tok
			next.After, next.Issued = aws.ToString(out.Shards[max-1].ShardId), now
			out.NextToken = aws.String(next.encode())
			break
		}
		out.Shards = append(out.Shards, st.describe(sh))
	}
	if out.Shards == nil {
		out.Shards = []types.Shard{}
	}
	return nil
}

func checkFilter(f *types.ShardFilter) error {
	switch f.Type {
	case types.ShardFilterTypeAfterShardId:
		if f.ShardId == nil {
			return invalid("ShardFilter of type AFTER_SHARD_ID needs a ShardId")
		}
	case types.ShardFilterTypeAtTimestamp, types.ShardFilterTypeFromTimestamp:
		if f.Timestamp == nil {
			return invalid("ShardFilter of type %s needs a Timestamp", f.Type)
		}
	case types.ShardFilterTypeAtTrimHorizon, types.ShardFilterTypeFromTrimHorizon, types.ShardFilterTypeAtLatest:
	default:
		return invalid("ShardFilter type %q is not valid", f.Type)
	}
	return nil
}

// filter returns which listed shards a ShardFilter keeps. Times before the
// trim horizon (the stream's creation, or now less the retention period)
// are taken as the trim horizon.
func (c *Client) filter(st *stream, tok listToken, now time.Time) func(*shard) bool {
	horizon := now.Add(-st.retention)
	if horizon.Before(st.created) {
		horizon = st.created
	}
	at := func(t time.Time) time.Time {
		if t.Before(horizon) {
			return horizon
		}
		return t
	}
	openAt := func(sh *shard, t time.Time) bool {
		return !sh.created.After(t) && (!sh.closed || sh.closedAt.After(t))
	}
	switch types.ShardFilterType(tok.FilterType) {
	case types.ShardFilterTypeAfterShardId:
		return func(sh *shard) bool { return sh.id > tok.FilterID }
	case types.ShardFilterTypeAtTrimHorizon:
		return func(sh *shard) bool { return openAt(sh, horizon) }
	case types.ShardFilterTypeAtLatest:
		return func(sh *shard) bool { return !sh.closed }
	case types.ShardFilterTypeAtTimestamp:
		t := at(tok.FilterTime)
		return func(sh *shard) bool { return openAt(sh, t) }
	case types.ShardFilterTypeFromTimestamp:
		t := at(tok.FilterTime)
		return func(sh *shard) bool { return !sh.closed || sh.closedAt.After(t) }
	}
	return func(*shard) bool { return true } // none, FROM_TRIM_HORIZON
}

func (st *stream) describe(sh *shard) types.Shard {
	// The answer's own copies of the shard's strings, and its two ranges,
	// in one allocation (the strings were formatted when the shard was
	// made, or closed).
	a := &struct {
		id, lo, hi, start, end, parent, adjacent string
		hash                                     types.HashKeyRange
		seqs                                     types.SequenceNumberRange
	}{id: sh.id, lo: sh.loKey, hi: sh.hiKey, start: sh.startSeq, end: sh.endSeq}
	a.hash = types.HashKeyRange{StartingHashKey: &a.lo, EndingHashKey: &a.hi}
	a.seqs = types.SequenceNumberRange{StartingSequenceNumber: &a.start}
	s := types.Shard{ShardId: &a.id, HashKeyRange: &a.hash, SequenceNumberRange: &a.seqs}
	if sh.closed {
		a.seqs.EndingSequenceNumber = &a.end
	}
	if len(sh.parents) > 0 {
		a.parent = sh.parents[0]
		s.ParentShardId = &a.parent
	}
	if len(sh.parents) > 1 {
		a.adjacent = sh.parents[1]
		s.AdjacentParentShardId = &a.adjacent
	}
	return s
}
