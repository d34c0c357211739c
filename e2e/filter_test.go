package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/internal/emulators"
	"github.com/shardloop/shardloop/internal/testaws"
	"github.com/shardloop/shardloop/pkg/lease"
)

// TestRealShardReaderWithFilterCriteriaDeliversOnlyWhatPasses runs one
// filtered subscription through the real shardreader in the Runtime
// Interface Emulator (SHARDLOOP_FILTER_CRITERIA, as the construct and the
// SAM template set it) and the stock sample target: one run over 30
// records, a third of them buys, the last one not. The target receives
// exactly the buys, the run's checkpoint is the last record (filtered out,
// passed), and the shardreader's metric lines count the rest as
// FilteredOutEventCount.
func TestRealShardReaderWithFilterCriteriaDeliversOnlyWhatPasses(t *testing.T) {
	if !supported {
		t.Skip("the Lambda bootstraps are linux binaries")
	}
	bins := buildBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var entries []ktypes.PutRecordsRequestEntry
	var buys []string
	for i := range 30 {
		kind := map[bool]string{true: "buy", false: "sell"}[i%3 == 0]
		d := fmt.Sprintf(`{"type":%q,"i":%d}`, kind, i)
		if kind == "buy" {
			buys = append(buys, d)
		}
		entries = append(entries, ktypes.PutRecordsRequestEntry{PartitionKey: aws.String(keyName(i % 4)), Data: []byte(d)})
	}
	stream, table, shard, last := oneShardAtHorizon(ctx, t, "e2e-filter", entries)
	host, received := hostReaderAndTarget(t, bins, bins.Target, table,
		"SHARDLOOP_BATCH_SIZE=4",
		"SHARDLOOP_RUN_LENGTH=5s",
		"SHARDLOOP_POLL_INTERVAL=200ms",
		`SHARDLOOP_FILTER_CRITERIA={"Filters": [{"Pattern": "{\"data\": {\"type\": [\"buy\"]}}"}]}`,
	)

	in, _ := json.Marshal(map[string]any{"stream": stream, "shardId": shard, "owner": "e2e-filter"})
	res, err := host.invoke(ctx, "shardreader", in, nil)
	if err != nil || res.FunctionError {
		t.Fatalf("shardreader: %v %s", err, res.Body)
	}
	var out struct {
		Checkpoint string `json:"checkpoint"`
		Records    int    `json:"records"`
		Continue   bool   `json:"continue"`
	}
	if err := json.Unmarshal(res.Body, &out); err != nil {
		t.Fatalf("shardreader answered %s: %v", res.Body, err)
	}
	var got []string
	for _, r := range readReceived(t, received) {
		got = append(got, r.Data)
	}
	if !slices.Equal(got, buys) {
		t.Errorf("the target received %q, want the %d buys %q", got, len(buys), buys)
	}
	if !out.Continue || out.Checkpoint != last || out.Records != len(buys) {
		t.Errorf("state %s: want continue, %d records and the checkpoint at the last record %s, filtered out", res.Body, len(buys), last)
	}
	if !host.logged("shardreader", `"FilteredOutEventCount":20`) {
		t.Errorf("the shardreader's metric lines lack FilteredOutEventCount 20")
	}
}

// oneShardAtHorizon creates a one-shard stream and a lease table whose row
// for the shard starts at the horizon, taken for the loop owner as a
// coordinator takes it (a loop's run never takes a free row), puts entries,
// and returns the stream, table, shard and the sequence number of the last
// entry.
func oneShardAtHorizon(ctx context.Context, t *testing.T, owner string, entries []ktypes.PutRecordsRequestEntry) (stream, table, shard, last string) {
	t.Helper()
	kin := testaws.Kinesis(t)
	ddb := testaws.Dynamo(t)
	stream, table = testaws.Name(t), testaws.Name(t)
	if _, err := kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(stream), ShardCount: aws.Int32(1)}); err != nil {
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
	shards, err := kin.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil {
		t.Fatal(err)
	}
	shard = aws.ToString(shards.Shards[0].ShardId)
	if _, err := store.SetStart(ctx, stream, shard, lease.Start{Position: "horizon", Generation: "g1", Order: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Take(ctx, stream, shard, owner); err != nil {
		t.Fatal(err)
	}
	put, err := kin.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries})
	if err != nil || aws.ToInt32(put.FailedRecordCount) != 0 {
		t.Fatalf("put: %v", err)
	}
	return stream, table, shard, aws.ToString(put.Records[len(put.Records)-1].SequenceNumber)
}

// hostReaderAndTarget serves the real shardreader (on the emulators, with
// table and the extra settings) and a target bootstrap recording to the
// host's record file, and returns the host and that file.
func hostReaderAndTarget(t *testing.T, bins binaries, targetBin, table string, extra ...string) (*lambdaHost, string) {
	t.Helper()
	host, work, received := serveHost(t, bins)
	t.Cleanup(func() {
		host.close()
		if t.Failed() {
			host.logTails(40)
		}
	})
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + work, "TMPDIR=" + os.TempDir(),
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_EC2_METADATA_DISABLED=true",
	}
	if err := host.add("shardreader", bins.ShardReader, 1, 30*time.Second, append(append(slices.Clone(env),
		"AWS_ENDPOINT_URL_KINESIS="+testaws.Endpoint(t, emulators.Kinesis),
		"AWS_ENDPOINT_URL_DYNAMODB="+testaws.Endpoint(t, emulators.DynamoDB),
		"AWS_ENDPOINT_URL_LAMBDA="+host.URL,
		"SHARDLOOP_LEASE_TABLE="+table,
		"SHARDLOOP_TARGET_FUNCTION="+targetARN,
	), extra...)); err != nil {
		t.Fatal(err)
	}
	if err := host.add("target", targetBin, 1, 4*time.Second, append(slices.Clone(env), "E2E_RECORD_FILE="+received)); err != nil {
		t.Fatal(err)
	}
	return host, received
}
