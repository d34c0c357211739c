package kinesismem

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go/middleware"
)

// CreateStream creates a stream: provisioned with ShardCount shards
// (DefaultShardCount when it is not given, as kinesis-local does) or
// on-demand with DefaultShardCount shards (on-demand scaling is not
// modelled). The stream is CREATING for Options.CreateDelay, then ACTIVE.
// Tags are accepted and dropped.
func (c *Client) CreateStream(ctx context.Context, in *kinesis.CreateStreamInput, _ ...func(*kinesis.Options)) (*kinesis.CreateStreamOutput, error) {
	if in == nil {
		in = &kinesis.CreateStreamInput{}
	}
	out := &kinesis.CreateStreamOutput{}
	err := c.do(ctx, "CreateStream", func(now time.Time) (*middleware.Metadata, error) {
		return &out.ResultMetadata, c.createStream(now, in)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *Client) createStream(now time.Time, in *kinesis.CreateStreamInput) error {
	name := aws.ToString(in.StreamName)
	if !validStreamName(name) {
		return invalid("Stream Name '%s' is not valid: want 1 to 128 of a-z A-Z 0-9 _ . -", name)
	}
	mode := types.StreamModeProvisioned
	if in.StreamModeDetails != nil {
		mode = in.StreamModeDetails.StreamMode
	}
	n := DefaultShardCount
	switch mode {
	case types.StreamModeProvisioned:
		if in.ShardCount != nil {
			n = int(*in.ShardCount)
		}
	case types.StreamModeOnDemand:
	default:
		return invalid("StreamModeDetails.StreamMode %q is not valid: want PROVISIONED or ON_DEMAND", mode)
	}
	switch {
	case n < 1:
		return invalid("ShardCount %d is not valid: want at least 1", n)
	case in.MaxRecordSizeInKiB != nil && *in.MaxRecordSizeInKiB != MaxRecordSize>>10:
		return invalid("MaxRecordSizeInKiB %d is not modelled: want 1024 or none", *in.MaxRecordSizeInKiB)
	case in.RecordDistributionStrategy != "" && in.RecordDistributionStrategy != types.RecordDistributionStrategyUserPartitionKey:
		return invalid("RecordDistributionStrategy %s is not modelled: want USER_PARTITION_KEY or none", in.RecordDistributionStrategy)
	case in.WarmThroughputMiBps != nil:
		return invalid("WarmThroughputMiBps is not modelled")
	}
	if c.streams[name] != nil {
		return inUse("Stream %s under account %s already exists.", name, c.opts.Account)
	}
	if used := c.openShards(); used+n > c.opts.ShardLimit {
		return limitExceeded("This request would exceed the shard limit for the account %s in %s. Current shard count for the account: %d. Limit: %d. Number of additional shards that would have resulted from this request: %d.",
			c.opts.Account, c.opts.Region, used, c.opts.ShardLimit, n)
	}
	creating := 0
	for _, st := range c.streams {
		if st.status == types.StreamStatusCreating {
			creating++
		}
	}
	if creating >= maxCreating {
		return limitExceeded("Account %s has %d streams in CREATING; at most %d may be", c.opts.Account, creating, maxCreating)
	}
	c.nextID++
	st := &stream{
		id: c.nextID, name: name, arn: c.arn(name), created: now, mode: mode,
		retention: c.opts.Retention, status: types.StreamStatusActive,
	}
	for _, r := range uniformRanges(n) {
		st.addShard(now, r[0], r[1])
	}
	st.reindex()
	c.streams[name], c.byID[st.id] = st, st
	if c.opts.CreateDelay > 0 {
		st.status = types.StreamStatusCreating
		st.pending = &change{due: now.Add(c.opts.CreateDelay), apply: func(time.Time) { st.status = types.StreamStatusActive }}
	}
	return nil
}

// DeleteStream deletes an ACTIVE stream: it is DELETING for
// Options.DeleteDelay (reads still work, writes are refused, as on
// kinesis-local), then gone.
func (c *Client) DeleteStream(ctx context.Context, in *kinesis.DeleteStreamInput, _ ...func(*kinesis.Options)) (*kinesis.DeleteStreamOutput, error) {
	if in == nil {
		in = &kinesis.DeleteStreamInput{}
	}
	out := &kinesis.DeleteStreamOutput{}
	err := c.do(ctx, "DeleteStream", func(now time.Time) (*middleware.Metadata, error) {
		st, err := c.stream(in.StreamName, in.StreamARN)
		if err != nil {
			return nil, err
		}
		if st.status != types.StreamStatusActive {
			return nil, inUse("Stream %s under account %s not ACTIVE, instead in state %s", st.name, c.opts.Account, st.status)
		}
		gone := func(time.Time) {
			delete(c.streams, st.name)
			delete(c.byID, st.id)
		}
		if c.opts.DeleteDelay == 0 {
			gone(now)
		} else {
			st.status = types.StreamStatusDeleting
			st.pending = &change{due: now.Add(c.opts.DeleteDelay), apply: gone}
		}
		return &out.ResultMetadata, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DescribeStreamSummary describes a stream. Enhanced fan-out consumers and
// encryption are not modelled: ConsumerCount is 0, EncryptionType NONE.
func (c *Client) DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, _ ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	if in == nil {
		in = &kinesis.DescribeStreamSummaryInput{}
	}
	out := &kinesis.DescribeStreamSummaryOutput{}
	err := c.do(ctx, "DescribeStreamSummary", func(now time.Time) (*middleware.Metadata, error) {
		st, err := c.stream(in.StreamName, in.StreamARN)
		if err != nil {
			return nil, err
		}
		out.StreamDescriptionSummary = &types.StreamDescriptionSummary{
			StreamName:              aws.String(st.name),
			StreamARN:               aws.String(st.arn),
			StreamStatus:            st.status,
			StreamModeDetails:       &types.StreamModeDetails{StreamMode: st.mode},
			RetentionPeriodHours:    aws.Int32(int32(st.retention / time.Hour)),
			StreamCreationTimestamp: aws.Time(millis(st.created)),
			EnhancedMonitoring:      []types.EnhancedMetrics{{ShardLevelMetrics: []types.MetricsName{}}},
			EncryptionType:          types.EncryptionTypeNone,
			OpenShardCount:          aws.Int32(int32(len(st.open))),
			ConsumerCount:           aws.Int32(0),
		}
		return &out.ResultMetadata, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// reshardable returns the stream for a split, merge or scaling: it must be
// provisioned and ACTIVE.
func (c *Client) reshardable(name, arn *string) (*stream, error) {
	st, err := c.stream(name, arn)
	if err != nil {
		return nil, err
	}
	if st.mode != types.StreamModeProvisioned {
		return nil, invalid("Stream %s under account %s is in ON_DEMAND mode; resharding needs PROVISIONED", st.name, c.opts.Account)
	}
	if st.status != types.StreamStatusActive {
		return nil, inUse("Stream %s under account %s not ACTIVE, instead in state %s", st.name, c.opts.Account, st.status)
	}
	return st, nil
}

// openShard returns an open, listed shard of st for a split or merge.
func (c *Client) openShard(st *stream, id string, now time.Time) (*shard, error) {
	sh, err := c.lookupShard(st, id, now)
	if err != nil {
		return nil, notFound("Could not find shard %s in stream %s under account %s.", id, st.name, c.opts.Account)
	}
	if sh.closed {
		return nil, inUse("Shard %s in stream %s under account %s has already been merged or split, and thus is not eligible for merging or splitting.", id, st.name, c.opts.Account)
	}
	return sh, nil
}

// reshard runs apply now or, with a ReshardDelay, when the stream's
// UPDATING ends; until then the old shards take the writes.
func (c *Client) reshard(st *stream, now time.Time, apply func(at time.Time)) {
	done := func(at time.Time) {
		apply(at)
		st.reindex()
		st.status = types.StreamStatusActive
	}
	if c.opts.ReshardDelay == 0 {
		done(now)
		return
	}
	st.status = types.StreamStatusUpdating
	st.pending = &change{due: now.Add(c.opts.ReshardDelay), apply: done}
}

func (c *Client) checkShardLimit(extra int) error {
	if used := c.openShards(); used+extra > c.opts.ShardLimit {
		return limitExceeded("This request would exceed the shard limit for the account %s in %s. Current shard count for the account: %d. Limit: %d. Number of additional shards that would have resulted from this request: %d.",
			c.opts.Account, c.opts.Region, used, c.opts.ShardLimit, extra)
	}
	return nil
}

// SplitShard closes a shard and opens two children: [start, key-1] and
// [key, end]. NewStartingHashKey must be greater than the shard's starting
// hash key plus one and less than its ending hash key, as on Kinesis.
func (c *Client) SplitShard(ctx context.Context, in *kinesis.SplitShardInput, _ ...func(*kinesis.Options)) (*kinesis.SplitShardOutput, error) {
	if in == nil {
		in = &kinesis.SplitShardInput{}
	}
	out := &kinesis.SplitShardOutput{}
	err := c.do(ctx, "SplitShard", func(now time.Time) (*middleware.Metadata, error) {
		st, err := c.reshardable(in.StreamName, in.StreamARN)
		if err != nil {
			return nil, err
		}
		id, keyStr := aws.ToString(in.ShardToSplit), aws.ToString(in.NewStartingHashKey)
		sh, err := c.openShard(st, id, now)
		if err != nil {
			return nil, err
		}
		key, ok := parseHashKey(keyStr)
		if !ok {
			return nil, invalid("NewStartingHashKey %q is not valid: want a decimal from 0 to 2^128-1", keyStr)
		}
		if key.cmp(sh.lo.next()) <= 0 || key.cmp(sh.hi) >= 0 {
			return nil, invalid("NewStartingHashKey %s used in SplitShard() on shard %s in stream %s under account %s is not both greater than one plus the shard's StartingHashKey %s and less than the shard's EndingHashKey %s.",
				keyStr, id, st.name, c.opts.Account, sh.lo, sh.hi)
		}
		if err := c.checkShardLimit(1); err != nil {
			return nil, err
		}
		c.reshard(st, now, func(at time.Time) {
			st.closeShard(sh, at)
			st.addShard(at, sh.lo, key.prev(), sh)
			st.addShard(at, key, sh.hi, sh)
		})
		return &out.ResultMetadata, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// MergeShards closes two adjacent shards and opens one child over both
// ranges. ShardToMerge must be the lower range (its ending hash key plus
// one is AdjacentShardToMerge's starting hash key), as on Kinesis; it
// becomes the child's ParentShardId, the other its AdjacentParentShardId.
func (c *Client) MergeShards(ctx context.Context, in *kinesis.MergeShardsInput, _ ...func(*kinesis.Options)) (*kinesis.MergeShardsOutput, error) {
	if in == nil {
		in = &kinesis.MergeShardsInput{}
	}
	out := &kinesis.MergeShardsOutput{}
	err := c.do(ctx, "MergeShards", func(now time.Time) (*middleware.Metadata, error) {
		st, err := c.reshardable(in.StreamName, in.StreamARN)
		if err != nil {
			return nil, err
		}
		a, err := c.openShard(st, aws.ToString(in.ShardToMerge), now)
		if err != nil {
			return nil, err
		}
		b, err := c.openShard(st, aws.ToString(in.AdjacentShardToMerge), now)
		if err != nil {
			return nil, err
		}
		if a == b || a.hi == maxHashKey || a.hi.next() != b.lo {
			return nil, invalid("Shards %s and %s in stream %s under account %s are not an adjacent pair of shards eligible for merging",
				a.id, b.id, st.name, c.opts.Account)
		}
		c.reshard(st, now, func(at time.Time) { merge(st, at, a, b) })
		return &out.ResultMetadata, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func merge(st *stream, at time.Time, a, b *shard) *shard {
	st.closeShard(a, at)
	st.closeShard(b, at)
	return st.addShard(at, a.lo, b.hi, a, b)
}

// UpdateShardCount rescales a provisioned stream to TargetShardCount
// shards of uniform ranges, as Kinesis does: by splits and then merges of
// the open shards, which may leave short-lived shards (created and closed
// at once, with no records) in the lineage. The target must be at least
// half and at most double the open shards, and a stream scales at most ten
// times in a rolling 24 hours.
func (c *Client) UpdateShardCount(ctx context.Context, in *kinesis.UpdateShardCountInput, _ ...func(*kinesis.Options)) (*kinesis.UpdateShardCountOutput, error) {
	if in == nil {
		in = &kinesis.UpdateShardCountInput{}
	}
	out := &kinesis.UpdateShardCountOutput{}
	err := c.do(ctx, "UpdateShardCount", func(now time.Time) (*middleware.Metadata, error) {
		st, err := c.reshardable(in.StreamName, in.StreamARN)
		if err != nil {
			return nil, err
		}
		if in.ScalingType != types.ScalingTypeUniformScaling {
			return nil, invalid("ScalingType %q is not valid: want UNIFORM_SCALING", in.ScalingType)
		}
		cur, target := len(st.open), int(aws.ToInt32(in.TargetShardCount))
		switch {
		case target < 1:
			return nil, invalid("TargetShardCount %d is not valid: want at least 1", target)
		case target > 2*cur:
			return nil, invalid("TargetShardCount %d would more than double the %d open shards of stream %s", target, cur, st.name)
		case 2*target < cur:
			return nil, invalid("TargetShardCount %d would scale stream %s below half of its %d open shards", target, st.name, cur)
		}
		if err := c.checkShardLimit(target - cur); err != nil {
			return nil, err
		}
		recent := st.scalings[:0]
		for _, t := range st.scalings {
			if now.Sub(t) < 24*time.Hour {
				recent = append(recent, t)
			}
		}
		st.scalings = recent
		if len(st.scalings) >= maxScalings {
			return nil, limitExceeded("Stream %s under account %s has been scaled %d times in the last 24 hours", st.name, c.opts.Account, len(st.scalings))
		}
		st.scalings = append(st.scalings, now)
		open := append([]*shard(nil), st.open...)
		c.reshard(st, now, func(at time.Time) { scale(st, at, open, target) })
		out.StreamName, out.StreamARN = aws.String(st.name), aws.String(st.arn)
		out.CurrentShardCount, out.TargetShardCount = aws.Int32(int32(cur)), aws.Int32(int32(target))
		return &out.ResultMetadata, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scale reshards the open shards (by starting hash key) into n uniform
// ranges: it splits every shard at each target boundary inside it, then
// merges, left to right, the pieces that fall in one target range. Shards
// whose range is already a target range are left alone.
func scale(st *stream, at time.Time, open []*shard, n int) {
	targets := uniformRanges(n)
	var pieces []*shard
	t := 0
	for _, sh := range open {
		cur := sh
		for {
			for t < n && targets[t][1].cmp(cur.lo) < 0 {
				t++
			}
			// A target range ending inside cur splits it after that end.
			if t < n && targets[t][1].cmp(cur.hi) < 0 {
				key := targets[t][1].next()
				st.closeShard(cur, at)
				left := st.addShard(at, cur.lo, key.prev(), cur)
				right := st.addShard(at, key, cur.hi, cur)
				pieces = append(pieces, left)
				cur = right
				continue
			}
			pieces = append(pieces, cur)
			break
		}
	}
	// Every piece now lies inside one target range; merge each range's.
	t = 0
	var acc *shard
	for _, p := range pieces {
		for targets[t][1].cmp(p.lo) < 0 {
			t++
		}
		if acc != nil && acc.lo.cmp(targets[t][0]) >= 0 {
			acc = merge(st, at, acc, p)
		} else {
			acc = p
		}
	}
}
