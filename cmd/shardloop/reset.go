package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/shardloop/shardloop/internal/awsconf"
	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/reader"
	"github.com/shardloop/shardloop/pkg/shards"
)

// envTable is the lease table --table defaults to, as the functions name it.
const envTable = "SHARDLOOP_LEASE_TABLE"

const resetToForms = `horizon, latest, timestamp:<unix ms or RFC 3339>, or sequence:<sequence number>`

func resetCmd(ctx context.Context, args []string, w io.Writer) error {
	fs := newFlags("reset", "shardloop reset --stream S --shard X --to P [--table T] [--force]")
	stream := fs.String("stream", "", "stream name or ARN (required)")
	shard := fs.String("shard", "", "shard id, e.g. shardId-000000000001 (required)")
	to := fs.String("to", "", "where the shard's next reader opens (required): "+resetToForms)
	table := fs.String("table", os.Getenv(envTable), "DynamoDB lease table (default $"+envTable+")")
	force := fs.Bool("force", false, "reset even while a live owner holds the lease: the holder stops at its next renewal and writes no more checkpoints")
	if err := fs.parse(args); err != nil {
		return err
	}
	switch {
	case *stream == "":
		return fs.withUsage(bad("--stream is required"))
	case *shard == "":
		return fs.withUsage(bad("--shard is required"))
	case *to == "":
		return fs.withUsage(bad("--to is required: %s", resetToForms))
	case *table == "":
		return fs.withUsage(bad("--table is required (or set $%s)", envTable))
	}
	name, err := shards.StreamName(*stream)
	if err != nil {
		return fs.withUsage(bad("--stream %q: want a stream name or a Kinesis stream ARN", *stream))
	}
	if _, err := resetPosition(*to, *shard, time.Now()); err != nil {
		return fs.withUsage(err)
	}
	cfg, err := awsconf.Load(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	if *to == "latest" {
		now = tipNow(ctx, w, awsconf.NewKinesis(cfg), *stream)
	}
	pos, err := resetPosition(*to, *shard, now)
	if err != nil {
		return fs.withUsage(err)
	}
	ddb := awsconf.NewDynamoDB(cfg)
	store, err := lease.NewDynamoStore(ddb, *table)
	if err != nil {
		return err
	}
	err = resetShard(ctx, w, store, name, *shard, pos, *force, *table)
	if tableMissing(err) {
		return fmt.Errorf("--table %s: no such table at %s (region %s): check the name, the region and the account", *table, dynamoEndpoint(ctx, ddb), cfg.Region)
	}
	return err
}

// tipNow is the moment "latest" is pinned to: Kinesis's clock (the Date of
// its answer to DescribeStreamSummary) less a second, since arrival times
// are stamped on that clock; this machine's clock, with a warning, when
// Kinesis cannot be asked.
func tipNow(ctx context.Context, w io.Writer, api interface {
	DescribeStreamSummary(context.Context, *kinesis.DescribeStreamSummaryInput, ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
}, stream string) time.Time {
	in := &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)}
	if strings.HasPrefix(stream, "arn:") {
		in = &kinesis.DescribeStreamSummaryInput{StreamARN: aws.String(stream)}
	}
	out, err := api.DescribeStreamSummary(ctx, in)
	if err == nil {
		if t, ok := shards.ServerTime(out.ResultMetadata); ok {
			return shards.TipPinnedAt(t)
		}
	}
	fmt.Fprintf(w, "warning: could not read Kinesis's clock (%v); latest is pinned on this machine's clock, off by as much as it is\n", err)
	return time.Now()
}

