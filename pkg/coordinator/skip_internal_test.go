package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/reader"
	"github.com/shardloop/shardloop/pkg/shards"
)

func TestSkipProbes_WhichShardsANewStartWouldMovePastRecordsAndFromWhere(t *testing.T) {
	tip := time.UnixMilli(1_800_000_000_000)
	listing := []shards.Shard{{ID: "a"}, {ID: "b"}, {ID: "c"}, {ID: "d"}, {ID: "e"}}
	rows := map[string]lease.Lease{
		"a": {ShardID: "a", Checkpoint: "100", Start: "horizon", StartApplied: true},
		"b": {ShardID: "b", Start: "horizon"},                 // the start not applied yet
		"c": {ShardID: "c", Checkpoint: lease.ShardEnd},       // finished
		"d": {ShardID: "d"},                                   // no checkpoint, no start: opens at the tip
		"e": {ShardID: "e", Start: "timestamp:1799999999000"}, // a pinned tip not applied yet
	}
	for _, c := range []struct {
		start string
		want  []string // shard:from
	}{
		{"", nil},
		{"horizon", nil},
		{"latest", []string{"a:AFTER_SEQUENCE_NUMBER 100", "b:TRIM_HORIZON", "e:AT_TIMESTAMP 2027-01-15T07:59:59Z"}},
		{"timestamp:1800000000000", []string{"a:AFTER_SEQUENCE_NUMBER 100", "b:TRIM_HORIZON", "e:AT_TIMESTAMP 2027-01-15T07:59:59Z"}},
		{"sequence:a:200", []string{"a:AFTER_SEQUENCE_NUMBER 100"}},
		{"sequence:c:200", nil},
	} {
		ps, err := skipProbes(Subscription{Stream: "s", Start: c.start}, listing, rows, tip)
		if err != nil {
			t.Fatalf("%q: %v", c.start, err)
		}
		var got []string
		for _, p := range ps {
			got = append(got, p.shard+":"+p.from.String())
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("start %q: probes %v, want %v", c.start, got, c.want)
		}
	}
}

// backlog is a shard's records after where its reader opens, for readSkips.
type backlog struct {
	recs   map[string][]types.Record // by shard
	behind int64
	err    error
}

func (b *backlog) GetShardIterator(_ context.Context, in *kinesis.GetShardIteratorInput, _ ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	if b.err != nil {
		return nil, b.err
	}
	return &kinesis.GetShardIteratorOutput{ShardIterator: in.ShardId}, nil
}

func (b *backlog) GetRecords(_ context.Context, in *kinesis.GetRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	recs := b.recs[aws.ToString(in.ShardIterator)]
	n := min(len(recs), int(aws.ToInt32(in.Limit)))
	behind := b.behind
	if n == len(recs) {
		behind = 0
	}
	return &kinesis.GetRecordsOutput{Records: recs[:n], NextShardIterator: aws.String("next"), MillisBehindLatest: aws.Int64(behind)}, nil
}

func records(from time.Time, n int) []types.Record {
	var out []types.Record
	for i := range n {
		at := from.Add(time.Duration(i) * time.Second)
		out = append(out, types.Record{SequenceNumber: aws.String(fmt.Sprintf("%05d", i)), ApproximateArrivalTimestamp: &at})
	}
	return out
}

func TestReadSkips_CountsTheRecordsBeforeTheNewStart(t *testing.T) {
	t0 := time.UnixMilli(1_800_000_000_000)
	after := func(shard string) skipProbe {
		return skipProbe{shard: shard, from: mustOpen(t, lease.Lease{ShardID: shard, Checkpoint: "1"})}
	}
	kin := &backlog{recs: map[string][]types.Record{
		"few":  records(t0, 40),              // all before the tip
		"half": records(t0, 40),              // 10 before the timestamp
		"many": records(t0, SkipReadLimit+5), // more than one read counts
		"none": nil,
	}, behind: 60_000}
	probes := []skipProbe{after("few"), after("half"), after("many"), after("none")}
	probes[0].until.at = t0.Add(time.Hour)
	probes[1].until.at = t0.Add(10 * time.Second)
	probes[2].until.at = t0.Add(100 * time.Hour)
	probes[3].until.at = t0.Add(time.Hour)
	skips := readSkips(t.Context(), kin, "s", "", probes)
	got := map[string]Skip{}
	for _, s := range skips {
		got[s.ShardID] = s
	}
	if len(skips) != 3 {
		t.Fatalf("skips %+v, want few, half and many", skips)
	}
	if s := got["few"]; s.Records != 40 || s.More || !s.Oldest.Equal(t0) {
		t.Errorf("few: %+v, want 40 records, the oldest at t0", s)
	}
	if s := got["half"]; s.Records != 10 || s.More {
		t.Errorf("half: %+v, want the 10 before the timestamp", s)
	}
	if s := got["many"]; s.Records != SkipReadLimit || !s.More || s.Behind != time.Minute {
		t.Errorf("many: %+v, want more than %d, a minute behind", s, SkipReadLimit)
	}
	now := t0.Add(2 * time.Minute)
	if d := got["many"].describe(now); !strings.Contains(d, "more than 10,000 records (the oldest arrived 2m0s ago; 1m0s behind the tip after them)") {
		t.Errorf("describe = %q", d)
	}

	// A read that fails: the lag the reader recorded, when there is one.
	failing := &backlog{err: errors.New("boom")}
	p := after("lagging")
	p.row = lease.Lease{ShardID: "lagging", MillisBehind: 240_000, LagAt: t0}
	q := after("quiet")
	skips = readSkips(t.Context(), failing, "s", "", []skipProbe{p, q})
	if len(skips) != 1 || skips[0].ShardID != "lagging" || skips[0].Err == nil || skips[0].Behind != 4*time.Minute {
		t.Fatalf("skips %+v, want the lagging shard with its recorded lag", skips)
	}
	if d := skips[0].describe(now); !strings.Contains(d, "4m0s behind at its last checkpoint, 2m0s ago") || Skipped(skips) != 1 {
		t.Errorf("describe = %q, skipped %d", d, Skipped(skips))
	}
}

func mustOpen(t *testing.T, row lease.Lease) reader.Opening {
	t.Helper()
	o, err := reader.Open(row)
	if err != nil {
		t.Fatal(err)
	}
	return o
}
