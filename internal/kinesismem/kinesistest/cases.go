package kinesistest

import (
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/shardloop/shardloop/pkg/shards"
)

const (
	shard0 = "shardId-000000000000"
	shard1 = "shardId-000000000001"
	shard2 = "shardId-000000000002"
	shard3 = "shardId-000000000003"
	shard4 = "shardId-000000000004"
)

var cases = []testCase{
	{name: "CreateStream_ListsUniformShardsAndDescribesTheStream", run: createListDescribe},
	{name: "CreateStream_RefusesAnExistingNameAndABadName", run: createRefusals},
	{name: "PutRecord_RoutesByMD5OfThePartitionKeyOrTheExplicitHashKey", run: routing},
	{name: "GetRecords_ReturnsAShardsRecordsInWriteOrderWithGrowingSequenceNumbers", run: putGetOrder},
	{name: "GetShardIterator_PlacesEachIteratorType", run: iteratorTypes},
	{name: "GetShardIterator_AtTimestampStartsAtTheFirstRecordArrivedAtOrAfterIt", run: atTimestamp},
	{name: "GetShardIterator_RefusesATimestampInTheFuture", run: futureTimestamp},
	{name: "GetShardIterator_RefusesATimestampInTheFutureOnAnEmptyShard", needs: QuirkFutureTimestamp, run: futureTimestampEmpty},
	{name: "GetRecords_HonoursLimit", run: getLimit},
	{name: "GetRecords_MillisBehindLatestIsZeroOnlyAtTheTip", run: millisBehind},
	{name: "SplitShard_ClosesTheParentAndReadingItEndsWithChildShards", run: splitLineage},
	{name: "SplitShard_EndingSequenceNumberBoundsTheParentsRecords", needs: QuirkEndingSequence, run: endingSequence},
	{name: "ListShards_AtTrimHorizonListsTheShardsOpenThen", needs: QuirkTrimHorizonFilter, run: trimHorizonFilter},
	{name: "SplitShard_RefusesAKeyOutsideTheShardAndAClosedShard", run: splitRefusals},
	{name: "SplitShard_RefusesAKeyAtTheShardsEdge", needs: QuirkSplitKey, run: splitEdgeKey},
	{name: "MergeShards_OpensOneChildWithBothParents", run: mergeLineage},
	{name: "MergeShards_RefusesShardsThatAreNotAnAdjacentPairInOrder", run: mergeRefusals},
	{name: "UpdateShardCount_ReshardsToUniformRanges", needs: QuirkUpdateShardCount, run: updateShardCount},
	{name: "ListShards_PagesWithNextTokenAndMaxResults", run: pagination},
	{name: "ListShards_RefusesMaxResultsOutOfRange", needs: QuirkMaxResults, run: maxResults},
	{name: "Calls_OnAMissingStreamFailWithResourceNotFound", run: missingStream},
	{name: "Calls_RefuseInvalidArguments", run: invalidArguments},
	{name: "GetShardIterator_RefusesAnotherShardsSequenceNumber", needs: QuirkForeignSequence, run: foreignSequence},
	{name: "GetShardIterator_RefusesASequenceNumberWithoutASequenceType", needs: QuirkSequenceWithoutSequenceType, run: sequenceWithoutType},
	{name: "GetRecords_RefusesAMalformedIterator", needs: QuirkMalformedIterator, run: malformedIterator},
	{name: "PutRecords_RefusesNoEntriesAndMoreThan500", needs: QuirkPutRecordsCount, run: putRecordsCount},
	{name: "PutRecord_CountsThePartitionKeyInTheRecordSize", needs: QuirkRecordSize, run: recordSize},
	{name: "DeleteStream_RemovesTheStreamAndFreesItsName", run: deleteStream},
	{name: "DeleteStream_AnIteratorOfTheDeletedStreamNeverReadsTheNewOne", run: iteratorOfDeletedStream},
	{name: "Answers_CarryTheServersTime", run: serverTime},
}

func createListDescribe(t *testing.T, k *kit) {
	name := k.create(t, 3)
	d := k.describe(t, name)
	if aws.ToString(d.StreamName) != name || !strings.HasPrefix(aws.ToString(d.StreamARN), "arn:aws:kinesis:") ||
		!strings.HasSuffix(aws.ToString(d.StreamARN), ":stream/"+name) {
		t.Errorf("name %s ARN %s, want %s and arn:aws:kinesis:…:stream/%s", aws.ToString(d.StreamName), aws.ToString(d.StreamARN), name, name)
	}
	if aws.ToInt32(d.OpenShardCount) != 3 || aws.ToInt32(d.RetentionPeriodHours) != 24 ||
		d.StreamModeDetails == nil || d.StreamModeDetails.StreamMode != types.StreamModeProvisioned ||
		d.EncryptionType != types.EncryptionTypeNone || d.StreamCreationTimestamp == nil {
		t.Errorf("summary %+v, want 3 open shards, 24 h, PROVISIONED, no encryption, a creation time", d)
	}
	byARN, err := k.API.DescribeStreamSummary(k.ctx, &kinesis.DescribeStreamSummaryInput{StreamARN: d.StreamARN})
	if err != nil || aws.ToString(byARN.StreamDescriptionSummary.StreamName) != name {
		t.Errorf("DescribeStreamSummary by ARN: %v", err)
	}

	ss := k.list(t, name, nil)
	want := [][2]string{
		{"0", "113427455640312821154458202477256070484"},
		{"113427455640312821154458202477256070485", "226854911280625642308916404954512140969"},
		{"226854911280625642308916404954512140970", "340282366920938463463374607431768211455"},
	}
	if len(ss) != 3 {
		t.Fatalf("ListShards: %v, want 3 shards", ids(ss))
	}
	for i, s := range ss {
		if id := fmt.Sprintf("shardId-%012d", i); aws.ToString(s.ShardId) != id {
			t.Errorf("shard %d is %s, want %s", i, aws.ToString(s.ShardId), id)
		}
		if r := s.HashKeyRange; *r.StartingHashKey != want[i][0] || *r.EndingHashKey != want[i][1] {
			t.Errorf("%s range %s..%s, want %s..%s", *s.ShardId, *r.StartingHashKey, *r.EndingHashKey, want[i][0], want[i][1])
		}
		if s.ParentShardId != nil || s.AdjacentParentShardId != nil || s.SequenceNumberRange.EndingSequenceNumber != nil {
			t.Errorf("%s has a parent or an end: %+v", *s.ShardId, s)
		}
		bigOf(t, aws.ToString(s.SequenceNumberRange.StartingSequenceNumber))
	}
	out, err := k.API.ListShards(k.ctx, &kinesis.ListShardsInput{StreamARN: d.StreamARN})
	if err != nil || len(out.Shards) != 3 {
		t.Errorf("ListShards by ARN: %v (%d shards)", err, len(out.Shards))
	}
}

