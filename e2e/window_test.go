package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// windowInvocation is one line of windowtarget's record file.
type windowInvocation struct {
	Start, End     int64
	Final, Early   bool
	ShardID        string
	StateIn, Out   map[string]string
	Data           []string
	EventSourceARN string
}

// TestRealShardReaderWithTumblingWindowCarriesTheStateToAFinalInvoke runs
// one windowed subscription through the real shardreader in the Runtime
// Interface Emulator (SHARDLOOP_TUMBLING_WINDOW_SECONDS, as the construct
// and the SAM template set it) and a stock KinesisTimeWindowEvent handler:
// 12 records in batches of 4. Every invocation receives the state the
// previous one returned, the window's records arrive in order, and a final
// invocation (isFinalInvokeForWindow) closes the window with the state of
// all 12.
func TestRealShardReaderWithTumblingWindowCarriesTheStateToAFinalInvoke(t *testing.T) {
	if !supported {
		t.Skip("the Lambda bootstraps are linux binaries")
	}
	bins := buildBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var entries []ktypes.PutRecordsRequestEntry
	var want []string
	for i := range 12 {
		d := fmt.Sprintf(`{"i":%d}`, i)
		want = append(want, d)
		entries = append(entries, ktypes.PutRecordsRequestEntry{PartitionKey: aws.String(keyName(i % 3)), Data: []byte(d)})
	}
	stream, table, shard, last := oneShardAtHorizon(ctx, t, "e2e-window", entries)
	host, received := hostReaderAndTarget(t, bins, bins.WindowTarget, table,
		"SHARDLOOP_BATCH_SIZE=4",
		"SHARDLOOP_RUN_LENGTH=8s",
		"SHARDLOOP_POLL_INTERVAL=200ms",
		"SHARDLOOP_TUMBLING_WINDOW_SECONDS=2",
	)

	in, _ := json.Marshal(map[string]any{"stream": stream, "shardId": shard, "owner": "e2e-window"})
	res, err := host.invoke(ctx, "shardreader", in, nil)
	if err != nil || res.FunctionError {
		t.Fatalf("shardreader: %v %s", err, res.Body)
	}
	var out struct {
		Checkpoint string `json:"checkpoint"`
		Continue   bool   `json:"continue"`
	}
	if err := json.Unmarshal(res.Body, &out); err != nil {
		t.Fatalf("shardreader answered %s: %v", res.Body, err)
	}
	if !out.Continue || out.Checkpoint != last {
		t.Errorf("state %s: want continue and the checkpoint at the last record %s", res.Body, last)
	}

	invs := readWindowInvocations(t, received)
	if len(invs) < 2 {
		t.Fatalf("the target was invoked %d times, want the window's batches and a final invocation: %+v", len(invs), invs)
	}
	var got []string
	var prev map[string]string
	for i, inv := range invs {
		if inv.ShardID != shard || !strings.HasSuffix(inv.EventSourceARN, "/"+stream) || inv.End-inv.Start != 2000 || inv.Start%2000 != 0 {
			t.Errorf("invocation %d: shard %q, source %q, window %d-%d: want %s, the stream's ARN, a 2 s window on the epoch", i, inv.ShardID, inv.EventSourceARN, inv.Start, inv.End, shard)
		}
		if i > 0 && invs[i-1].Start == inv.Start && !maps.Equal(inv.StateIn, prev) {
			t.Errorf("invocation %d received state %v, want the %v the previous one returned", i, inv.StateIn, prev)
		}
		prev = inv.Out
		got = append(got, inv.Data...)
	}
	if !slices.Equal(got, want) {
		t.Errorf("the windows received %q, want %q in order", got, want)
	}
	fin := invs[len(invs)-1]
	if !fin.Final || fin.Early || len(fin.Data) != 0 {
		t.Errorf("last invocation %+v: want a final invocation for the window, not early, without records", fin)
	}
	// Each window's final invocation carries the state of its records: all
	// 12 in all (one window, or two if the put straddled a boundary).
	total := 0
	for _, inv := range invs {
		if inv.Final {
			n, _ := strconv.Atoi(inv.StateIn["n"])
			total += n
		}
	}
	if total != len(want) {
		t.Errorf("final invocations received states counting %d records in all, want %d", total, len(want))
	}
}

func readWindowInvocations(t *testing.T, path string) []windowInvocation {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("the window target recorded nothing: %v", err)
	}
	defer f.Close()
	var out []windowInvocation
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var inv windowInvocation
		if err := json.Unmarshal(sc.Bytes(), &inv); err != nil {
			t.Fatalf("record file line %q: %v", sc.Text(), err)
		}
		out = append(out, inv)
	}
	return out
}
