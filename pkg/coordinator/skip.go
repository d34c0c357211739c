package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/reader"
	"github.com/shardloop/shardloop/pkg/shards"
)

// Skip is what a new start would move one shard past: the records after
// where the shard's next reader would open under the stream's recorded
// start (after its checkpoint, or at a start not applied yet) and before
// the new start, which nobody has delivered.
type Skip struct {
	ShardID string
	// From is where the shard's next reader would open without the new start.
	From string
	// Records is how many records one read (up to SkipReadLimit) counted
	// before the new start; More: there are more than that.
	Records int
	More    bool
	// Oldest is when the first of them arrived (zero when the read returned
	// none while the shard is behind); Behind is how far behind the tip the
	// read ended, by Kinesis.
	Oldest time.Time
	Behind time.Duration
	// Err is why the shard could not be read; the figures are then the lag
	// its reader recorded with its last checkpoint (Behind, as of LagAt).
	Err   error
	LagAt time.Time
}

// String says it for people: "shardId-000000000001: 1,400 records (the
// oldest arrived 2m10s ago)".
func (s Skip) String() string {
	return s.describe(time.Now())
}

func (s Skip) describe(now time.Time) string {
	var b strings.Builder
	b.WriteString(s.ShardID + ": ")
	switch {
	case s.Err != nil:
		if s.LagAt.IsZero() {
			fmt.Fprintf(&b, "records wait after %s (could not read them: %v)", s.From, s.Err)
		} else {
			fmt.Fprintf(&b, "%s behind at its last checkpoint, %s ago (could not read after %s: %v)", s.Behind.Round(time.Second), now.Sub(s.LagAt).Round(time.Second), s.From, s.Err)
		}
		return b.String()
	case s.Records == 0:
		fmt.Fprintf(&b, "records %s behind the tip after %s", s.Behind.Round(time.Second), s.From)
		return b.String()
	case s.More:
		fmt.Fprintf(&b, "more than %s records", thousands(s.Records))
	default:
		fmt.Fprintf(&b, "%s records", thousands(s.Records))
	}
	if !s.Oldest.IsZero() {
		fmt.Fprintf(&b, " (the oldest arrived %s ago", max(now.Sub(s.Oldest), 0).Round(time.Second))
		if s.More && s.Behind > 0 {
			fmt.Fprintf(&b, "; %s behind the tip after them", s.Behind.Round(time.Second))
		}
		b.WriteString(")")
	}
	return b.String()
}