func createRefusals(t *testing.T, k *kit) {
	name := k.create(t, 1)
	_, err := k.API.CreateStream(k.ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(1)})
	wantErr[*types.ResourceInUseException](t, "CreateStream of an existing name", err)
	_, err = k.API.CreateStream(k.ctx, &kinesis.CreateStreamInput{StreamName: aws.String("bad name!"), ShardCount: aws.Int32(1)})
	wantErr[*types.InvalidArgumentException](t, "CreateStream of a bad name", err)
}

func routing(t *testing.T, k *kit) {
	name := k.create(t, 4)
	ss := k.list(t, name, nil)
	for i := range 12 {
		key := fmt.Sprintf("key-%d", i)
		out := k.put(t, name, key, "x", nil)
		if want := shardOf(t, ss, hashOf(key)); aws.ToString(out.ShardId) != want {
			t.Errorf("key %s (hash %s) went to %s, want %s", key, hashOf(key), aws.ToString(out.ShardId), want)
		}
	}
	s1 := byID(ss, shard1)
	for key, want := range map[string]string{
		"0": shard0, *s1.HashKeyRange.StartingHashKey: shard1, *s1.HashKeyRange.EndingHashKey: shard1, maxHash.String(): shard3,
	} {
		out := k.put(t, name, "any", "x", aws.String(key))
		if aws.ToString(out.ShardId) != want {
			t.Errorf("ExplicitHashKey %s went to %s, want %s", key, aws.ToString(out.ShardId), want)
		}
	}
	var entries []types.PutRecordsRequestEntry
	for i := range 8 {
		entries = append(entries, types.PutRecordsRequestEntry{PartitionKey: aws.String(fmt.Sprintf("batch-%d", i)), Data: []byte("x")})
	}
	out, err := k.API.PutRecords(k.ctx, &kinesis.PutRecordsInput{StreamName: aws.String(name), Records: entries})
	if err != nil || aws.ToInt32(out.FailedRecordCount) != 0 || len(out.Records) != len(entries) {
		t.Fatalf("PutRecords: %v %+v", err, out)
	}
	for i, r := range out.Records {
		if want := shardOf(t, ss, hashOf(*entries[i].PartitionKey)); aws.ToString(r.ShardId) != want {
			t.Errorf("PutRecords entry %d went to %s, want %s", i, aws.ToString(r.ShardId), want)
		}
	}
}

func putGetOrder(t *testing.T, k *kit) {
	name := k.create(t, 2)
	var entries []types.PutRecordsRequestEntry
	for i := range 30 {
		entries = append(entries, types.PutRecordsRequestEntry{PartitionKey: aws.String("order"), Data: []byte(fmt.Sprintf("r%02d", i))})
	}
	out, err := k.API.PutRecords(k.ctx, &kinesis.PutRecordsInput{StreamName: aws.String(name), Records: entries})
	if err != nil || aws.ToInt32(out.FailedRecordCount) != 0 {
		t.Fatalf("PutRecords: %v", err)
	}
	seqs := []string{}
	shard := aws.ToString(out.Records[0].ShardId)
	for _, r := range out.Records {
		if aws.ToString(r.ShardId) != shard {
			t.Fatalf("one partition key went to %s and %s", shard, aws.ToString(r.ShardId))
		}
		seqs = append(seqs, aws.ToString(r.SequenceNumber))
	}
	for i := 30; i < 35; i++ {
		seqs = append(seqs, aws.ToString(k.put(t, name, "order", fmt.Sprintf("r%02d", i), nil).SequenceNumber))
	}
	recs, _ := k.drain(t, k.at(t, name, shard, types.ShardIteratorTypeTrimHorizon), 0)
	if len(recs) != 35 {
		t.Fatalf("read %d records, want 35", len(recs))
	}
	for i, r := range recs {
		if string(r.Data) != fmt.Sprintf("r%02d", i) || aws.ToString(r.PartitionKey) != "order" || aws.ToString(r.SequenceNumber) != seqs[i] {
			t.Errorf("record %d: %s key %s seq %s, want r%02d order %s", i, r.Data, aws.ToString(r.PartitionKey), aws.ToString(r.SequenceNumber), i, seqs[i])
		}
		if r.ApproximateArrivalTimestamp == nil {
			t.Errorf("record %d has no ApproximateArrivalTimestamp", i)
		}
		if i > 0 {
			if bigOf(t, seqs[i]).Cmp(bigOf(t, seqs[i-1])) <= 0 {
				t.Errorf("sequence %d (%s) not greater than %d (%s)", i, seqs[i], i-1, seqs[i-1])
			}
			if r.ApproximateArrivalTimestamp.Before(*recs[i-1].ApproximateArrivalTimestamp) {
				t.Errorf("record %d arrived before record %d", i, i-1)
			}
		}
	}
}

