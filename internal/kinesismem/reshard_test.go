package kinesismem_test

import (
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/internal/kinesismem"
)

func bigOf(t *testing.T, s string) *big.Int {
	t.Helper()
	b, ok := new(big.Int).SetString(s, 10)
	if !ok {
		t.Fatalf("%q is not a decimal", s)
	}
	return b
}

// checkLineage checks what every listing must hold: the open shards
// partition the hash key space; every parent is listed and closed; every
// closed shard ends after it starts; a merge's parents were adjacent.
func checkLineage(t *testing.T, ss []types.Shard) []types.Shard {
	t.Helper()
	byID := map[string]types.Shard{}
	for _, s := range ss {
		byID[*s.ShardId] = s
	}
	var open []types.Shard
	for _, s := range ss {
		r := s.SequenceNumberRange
		if r.EndingSequenceNumber == nil {
			open = append(open, s)
		} else if bigOf(t, *r.EndingSequenceNumber).Cmp(bigOf(t, *r.StartingSequenceNumber)) <= 0 {
			t.Errorf("%s ends at %s, not after its start %s", *s.ShardId, *r.EndingSequenceNumber, *r.StartingSequenceNumber)
		}
		for _, p := range []*string{s.ParentShardId, s.AdjacentParentShardId} {
			if p == nil {
				continue
			}
			ps, ok := byID[*p]
			if !ok || ps.SequenceNumberRange.EndingSequenceNumber == nil {
				t.Errorf("%s has parent %s, not listed or not closed", *s.ShardId, *p)
				continue
			}
			if bigOf(t, *s.SequenceNumberRange.StartingSequenceNumber).Cmp(bigOf(t, *ps.SequenceNumberRange.EndingSequenceNumber)) <= 0 {
				t.Errorf("%s starts before its parent %s ends", *s.ShardId, *p)
			}
		}
		if s.AdjacentParentShardId != nil {
			a, b := byID[*s.ParentShardId], byID[*s.AdjacentParentShardId]
			if new(big.Int).Add(bigOf(t, *a.HashKeyRange.EndingHashKey), big.NewInt(1)).Cmp(bigOf(t, *b.HashKeyRange.StartingHashKey)) != 0 {
				t.Errorf("%s merged %s and %s, which are not adjacent in that order", *s.ShardId, *a.ShardId, *b.ShardId)
			}
		}
	}
	slices.SortFunc(open, func(a, b types.Shard) int {
		return bigOf(t, *a.HashKeyRange.StartingHashKey).Cmp(bigOf(t, *b.HashKeyRange.StartingHashKey))
	})
	next := big.NewInt(0)
	for _, s := range open {
		if bigOf(t, *s.HashKeyRange.StartingHashKey).Cmp(next) != 0 {
			t.Errorf("open shard %s starts at %s, want %s", *s.ShardId, *s.HashKeyRange.StartingHashKey, next)
		}
		next = new(big.Int).Add(bigOf(t, *s.HashKeyRange.EndingHashKey), big.NewInt(1))
	}
	if want := new(big.Int).Lsh(big.NewInt(1), 128); next.Cmp(want) != 0 {
		t.Errorf("open shards end at %s, want 2^128-1", new(big.Int).Sub(next, big.NewInt(1)))
	}
	return open
}

func TestUpdateShardCount_ReshardsToUniformRangesWithAValidLineage(t *testing.T) {
	for _, tc := range [][2]int{{1, 2}, {2, 1}, {2, 3}, {3, 5}, {5, 3}, {4, 7}, {7, 4}, {3, 6}, {6, 3}, {4, 4}} {
		from, to := tc[0], tc[1]
		t.Run(fmt.Sprintf("%d_to_%d", from, to), func(t *testing.T) {
			e := newEnv(t, from, kinesismem.Options{NoReadLimits: true})
			for i := range 50 {
				e.put(fmt.Sprint("before-", i), []byte("b"))
			}
			out, err := e.c.UpdateShardCount(e.ctx, &kinesis.UpdateShardCountInput{StreamName: aws.String(e.stream), TargetShardCount: aws.Int32(int32(to)), ScalingType: types.ScalingTypeUniformScaling})
			if err != nil {
				t.Fatal(err)
			}
			if aws.ToInt32(out.CurrentShardCount) != int32(from) || aws.ToInt32(out.TargetShardCount) != int32(to) {
				t.Errorf("output %d → %d", aws.ToInt32(out.CurrentShardCount), aws.ToInt32(out.TargetShardCount))
			}
			all := e.list(nil)
			open := checkLineage(t, all)
			if len(open) != to {
				t.Fatalf("%d open shards, want %d", len(open), to)
			}
			width := new(big.Int).Div(new(big.Int).Lsh(big.NewInt(1), 128), big.NewInt(int64(to)))
			for i, s := range open {
				if want := new(big.Int).Mul(width, big.NewInt(int64(i))); bigOf(t, *s.HashKeyRange.StartingHashKey).Cmp(want) != 0 {
					t.Errorf("open shard %d starts at %s, want %s", i, *s.HashKeyRange.StartingHashKey, want)
				}
			}
			if from == to && len(all) != from {
				t.Errorf("a uniform stream rescaled to its own count changed: %v", ids(all))
			}
			// Every record is still read once, and a reader following
			// ChildShards from the roots reaches every open shard.
			for i := range 50 {
				e.put(fmt.Sprint("after-", i), []byte("a"))
			}
			seen, reached := 0, map[string]bool{}
			queue := []string{}
			for _, s := range all {
				if s.ParentShardId == nil {
					queue = append(queue, *s.ShardId)
				}
			}
			for len(queue) > 0 {
				id := queue[0]
				queue = queue[1:]
				if reached[id] {
					continue
				}
				reached[id] = true
				out := e.mustGet(e.iterator(id, types.ShardIteratorTypeTrimHorizon))
				seen += len(out.Records)
				for _, c := range out.ChildShards {
					queue = append(queue, *c.ShardId)
				}
			}
			if seen != 100 {
				t.Errorf("read %d records over the lineage, want 100", seen)
			}
			for _, s := range open {
				if !reached[*s.ShardId] {
					t.Errorf("open shard %s is not reached from the roots", *s.ShardId)
				}
			}
		})
	}
}