// Skipped is how many records the skips stand for, at least one a shard
// (a shard that could not be read counts one).
func Skipped(skips []Skip) int {
	n := 0
	for _, s := range skips {
		n += max(s.Records, 1)
	}
	return n
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// SkipReadLimit is how many records the one read of a shard counts.
const SkipReadLimit = 10000

// skipReadConcurrency bounds the shards read at once: each answer may be
// 10 MB, and the coordinator function has 128 MB by default.
const skipReadConcurrency = 2

// BacklogReader is what counting a skipped backlog reads on Kinesis.
type BacklogReader interface {
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
}

// skipBound is a new start on one shard: it skips the records that arrived
// before at (a tip, a timestamp), or that come before seq (a sequence
// start).
type skipBound struct {
	at  time.Time
	seq string
}

func (b skipBound) before(r types.Record) bool {
	if b.seq != "" {
		return seqBefore(aws.ToString(r.SequenceNumber), b.seq)
	}
	return r.ApproximateArrivalTimestamp != nil && r.ApproximateArrivalTimestamp.Before(b.at)
}

// seqBefore compares two decimal sequence numbers.
func seqBefore(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// skipProbe is one shard whose backlog a new start may skip: where its
// reader opens now, and the new start.
type skipProbe struct {
	shard string
	from  reader.Opening
	until skipBound
	row   lease.Lease
}

// skipProbes decides which shards a generation that begins with sub's start
// (tip: the pinned tip of the new generation, Kinesis's time) would move
// past records not yet delivered, and from where: every listed shard with a
// row that is not finished and whose reader would open somewhere other than
// the tip, for a latest start (up to the tip) and a timestamp start (up to
// it), the named shard for a sequence start (up to the record). A horizon
// start skips nothing, nor does none (it records a start only on shards
// without a row).
func skipProbes(sub Subscription, listing []shards.Shard, rows map[string]lease.Lease, tip time.Time) ([]skipProbe, error) {
	if sub.Start == "" {
		return nil, nil
	}
	p, err := reader.ParsePosition(sub.Start)
	if err != nil {
		return nil, err
	}
	var bound skipBound
	switch p.Kind {
	case reader.Horizon:
		return nil, nil
	case reader.Latest:
		bound.at = tip
	case reader.Timestamp:
		bound.at = p.At
	case reader.Sequence:
		bound.seq = p.Seq
	}
	var out []skipProbe
	for _, s := range listing {
		row, ok := rows[s.ID]
		if !ok || row.Finished() || (p.Kind == reader.Sequence && s.ID != p.ShardID) {
			continue
		}
		from, err := reader.Open(row)
		if err != nil || from.ShardEnd || from.Type == types.ShardIteratorTypeLatest {
			continue // nothing owed: it opens at the tip, or cannot open
		}
		out = append(out, skipProbe{shard: s.ID, from: from, until: bound, row: row})
	}
	return out, nil
}

// readSkips reads each probe's shard once from where its reader opens now
// and counts the records before the new start: the shards with any.
// Without a reader (kin nil) or when a read fails, a shard whose last
// checkpoint recorded a lag counts as skipped with that lag.
func readSkips(ctx context.Context, kin BacklogReader, stream, streamARN string, probes []skipProbe) []Skip {
	out := make([]*Skip, len(probes))
	sem := make(chan struct{}, skipReadConcurrency)
	var wg sync.WaitGroup
	for i, p := range probes {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			s := Skip{ShardID: p.shard, From: p.from.String()}
			err := errors.New("no Kinesis reader")
			if kin != nil {
				err = countSkip(ctx, kin, stream, streamARN, p, &s)
			}
			if err != nil {
				if p.row.LagAt.IsZero() || p.row.MillisBehind <= 0 {
					return // nothing known to wait
				}
				s.Err, s.Behind, s.LagAt = err, time.Duration(p.row.MillisBehind)*time.Millisecond, p.row.LagAt
			}
			if s.Records > 0 || s.Err != nil || (s.More && s.Behind > 0) {
				out[i] = &s
			}
		})
	}
	wg.Wait()
	var skips []Skip
	for _, s := range out {
		if s != nil {
			skips = append(skips, *s)
		}
	}
	slices.SortFunc(skips, func(a, b Skip) int { return strings.Compare(a.ShardID, b.ShardID) })
	return skips
}

// countSkip reads p's shard once from where its reader opens now.
func countSkip(ctx context.Context, kin BacklogReader, stream, streamARN string, p skipProbe, s *Skip) error {
	in := &kinesis.GetShardIteratorInput{ShardId: aws.String(p.shard), ShardIteratorType: p.from.Type}
	if streamARN != "" {
		in.StreamARN = aws.String(streamARN)
	} else {
		in.StreamName = aws.String(stream)
	}
	switch p.from.Type {
	case types.ShardIteratorTypeAtSequenceNumber, types.ShardIteratorTypeAfterSequenceNumber:
		in.StartingSequenceNumber = aws.String(p.from.Seq)
	case types.ShardIteratorTypeAtTimestamp:
		in.Timestamp = aws.Time(p.from.At)
	}
	it, err := kin.GetShardIterator(ctx, in)
	if err != nil {
		return fmt.Errorf("get shard iterator %s: %w", p.from, err)
	}
	if it.ShardIterator == nil {
		return nil // a closed shard opened past its end
	}
	out, err := kin.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator, Limit: aws.Int32(SkipReadLimit), StreamARN: nonEmpty(streamARN)})
	if err != nil {
		return fmt.Errorf("get records after %s: %w", p.from, err)
	}
	s.Behind = time.Duration(aws.ToInt64(out.MillisBehindLatest)) * time.Millisecond
	all := true
	for _, r := range out.Records {
		if !p.until.before(r) {
			all = false
			break
		}
		if s.Records == 0 {
			s.Oldest = aws.ToTime(r.ApproximateArrivalTimestamp)
		}
		s.Records++
	}
	s.More = all && out.NextShardIterator != nil && (len(out.Records) >= SkipReadLimit || s.Behind > 0)
	if s.Records > 0 && !all {
		s.Behind = 0 // what follows is at or after the new start
	}
	return nil
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return aws.String(s)
}