func iteratorTypes(t *testing.T, k *kit) {
	name := k.create(t, 1)
	var seqs []string
	for i := range 5 {
		seqs = append(seqs, *k.put(t, name, "k", fmt.Sprintf("r%d", i), nil).SequenceNumber)
	}
	check := func(what string, it *string, want ...string) *string {
		t.Helper()
		recs, last := k.drain(t, it, 0)
		if got := data(recs); !slices.Equal(got, append([]string{}, want...)) {
			t.Errorf("%s read %v, want %v", what, got, want)
		}
		return last.NextShardIterator
	}
	check("TRIM_HORIZON", k.at(t, name, shard0, types.ShardIteratorTypeTrimHorizon), "r0", "r1", "r2", "r3", "r4")
	check("AT_SEQUENCE_NUMBER r2", k.atSeq(t, name, shard0, types.ShardIteratorTypeAtSequenceNumber, seqs[2]), "r2", "r3", "r4")
	check("AFTER_SEQUENCE_NUMBER r2", k.atSeq(t, name, shard0, types.ShardIteratorTypeAfterSequenceNumber, seqs[2]), "r3", "r4")
	start := *k.list(t, name, nil)[0].SequenceNumberRange.StartingSequenceNumber
	check("AT_SEQUENCE_NUMBER of the shard's start", k.atSeq(t, name, shard0, types.ShardIteratorTypeAtSequenceNumber, start), "r0", "r1", "r2", "r3", "r4")
	afterLast := check("AFTER_SEQUENCE_NUMBER r4", k.atSeq(t, name, shard0, types.ShardIteratorTypeAfterSequenceNumber, seqs[4]))
	latest := k.at(t, name, shard0, types.ShardIteratorTypeLatest)
	latestNext := check("LATEST", latest)
	k.put(t, name, "k", "r5", nil)
	check("LATEST's iterator after a put", latest, "r5")
	check("LATEST's next iterator after a put", latestNext, "r5")
	check("the next iterator after r4, after a put", afterLast, "r5")
}

// arrivals puts n records to shard 0 of a one-shard stream, a few
// milliseconds apart, and returns them as read back.
func arrivals(t *testing.T, k *kit, name string, n int) []types.Record {
	for i := range n {
		k.put(t, name, "k", fmt.Sprintf("r%d", i), nil)
		time.Sleep(4 * time.Millisecond)
	}
	recs, _ := k.drain(t, k.at(t, name, shard0, types.ShardIteratorTypeTrimHorizon), 0)
	if len(recs) != n {
		t.Fatalf("read %d records, want %d", len(recs), n)
	}
	return recs
}

func atTimestamp(t *testing.T, k *kit) {
	name := k.create(t, 1)
	recs := arrivals(t, k, name, 4)
	from := func(ts time.Time) []string { // what AT_TIMESTAMP ts must read
		var want []string
		for _, r := range recs {
			if !r.ApproximateArrivalTimestamp.Before(ts.Truncate(time.Millisecond)) {
				want = append(want, string(r.Data))
			}
		}
		return want
	}
	time.Sleep(5 * time.Millisecond) // every probe below is in the past for the server
	last := *recs[len(recs)-1].ApproximateArrivalTimestamp
	probes := []time.Time{recs[0].ApproximateArrivalTimestamp.Add(-time.Hour), last.Add(time.Millisecond)}
	for _, r := range recs {
		a := *r.ApproximateArrivalTimestamp
		probes = append(probes, a, a.Add(-time.Millisecond), a.Add(500*time.Microsecond), a.Add(time.Millisecond))
	}
	for _, ts := range probes {
		got, _ := k.drain(t, k.atTime(t, name, shard0, ts), 0)
		if want := from(ts); !slices.Equal(data(got), append([]string{}, want...)) {
			t.Errorf("AT_TIMESTAMP %s read %v, want %v", ts.Format(time.RFC3339Nano), data(got), want)
		}
	}
	it := k.atTime(t, name, shard0, last.Add(time.Millisecond))
	k.put(t, name, "k", "later", nil)
	if got, _ := k.drain(t, it, 0); !slices.Equal(data(got), []string{"later"}) {
		t.Errorf("AT_TIMESTAMP after the last record, then a put, read %v, want [later]", data(got))
	}
}

func futureTimestamp(t *testing.T, k *kit) {
	name := k.create(t, 1)
	k.put(t, name, "k", "x", nil)
	_, err := k.API.GetShardIterator(k.ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: aws.String(shard0),
		ShardIteratorType: types.ShardIteratorTypeAtTimestamp, Timestamp: aws.Time(time.Now().Add(time.Hour))})
	wantErr[*types.InvalidArgumentException](t, "AT_TIMESTAMP an hour ahead", err)
}

func futureTimestampEmpty(t *testing.T, k *kit) {
	name := k.create(t, 1)
	_, err := k.API.GetShardIterator(k.ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: aws.String(shard0),
		ShardIteratorType: types.ShardIteratorTypeAtTimestamp, Timestamp: aws.Time(time.Now().Add(time.Hour))})
	wantErr[*types.InvalidArgumentException](t, "AT_TIMESTAMP an hour ahead on an empty shard", err)
}

func getLimit(t *testing.T, k *kit) {
	name := k.create(t, 1)
	for i := range 7 {
		k.put(t, name, "k", fmt.Sprintf("r%d", i), nil)
	}
	it := k.at(t, name, shard0, types.ShardIteratorTypeTrimHorizon)
	var sizes []int
	for range 3 {
		out := k.get(t, it, 3)
		sizes = append(sizes, len(out.Records))
		it = out.NextShardIterator
	}
	if !slices.Equal(sizes, []int{3, 3, 1}) {
		t.Errorf("Limit 3 read %v records, want [3 3 1]", sizes)
	}
	for _, limit := range []int32{0, 10001} {
		_, err := k.API.GetRecords(k.ctx, &kinesis.GetRecordsInput{ShardIterator: it, Limit: aws.Int32(limit)})
		wantErr[*types.InvalidArgumentException](t, fmt.Sprintf("Limit %d", limit), err)
	}
}

