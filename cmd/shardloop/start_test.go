package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/internal/testaws"
	"github.com/shardloop/shardloop/pkg/coordinator"
	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/shards"
)

// A second runner whose --start differs from the one the table records
// would begin a new generation and move every shard past the records the
// first has not delivered yet. Without --confirm-skip it refuses, saying
// on which shards and how many records, and changes nothing; with it, it
// starts.
func TestRun_AStartThatWouldSkipABacklogIsRefusedWithoutConfirmation(t *testing.T) {
	emulatorEnv(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	kc, dc := testaws.Kinesis(t), testaws.Dynamo(t)
	stream, table := testaws.Name(t), testaws.Name(t)
	if _, err := shards.CreateIfMissing(ctx, kc, stream, 2); err != nil {
		t.Fatal(err)
	}
	listing, err := shards.List(ctx, kc, stream)
	if err != nil {
		t.Fatal(err)
	}
	// 150 records on the first shard, 40 on the second.
	for i, n := range []int{150, 40} {
		var es []ktypes.PutRecordsRequestEntry
		for j := range n {
			es = append(es, ktypes.PutRecordsRequestEntry{PartitionKey: aws.String("k"), ExplicitHashKey: aws.String(listing[i].HashKeyStart),
				Data: fmt.Appendf(nil, "r%d-%d", i, j)})
		}
		if _, err := kc.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: es}); err != nil {
			t.Fatal(err)
		}
	}
	// A latest start opens at Kinesis's time less a second (its clock has
	// second precision): let the backlog be older than that.
	time.Sleep(2500 * time.Millisecond)
	if err := lease.CreateTable(ctx, dc, table); err != nil {
		t.Fatal(err)
	}
	store, err := lease.NewDynamoStore(dc, table)
	if err != nil {
		t.Fatal(err)
	}
	// The first runner's start: horizon, applied to both rows; its reader
	// has delivered the first shard's first 100 records.
	first, err := coordinator.New(coordinator.Config{Subscriptions: []coordinator.Subscription{{Stream: stream, Start: "horizon"}}, Name: "shardloop run first",
		Claim: func(string, shards.Decision) []shards.Shard { return nil }}, // records the start, takes nothing
		store, kc, coordinator.StarterFunc(func(context.Context, coordinator.Loop) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	out, err := kc.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(stream), ShardId: aws.String(listing[0].ID), ShardIteratorType: ktypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := kc.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: out.ShardIterator, Limit: aws.Int32(100)})
	if err != nil || len(recs.Records) != 100 {
		t.Fatalf("read %d records: %v", len(recs.Records), err)
	}
	owner := "first-loop"
	if _, err := store.Take(ctx, stream, listing[0].ID, owner); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Checkpoint(ctx, stream, listing[0].ID, owner, aws.ToString(recs.Records[99].SequenceNumber)); err != nil {
		t.Fatal(err)
	}
	if err := store.Release(ctx, stream, listing[0].ID, owner, lease.Handover{}); err != nil {
		t.Fatal(err)
	}
	before, err := store.GetGeneration(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}

	rctx, stop := context.WithTimeout(ctx, 10*time.Second) // should it run instead
	code, _, stderr := runCLI(rctx, "run", "--stream", stream, "--table", table, "--start", "latest")
	stop()
	if code != 1 {
		t.Fatalf("run --start latest over a backlog: exit %d, want 1 (refused)\n%s", code, stderr)
	}
	t.Logf("refused:\n%s", stderr)
	for _, want := range []string{"--start latest would skip records not yet delivered on 2 shard(s)", "the table's current start (horizon, recorded by shardloop run first",
		listing[0].ID + ": 50 records (the oldest arrived", listing[1].ID + ": 40 records", "--confirm-skip", "same --start"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the refusal lacks %q:\n%s", want, stderr)
		}
	}
	if after, err := store.GetGeneration(ctx, stream); err != nil || after.ID != before.ID || after.Order != before.Order {
		t.Errorf("generation after the refusal = %+v, %v; want it unchanged (%s)", after, err, before.ID)
	}

	// Confirmed: it runs, and its start is the table's from then on.
	rctx, stop = context.WithTimeout(ctx, 5*time.Second)
	code, _, stderr = runCLI(rctx, "run", "--stream", stream, "--table", table, "--start", "latest", "--confirm-skip")
	stop()
	if code != 0 || !strings.Contains(stderr, "--confirm-skip") || !strings.Contains(stderr, "the new start skips records the stream's previous start has not delivered") {
		t.Fatalf("run --start latest --confirm-skip: exit %d, want it to run, and it and its coordinator to warn\n%s", code, stderr)
	}
	if after, err := store.GetGeneration(ctx, stream); err != nil || after.Order <= before.Order {
		t.Errorf("generation after the confirmed start = %+v, %v; want a new one", after, err)
	}

	// A start that skips nothing (horizon replays), or none (the table's
	// start is followed): nothing to refuse.
	for _, start := range []string{"horizon", ""} {
		args := []string{"run", "--stream", stream, "--table", table}
		if start != "" {
			args = append(args, "--start", start)
		}
		rctx, stop := context.WithTimeout(ctx, 3*time.Second)
		code, _, stderr := runCLI(rctx, args...)
		stop()
		if code != 0 || strings.Contains(stderr, "would skip") {
			t.Errorf("run --start %q: exit %d, want it to run\n%s", start, code, stderr)
		}
	}
}

// A runner's start is stamped with Kinesis's clock (the Date of its
// answer, to the second), not the host's: two runners on hosts whose
// clocks disagree order their configurations by one clock. Without a Date
// (a stand-in with no HTTP answers) it is the host's, with a warning.
func TestRun_TheStartIsStampedWithKinesissClock(t *testing.T) {
	emulatorEnv(t)
	kc := testaws.Kinesis(t)
	stream := testaws.Name(t)
	if _, err := shards.CreateIfMissing(t.Context(), kc, stream, 1); err != nil {
		t.Fatal(err)
	}
	arn, err := resolveStream(t.Context(), kc, stream, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().Truncate(time.Second)
	at := kinesisNow(t.Context(), kc, arn, slog.New(slog.DiscardHandler))
	if at.Nanosecond() != 0 || at.Before(before.Add(-5*time.Second)) || at.After(time.Now().Add(5*time.Second)) {
		t.Fatalf("stamped %s (host %s): want Kinesis's Date, whole seconds, near the host's clock on loopback", at.Format(time.RFC3339Nano), before)
	}
	var logs strings.Builder
	at = kinesisNow(t.Context(), noDate{}, arn, newLogger(&logs, "text", slog.LevelInfo))
	if time.Since(at) > time.Second || !strings.Contains(logs.String(), "stamped with the host's clock") {
		t.Fatalf("without a Date: stamped %s, logged %q; want the host's clock and a warning", at, logs.String())
	}
}

type noDate struct{}

func (noDate) DescribeStreamSummary(context.Context, *kinesis.DescribeStreamSummaryInput, ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	return &kinesis.DescribeStreamSummaryOutput{}, nil
}
