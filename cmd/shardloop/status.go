package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/internal/awsconf"
	"github.com/shardloop/shardloop/internal/handlers"
	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/shards"
)

func statusCmd(ctx context.Context, args []string, w io.Writer) error {
	fs := newFlags("status", "shardloop status --stream S --table T [-o table|json]")
	stream := fs.String("stream", "", "stream name or ARN (required)")
	table := fs.String("table", os.Getenv(envTable), "DynamoDB lease table (default $"+envTable+")")
	output := newChoice("table", "table", "json")
	fs.Var(output, "output", "`format`: table (for people) or json (one document, for scripts: docs/operations.md has its fields)")
	fs.want("output", output.want())
	fs.alias("o", "output")
	if err := fs.parse(args); err != nil {
		return err
	}
	if *stream == "" || *table == "" {
		return fs.withUsage(bad("--stream and --table (or $%s) are required", envTable))
	}
	name, err := shards.StreamName(*stream)
	if err != nil {
		return fs.withUsage(bad("--stream %q: want a stream name or a Kinesis stream ARN", *stream))
	}
	cfg, err := awsconf.Load(ctx)
	if err != nil {
		return err
	}
	kc, ddb := awsconf.NewKinesis(cfg), awsconf.NewDynamoDB(cfg)
	listing, err := shards.List(ctx, kc, *stream)
	switch {
	case handlers.StreamMissing(err):
		return streamNotFound(ctx, kc, *stream, ": check the name, the region and the account")
	case err != nil:
		return fmt.Errorf("--stream %s: %w", *stream, err)
	}
	store, err := lease.NewDynamoStore(ddb, *table)
	if err != nil {
		return err
	}
	rows, err := store.List(ctx, name)
	switch {
	case tableMissing(err):
		return fmt.Errorf("--table %s: no such table at %s (region %s): check the name, the region and the account", *table, dynamoEndpoint(ctx, ddb), cfg.Region)
	case err != nil:
		return fmt.Errorf("--table %s: %w", *table, err)
	}
	runners, err := store.Runners(ctx, name)
	if err != nil {
		return fmt.Errorf("--table %s: %w", *table, err)
	}
	now := time.Now()
	views := statusViews(listing, rows, now)
	for i := range views {
		views[i].Runners = runners
	}
	probeAll(ctx, kc, *stream, views)
	if output.value == "json" {
		return writeStatusJSON(w, *stream, *table, views, runners, rows, now)
	}
	printStatus(w, views, now)
	printRunners(w, runners, rows, now)
	return nil
}