func millisBehind(t *testing.T, k *kit) {
	name := k.create(t, 1)
	arrivals(t, k, name, 3)
	out := k.get(t, k.at(t, name, shard0, types.ShardIteratorTypeTrimHorizon), 1)
	if aws.ToInt64(out.MillisBehindLatest) <= 0 {
		t.Errorf("MillisBehindLatest %d with 2 later records left, want > 0", aws.ToInt64(out.MillisBehindLatest))
	}
	out = k.get(t, out.NextShardIterator, 0)
	if len(out.Records) != 2 || out.MillisBehindLatest == nil || *out.MillisBehindLatest != 0 {
		t.Errorf("at the tip: %d records, MillisBehindLatest %v, want 2 and 0", len(out.Records), out.MillisBehindLatest)
	}
}

// split makes a one-shard stream with records r0 r1 r2, splits it in
// halves and returns the stream, the records' sequence numbers and the
// listing after the split.
func split(t *testing.T, k *kit) (string, []string, []types.Shard) {
	name := k.create(t, 1)
	var seqs []string
	for i, key := range []string{"1", maxHash.String(), "2"} {
		seqs = append(seqs, *k.put(t, name, "k", fmt.Sprintf("r%d", i), aws.String(key)).SequenceNumber)
	}
	if _, err := k.API.SplitShard(k.ctx, &kinesis.SplitShardInput{StreamName: aws.String(name), ShardToSplit: aws.String(shard0), NewStartingHashKey: aws.String(midHash.String())}); err != nil {
		t.Fatalf("SplitShard: %v", err)
	}
	k.waitActive(t, name)
	return name, seqs, k.list(t, name, nil)
}

func splitLineage(t *testing.T, k *kit) {
	name, seqs, ss := split(t, k)
	if got := ids(ss); !slices.Equal(got, []string{shard0, shard1, shard2}) {
		t.Fatalf("after the split: %v", got)
	}
	parent, low, high := ss[0], ss[1], ss[2]
	if parent.SequenceNumberRange.EndingSequenceNumber == nil {
		t.Errorf("the parent has no EndingSequenceNumber")
	}
	for _, c := range []types.Shard{low, high} {
		if aws.ToString(c.ParentShardId) != shard0 || c.AdjacentParentShardId != nil || c.SequenceNumberRange.EndingSequenceNumber != nil {
			t.Errorf("child %+v, want parent %s, open", c, shard0)
		}
		if bigOf(t, *c.SequenceNumberRange.StartingSequenceNumber).Cmp(bigOf(t, seqs[len(seqs)-1])) <= 0 {
			t.Errorf("child %s starts at %s, not after the parent's last record %s", *c.ShardId, *c.SequenceNumberRange.StartingSequenceNumber, seqs[2])
		}
	}
	lowEnd := new(big.Int).Sub(midHash, big.NewInt(1)).String()
	if *low.HashKeyRange.StartingHashKey != "0" || *low.HashKeyRange.EndingHashKey != lowEnd ||
		*high.HashKeyRange.StartingHashKey != midHash.String() || *high.HashKeyRange.EndingHashKey != maxHash.String() {
		t.Errorf("children ranges %+v %+v, want 0..%s and %s..%s", *low.HashKeyRange, *high.HashKeyRange, lowEnd, midHash, maxHash)
	}
	if out := k.put(t, name, "k", "after", aws.String("5")); aws.ToString(out.ShardId) != shard1 {
		t.Errorf("a put after the split went to %s, want %s", aws.ToString(out.ShardId), shard1)
	}
	if n := aws.ToInt32(k.describe(t, name).OpenShardCount); n != 2 {
		t.Errorf("OpenShardCount %d, want 2", n)
	}

	wantChildren := func(what string, out *kinesis.GetRecordsOutput) {
		t.Helper()
		if out.NextShardIterator != nil {
			t.Errorf("%s: NextShardIterator set at the end of a closed shard", what)
		}
		var got []string
		for _, c := range out.ChildShards {
			got = append(got, fmt.Sprintf("%s<%v>%s..%s", *c.ShardId, c.ParentShards, *c.HashKeyRange.StartingHashKey, *c.HashKeyRange.EndingHashKey))
		}
		want := []string{
			fmt.Sprintf("%s<[%s]>0..%s", shard1, shard0, lowEnd),
			fmt.Sprintf("%s<[%s]>%s..%s", shard2, shard0, midHash, maxHash),
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: ChildShards %v, want %v", what, got, want)
		}
	}
	it := k.at(t, name, shard0, types.ShardIteratorTypeTrimHorizon)
	first := k.get(t, it, 2)
	if !slices.Equal(data(first.Records), []string{"r0", "r1"}) || first.NextShardIterator == nil || first.ChildShards != nil {
		t.Errorf("first read of the parent: %v next %v children %v, want [r0 r1], a next iterator, no children", data(first.Records), first.NextShardIterator != nil, first.ChildShards)
	}
	if first.NextShardIterator != nil {
		last := k.get(t, first.NextShardIterator, 2)
		if !slices.Equal(data(last.Records), []string{"r2"}) {
			t.Errorf("last read of the parent: %v, want [r2]", data(last.Records))
		}
		wantChildren("the read with the parent's last record", last)
	}
	latest := k.get(t, k.at(t, name, shard0, types.ShardIteratorTypeLatest), 0)
	if len(latest.Records) != 0 {
		t.Errorf("LATEST on the closed parent read %v", data(latest.Records))
	}
	wantChildren("LATEST on the closed parent", latest)

	for _, f := range []struct {
		filter types.ShardFilter
		want   []string
	}{
		{types.ShardFilter{Type: types.ShardFilterTypeAtLatest}, []string{shard1, shard2}},
		{types.ShardFilter{Type: types.ShardFilterTypeAfterShardId, ShardId: aws.String(shard1)}, []string{shard2}},
		{types.ShardFilter{Type: types.ShardFilterTypeFromTrimHorizon}, []string{shard0, shard1, shard2}},
	} {
		if got := ids(k.list(t, name, &f.filter)); !slices.Equal(got, f.want) {
			t.Errorf("ShardFilter %s: %v, want %v", f.filter.Type, got, f.want)
		}
	}
	// At a time after the split, only the children are open. kinesis-local
	// stamps the parent's close up to a second after the split is done, so
	// the time is taken again until then.
	for _, typ := range []types.ShardFilterType{types.ShardFilterTypeAtTimestamp, types.ShardFilterTypeFromTimestamp} {
		var got []string
		for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			got = ids(k.list(t, name, &types.ShardFilter{Type: typ, Timestamp: aws.Time(time.Now())}))
			if slices.Equal(got, []string{shard1, shard2}) || time.Now().After(deadline) {
				break
			}
		}
		if !slices.Equal(got, []string{shard1, shard2}) {
			t.Errorf("ShardFilter %s now: %v, want [%s %s]", typ, got, shard1, shard2)
		}
	}
}

