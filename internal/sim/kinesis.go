package sim

import (
	"context"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/internal/kinesismem"
)

// network is the hosts' way to the in-memory Kinesis: latency on every
// call, and the read failures AWS produces (throttles, expired iterators,
// internal failures, half of them after the call was served, ListShards
// limits). The coordinators and readers of every deployment call through
// it; the world's own producer and operator do not.
type network struct {
	w     *World
	inner *kinesismem.Client

	mu           sync.Mutex
	shards       map[string]string // iterator -> shard id, for per-shard draws
	sabotageDone bool              // DropRecord done
}

func (n *network) shardOf(it *string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.shards[aws.ToString(it)]
}

func (n *network) noteIterator(it *string, shardID string) {
	if it == nil {
		return
	}
	n.mu.Lock()
	n.shards[*it] = shardID
	n.mu.Unlock()
}

func injectedMsg(s string) *string { return aws.String("injected by the simulator: " + s) }

func (n *network) latency(ctx context.Context, rs *stream) error {
	f := &n.w.cfg.Faults
	n.w.wake(ctx)
	return n.w.sleep(ctx, rs.latency(f.KinesisLatency, f.KinesisTail))
}

// ListShards is kinesis.Client's.
func (n *network) ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	rs := n.w.rnd.get("kinesis:list:" + n.w.actor(ctx))
	if err := n.latency(ctx, rs); err != nil {
		return nil, err
	}
	if rs.hit(n.w.cfg.Faults.List) {
		return nil, &types.LimitExceededException{Message: injectedMsg("rate exceeded")}
	}
	return n.inner.ListShards(ctx, in, optFns...)
}

// DescribeStreamSummary is kinesis.Client's.
func (n *network) DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	if err := n.latency(ctx, n.w.rnd.get("kinesis:describe:"+n.w.actor(ctx))); err != nil {
		return nil, err
	}
	out, err := n.inner.DescribeStreamSummary(ctx, in, optFns...)
	// A coordinator's description answered just before a re-creation's
	// deletion (a "describe" race): its host freezes as the answer
	// arrives, and its pass goes on with the old stream in hand.
	if _, _, owned := ownerOf(ctx); !owned && err == nil && n.w.meetRace(ctx, "describe", depOfHost(hostOf(ctx))) {
		n.w.wake(ctx)
	}
	return out, err
}

// CreateStream is kinesis.Client's.
func (n *network) CreateStream(ctx context.Context, in *kinesis.CreateStreamInput, optFns ...func(*kinesis.Options)) (*kinesis.CreateStreamOutput, error) {
	return n.inner.CreateStream(ctx, in, optFns...)
}

// readFault draws the fault of one read: 0 none, 1 throttled, 2 expired
// iterator (GetRecords only), 3 internal failure before the call, 4 after.
func (n *network) readFault(rs *stream, records bool) int {
	f := &n.w.cfg.Faults
	x := rs.float()
	switch {
	case x < f.Throttle:
		return 1
	case records && x < f.Throttle+f.Expired:
		return 2
	case x < f.Throttle+f.Expired+f.Internal:
		if rs.intN(2) == 0 {
			return 3
		}
		return 4
	}
	return 0
}

// GetShardIterator is kinesis.Client's.
func (n *network) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	id := aws.ToString(in.ShardId)
	rs := n.w.draws(ctx, "kinesis", id)
	if err := n.latency(ctx, rs); err != nil {
		return nil, err
	}
	switch n.readFault(rs, false) {
	case 1:
		return nil, &types.ProvisionedThroughputExceededException{Message: injectedMsg("rate exceeded for shard")}
	case 3:
		return nil, &types.InternalFailureException{Message: injectedMsg("internal failure")}
	case 4:
		if out, err := n.inner.GetShardIterator(ctx, in, optFns...); err == nil {
			n.noteIterator(out.ShardIterator, id)
		}
		return nil, &types.InternalFailureException{Message: injectedMsg("internal failure after the call")}
	}
	out, err := n.inner.GetShardIterator(ctx, in, optFns...)
	if err == nil {
		n.noteIterator(out.ShardIterator, id)
	}
	return out, err
}

// GetRecords is kinesis.Client's.
func (n *network) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	id := n.shardOf(in.ShardIterator)
	rs := n.w.draws(ctx, "kinesis", id)
	if err := n.latency(ctx, rs); err != nil {
		return nil, err
	}
	switch n.readFault(rs, true) {
	case 1:
		return nil, &types.ProvisionedThroughputExceededException{Message: injectedMsg("rate exceeded for shard")}
	case 2:
		return nil, &types.ExpiredIteratorException{Message: injectedMsg("iterator expired")}
	case 3:
		return nil, &types.InternalFailureException{Message: injectedMsg("internal failure")}
	case 4:
		if out, err := n.inner.GetRecords(ctx, in, optFns...); err == nil {
			n.noteIterator(out.NextShardIterator, id)
		}
		return nil, &types.InternalFailureException{Message: injectedMsg("internal failure after the call")}
	}
	out, err := n.inner.GetRecords(ctx, in, optFns...)
	if err == nil {
		n.noteIterator(out.NextShardIterator, id)
		n.sabotage(id, out)
	}
	return out, err
}

// sabotage breaks an answer as Config.Sabotage says.
func (n *network) sabotage(shardID string, out *kinesis.GetRecordsOutput) {
	w := n.w
	switch w.cfg.Sabotage {
	case DropRecord:
		n.mu.Lock()
		defer n.mu.Unlock()
		if !n.sabotageDone && len(out.Records) >= 3 && time.Since(w.began) > 2*time.Minute {
			n.sabotageDone = true
			w.tr.add(w.shardName(shardID), "", "SABOTAGE: record %s left out of a GetRecords answer", short(aws.ToString(out.Records[1].SequenceNumber)))
			out.Records = append(out.Records[:1], out.Records[2:]...)
		}
	case EarlyEnd:
		if len(out.Records) >= 2 && w.closed(shardID) {
			w.tr.add(w.shardName(shardID), "", "SABOTAGE: the closed shard ends after %s", short(aws.ToString(out.Records[0].SequenceNumber)))
			out.Records, out.NextShardIterator = out.Records[:1], nil
		}
	}
}