// printRunners lists the runners that share the stream (shardloop run
// processes on this table, by their heartbeat rows): id, host, pid, the
// leases the rows name it the owner of (and what it reported at its last
// beat), and how long ago it last beat by its own clock. Nothing when no
// runner beats for the stream.
func printRunners(w io.Writer, hs []lease.Heartbeat, rows []lease.Lease, now time.Time) {
	if len(hs) == 0 {
		return
	}
	held := heldByRunner(rows)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUNNER\tHOST\tPID\tLEASES\tLAST BEAT")
	for _, hb := range hs {
		host, pid, beat := hb.Host, fmt.Sprint(hb.PID), "-"
		if host == "" {
			host = "-"
		}
		if hb.PID == 0 {
			pid = "-"
		}
		if !hb.BeatAt.IsZero() {
			if d := now.Sub(hb.BeatAt); d >= 0 {
				beat = age(d) + " ago by its clock"
			} else {
				beat = "in " + age(-d) + " by its clock (clocks differ)"
			}
		}
		if hb.Counter == 0 {
			beat = "leaving or not yet beating"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d (%d at its last beat)\t%s\n", hb.Runner, host, pid, held[hb.Runner], hb.Leases, beat)
	}
	tw.Flush()
	fmt.Fprintln(w, "A runner that stops beating is counted out by the others once its heartbeat stood still for a lease duration on their own clocks,")
	fmt.Fprintln(w, "or sooner once it missed a beat and let a lease lapse; they take its shards as its leases lapse.")
}

// shardView is what status knows of one shard: its listing (unless retention
// trimmed it), its lease row (unless it has none yet), why the coordinator
// does not take it, and what the probe found after its checkpoint.
type shardView struct {
	ID      string
	Shard   shards.Shard
	Listed  bool
	Row     lease.Lease
	HasRow  bool
	Parents []string
	// Reason is why the shard is not leasable now; nil when it is.
	Reason *shards.Reason
	// Rows of the stream by shard id, for what a child waits for.
	Rows map[string]lease.Lease
	// Probe is nil when the shard was not probed.
	Probe *probe
	// Runners are the heartbeat rows of the runners that share the stream
	// (none for a deployment): who takes a shard over, and when.
	Runners []lease.Heartbeat
}

// statusViews joins the listing with the lease rows: every listed shard in
// the listing's order, then the rows of shards no longer listed.
func statusViews(listing []shards.Shard, rows []lease.Lease, now time.Time) []shardView {
	byID := make(map[string]lease.Lease, len(rows))
	for _, r := range rows {
		byID[r.ShardID] = r
	}
	d := shards.Decide(shards.Input{Shards: listing, Leases: byID, Verdicts: displayVerdicts(byID, now)})
	listed := make(map[string]bool, len(listing))
	var views []shardView
	for _, s := range listing {
		if listed[s.ID] {
			continue
		}
		listed[s.ID] = true
		row, has := byID[s.ID]
		v := shardView{ID: s.ID, Shard: s, Listed: true, Row: row, HasRow: has, Parents: s.Parents(), Rows: byID}
		if why, ok := d.NotLeasable[s.ID]; ok {
			v.Reason = &why
		}
		views = append(views, v)
	}
	for _, r := range rows {
		if !listed[r.ShardID] {
			views = append(views, shardView{ID: r.ShardID, Row: r, HasRow: true, Parents: r.ParentShardIDs, Rows: byID})
		}
	}
	return views
}

// probe is what one GetRecords right after a shard's checkpoint found.
type probe struct {
	// CaughtUp: nothing after the checkpoint (or the shard's end).
	CaughtUp bool
	// Oldest is when the first record after the checkpoint arrived, zero
	// when that read returned none (Behind then says how far the tip is).
	Oldest time.Time
	Behind time.Duration
	Err    error
}

// probeConcurrency bounds the probes in flight: each is two small calls.
const probeConcurrency = 4

// probeAll probes every listed, unfinished shard with a checkpoint: is
// anything after it? That tells a caught-up idle shard from one whose
// reader is stuck, which the lag recorded with the last checkpoint cannot.
func probeAll(ctx context.Context, kc *kinesis.Client, stream string, views []shardView) {
	sem := make(chan struct{}, probeConcurrency)
	var wg sync.WaitGroup
	for i := range views {
		v := &views[i]
		if !v.Listed || !v.HasRow || v.Row.Checkpoint == "" || v.Row.Finished() || (v.Row.Start != "" && !v.Row.StartApplied) {
			continue // nothing to read after, or the next reader opens at a start, not after the checkpoint
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			p := probeShard(ctx, kc, stream, v.ID, v.Row.Checkpoint)
			v.Probe = &p
		})
	}
	wg.Wait()
}

