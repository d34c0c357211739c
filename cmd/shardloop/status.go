package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/shards"
)

func statusCmd(ctx context.Context, args []string, w io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	stream := fs.String("stream", "", "stream name or ARN (required)")
	table := fs.String("table", os.Getenv(envTable), "DynamoDB lease table (default $"+envTable+")")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if *stream == "" || *table == "" {
		return usageError{"--stream and --table (or $" + envTable + ") are required"}
	}
	name, err := shards.StreamName(*stream)
	if err != nil {
		return usageError{err.Error()}
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return err
	}
	store, err := lease.NewDynamoStore(dynamodb.NewFromConfig(cfg), *table)
	if err != nil {
		return err
	}
	rows, err := store.List(ctx, name)
	if err != nil {
		return err
	}
	printStatus(w, rows, time.Now())
	return nil
}

// printStatus writes the lease rows as a table: shard, parents, owner,
// expiry (or how long ago it expired), checkpoint, lag, and a start not yet
// applied (a subscription start or a reset the next reader opens at).
func printStatus(w io.Writer, rows []lease.Lease, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SHARD\tPARENTS\tOWNER\tEXPIRY\tCHECKPOINT\tLAG\tOPENS AT")
	for _, r := range rows {
		owner, expiry := r.Owner, "-"
		switch {
		case r.Owner == "":
			owner = "-"
		case now.Before(r.Expiry): // by the holder's clock, which may differ from this one
			expiry = "in " + r.Expiry.Sub(now).Round(100*time.Millisecond).String()
		default:
			expiry = "expired " + now.Sub(r.Expiry).Round(100*time.Millisecond).String() + " ago"
		}
		parents := strings.Join(r.ParentShardIDs, ",")
		if parents == "" {
			parents = "-"
		}
		ckpt := r.Checkpoint
		if ckpt == "" {
			ckpt = "-"
		} else if len(ckpt) > 24 && ckpt != lease.ShardEnd {
			ckpt = "…" + ckpt[len(ckpt)-12:]
		}
		opens := "-"
		if r.Start != "" && !r.StartApplied && !r.Finished() {
			opens = r.Start
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ShardID, parents, owner, expiry, ckpt, lag(r, now), opens)
	}
	tw.Flush()
}

// staleLag: a lag recorded longer ago than this is shown with its age; a
// reader that is stuck writes no checkpoint, so its lag does not move.
const staleLag = time.Minute

// lag is how far behind the tip the shard's reader was at its last
// checkpoint that recorded it: "1.2s", "3m4s", "-" when none did or the
// shard is finished.
func lag(r lease.Lease, now time.Time) string {
	if r.LagAt.IsZero() || r.Finished() {
		return "-"
	}
	d := time.Duration(r.MillisBehind) * time.Millisecond
	switch {
	case d < time.Minute:
		d = d.Round(100 * time.Millisecond)
	default:
		d = d.Round(time.Second)
	}
	s := d.String()
	if age := now.Sub(r.LagAt); age > staleLag {
		s += " (" + age.Round(time.Second).String() + " ago)"
	}
	return s
}