func endingSequence(t *testing.T, k *kit) {
	name, seqs, ss := split(t, k)
	end := aws.ToString(ss[0].SequenceNumberRange.EndingSequenceNumber)
	if bigOf(t, end).Cmp(bigOf(t, seqs[2])) < 0 {
		t.Errorf("EndingSequenceNumber %s is before the parent's last record %s", end, seqs[2])
	}
	for _, c := range ss[1:] {
		if bigOf(t, end).Cmp(bigOf(t, *c.SequenceNumberRange.StartingSequenceNumber)) >= 0 {
			t.Errorf("EndingSequenceNumber %s is not before child %s's start %s", end, *c.ShardId, *c.SequenceNumberRange.StartingSequenceNumber)
		}
	}
	for _, typ := range []types.ShardIteratorType{types.ShardIteratorTypeAtSequenceNumber, types.ShardIteratorTypeAfterSequenceNumber} {
		out := k.get(t, k.atSeq(t, name, shard0, typ, end), 0)
		if len(out.Records) != 0 || out.NextShardIterator != nil || len(out.ChildShards) != 2 {
			t.Errorf("%s EndingSequenceNumber: %v next %v children %d, want the shard's end", typ, data(out.Records), out.NextShardIterator != nil, len(out.ChildShards))
		}
	}
}

func trimHorizonFilter(t *testing.T, k *kit) {
	name, _, _ := split(t, k)
	if got := ids(k.list(t, name, &types.ShardFilter{Type: types.ShardFilterTypeAtTrimHorizon})); !slices.Equal(got, []string{shard0}) {
		t.Errorf("AT_TRIM_HORIZON: %v, want [%s]", got, shard0)
	}
}

func splitRefusals(t *testing.T, k *kit) {
	name, _, _ := split(t, k)
	for _, key := range []string{two128.String(), "-5"} {
		_, err := k.API.SplitShard(k.ctx, &kinesis.SplitShardInput{StreamName: aws.String(name), ShardToSplit: aws.String(shard1), NewStartingHashKey: aws.String(key)})
		wantErr[*types.InvalidArgumentException](t, "SplitShard at "+key, err)
	}
	_, err := k.API.SplitShard(k.ctx, &kinesis.SplitShardInput{StreamName: aws.String(name), ShardToSplit: aws.String(shard0), NewStartingHashKey: aws.String("1000")})
	wantErr[*types.ResourceInUseException](t, "SplitShard of a closed shard", err)
	_, err = k.API.SplitShard(k.ctx, &kinesis.SplitShardInput{StreamName: aws.String(name), ShardToSplit: aws.String("shardId-000000000099"), NewStartingHashKey: aws.String("1000")})
	wantErr[*types.ResourceNotFoundException](t, "SplitShard of a missing shard", err)
}

func splitEdgeKey(t *testing.T, k *kit) {
	name := k.create(t, 1)
	for _, key := range []string{"0", "1", maxHash.String(), "abc"} {
		_, err := k.API.SplitShard(k.ctx, &kinesis.SplitShardInput{StreamName: aws.String(name), ShardToSplit: aws.String(shard0), NewStartingHashKey: aws.String(key)})
		wantErr[*types.InvalidArgumentException](t, "SplitShard at "+key, err)
	}
}

