package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/internal/emulators"
	"github.com/shardloop/shardloop/internal/testaws"
	"github.com/shardloop/shardloop/pkg/lease"
)

const (
	stateMachineARN = "arn:aws:states:us-east-1:000000000000:stateMachine:shardloop-e2e"
	targetARN       = "arn:aws:lambda:us-east-1:000000000000:function:target" // the host maps it to "target"
	keys            = 20
	waveSize        = 150
)

// TestRealLambdasDeliverEveryRecordInKeyOrderAcrossSplitAndKilledLoop runs
// the real coordinator, shardreader and a target Lambda in the Runtime
// Interface Emulator against kinesis-local and dynalite, with Step Functions
// played by a fake that follows template/statemachine.asl.json. It produces
// keyed records in waves, splits a shard, kills the loop of another shard
// inside a Read, and checks from what the target received that every record
// arrived at least once and that each key's records first arrived in order.
// The shardreader delivers through 3 lanes a shard
// (SHARDLOOP_PARALLELIZATION_FACTOR), so one shard's batches reach the
// target at overlapping times, each key's in order.
func TestRealLambdasDeliverEveryRecordInKeyOrderAcrossSplitAndKilledLoop(t *testing.T) {
	if !supported {
		t.Skip("the Lambda bootstraps are linux binaries")
	}
	began := time.Now()
	bins := buildBinaries(t)
	kin := testaws.Kinesis(t)
	ddb := testaws.Dynamo(t)
	kinURL := testaws.Endpoint(t, emulators.Kinesis)
	ddbURL := testaws.Endpoint(t, emulators.DynamoDB)
	shape := loadLoopShape(t)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stream, table := testaws.Name(t), testaws.Name(t)
	if _, err := kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(stream), ShardCount: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	waitActive(ctx, t, kin, stream)
	if err := lease.CreateTable(ctx, ddb, table); err != nil {
		t.Fatal(err)
	}
	store, err := lease.NewDynamoStore(ddb, table)
	if err != nil {
		t.Fatal(err)
	}

	host, work, received := serveHost(t, bins)
	sfn, err := newFakeSFN(t, host, "shardreader", shape)
	if err != nil {
		t.Fatal(err)
	}
	schedCtx, stopSchedule := context.WithCancel(ctx)
	var schedule, statusEvents sync.WaitGroup
	t.Cleanup(func() {
		stopSchedule()
		sfn.stop()
		host.close() // kills every emulator: the Reads in flight end
		schedule.Wait()
		statusEvents.Wait()
		sfn.wait()
		if t.Failed() {
			host.logTails(40)
		}
	})

	base := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + work, "TMPDIR=" + os.TempDir(),
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		"AWS_EC2_METADATA_DISABLED=true",
	}
	env := func(extra ...string) []string { return append(slices.Clone(base), extra...) }
	start := time.Now()
	errs := []error{
		host.add("shardreader", bins.ShardReader, 4, 15*time.Second, env(
			"AWS_ENDPOINT_URL_KINESIS="+kinURL,
			"AWS_ENDPOINT_URL_DYNAMODB="+ddbURL,
			"AWS_ENDPOINT_URL_LAMBDA="+host.URL,
			"SHARDLOOP_LEASE_TABLE="+table,
			"SHARDLOOP_TARGET_FUNCTION="+targetARN,
			"SHARDLOOP_COORDINATOR_FUNCTION=coordinator",
			"SHARDLOOP_BATCH_SIZE=40",
			"SHARDLOOP_RUN_LENGTH=5s",
			"SHARDLOOP_POLL_INTERVAL=200ms",
			"SHARDLOOP_MAX_ITERATIONS=3",
			"SHARDLOOP_PARALLELIZATION_FACTOR=3",
		)),
		// Two instances: a watch after a failed execution holds one for
		// about a lease duration while the schedule and nudges go on.
		host.add("coordinator", bins.Coordinator, 2, 40*time.Second, env(
			"AWS_ENDPOINT_URL_KINESIS="+kinURL,
			"AWS_ENDPOINT_URL_DYNAMODB="+ddbURL,
			"AWS_ENDPOINT_URL_SFN="+sfn.URL,
			"SHARDLOOP_STREAM="+stream,
			"SHARDLOOP_LEASE_TABLE="+table,
			"SHARDLOOP_STATE_MACHINE_ARN="+stateMachineARN,
			"SHARDLOOP_TARGET_FUNCTION="+targetARN,
			"SHARDLOOP_START_POSITION=horizon",
			"SHARDLOOP_RUN_LENGTH=5s", // no window: one pass per scheduled invocation
		)),
		host.add("target", bins.Target, 6, 4*time.Second, env(
			"E2E_RECORD_FILE="+received,
			"E2E_FAIL_EVERY=7", // a partial batch failure now and then
			"E2E_DELAY=200ms",  // received, not yet settled: the kill lands here
		)),
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	t.Logf("setup (build, emulators, stream, table, 8 RIE instances) took %s", time.Since(began).Round(time.Millisecond))

	p := &producer{kin: kin, stream: stream, next: map[string]int{}, sent: map[string]sent{}}
	mustWave := func(wave int) {
		t.Helper()
		if err := p.wave(ctx, wave, waveSize); err != nil {
			t.Fatal(err)
		}
	}
	mustWave(1) // before any loop runs: read from the horizon

	// The deployment's rule on the state machine's status changes: each
	// execution that ends FAILED or ABORTED invokes the coordinator with
	// the event, asynchronously, and it watches that shard until its lease
	// lapses, then takes it.
	sfn.setOnEnd(func(machine string, e *execution, status string) {
		ev, err := json.Marshal(map[string]any{
			"version": "0", "id": e.Name, "detail-type": "Step Functions Execution Status Change", "source": "aws.states",
			"account": "000000000000", "region": "us-east-1", "time": time.Now().UTC().Format(time.RFC3339), "resources": []string{e.ARN},
			"detail": map[string]any{"executionArn": e.ARN, "stateMachineArn": machine, "name": e.Name, "status": status,
				"startDate": e.Started.UnixMilli(), "stopDate": time.Now().UnixMilli(), "input": string(e.Input),
				"inputDetails": map[string]any{"included": true}},
		})
		if err != nil {
			t.Errorf("status event: %v", err)
			return
		}
		statusEvents.Go(func() {
			res, err := host.invoke(schedCtx, "coordinator", ev, nil)
			switch {
			case schedCtx.Err() != nil:
			case err != nil:
				t.Errorf("status event of %s: coordinator invoke failed: %v", e.Name, err)
			case res.FunctionError || res.Status != http.StatusOK:
				t.Errorf("status event of %s: coordinator answered %d (function error %v): %s", e.Name, res.Status, res.FunctionError, res.Body)
			}
		})
	})

	// The EventBridge schedule, once a minute: one pass each. Readers'
	// nudges ({"nudge":true}) arrive in between. A minute apart, the
	// schedule takes no part in the takeover below: the status event does.
	schedule.Go(func() {
		ev := []byte(`{"source":"aws.events","detail-type":"Scheduled Event","detail":{}}`)
		for schedCtx.Err() == nil {
			res, err := host.invoke(schedCtx, "coordinator", ev, nil)
			switch {
			case schedCtx.Err() != nil:
				return
			case err != nil:
				t.Logf("schedule: coordinator invoke failed: %v", err)
			case res.FunctionError || res.Status != http.StatusOK:
				t.Errorf("schedule: coordinator answered %d (function error %v): %s", res.Status, res.FunctionError, res.Body)
			}
			select {
			case <-schedCtx.Done():
			case <-time.After(time.Minute):
			}
		}
	})

	waitFor(ctx, t, 45*time.Second, "the first delivery", func() bool { return len(readReceived(t, received)) > 0 })
	t.Logf("first delivery %s after the loops were started", time.Since(start).Round(time.Millisecond))
	mustWave(2)

	children := splitInTheMiddle(ctx, t, kin, stream, "shardId-000000000001")
	t.Logf("split shardId-000000000001 into %v", children)
	// Kill shard 0's loop in the middle of a batch: while the target has a
	// batch of that shard in hand (it records it, then sleeps E2E_DELAY
	// before answering), so the batch is delivered but not checkpointed.
	inFlight := make(chan struct{}, 1)
	host.setWatch(func(name string, payload []byte) {
		if name == "target" && bytes.Contains(payload, []byte(`"eventID":"shardId-000000000000:`)) {
			select {
			case inFlight <- struct{}{}:
			default:
			}
		}
	})
	mustWave(3)
	select {
	case <-inFlight:
	case <-time.After(20 * time.Second):
		t.Fatal("no batch of shardId-000000000000 reached the target within 20 s of wave 3")
	}
	host.setWatch(nil)
	killCtx, killCancel := context.WithTimeout(ctx, 20*time.Second)
	killed, midRead, err := sfn.killMidRead(killCtx, "shardId-000000000000")
	killCancel()
	if err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	t.Logf("killed execution %s (owner %s) of %s after %d iterations; its shardreader was killed inside a Read: %v",
		killed.Name, killed.Owner, killed.Shard, killed.Iterations, midRead)

	time.Sleep(time.Second)
	mustWave(4)
	time.Sleep(2 * time.Second)
	mustWave(5)

	// Wait for every record, and for a continue-as-new and the takeover.
	takenOver := func() (execInfo, bool) {
		for _, e := range sfn.executions() {
			if e.Shard == killed.Shard && e.Owner != killed.Owner && e.Parent == "" && e.Iterations > 0 {
				return e, true
			}
		}
		return execInfo{}, false
	}
	lastLog := time.Now()
	waitFor(ctx, t, 75*time.Second, "every record delivered, a takeover and a continue-as-new", func() bool {
		got := readReceived(t, received)
		delivered := map[string]bool{}
		for _, r := range got {
			delivered[r.id()] = true
		}
		_, took := takenOver()
		can := false
		for _, e := range sfn.executions() {
			can = can || e.Parent != ""
		}
		if time.Since(lastLog) > 5*time.Second {
			lastLog = time.Now()
			t.Logf("progress: produced %d, delivered %d unique (%d deliveries), takeover %v, continue-as-new %v, executions %d",
				len(p.sent), len(delivered), len(got), took, can, len(sfn.executions()))
		}
		return len(delivered) >= len(p.sent) && took && can
	})
	took, _ := takenOver()
	t.Logf("shard %s taken over by owner %s: its loop started %s after the kill (the status event's watch: a 10 s lease, observed from the event on)",
		killed.Shard, took.Owner, took.Started.Sub(killedAt).Round(time.Millisecond))
	if after := took.Started.Sub(killedAt); after < lease.DefaultDuration || after > lease.DefaultDuration+10*time.Second {
		t.Errorf("the takeover came %s after the kill, want a little over the %s lease (the watch after the ABORTED event)", after, lease.DefaultDuration)
	}
	if !host.logged("coordinator", `"outcome":"taken"`, killed.Owner) {
		t.Errorf("no coordinator log says its watch after the status event of %s took the shard over", killed.Owner)
	}
	// Each function's log lines carry their invocation's request id, as
	// Lambda's own lines do: the coordinator's watch, and the reader's end
	// of a run, which pkg/reader logs without the invocation's context.
	if !host.logged("coordinator", `"outcome":"taken"`, `"requestId":"`) {
		t.Errorf("the coordinator's line of its watch after the status event has no requestId")
	}
	if !host.logged("shardreader", `"message":"run done"`, `"requestId":"`) {
		t.Errorf("no shardreader line of a run's end carries a requestId")
	}
	for _, e := range sfn.executions() {
		t.Logf("execution %-40.40s shard %s owner %.12s parent %.12s: %s, %d iterations, last reason %q, err %v",
			e.Name, e.Shard, e.Owner, e.Parent, e.Status, e.Iterations, e.LastReason, e.Err)
		if e.Status == failed {
			t.Errorf("execution %s of %s failed: %v", e.Name, e.Shard, e.Err)
		}
	}

	got := readReceived(t, received)
	checkDelivery(t, p, got)
	checkLanesOverlapped(t, got)
	// The batch in the target's hands when the loop died was never
	// settled: its new owner must deliver it again.
	redelivered := map[string]bool{}
	firstAt := map[string]int64{}
	for _, r := range got {
		if r.ShardID != killed.Shard {
			continue
		}
		if f, ok := firstAt[r.id()]; !ok {
			firstAt[r.id()] = r.At
		} else if f < took.Started.UnixMilli() && r.At >= took.Started.UnixMilli() {
			redelivered[r.id()] = true
		}
	}
	t.Logf("the new owner of %s delivered again %d records the killed loop had delivered", killed.Shard, len(redelivered))
	if midRead && len(redelivered) == 0 {
		t.Errorf("the loop of %s died with a batch unsettled, yet its new owner delivered none of its records again", killed.Shard)
	}
	checkLeases(ctx, t, store, stream, killed, children)
	t.Logf("whole test: %s", time.Since(began).Round(time.Millisecond))
}