func probeShard(ctx context.Context, kc *kinesis.Client, stream, shardID, checkpoint string) probe {
	in := &kinesis.GetShardIteratorInput{ShardId: aws.String(shardID), ShardIteratorType: ktypes.ShardIteratorTypeAfterSequenceNumber, StartingSequenceNumber: aws.String(checkpoint)}
	if strings.HasPrefix(stream, "arn:") {
		in.StreamARN = aws.String(stream)
	} else {
		in.StreamName = aws.String(stream)
	}
	it, err := kc.GetShardIterator(ctx, in)
	if err != nil {
		return probe{Err: err}
	}
	out, err := kc.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator, Limit: aws.Int32(1)})
	if err != nil {
		return probe{Err: err}
	}
	behind := time.Duration(aws.ToInt64(out.MillisBehindLatest)) * time.Millisecond
	switch {
	case len(out.Records) > 0:
		return probe{Oldest: aws.ToTime(out.Records[0].ApproximateArrivalTimestamp), Behind: behind}
	case out.NextShardIterator == nil || behind == 0:
		return probe{CaughtUp: true}
	}
	return probe{Behind: behind}
}

// printStatus writes one line per shard: shard, parents, owner, expiry (or
// how long ago it expired), checkpoint, lag, a start not yet applied (a
// subscription start or a reset the next reader opens at), and its state in
// words: read to its end, being read (caught up or behind, and whether it
// checkpoints), waiting for a parent (and what that parent is doing), free
// for the coordinator, or gone from the stream.
func printStatus(w io.Writer, views []shardView, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SHARD\tPARENTS\tOWNER\tEXPIRY\tCHECKPOINT\tLAG\tOPENS AT\tSTATE")
	for _, v := range views {
		r := v.Row
		owner, expiry := r.Owner, "-"
		switch {
		case r.Owner == "":
			owner = "-"
		case now.Before(r.Expiry): // by the holder's clock, which may differ from this one
			expiry = "in " + r.Expiry.Sub(now).Round(100*time.Millisecond).String()
		default:
			expiry = "expired " + now.Sub(r.Expiry).Round(100*time.Millisecond).String() + " ago"
		}
		parents := strings.Join(v.Parents, ",")
		if parents == "" {
			parents = "-"
		}
		opens := "-"
		if r.Start != "" && !r.StartApplied && !r.Finished() {
			opens = r.Start
		}
		_, words := state(v, now)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v.ID, parents, owner, expiry, shortSeq(r.Checkpoint), lag(v, now), opens, words)
	}
	tw.Flush()
}

func shortSeq(seq string) string {
	switch {
	case seq == "":
		return "-"
	case len(seq) > 24 && seq != lease.ShardEnd:
		return "…" + seq[len(seq)-12:]
	}
	return seq
}