func mergeLineage(t *testing.T, k *kit) {
	name := k.create(t, 2)
	k.put(t, name, "k", "low", aws.String("0"))
	k.put(t, name, "k", "high", aws.String(maxHash.String()))
	if _, err := k.API.MergeShards(k.ctx, &kinesis.MergeShardsInput{StreamName: aws.String(name), ShardToMerge: aws.String(shard0), AdjacentShardToMerge: aws.String(shard1)}); err != nil {
		t.Fatalf("MergeShards: %v", err)
	}
	k.waitActive(t, name)
	ss := k.list(t, name, nil)
	if got := ids(ss); !slices.Equal(got, []string{shard0, shard1, shard2}) {
		t.Fatalf("after the merge: %v", got)
	}
	child := ss[2]
	if aws.ToString(child.ParentShardId) != shard0 || aws.ToString(child.AdjacentParentShardId) != shard1 ||
		*child.HashKeyRange.StartingHashKey != "0" || *child.HashKeyRange.EndingHashKey != maxHash.String() {
		t.Errorf("child %+v, want parents %s and %s over the whole range", child, shard0, shard1)
	}
	for i, p := range []string{shard0, shard1} {
		if ss[i].SequenceNumberRange.EndingSequenceNumber == nil {
			t.Errorf("parent %s has no EndingSequenceNumber", p)
		}
		recs, last := k.drain(t, k.at(t, name, p, types.ShardIteratorTypeTrimHorizon), 0)
		if want := []string{"low", "high"}[i]; !slices.Equal(data(recs), []string{want}) {
			t.Errorf("parent %s read %v, want [%s]", p, data(recs), want)
		}
		if last.NextShardIterator != nil || len(last.ChildShards) != 1 || aws.ToString(last.ChildShards[0].ShardId) != shard2 ||
			!slices.Equal(last.ChildShards[0].ParentShards, []string{shard0, shard1}) {
			t.Errorf("end of parent %s: next %v children %+v, want %s with parents [%s %s]", p, last.NextShardIterator != nil, last.ChildShards, shard2, shard0, shard1)
		}
	}
	if out := k.put(t, name, "k", "after", nil); aws.ToString(out.ShardId) != shard2 {
		t.Errorf("a put after the merge went to %s, want %s", aws.ToString(out.ShardId), shard2)
	}
}

func mergeRefusals(t *testing.T, k *kit) {
	name := k.create(t, 3)
	for _, pair := range [][2]string{{shard1, shard0}, {shard0, shard2}} {
		_, err := k.API.MergeShards(k.ctx, &kinesis.MergeShardsInput{StreamName: aws.String(name), ShardToMerge: aws.String(pair[0]), AdjacentShardToMerge: aws.String(pair[1])})
		wantErr[*types.InvalidArgumentException](t, fmt.Sprintf("MergeShards %s with %s", pair[0], pair[1]), err)
	}
	_, err := k.API.MergeShards(k.ctx, &kinesis.MergeShardsInput{StreamName: aws.String(name), ShardToMerge: aws.String(shard2), AdjacentShardToMerge: aws.String("shardId-000000000099")})
	wantErr[*types.ResourceNotFoundException](t, "MergeShards with a missing shard", err)
	if n := aws.ToInt32(k.describe(t, name).OpenShardCount); n != 3 {
		t.Errorf("OpenShardCount %d after refused merges, want 3", n)
	}
}

func updateShardCount(t *testing.T, k *kit) {
	name := k.create(t, 2)
	if _, err := k.API.UpdateShardCount(k.ctx, &kinesis.UpdateShardCountInput{StreamName: aws.String(name), TargetShardCount: aws.Int32(3), ScalingType: types.ScalingTypeUniformScaling}); err != nil {
		t.Fatalf("UpdateShardCount: %v", err)
	}
	k.waitActive(t, name)
	all := k.list(t, name, nil)
	listed := map[string]bool{}
	for _, s := range all {
		listed[*s.ShardId] = true
	}
	var open []types.Shard
	for _, s := range all {
		if s.SequenceNumberRange.EndingSequenceNumber == nil {
			open = append(open, s)
		}
		for _, p := range []*string{s.ParentShardId, s.AdjacentParentShardId} {
			if p != nil && !listed[*p] {
				t.Errorf("%s has parent %s, which is not listed", *s.ShardId, *p)
			}
		}
	}
	slices.SortFunc(open, func(a, b types.Shard) int {
		return bigOf(t, *a.HashKeyRange.StartingHashKey).Cmp(bigOf(t, *b.HashKeyRange.StartingHashKey))
	})
	want := []string{"0", "113427455640312821154458202477256070485", "226854911280625642308916404954512140970"}
	var got []string
	for _, s := range open {
		got = append(got, *s.HashKeyRange.StartingHashKey)
	}
	if !slices.Equal(got, want) {
		t.Errorf("open shards start at %v, want %v", got, want)
	}
}

func pagination(t *testing.T, k *kit) {
	name := k.create(t, 5)
	var pages [][]string
	in := &kinesis.ListShardsInput{StreamName: aws.String(name), MaxResults: aws.Int32(2)}
	for range 10 {
		out, err := k.API.ListShards(k.ctx, in)
		if err != nil {
			t.Fatalf("ListShards page %d: %v", len(pages)+1, err)
		}
		pages = append(pages, ids(out.Shards))
		if out.NextToken == nil {
			break
		}
		if len(pages) == 1 {
			_, err := k.API.ListShards(k.ctx, &kinesis.ListShardsInput{StreamName: aws.String(name), NextToken: out.NextToken})
			wantErr[*types.InvalidArgumentException](t, "ListShards with NextToken and StreamName", err)
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken, MaxResults: aws.Int32(2)}
	}
	if want := [][]string{{shard0, shard1}, {shard2, shard3}, {shard4}}; fmt.Sprint(pages) != fmt.Sprint(want) {
		t.Errorf("pages %v, want %v", pages, want)
	}
	out, err := k.API.ListShards(k.ctx, &kinesis.ListShardsInput{StreamName: aws.String(name), ExclusiveStartShardId: aws.String(shard2)})
	if err != nil || !slices.Equal(ids(out.Shards), []string{shard3, shard4}) {
		t.Errorf("ExclusiveStartShardId %s: %v %v", shard2, err, ids(out.Shards))
	}
	_, err = k.API.ListShards(k.ctx, &kinesis.ListShardsInput{NextToken: aws.String("not-a-token")})
	wantErr[*types.InvalidArgumentException](t, "ListShards with a made-up NextToken", err)
}