// sent is where a produced record went.
type sent struct{ shard, seq string }

type producer struct {
	kin    *kinesis.Client
	stream string
	next   map[string]int  // per-key counter
	sent   map[string]sent // by record id "key/n"
	order  []string        // ids in production order
}

func keyName(i int) string { return fmt.Sprintf("k%02d", i) }

// wave puts n records round-robin over the keys, each carrying its key's
// next counter, in one PutRecords.
func (p *producer) wave(ctx context.Context, wave, n int) error {
	var entries []ktypes.PutRecordsRequestEntry
	var ids []string
	for i := range n {
		k := keyName(i % keys)
		c := p.next[k]
		p.next[k]++
		ids = append(ids, fmt.Sprintf("%s/%d", k, c))
		entries = append(entries, ktypes.PutRecordsRequestEntry{
			PartitionKey: aws.String(k),
			Data:         fmt.Appendf(nil, `{"k":%q,"n":%d,"w":%d}`, k, c, wave),
		})
	}
	out, err := p.kin.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(p.stream), Records: entries})
	if err != nil {
		return fmt.Errorf("wave %d: %w", wave, err)
	}
	if aws.ToInt32(out.FailedRecordCount) > 0 {
		return fmt.Errorf("wave %d: %d records failed (kinesis-local never throttles)", wave, aws.ToInt32(out.FailedRecordCount))
	}
	for i, r := range out.Records {
		p.sent[ids[i]] = sent{shard: aws.ToString(r.ShardId), seq: aws.ToString(r.SequenceNumber)}
		p.order = append(p.order, ids[i])
	}
	return nil
}