// resetPosition turns --to into the position recorded on the row, in the
// reader's text form. latest is pinned to now (as the coordinator pins a
// tip start): a reader that opened at LATEST and died before its first
// checkpoint would otherwise leave its successor at a later tip, and what
// arrived in between would be skipped. A sequence names a record of this
// shard.
func resetPosition(to, shardID string, now time.Time) (string, error) {
	refuse := func(why string) error { return bad("--to %q: %s", to, why) }
	kind, rest, _ := strings.Cut(to, ":")
	var pos string
	switch kind {
	case "horizon":
		pos = to
	case "latest":
		if rest != "" {
			return "", refuse("want " + resetToForms)
		}
		pos = fmt.Sprintf("timestamp:%d", now.UnixMilli())
	case "timestamp":
		p, err := reader.ParseUserPosition(to)
		if err != nil {
			return "", refuse("want timestamp:<unix milliseconds> or timestamp:<RFC 3339 time>")
		}
		pos = p.String()
	case "sequence":
		seq := rest
		if s, q, ok := strings.Cut(rest, ":"); ok { // sequence:<shard>:<seq>
			if s != shardID {
				return "", refuse(fmt.Sprintf("names a record of %s, not of --shard %s", s, shardID))
			}
			seq = q
		}
		if seq == "" || strings.Trim(seq, "0123456789") != "" {
			return "", refuse("want sequence:<sequence number>, the decimal sequence number of a record of --shard " + shardID)
		}
		pos = "sequence:" + shardID + ":" + seq
	default:
		return "", refuse("want " + resetToForms)
	}
	if _, err := reader.ParsePosition(pos); err != nil {
		return "", refuse(err.Error())
	}
	return pos, nil
}

// resetShard moves the shard's start to pos and says what happens next.
func resetShard(ctx context.Context, w io.Writer, store lease.AdminStore, stream, shardID, pos string, force bool, table string) error {
	row, err := store.Get(ctx, stream, shardID)
	if errors.Is(err, lease.ErrNotFound) {
		return fmt.Errorf("no lease row for --shard %s of --stream %s in --table %s: check the shard id with shardloop status; a shard the coordinator has not opened yet has nothing to reset", shardID, stream, table)
	}
	if err != nil {
		return err
	}
	if row.Finished() {
		return fmt.Errorf("--shard %s was read to its end (SHARD_END): its children carry on from their own checkpoints; reset a child instead", shardID)
	}
	lapsed := false
	if row.Held() && !force {
		// Whether the owner is alive is told by its counter, not by the
		// expiry its own clock wrote: watch it for one lease duration.
		fmt.Fprintf(w, "owner %q holds --shard %s; watching its lease for %s to see whether it is alive\n", row.Owner, shardID, lease.DefaultDuration)
		if lapsed, err = watchLease(ctx, store, row, lease.DefaultDuration, 500*time.Millisecond); err != nil {
			return err
		}
		force = lapsed
	}
	l, err := store.Reset(ctx, stream, shardID, pos, force)
	var ce *lease.ConflictError
	switch {
	case errors.As(err, &ce) && errors.Is(err, lease.ErrHeld):
		holder := row
		if ce.Current != nil {
			holder = *ce.Current
		}
		return fmt.Errorf("--shard %s is being read: owner %q renewed its lease while we watched (counter %d); stop it first or pass --force (the holder then stops at its next renewal, within seconds, and writes no more checkpoints)",
			shardID, holder.Owner, holder.Counter)
	case errors.Is(err, lease.ErrNotFound):
		return fmt.Errorf("no lease row for --shard %s of --stream %s in --table %s", shardID, stream, table)
	case err != nil:
		return err
	}
	was := "no checkpoint"
	if row.Checkpoint != "" {
		was = "checkpoint " + row.Checkpoint
	}
	fmt.Fprintf(w, "%s %s: the next reader opens at %s (was %s)\n", stream, shardID, l.Start, was)
	switch {
	case lapsed:
		fmt.Fprintf(w, "owner %q had stopped renewing its lease, which was cleared; the coordinator starts a new loop at its next pass\n", row.Owner)
	case row.Held():
		fmt.Fprintf(w, "owner %q was cleared: it stops at its next lease renewal; the coordinator starts a new loop at its next pass\n", row.Owner)
	default:
		fmt.Fprintln(w, "no loop holds the shard: the coordinator starts one at its next pass")
	}
	return nil
}

// watchLease reads the shard's row every poll until its owner's counter has
// stood still for d (the owner is gone: lapsed true) or changed (alive:
// false), as a coordinator's lease.Observer judges it.
func watchLease(ctx context.Context, store lease.AdminStore, row lease.Lease, d, poll time.Duration) (bool, error) {
	obs := lease.NewObserver(d)
	for {
		if obs.Observe(row, time.Now()).Available() {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(poll):
		}
		next, err := store.Get(ctx, row.Stream, row.ShardID)
		if err != nil {
			return false, err
		}
		if next.Owner != row.Owner || next.Counter != row.Counter {
			return false, nil
		}
		row = next
	}
}