func age(d time.Duration) string {
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// staleLag: a checkpoint older than this, while records wait after it,
// means the reader is not getting through (a reader writes one per batch).
const staleLag = time.Minute

// lag is how far behind the shard's reader is: from the probe when there
// was one (0s when nothing waits after the checkpoint, else how long ago
// the oldest waiting record arrived), else as recorded with the last
// checkpoint, with its age when that is old; "-" when unknown or finished.
func lag(v shardView, now time.Time) string {
	l, ok := lagOf(v, now)
	switch {
	case !ok:
		return "-"
	case l.source == "probe" && l.behind == 0:
		return "0s"
	}
	s := age(l.behind)
	if a := now.Sub(l.recordedAt); l.source == "checkpoint" && a > staleLag {
		s += " (" + a.Round(time.Second).String() + " ago)"
	}
	return s
}

// state says what the shard is doing, as one of the state constants
// (status --output json) and in words, and for a child what it waits for.
func state(v shardView, now time.Time) (kind, words string) {
	r := v.Row
	switch {
	case r.Finished():
		return stateFinished, "finished: read to its end"
	case !v.Listed:
		return stateGone, "gone from the stream (trimmed by retention); its row stays while a child needs it"
	case v.Reason != nil && v.Reason.Kind == shards.WaitingOnParent:
		return stateWaiting, "waiting for parent " + v.Reason.Parent + " to be read to its end: " + parentDoing(v.Rows, v.Reason.Parent, now)
	case v.Reason != nil && v.Reason.Kind == shards.WaitingOnDescendant && v.Reason.Owner == "":
		return stateFree, "re-opened by a new start: taken once the invocations that the last holder of " + v.Reason.Descendant +
			" (which carries its keys) released with could have ended (up to its fence, " + v.Rows[v.Reason.Descendant].Fence.String() + ", after the release)"
	case v.Reason != nil && v.Reason.Kind == shards.WaitingOnDescendant:
		return stateFree, "re-opened by a new start: taken once the revoked holder of " + v.Reason.Descendant +
			" (which carries its keys) has stopped and its invocations could have ended (its lease and fence passed)"
	case r.Owner != "" && r.Revoked:
		return stateRevoked, "lease revoked by a new start position: its reader stops at its next renewal; the shard is taken again once the lease has lapsed"
	case heldByItsClock(r, now):
		s := "reading: " + progress(v, now)
		if runner := lease.OwnerRunner(r.Owner); runner != "" && !beating(v.Runners, runner, now) {
			s += "; its runner " + runner + " " + silence(v.Runners, runner, now) + ": if it is gone, "
			if n := beatingBesides(v.Runners, runner, now); n > 0 {
				s += fmt.Sprintf("%s take the shard when its lease lapses, in about %s", others(n), age(r.Expiry.Sub(now)+r.Fence))
			} else {
				s += "no other runner beats on this table: the next shardloop run to start takes the shard a lease after it starts"
			}
		}
		return stateReading, s
	case r.Owner != "":
		return stateExpired, "lease expired by its holder's clock: " + afterExpiry(v, now)
	case !v.HasRow:
		return stateNotOpened, "not started: " + nextPass(v, now)
	case r.Fence > 0:
		return stateFree, fmt.Sprintf("released while invocations it started may still run (for up to %s): taken once that has passed, then %s", r.Fence, nextPass(v, now))
	}
	return stateFree, "free: " + nextPass(v, now)
}

// nextPass says who takes a shard whose row is free, and when.
func nextPass(v shardView, now time.Time) string {
	switch n := beatingBesides(v.Runners, "", now); {
	case len(v.Runners) == 0:
		return "the coordinator takes it at its next pass (at once after a reader's nudge, else within a minute)"
	case n == 0:
		return "no runner beats on this table now: the next shardloop run to start takes it at its first pass"
	default:
		return fmt.Sprintf("the %d runners on this table take it at once (each looks every 500 ms and passes while below its share), or within half a lease", n)
	}
}

// afterExpiry says who takes over a shard whose lease expired by its
// holder's clock, and when. A taker judges the lease by watching its counter
// stand still for a lease duration on its own clock; status, reading once,
// reports what the takers do about it.
func afterExpiry(v shardView, now time.Time) string {
	runner := lease.OwnerRunner(v.Row.Owner)
	if v.Row.Fence > 0 {
		return fmt.Sprintf("its holder may have left an invocation running (the row's fence: %s), so a taker waits a lease duration plus that; ", v.Row.Fence) +
			afterLapse(v, runner, now)
	}
	return afterLapse(v, runner, now)
}

// afterLapse says who takes over a lapsed lease of runner (none: a
// deployment's loop), and when.
func afterLapse(v shardView, runner string, now time.Time) string {
	switch {
	case runner == "":
		return "the coordinator takes the shard over once it has seen the lease stand still for a lease duration on its own clock: " +
			"within about a lease of the shard loop's execution failing (the coordinator watches it), else at the second scheduled pass that finds it unchanged " +
			"(one to two minutes; about a lease with a relisting window)"
	case beating(v.Runners, runner, now):
		return "its runner " + runner + " still beats and takes it again a lease after the loop's last renewal (about now), unless another runner does first"
	}
	s := "its runner " + runner + " " + silence(v.Runners, runner, now) + ": "
	if n := beatingBesides(v.Runners, runner, now); n > 0 {
		return s + others(n) + " take the shard once they have seen its lease stand still for a lease duration (they read the rows every 500 ms): about now"
	}
	return s + "no other runner beats on this table: the next shardloop run to start takes the shard a lease after it starts"
}

func others(n int) string {
	if n == 1 {
		return "the other runner on this table"
	}
	return fmt.Sprintf("the %d other runners on this table", n)
}

// staleBeat: a runner whose heartbeat, by its own clock, is older than this
// has missed beats (they come every renew interval). For display only.
const staleBeat = 2 * lease.DefaultRenewInterval

// beating reports whether runner's heartbeat row is there and recent by its
// own clock.
func beating(hs []lease.Heartbeat, runner string, now time.Time) bool {
	for _, hb := range hs {
		if hb.Runner == runner {
			return hb.Counter > 0 && now.Sub(hb.BeatAt) < staleBeat
		}
	}
	return false
}

// beatingBesides counts the runners beating other than runner.
func beatingBesides(hs []lease.Heartbeat, runner string, now time.Time) int {
	n := 0
	for _, hb := range hs {
		if hb.Runner != runner && beating(hs, hb.Runner, now) {
			n++
		}
	}
	return n
}

// silence says since when runner has not beaten, as its row shows.
func silence(hs []lease.Heartbeat, runner string, now time.Time) string {
	for _, hb := range hs {
		if hb.Runner == runner && !hb.BeatAt.IsZero() {
			return "last beat " + age(max(now.Sub(hb.BeatAt), 0)) + " ago by its clock"
		}
	}
	return "has no heartbeat row (it left, or another runner counted it out)"
}

// progress describes a held shard: caught up (idle) or behind, and when it
// last checkpointed.
func progress(v shardView, now time.Time) string {
	r := v.Row
	last := "no checkpoint yet"
	var since time.Duration
	if !r.LagAt.IsZero() {
		since = now.Sub(r.LagAt)
		last = "last checkpoint " + since.Round(time.Second).String() + " ago"
	}
	p := v.Probe
	switch {
	case r.Checkpoint == "":
		return "no checkpoint yet"
	case p == nil:
		return last
	case p.Err != nil:
		return last + "; could not read after the checkpoint: " + firstLine(p.Err.Error())
	case p.CaughtUp:
		if since > staleLag {
			return "caught up, idle: nothing new since its " + last
		}
		return "caught up; " + last
	}
	s := "behind: records wait after the checkpoint; " + last
	if since > staleLag || r.LagAt.IsZero() {
		s += ": stuck? (see the reader's logs and TargetErrors)"
	}
	return s
}

// parentDoing says what a parent a child waits for is doing.
func parentDoing(rows map[string]lease.Lease, parent string, now time.Time) string {
	r, ok := rows[parent]
	switch {
	case !ok:
		return "not started yet"
	case heldByItsClock(r, now):
		ckpt := "no checkpoint yet"
		if r.Checkpoint != "" {
			ckpt = "checkpoint " + shortSeq(r.Checkpoint)
		}
		return fmt.Sprintf("read by %s, %s", r.Owner, ckpt)
	}
	return "no reader now; the coordinator takes it at its next pass"
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

// heldByItsClock reports whether r's owner holds it by the expiry its own
// clock wrote. It is for display only: a taker judges a lease by watching
// its counter on its own clock (lease.Observer), which status, reading
// once, cannot.
func heldByItsClock(r lease.Lease, now time.Time) bool { return r.Owner != "" && now.Before(r.Expiry) }

// displayVerdicts judges the rows for status's one look by heldByItsClock.
// A row released with a fence is not free: when its fence passes is
// measured from the release by a watcher, which one look cannot be, so it
// is shown as waiting (the coordinator's own watch decides).
func displayVerdicts(rows map[string]lease.Lease, now time.Time) map[string]lease.Verdict {
	v := make(map[string]lease.Verdict, len(rows))
	for id, r := range rows {
		v[id] = lease.Verdict{Free: r.Owner == "" && r.Fence == 0, Lapsed: r.Owner != "" && !heldByItsClock(r, now), Counter: r.Counter}
	}
	return v
}