// receivedRecord is one line the sample target wrote.
type receivedRecord struct {
	ShardID      string `json:"shardId"`
	Seq          string `json:"seq"`
	PartitionKey string `json:"partitionKey"`
	Data         string `json:"data"`
	At           int64  `json:"at"`
	Failed       bool   `json:"failed"`

	Key string `json:"-"`
	N   int    `json:"-"` // the key's counter
	W   int    `json:"-"` // the wave
}

func (r receivedRecord) id() string { return fmt.Sprintf("%s/%d", r.Key, r.N) }

// readReceived reads the target's record file (one write per record set, so
// a line is never torn).
func readReceived(t testing.TB, path string) []receivedRecord {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []receivedRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r receivedRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("target record file: %v: %q", err, sc.Text())
		}
		var d struct {
			K string `json:"k"`
			N int    `json:"n"`
			W int    `json:"w"`
		}
		if err := json.Unmarshal([]byte(r.Data), &d); err != nil {
			t.Fatalf("target received data this test did not produce: %q", r.Data)
		}
		r.Key, r.N, r.W = d.K, d.N, d.W
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkDelivery: every produced record was received at least once, with the
// shard, sequence number and partition key it was put with; each key's
// records were first received in the producer's order; duplicates are
// counted and reported.
// checkLanesOverlapped checks that some shard had two invocations of the
// target at once: each takes E2E_DELAY (200 ms) or more, so two invocations
// of one shard received less than that apart were both in flight, which
// only lanes (SHARDLOOP_PARALLELIZATION_FACTOR > 1) make happen.
func checkLanesOverlapped(t *testing.T, got []receivedRecord) {
	t.Helper()
	at := map[string][]int64{} // shard -> receipt times of its invocations
	for _, r := range got {
		ts := at[r.ShardID]
		if len(ts) == 0 || ts[len(ts)-1] != r.At {
			at[r.ShardID] = append(ts, r.At)
		}
	}
	for shard, ts := range at {
		slices.Sort(ts)
		for i := 1; i < len(ts); i++ {
			if ts[i]-ts[i-1] < 150 {
				t.Logf("shard %s: invocations received %d ms apart, both in flight", shard, ts[i]-ts[i-1])
				return
			}
		}
	}
	t.Errorf("no shard had two invocations of the target in flight at once: the lanes did not deliver concurrently")
}