func maxResults(t *testing.T, k *kit) {
	name := k.create(t, 2)
	for _, n := range []int32{0, 10001} {
		_, err := k.API.ListShards(k.ctx, &kinesis.ListShardsInput{StreamName: aws.String(name), MaxResults: aws.Int32(n)})
		wantErr[*types.InvalidArgumentException](t, fmt.Sprintf("MaxResults %d", n), err)
	}
	out, err := k.API.ListShards(k.ctx, &kinesis.ListShardsInput{StreamName: aws.String(name), MaxResults: aws.Int32(10000)})
	if err != nil || len(out.Shards) != 2 || out.NextToken != nil {
		t.Errorf("MaxResults 10000: %v", err)
	}
}

func missingStream(t *testing.T, k *kit) {
	name := aws.String(k.Name(t))
	calls := map[string]func() error{
		"DescribeStreamSummary": func() error {
			_, err := k.API.DescribeStreamSummary(k.ctx, &kinesis.DescribeStreamSummaryInput{StreamName: name})
			return err
		},
		"ListShards": func() error {
			_, err := k.API.ListShards(k.ctx, &kinesis.ListShardsInput{StreamName: name})
			return err
		},
		"GetShardIterator": func() error {
			_, err := k.API.GetShardIterator(k.ctx, &kinesis.GetShardIteratorInput{StreamName: name, ShardId: aws.String(shard0), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
			return err
		},
		"PutRecord": func() error {
			_, err := k.API.PutRecord(k.ctx, &kinesis.PutRecordInput{StreamName: name, PartitionKey: aws.String("k"), Data: []byte("x")})
			return err
		},
		"PutRecords": func() error {
			_, err := k.API.PutRecords(k.ctx, &kinesis.PutRecordsInput{StreamName: name, Records: []types.PutRecordsRequestEntry{{PartitionKey: aws.String("k"), Data: []byte("x")}}})
			return err
		},
		"SplitShard": func() error {
			_, err := k.API.SplitShard(k.ctx, &kinesis.SplitShardInput{StreamName: name, ShardToSplit: aws.String(shard0), NewStartingHashKey: aws.String("1000")})
			return err
		},
		"MergeShards": func() error {
			_, err := k.API.MergeShards(k.ctx, &kinesis.MergeShardsInput{StreamName: name, ShardToMerge: aws.String(shard0), AdjacentShardToMerge: aws.String(shard1)})
			return err
		},
		"DeleteStream": func() error {
			_, err := k.API.DeleteStream(k.ctx, &kinesis.DeleteStreamInput{StreamName: name})
			return err
		},
	}
	for op, call := range calls {
		wantErr[*types.ResourceNotFoundException](t, op+" on a missing stream", call())
	}
	existing := k.create(t, 1)
	_, err := k.API.GetShardIterator(k.ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(existing), ShardId: aws.String("shardId-000000000099"), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
	wantErr[*types.ResourceNotFoundException](t, "GetShardIterator on a missing shard", err)
}

func invalidArguments(t *testing.T, k *kit) {
	name := aws.String(k.create(t, 1))
	putErr := func(key string, data []byte, explicit *string) error {
		_, err := k.API.PutRecord(k.ctx, &kinesis.PutRecordInput{StreamName: name, PartitionKey: aws.String(key), Data: data, ExplicitHashKey: explicit})
		return err
	}
	wantErr[*types.InvalidArgumentException](t, "an empty partition key", putErr("", []byte("x"), nil))
	wantErr[*types.InvalidArgumentException](t, "a partition key of 257 characters", putErr(strings.Repeat("é", 257), []byte("x"), nil))
	wantErr[*types.InvalidArgumentException](t, "ExplicitHashKey 2^128", putErr("k", []byte("x"), aws.String(two128.String())))
	wantErr[*types.InvalidArgumentException](t, "data of 1 MiB + 1", putErr("k", make([]byte, 1<<20+1), nil))
	if err := putErr(strings.Repeat("é", 256), []byte("x"), nil); err != nil {
		t.Errorf("a partition key of 256 characters: %v", err)
	}

	iterErr := func(in kinesis.GetShardIteratorInput) error {
		in.StreamName, in.ShardId = name, aws.String(shard0)
		_, err := k.API.GetShardIterator(k.ctx, &in)
		return err
	}
	wantErr[*types.InvalidArgumentException](t, "a malformed sequence number",
		iterErr(kinesis.GetShardIteratorInput{ShardIteratorType: types.ShardIteratorTypeAtSequenceNumber, StartingSequenceNumber: aws.String("12x")}))
	wantErr[*types.InvalidArgumentException](t, "AT_SEQUENCE_NUMBER without a sequence number",
		iterErr(kinesis.GetShardIteratorInput{ShardIteratorType: types.ShardIteratorTypeAtSequenceNumber}))
	wantErr[*types.InvalidArgumentException](t, "AFTER_SEQUENCE_NUMBER without a sequence number",
		iterErr(kinesis.GetShardIteratorInput{ShardIteratorType: types.ShardIteratorTypeAfterSequenceNumber}))
	wantErr[*types.InvalidArgumentException](t, "AT_TIMESTAMP without a timestamp",
		iterErr(kinesis.GetShardIteratorInput{ShardIteratorType: types.ShardIteratorTypeAtTimestamp}))

	_, err := k.API.ListShards(k.ctx, &kinesis.ListShardsInput{})
	wantErr[*types.InvalidArgumentException](t, "ListShards with no stream", err)
}

func foreignSequence(t *testing.T, k *kit) {
	name := k.create(t, 2)
	seq := *k.put(t, name, "k", "x", aws.String("0")).SequenceNumber // on shard 0
	for _, typ := range []types.ShardIteratorType{types.ShardIteratorTypeAtSequenceNumber, types.ShardIteratorTypeAfterSequenceNumber} {
		_, err := k.API.GetShardIterator(k.ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: aws.String(shard1), ShardIteratorType: typ, StartingSequenceNumber: aws.String(seq)})
		wantErr[*types.InvalidArgumentException](t, string(typ)+" with shard 0's sequence number on shard 1", err)
	}
}

func sequenceWithoutType(t *testing.T, k *kit) {
	name := k.create(t, 1)
	seq := *k.put(t, name, "k", "x", nil).SequenceNumber
	for _, typ := range []types.ShardIteratorType{types.ShardIteratorTypeTrimHorizon, types.ShardIteratorTypeLatest} {
		_, err := k.API.GetShardIterator(k.ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: aws.String(shard0), ShardIteratorType: typ, StartingSequenceNumber: aws.String(seq)})
		wantErr[*types.InvalidArgumentException](t, string(typ)+" with a StartingSequenceNumber", err)
	}
}

func malformedIterator(t *testing.T, k *kit) {
	for _, it := range []string{"AAAA", "not an iterator"} {
		_, err := k.API.GetRecords(k.ctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(it)})
		wantErr[*types.InvalidArgumentException](t, "GetRecords with iterator "+it, err)
	}
}