func TestUpdateShardCount_RefusesMoreThanDoubleLessThanHalfAndAnEleventhScalingADay(t *testing.T) {
	e := newEnv(t, 2, kinesismem.Options{})
	scale := func(n int32) error {
		_, err := e.c.UpdateShardCount(e.ctx, &kinesis.UpdateShardCountInput{StreamName: aws.String(e.stream), TargetShardCount: aws.Int32(n), ScalingType: types.ScalingTypeUniformScaling})
		return err
	}
	for _, n := range []int32{5, 0} {
		if err := scale(n); !is[*types.InvalidArgumentException](err) {
			t.Errorf("2 → %d: err = %v, want InvalidArgumentException", n, err)
		}
	}
	_, err := e.c.UpdateShardCount(e.ctx, &kinesis.UpdateShardCountInput{StreamName: aws.String(e.stream), TargetShardCount: aws.Int32(3)})
	if !is[*types.InvalidArgumentException](err) {
		t.Errorf("no ScalingType: err = %v, want InvalidArgumentException", err)
	}
	for i := range 10 {
		if err := scale(int32(2 + i%2)); err != nil {
			t.Fatalf("scaling %d: %v", i+1, err)
		}
	}
	if err := scale(3); !is[*types.LimitExceededException](err) {
		t.Errorf("an eleventh scaling in 24 h: err = %v, want LimitExceededException", err)
	}
}

func TestSplitAndMerge_KeepTheLineageValidOverManyReshards(t *testing.T) {
	e := newEnv(t, 2, kinesismem.Options{})
	for round := range 6 {
		open := checkLineage(t, e.list(nil))
		if round%2 == 0 {
			for _, s := range open {
				lo, hi := bigOf(t, *s.HashKeyRange.StartingHashKey), bigOf(t, *s.HashKeyRange.EndingHashKey)
				key := new(big.Int).Rsh(new(big.Int).Add(lo, hi), 1)
				e.split(*s.ShardId, key.String())
			}
		} else {
			for i := 0; i+1 < len(open); i += 2 {
				if _, err := e.c.MergeShards(e.ctx, &kinesis.MergeShardsInput{StreamName: aws.String(e.stream), ShardToMerge: open[i].ShardId, AdjacentShardToMerge: open[i+1].ShardId}); err != nil {
					t.Fatalf("round %d: MergeShards: %v", round, err)
				}
			}
		}
	}
	checkLineage(t, e.list(nil))
}

func TestSequenceNumbers_Are56DigitsAndGrowAcrossTheStreamInArrivalOrder(t *testing.T) {
	e := newEnv(t, 4, kinesismem.Options{NoWriteLimits: true})
	var last *big.Int
	check := func(seq string) {
		t.Helper()
		if len(seq) != 56 || strings.Trim(seq, "0123456789") != "" {
			t.Fatalf("sequence number %q is not 56 digits", seq)
		}
		if n := bigOf(t, seq); last != nil && n.Cmp(last) <= 0 {
			t.Fatalf("sequence number %s not greater than the one before, %s", seq, last)
		} else {
			last = n
		}
	}
	for i := range 100 {
		check(*e.put(fmt.Sprint("key-", i), []byte("x")).SequenceNumber)
		if i == 50 {
			e.split(shardN(0), "1000")
			for _, s := range e.list(nil)[4:] {
				check(*s.SequenceNumberRange.StartingSequenceNumber)
			}
		}
	}
}