func checkDelivery(t *testing.T, p *producer, got []receivedRecord) {
	t.Helper()
	// Precondition: the producer's order is the stream's order per key
	// (PutRecords keeps request order within a shard).
	last := map[string]sent{}
	for _, id := range p.order {
		k, _, _ := strings.Cut(id, "/")
		s := p.sent[id]
		if prev, ok := last[k]; ok && prev.shard == s.shard && seqLess(s.seq, prev.seq) {
			t.Fatalf("precondition: kinesis-local gave %s a sequence number below its key's previous record in %s", id, s.shard)
		}
		last[k] = s
	}

	times := map[string]int{}
	first := map[string][]int{} // key -> counters in order of first receipt
	firstAt := map[string]receivedRecord{}
	for _, r := range got {
		s, ok := p.sent[r.id()]
		switch {
		case !ok:
			t.Errorf("received a record that was never produced: %+v", r)
			continue
		case s.shard != r.ShardID || s.seq != r.Seq || r.PartitionKey != r.Key:
			t.Errorf("record %s received as shard %s seq %s key %s; produced into %s with seq %s",
				r.id(), r.ShardID, r.Seq, r.PartitionKey, s.shard, s.seq)
		}
		times[r.id()]++
		if times[r.id()] == 1 {
			first[r.Key] = append(first[r.Key], r.N)
			firstAt[r.id()] = r
		}
	}
	var lost []string
	for _, id := range p.order {
		if times[id] == 0 {
			lost = append(lost, id)
		}
	}
	if len(lost) > 0 {
		t.Errorf("lost %d of %d records (never received), e.g. %v", len(lost), len(p.order), lost[:min(len(lost), 10)])
	}
	for k, ns := range first {
		for i := 1; i < len(ns); i++ {
			if ns[i] < ns[i-1] {
				a, b := firstAt[fmt.Sprintf("%s/%d", k, ns[i-1])], firstAt[fmt.Sprintf("%s/%d", k, ns[i])]
				t.Errorf("key %s out of order: %d (shard %s seq %s) first received before %d (shard %s seq %s)",
					k, ns[i-1], a.ShardID, a.Seq, ns[i], b.ShardID, b.Seq)
				break
			}
		}
	}
	dups, dupIDs := 0, []string{}
	for id, n := range times {
		if n > 1 {
			dups += n - 1
			dupIDs = append(dupIDs, id)
		}
	}
	sort.Strings(dupIDs)
	byShard, dupsByShard := map[string]int{}, map[string]int{}
	seen := map[string]bool{}
	for _, r := range got {
		byShard[r.ShardID]++
		if seen[r.id()] {
			dupsByShard[r.ShardID]++
		}
		seen[r.id()] = true
	}
	t.Logf("produced %d, received %d deliveries of %d unique records (%d duplicates, of %d records), lost %d; deliveries by shard %v, duplicates by shard %v",
		len(p.order), len(got), len(times), dups, len(dupIDs), len(lost), byShard, dupsByShard)
	if len(dupIDs) > 0 {
		t.Logf("duplicated records, e.g. %v", dupIDs[:min(len(dupIDs), 12)])
	}
}

