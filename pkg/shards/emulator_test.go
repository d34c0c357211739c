package shards

import (
	"context"
	"errors"
	"maps"
	"math/big"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/internal/testaws"
	"github.com/shardloop/shardloop/pkg/lease"
)

func fastCreate(o *CreateOptions) { o.Timeout, o.PollInterval = 20*time.Second, 20*time.Millisecond }

// newStream creates a provisioned stream on kinesis-local and waits for it.
func newStream(t *testing.T, k *kinesis.Client, shards int) string {
	t.Helper()
	name := testaws.Name(t)
	created, err := CreateIfMissing(t.Context(), k, name, shards, fastCreate)
	if err != nil || !created {
		t.Fatalf("CreateIfMissing(%s, %d) = %v, %v; want true, nil", name, shards, created, err)
	}
	return name
}

// waitSettled waits for a split or merge to settle.
func waitSettled(t *testing.T, k *kinesis.Client, name string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := k.DescribeStreamSummary(t.Context(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
		if err != nil {
			t.Fatalf("describe %s: %v", name, err)
		}
		if s := out.StreamDescriptionSummary.StreamStatus; s == types.StreamStatusActive {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("stream %s still %s", name, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func byID(t *testing.T, ss []Shard) map[string]Shard {
	t.Helper()
	m := map[string]Shard{}
	for _, s := range ss {
		if _, dup := m[s.ID]; dup {
			t.Fatalf("shard %s listed twice", s.ID)
		}
		m[s.ID] = s
	}
	return m
}

func mid(t *testing.T, s Shard) string {
	t.Helper()
	lo, ok1 := new(big.Int).SetString(s.HashKeyStart, 10)
	hi, ok2 := new(big.Int).SetString(s.HashKeyEnd, 10)
	if !ok1 || !ok2 {
		t.Fatalf("shard %s: hash keys %q..%q are not decimal", s.ID, s.HashKeyStart, s.HashKeyEnd)
	}
	return new(big.Int).Rsh(new(big.Int).Add(new(big.Int).Add(lo, hi), big.NewInt(1)), 1).String()
}

// rowsOf reads the stream's lease rows keyed by shard id, as the
// coordinator does.
func rowsOf(t *testing.T, store lease.Store, stream string) map[string]lease.Lease {
	t.Helper()
	ls, err := store.List(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]lease.Lease{}
	for _, l := range ls {
		m[l.ShardID] = l
	}
	return m
}

// readToEnd takes a shard's lease, marks it SHARD_END and releases it, as a
// reader does when it reaches the end of a closed shard.
func readToEnd(t *testing.T, store lease.Store, stream, shard string) {
	t.Helper()
	ctx := t.Context()
	if _, err := store.Take(ctx, stream, shard, "reader-"+shard); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Checkpoint(ctx, stream, shard, "reader-"+shard, lease.ShardEnd); err != nil {
		t.Fatal(err)
	}
	if err := store.Release(ctx, stream, shard, "reader-"+shard, lease.Handover{}); err != nil {
		t.Fatal(err)
	}
}

const (
	sh0 = "shardId-000000000000"
	sh1 = "shardId-000000000001"
	sh2 = "shardId-000000000002"
	sh3 = "shardId-000000000003"
	sh4 = "shardId-000000000004"
)

// Two shards; shard 0 splits into 2 and 3; then 3 merges with its neighbour
// 1 into 4. Children open only once every parent is SHARD_END.
func TestSplitAndMerge_ChildrenWaitForEveryParentOnRealListing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	k := testaws.Kinesis(t)
	name := newStream(t, k, 2)

	before, err := List(ctx, k, name)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(before); !slices.Equal(got, []string{sh0, sh1}) {
		t.Fatalf("listing after create = %v", got)
	}
	if _, err := k.SplitShard(ctx, &kinesis.SplitShardInput{
		StreamName: aws.String(name), ShardToSplit: aws.String(sh0), NewStartingHashKey: aws.String(mid(t, before[0])),
	}); err != nil {
		t.Fatalf("split: %v", err)
	}
	waitSettled(t, k, name)
	if _, err := k.MergeShards(ctx, &kinesis.MergeShardsInput{
		StreamName: aws.String(name), ShardToMerge: aws.String(sh3), AdjacentShardToMerge: aws.String(sh1),
	}); err != nil {
		t.Fatalf("merge: %v", err)
	}
	waitSettled(t, k, name)

	listed, err := List(ctx, k, name)
	if err != nil {
		t.Fatal(err)
	}
	got := byID(t, listed)
	want := map[string]struct {
		parents []string
		closed  bool
	}{
		sh0: {nil, true},
		sh1: {nil, true},
		sh2: {[]string{sh0}, false},
		sh3: {[]string{sh0}, true},
		sh4: {[]string{sh3, sh1}, false},
	}
	if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))) {
		t.Fatalf("listed %v, want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	for id, w := range want {
		s := got[id]
		if !slices.Equal(s.Parents(), w.parents) || s.Closed() != w.closed {
			t.Errorf("%s: parents %v closed %v, want %v %v", id, s.Parents(), s.Closed(), w.parents, w.closed)
		}
		if s.StartingSequence == "" || s.HashKeyStart == "" || s.HashKeyEnd == "" {
			t.Errorf("%s: missing ranges: %+v", id, s)
		}
	}
	if s := got[sh4]; s.ParentID != sh3 || s.AdjacentParentID != sh1 {
		t.Errorf("merge child: ParentID %q AdjacentParentID %q, want %q %q", s.ParentID, s.AdjacentParentID, sh3, sh1)
	}
	if got[sh2].HashKeyStart != got[sh0].HashKeyStart || got[sh4].HashKeyEnd != got[sh1].HashKeyEnd {
		t.Errorf("children's hash ranges do not cover their parents': %+v", got)
	}

	store, err := lease.NewMemoryStore()
	if err != nil {
		t.Fatal(err)
	}
	obs := lease.NewObserver(lease.DefaultDuration)
	decide := func() Decision {
		t.Helper()
		rows := rowsOf(t, store, name)
		v := map[string]lease.Verdict{}
		for id, r := range rows {
			v[id] = obs.Observe(r, time.Now())
		}
		d := Decide(Input{Shards: listed, Leases: rows, Verdicts: v})
		checkPartition(t, listed, d)
		return d
	}
	expect := func(step string, d Decision, leasable []string, not map[string]Reason) {
		t.Helper()
		if got := ids(d.Leasable); !slices.Equal(got, leasable) {
			t.Errorf("%s: Leasable = %v, want %v", step, got, leasable)
		}
		for id, r := range not {
			if d.NotLeasable[id] != r {
				t.Errorf("%s: %s is %v, want %v", step, id, d.NotLeasable[id], r)
			}
		}
	}

	// A tip generation records every closed shard read to its end: only
	// the open leaves may open.
	startup, err := lease.NewMemoryStore()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range listed {
		st := lease.Start{Position: "timestamp:1", Generation: "g1", Order: 1, Finished: s.Closed()}
		if _, err := startup.SetStart(ctx, name, s.ID, st); err != nil {
			t.Fatal(err)
		}
	}
	atStartup := Decide(Input{Shards: listed, Leases: rowsOf(t, startup, name)})
	expect("tip generation", atStartup, []string{sh2, sh4}, map[string]Reason{sh0: fin, sh1: fin, sh3: fin})

	// From the horizon, only the original shards may open.
	expect("no rows", decide(), []string{sh0, sh1},
		map[string]Reason{sh2: waiting(sh0), sh3: waiting(sh0), sh4: waiting(sh3)})

	// A reader holds shard 0 midway: it is held, its children wait.
	if _, err := store.Take(ctx, name, sh0, "reader-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Checkpoint(ctx, name, sh0, "reader-a", before[0].StartingSequence); err != nil {
		t.Fatal(err)
	}
	d := decide()
	if r := d.NotLeasable[sh0]; r.Kind != Held || r.Owner != "reader-a" {
		t.Errorf("shard 0 while read: %v, want held by reader-a", r)
	}
	expect("0 held", d, []string{sh1}, map[string]Reason{sh2: waiting(sh0), sh3: waiting(sh0)})
	if err := store.Release(ctx, name, sh0, "reader-a", lease.Handover{}); err != nil {
		t.Fatal(err)
	}

	readToEnd(t, store, name, sh0)
	expect("0 finished", decide(), []string{sh1, sh2, sh3},
		map[string]Reason{sh0: fin, sh4: waiting(sh3)})

	readToEnd(t, store, name, sh3)
	expect("0, 3 finished", decide(), []string{sh1, sh2},
		map[string]Reason{sh3: fin, sh4: waiting(sh1)}) // the merge waits for its second parent too

	readToEnd(t, store, name, sh1)
	expect("0, 1, 3 finished", decide(), []string{sh2, sh4},
		map[string]Reason{sh0: fin, sh1: fin, sh3: fin})
}

// pagedAPI sends every ListShards with a small MaxResults and records the
// requests.
type pagedAPI struct {
	ListAPI
	size int32
	mu   sync.Mutex
	seen []kinesis.ListShardsInput
}

func (p *pagedAPI) ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	cp := *in
	cp.MaxResults = aws.Int32(p.size)
	p.mu.Lock()
	p.seen = append(p.seen, cp)
	p.mu.Unlock()
	return p.ListAPI.ListShards(ctx, &cp, optFns...)
}

func TestList_FollowsPagesByNameAndByARN(t *testing.T) {
	t.Parallel()
	k := testaws.Kinesis(t)
	name := newStream(t, k, 7)
	out, err := k.DescribeStreamSummary(t.Context(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	arn := aws.ToString(out.StreamDescriptionSummary.StreamARN)

	var want []string
	for i := range 7 {
		want = append(want, "shardId-00000000000"+string(rune('0'+i)))
	}
	for _, stream := range []string{name, arn} {
		api := &pagedAPI{ListAPI: k, size: 2}
		got, err := List(t.Context(), api, stream)
		if err != nil {
			t.Fatalf("List(%s): %v", stream, err)
		}
		if !slices.Equal(ids(got), want) {
			t.Errorf("List(%s) = %v, want %v", stream, ids(got), want)
		}
		if len(api.seen) != 4 {
			t.Errorf("List(%s) sent %d requests, want 4 pages of at most 2", stream, len(api.seen))
		}
		first := api.seen[0]
		if stream == arn && (aws.ToString(first.StreamARN) != arn || first.StreamName != nil) {
			t.Errorf("first request by ARN: StreamARN %q StreamName %q", aws.ToString(first.StreamARN), aws.ToString(first.StreamName))
		}
		if stream == name && (aws.ToString(first.StreamName) != name || first.StreamARN != nil) {
			t.Errorf("first request by name: StreamName %q StreamARN %q", aws.ToString(first.StreamName), aws.ToString(first.StreamARN))
		}
		for _, in := range api.seen[1:] {
			if in.NextToken == nil || in.StreamName != nil || in.StreamARN != nil {
				t.Errorf("later page: want NextToken only, got %+v", in)
			}
		}
	}
}

func TestList_MissingStreamIsWrappedSDKError(t *testing.T) {
	t.Parallel()
	k := testaws.Kinesis(t)
	name := testaws.Name(t)
	_, err := List(t.Context(), k, name)
	if !errors.As(err, new(*types.ResourceNotFoundException)) || !strings.Contains(err.Error(), name) {
		t.Errorf("List of a missing stream: %v, want ResourceNotFoundException naming %s", err, name)
	}
}

func TestList_InvalidStreamRefusedBeforeAnyRequest(t *testing.T) {
	api := &pagedAPI{ListAPI: nil, size: 2}
	_, err := List(t.Context(), api, "arn:aws:kinesis:us-east-1:123456789012:table/x")
	var ie *InvalidError
	if !errors.As(err, &ie) || ie.Field != "stream" || len(api.seen) != 0 {
		t.Errorf("err = %v, requests %d; want InvalidError for field stream and no request", err, len(api.seen))
	}
}

func TestCreateIfMissing_LeavesExistingStreamAlone(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	k := testaws.Kinesis(t)
	name := newStream(t, k, 2)
	out, err := k.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	arn := aws.ToString(out.StreamDescriptionSummary.StreamARN)

	for _, stream := range []string{name, arn} {
		created, err := CreateIfMissing(ctx, k, stream, 5, fastCreate)
		if err != nil || created {
			t.Errorf("CreateIfMissing(%s) on an existing stream = %v, %v; want false, nil", stream, created, err)
		}
	}
	out, err = k.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	s := out.StreamDescriptionSummary
	if n := aws.ToInt32(s.OpenShardCount); n != 2 {
		t.Errorf("open shards = %d, want the original 2", n)
	}
	if s.StreamModeDetails == nil || s.StreamModeDetails.StreamMode != types.StreamModeProvisioned {
		t.Errorf("stream mode = %+v, want PROVISIONED", s.StreamModeDetails)
	}
}

// creatingForever reports CREATING whatever the real status is.
type creatingForever struct {
	CreateAPI CreateAPI
	mu        sync.Mutex
	describes int
}

func (c *creatingForever) CreateStream(ctx context.Context, in *kinesis.CreateStreamInput, optFns ...func(*kinesis.Options)) (*kinesis.CreateStreamOutput, error) {
	return c.CreateAPI.CreateStream(ctx, in, optFns...)
}

func (c *creatingForever) DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	out, err := c.CreateAPI.DescribeStreamSummary(ctx, in, optFns...)
	c.mu.Lock()
	c.describes++
	c.mu.Unlock()
	if err == nil {
		out.StreamDescriptionSummary.StreamStatus = types.StreamStatusCreating
	}
	return out, err
}

func TestCreateIfMissing_NotActiveInTimeIsClearError(t *testing.T) {
	t.Parallel()
	k := testaws.Kinesis(t)
	name := testaws.Name(t)
	api := &creatingForever{CreateAPI: k}
	start := time.Now()
	// A timeout of seconds, not milliseconds: a busy machine's emulator may
	// take longer than a short one to show the new stream at all, and the
	// test is of the error at the timeout, not of the emulator's speed.
	created, err := CreateIfMissing(t.Context(), api, name, 1, func(o *CreateOptions) {
		o.Timeout, o.PollInterval = 3*time.Second, 20*time.Millisecond
	})
	took := time.Since(start)

	var nae *NotActiveError
	if !errors.Is(err, ErrNotActive) || !errors.As(err, &nae) {
		t.Fatalf("err = %v, want a NotActiveError", err)
	}
	if !created {
		t.Error("created = false, want true: this call created the stream")
	}
	if nae.Stream != name || nae.Status != types.StreamStatusCreating || nae.Waited != 3*time.Second {
		t.Errorf("NotActiveError = %+v", nae)
	}
	wantMsg := "stream " + name + " not ACTIVE after 3s (last status: CREATING)"
	if err.Error() != wantMsg {
		t.Errorf("message %q, want %q", err, wantMsg)
	}
	if took < 3*time.Second || took > 30*time.Second {
		t.Errorf("returned after %s, want just after the 3s timeout", took)
	}
	if api.describes < 3 {
		t.Errorf("%d status checks in 3s at a 20ms interval; want several", api.describes)
	}
}