func TestCreateStream_OnDemandHasFourShardsAndRefusesResharding(t *testing.T) {
	e := newEnv(t, 0, kinesismem.Options{})
	_, err := e.c.CreateStream(e.ctx, &kinesis.CreateStreamInput{StreamName: aws.String(e.stream), StreamModeDetails: &types.StreamModeDetails{StreamMode: types.StreamModeOnDemand}})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(e.list(nil)); n != 4 {
		t.Errorf("%d shards, want 4", n)
	}
	_, err = e.c.SplitShard(e.ctx, &kinesis.SplitShardInput{StreamName: aws.String(e.stream), ShardToSplit: aws.String(shardN(0)), NewStartingHashKey: aws.String("1000")})
	if !is[*types.InvalidArgumentException](err) {
		t.Errorf("SplitShard on an on-demand stream: err = %v, want InvalidArgumentException", err)
	}
}

func TestShardLimit_RefusesCreatesAndSplitsBeyondIt(t *testing.T) {
	e := newEnv(t, 2, kinesismem.Options{ShardLimit: 3})
	_, err := e.c.CreateStream(e.ctx, &kinesis.CreateStreamInput{StreamName: aws.String("more"), ShardCount: aws.Int32(2)})
	if !is[*types.LimitExceededException](err) {
		t.Errorf("CreateStream beyond the limit: err = %v, want LimitExceededException", err)
	}
	e.split(shardN(0), mid[:10])
	_, err = e.c.SplitShard(e.ctx, &kinesis.SplitShardInput{StreamName: aws.String(e.stream), ShardToSplit: aws.String(shardN(1)), NewStartingHashKey: aws.String("300000000000000000000000000000000000000")})
	if !is[*types.LimitExceededException](err) {
		t.Errorf("a fourth open shard: err = %v, want LimitExceededException", err)
	}
}

func TestStreamARN_NamesTheStreamAndMustAgreeWithStreamName(t *testing.T) {
	e := newEnv(t, 1, kinesismem.Options{Region: "eu-west-1", Account: "123456789012"})
	arn := "arn:aws:kinesis:eu-west-1:123456789012:stream/orders"
	if _, err := e.c.ListShards(e.ctx, &kinesis.ListShardsInput{StreamARN: aws.String(arn)}); err != nil {
		t.Errorf("ListShards by ARN: %v", err)
	}
	if _, err := e.c.ListShards(e.ctx, &kinesis.ListShardsInput{StreamARN: aws.String(arn), StreamName: aws.String("orders")}); err != nil {
		t.Errorf("ListShards by ARN and the same name: %v", err)
	}
	for what, in := range map[string]*kinesis.ListShardsInput{
		"another name":    {StreamARN: aws.String(arn), StreamName: aws.String("other")},
		"a consumer ARN":  {StreamARN: aws.String(arn + "/consumer/c:1")},
		"a malformed ARN": {StreamARN: aws.String("arn:aws:sqs:eu-west-1:123456789012:orders")},
	} {
		if _, err := e.c.ListShards(e.ctx, in); !is[*types.InvalidArgumentException](err) {
			t.Errorf("%s: err = %v, want InvalidArgumentException", what, err)
		}
	}
	for _, other := range []string{"arn:aws:kinesis:us-east-1:123456789012:stream/orders", "arn:aws:kinesis:eu-west-1:000000000000:stream/orders"} {
		if _, err := e.c.ListShards(e.ctx, &kinesis.ListShardsInput{StreamARN: aws.String(other)}); !is[*types.ResourceNotFoundException](err) {
			t.Errorf("%s: err = %v, want ResourceNotFoundException", other, err)
		}
	}
	it := e.iterator(shardN(0), types.ShardIteratorTypeLatest)
	if _, err := e.c.GetRecords(e.ctx, &kinesis.GetRecordsInput{ShardIterator: it, StreamARN: aws.String(arn)}); err != nil {
		t.Errorf("GetRecords with its stream's ARN: %v", err)
	}
	if _, err := e.c.CreateStream(e.ctx, &kinesis.CreateStreamInput{StreamName: aws.String("b"), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	_, err := e.c.GetRecords(e.ctx, &kinesis.GetRecordsInput{ShardIterator: it, StreamARN: aws.String("arn:aws:kinesis:eu-west-1:123456789012:stream/b")})
	if !is[*types.InvalidArgumentException](err) {
		t.Errorf("GetRecords with another stream's ARN: err = %v, want InvalidArgumentException", err)
	}
}

func TestNew_RefusesBadOptionsNamingTheField(t *testing.T) {
	for field, o := range map[string]kinesismem.Options{
		"Retention":    {Retention: 23 * 3600e9},
		"ReshardDelay": {ReshardDelay: -1},
		"ShardLimit":   {ShardLimit: -1},
		"Account":      {Account: "acct"},
		"Region":       {Region: "US EAST"},
	} {
		_, err := kinesismem.New(o)
		if !is[*kinesismem.InvalidOptionError](err) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: err = %v, want an InvalidOptionError naming it", field, err)
		}
	}
}