// StartCheck is what a subscription's start would do to its stream now.
type StartCheck struct {
	Stream string
	// Begins: the start would begin a new generation (its position applied
	// over the rows' checkpoints).
	Begins bool
	// Recorded is the stream's generation record now; Found false when
	// there is none.
	Recorded lease.Generation
	Found    bool
	// Skips are the shards whose records not yet delivered the new
	// generation would move past.
	Skips []Skip
}

// CheckStore is what CheckStart reads of the lease store.
type CheckStore interface {
	GetGeneration(ctx context.Context, stream string) (lease.Generation, error)
	GetMany(ctx context.Context, stream string, shardIDs []string) (map[string]lease.Lease, error)
}

// CheckAPI is what CheckStart calls on Kinesis.
type CheckAPI interface {
	shards.ListAPI
	describeAPI
	BacklogReader
}

// CheckStart says what starting sub now would do, as the first pass of a
// coordinator with it would: whether it begins a new generation, and which
// shards' records not yet delivered (under the generation recorded now) it
// would skip, counted by one read of each (see Skip). It changes nothing.
// A CLI refuses such a start unless confirmed; a coordinator warns when it
// begins one (StreamResult.Skipped).
func CheckStart(ctx context.Context, store CheckStore, kin CheckAPI, sub Subscription) (StartCheck, error) {
	name, err := shards.StreamName(sub.Stream)
	if err != nil {
		return StartCheck{}, err
	}
	if sub.Start != "" && sub.Generation == "" {
		sub.Generation = generationOf(sub.Stream, sub.Start)
	}
	res := StartCheck{Stream: name}
	rec, err := store.GetGeneration(ctx, name)
	res.Found = err == nil
	if err != nil && !errors.Is(err, lease.ErrNotFound) {
		return res, fmt.Errorf("read generation: %w", err)
	}
	res.Recorded = rec
	sum, err := describeStream(ctx, kin, time.Now, sub.Stream)
	if err != nil {
		return res, fmt.Errorf("stream %s: %w", name, err)
	}
	if stepFor(rec, res.Found, sub, sum.incarnation) != genBegin {
		return res, nil
	}
	res.Begins = true
	listing, err := shards.List(ctx, kin, sub.Stream)
	if err != nil {
		return res, fmt.Errorf("stream %s: %w", name, err)
	}
	ids := make([]string, len(listing))
	for i, s := range listing {
		ids[i] = s.ID
	}
	rows, err := store.GetMany(ctx, name, ids)
	if err != nil {
		return res, fmt.Errorf("stream %s: read leases: %w", name, err)
	}
	probes, err := skipProbes(sub, listing, rows, tipOf(sum.serverNow))
	if err != nil {
		return res, err
	}
	res.Skips = readSkips(ctx, kin, name, sum.arn, probes)
	return res, nil
}

// tipOf is the tip a generation begun at Kinesis's time serverNow pins
// (pinTip's time).
func tipOf(serverNow time.Time) time.Time {
	return shards.TipPinnedAt(serverNow)
}

// skips counts what the generation a pass is about to begin with begin's
// start would skip (see CheckStart); nothing when applied (it adopts rows
// that carry it already, and records no start).
func (c *Coordinator) skips(ctx context.Context, begin Subscription, listing []shards.Shard, rows map[string]lease.Lease, sum summary, applied bool) []Skip {
	if applied {
		return nil
	}
	probes, err := skipProbes(begin, listing, rows, tipOf(sum.serverNow))
	if err != nil || len(probes) == 0 {
		return nil
	}
	kin, _ := c.kinesis.(BacklogReader)
	name, _ := shards.StreamName(begin.Stream)
	return readSkips(ctx, kin, name, sum.arn, probes)
}

// warnSkips logs what a generation that began skipped.
func warnSkips(ctx context.Context, log *slog.Logger, sub Subscription, prev lease.Generation, found bool, skips []Skip) {
	now := time.Now()
	lines := make([]string, len(skips))
	for i, s := range skips {
		lines[i] = s.describe(now)
	}
	attrs := []any{"start", sub.Start, "shards", len(skips), "records", Skipped(skips), "skipped", lines}
	if found {
		attrs = append(attrs, "previous_generation", prev.ID, "previous_start", prev.Start, "previous_recorded_by", prev.RecordedBy)
	}
	log.WarnContext(ctx, "the new start skips records the stream's previous start has not delivered", attrs...)
}
