package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/shardloop/shardloop/internal/testaws"
	"github.com/shardloop/shardloop/pkg/metrics"
	"github.com/shardloop/shardloop/pkg/shards"
)

func TestRunProgress_LineCountsDeliveriesAndTheMostLaggingHeldShard(t *testing.T) {
	rec, err := metrics.New(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	p := newRunProgress(rec)
	p.RecordsDelivered("s", "shard-1", 40)
	p.RecordsDelivered("s", "shard-2", 20)
	p.MillisBehindLatest("s", "shard-1", 1500)
	p.MillisBehindLatest("s", "shard-2", 200)
	p.MillisBehindLatest("s", "shard-3", 9000) // no longer held here
	l := p.line(10, 10*time.Second, []string{"shard-1", "shard-2"})
	if l.delivered != 60 || l.since != 50 || l.perSecond != 5 || l.held != 2 {
		t.Errorf("line %+v: want 60 delivered, 50 since the last line, 5/s, 2 held", l)
	}
	if l.lagging != "shard-1" || l.maxLag != 1500*time.Millisecond {
		t.Errorf("most lagging %s at %s: want shard-1 at 1.5s (shard-3 is not held)", l.lagging, l.maxLag)
	}
	if l := p.line(60, 0, nil); l.lagging != "" || l.perSecond != 0 || l.since != 0 {
		t.Errorf("line with nothing held over no time %+v: want no lag and no rate", l)
	}
}

// run --progress: a long run says at info level what it has delivered, how
// many shards it holds and how far behind the most lagging one is.
func TestRun_LogsAProgressLine(t *testing.T) {
	kc := testaws.Kinesis(t)
	stream := testaws.Name(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if _, err := shards.CreateIfMissing(ctx, kc, stream, 1); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"r0", "r1", "r2"} {
		if _, err := kc.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(stream), PartitionKey: aws.String("k"), Data: []byte(d)}); err != nil {
			t.Fatal(err)
		}
	}
	emulatorEnv(t)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var stdout, stderr syncBuffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		cli(runCtx, []string{"run", "--stream", stream, "--start", "horizon", "--poll-interval", "200ms", "--progress", "200ms", "--log-format", "json"}, &stdout, &stderr)
	}()
	// Waits for a line that has seen all three records: a condition, not a
	// time, however slow the machine.
	var got map[string]any
	for got == nil && ctx.Err() == nil {
		sc := bufio.NewScanner(strings.NewReader(stderr.String()))
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == "progress" && line["delivered"] == 3.0 {
				got = line
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	<-done
	if got == nil {
		t.Fatalf("no progress line counted the 3 records delivered:\n%s", stderr.String())
	}
	if got["level"] != "INFO" || got["shards_held"] != 1.0 || got["max_lag_shard"] == nil {
		t.Errorf("progress line %v: want level INFO, 1 shard held and the most lagging shard named", got)
	}
}

func TestRun_ProgressRefusesANegativeInterval(t *testing.T) {
	code, _, stderr := runCLI(t.Context(), "run", "--stream", "s", "--progress", "-1s")
	if code != 2 || !strings.Contains(stderr, "--progress -1s") || !strings.Contains(stderr, "positive duration") {
		t.Errorf("exit %d, stderr %q: want 2 and the flag, its value and the expected form named", code, stderr)
	}
}