func putRecordsCount(t *testing.T, k *kit) {
	name := aws.String(k.create(t, 1))
	for _, n := range []int{0, 501} {
		entries := make([]types.PutRecordsRequestEntry, n)
		for i := range entries {
			entries[i] = types.PutRecordsRequestEntry{PartitionKey: aws.String("k"), Data: []byte("x")}
		}
		_, err := k.API.PutRecords(k.ctx, &kinesis.PutRecordsInput{StreamName: name, Records: entries})
		wantErr[*types.InvalidArgumentException](t, fmt.Sprintf("PutRecords of %d entries", n), err)
	}
}

func recordSize(t *testing.T, k *kit) {
	name := aws.String(k.create(t, 1))
	_, err := k.API.PutRecord(k.ctx, &kinesis.PutRecordInput{StreamName: name, PartitionKey: aws.String("k"), Data: make([]byte, 1<<20)})
	wantErr[*types.InvalidArgumentException](t, "1 MiB of data with a partition key", err)
	if _, err := k.API.PutRecord(k.ctx, &kinesis.PutRecordInput{StreamName: name, PartitionKey: aws.String("k"), Data: make([]byte, 1<<20-1)}); err != nil {
		t.Errorf("1 MiB - 1 of data with a 1-byte partition key: %v", err)
	}
}

func deleteStream(t *testing.T, k *kit) {
	name := k.create(t, 1)
	k.put(t, name, "k", "old", nil)
	if _, err := k.API.DeleteStream(k.ctx, &kinesis.DeleteStreamInput{StreamName: aws.String(name)}); err != nil {
		t.Fatalf("DeleteStream: %v", err)
	}
	deadline := time.Now().Add(k.Timeout)
	for {
		_, err := k.API.DescribeStreamSummary(k.ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
		if err != nil {
			wantErr[*types.ResourceNotFoundException](t, "DescribeStreamSummary after DeleteStream", err)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream %s still there %s after DeleteStream", name, k.Timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := k.API.CreateStream(k.ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatalf("CreateStream again: %v", err)
	}
	k.waitActive(t, name)
	if recs, _ := k.drain(t, k.at(t, name, shard0, types.ShardIteratorTypeTrimHorizon), 0); len(recs) != 0 {
		t.Errorf("the new stream holds %v", data(recs))
	}
}

// iteratorOfDeletedStream: a reader holding an iterator when its stream is
// deleted and created again under the same name must not read the new
// stream's records with it (they belong to another incarnation's shard of
// the same id): the read fails.
func iteratorOfDeletedStream(t *testing.T, k *kit) {
	name := k.create(t, 1)
	k.put(t, name, "k", "old", nil)
	old := k.at(t, name, shard0, types.ShardIteratorTypeLatest)
	if _, err := k.API.DeleteStream(k.ctx, &kinesis.DeleteStreamInput{StreamName: aws.String(name)}); err != nil {
		t.Fatalf("DeleteStream: %v", err)
	}
	deadline := time.Now().Add(k.Timeout)
	for {
		_, err := k.API.DescribeStreamSummary(k.ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream %s still there %s after DeleteStream", name, k.Timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := k.API.CreateStream(k.ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatalf("CreateStream again: %v", err)
	}
	k.waitActive(t, name)
	k.put(t, name, "k", "new", nil)
	out, err := k.API.GetRecords(k.ctx, &kinesis.GetRecordsInput{ShardIterator: old})
	t.Logf("GetRecords with the deleted stream's iterator: %d records, err %T %v", len(recordsOf(out)), err, err)
	if err == nil && len(out.Records) > 0 {
		t.Errorf("the deleted stream's iterator read %v of the stream created again", data(out.Records))
	}
}

func recordsOf(out *kinesis.GetRecordsOutput) []types.Record {
	if out == nil {
		return nil
	}
	return out.Records
}

func serverTime(t *testing.T, k *kit) {
	name := k.create(t, 1)
	put := k.put(t, name, "k", "x", nil)
	it, err := k.API.GetShardIterator(k.ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: aws.String(shard0), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	get := k.get(t, it.ShardIterator, 0)
	list, err := k.API.ListShards(k.ctx, &kinesis.ListShardsInput{StreamName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	desc, err := k.API.DescribeStreamSummary(k.ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	for what, md := range map[string]middleware.Metadata{"PutRecord": put.ResultMetadata, "GetShardIterator": it.ResultMetadata,
		"GetRecords": get.ResultMetadata, "ListShards": list.ResultMetadata, "DescribeStreamSummary": desc.ResultMetadata} {
		if ts, ok := shards.ServerTime(md); !ok || time.Since(ts).Abs() > time.Minute {
			t.Errorf("%s: server time %v (known %v), want about now", what, ts, ok)
		}
	}
}