// checkLeases: the split parent was read to its end, the killed loop's
// shard belongs to its new owner, and each child has a checkpoint.
func checkLeases(ctx context.Context, t *testing.T, store *lease.DynamoStore, stream string, killed execInfo, children []string) {
	t.Helper()
	rows, err := store.List(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	byShard := map[string]lease.Lease{}
	for _, l := range rows {
		byShard[l.ShardID] = l
		t.Logf("lease %s: owner %.12s expiry %s checkpoint %s parents %v", l.ShardID, l.Owner, l.Expiry.Format(time.TimeOnly), l.Checkpoint, l.ParentShardIDs)
	}
	if l := byShard["shardId-000000000001"]; !l.Finished() {
		t.Errorf("split parent shardId-000000000001 checkpoint %q, want %s", l.Checkpoint, lease.ShardEnd)
	}
	if l := byShard[killed.Shard]; lease.LoopOwner(l.Owner) == killed.Owner {
		t.Errorf("%s still belongs to the killed loop's owner %s", killed.Shard, killed.Owner)
	}
	for _, c := range children {
		if byShard[c].Checkpoint == "" {
			t.Errorf("child %s has no checkpoint: was it read?", c)
		}
	}
}

// seqLess compares two Kinesis sequence numbers (decimal strings).
func seqLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

func waitActive(ctx context.Context, t testing.TB, kin *kinesis.Client, stream string) {
	t.Helper()
	w := kinesis.NewStreamExistsWaiter(kin, func(o *kinesis.StreamExistsWaiterOptions) {
		o.MinDelay = 50 * time.Millisecond
		o.MaxDelay = 200 * time.Millisecond
	})
	if err := w.Wait(ctx, &kinesis.DescribeStreamInput{StreamName: aws.String(stream)}, 30*time.Second); err != nil {
		t.Fatalf("stream %s not active: %v", stream, err)
	}
}

// splitInTheMiddle splits shard at the middle of its hash key range and
// returns the children's ids.
func splitInTheMiddle(ctx context.Context, t testing.TB, kin *kinesis.Client, stream, shard string) []string {
	t.Helper()
	out, err := kin.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil {
		t.Fatal(err)
	}
	var mid *big.Int
	for _, s := range out.Shards {
		if aws.ToString(s.ShardId) == shard {
			lo, _ := new(big.Int).SetString(aws.ToString(s.HashKeyRange.StartingHashKey), 10)
			hi, _ := new(big.Int).SetString(aws.ToString(s.HashKeyRange.EndingHashKey), 10)
			mid = new(big.Int).Rsh(new(big.Int).Add(lo, hi), 1)
		}
	}
	if mid == nil {
		t.Fatalf("shard %s not listed", shard)
	}
	if _, err := kin.SplitShard(ctx, &kinesis.SplitShardInput{StreamName: aws.String(stream), ShardToSplit: aws.String(shard), NewStartingHashKey: aws.String(mid.String())}); err != nil {
		t.Fatal(err)
	}
	waitActive(ctx, t, kin, stream)
	out, err = kin.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil {
		t.Fatal(err)
	}
	var children []string
	for _, s := range out.Shards {
		if aws.ToString(s.ParentShardId) == shard {
			children = append(children, aws.ToString(s.ShardId))
		}
	}
	if len(children) != 2 {
		t.Fatalf("split of %s: children %v, want 2", shard, children)
	}
	return children
}

// waitFor polls cond every 50 ms until it holds, failing after limit.
func waitFor(ctx context.Context, t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("no %s within %s", what, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
