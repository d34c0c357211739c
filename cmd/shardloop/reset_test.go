package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/internal/testaws"
	"github.com/shardloop/shardloop/pkg/coordinator"
	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/metrics"
	"github.com/shardloop/shardloop/pkg/reader"
	"github.com/shardloop/shardloop/pkg/runner"
	"github.com/shardloop/shardloop/pkg/shards"
)

func TestMain(m *testing.M) {
	if os.Getenv(asCLI) == "1" {
		main() // the test binary as the shardloop command, for tests that signal a process
	}
	os.Exit(testaws.Main(m))
}

func TestResetPosition_FormsOfTo(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_123)
	const shard = "shardId-000000000001"
	for _, c := range []struct{ to, want, errHas string }{
		{to: "horizon", want: "horizon"},
		{to: "latest", want: "timestamp:1800000000123"},
		{to: "timestamp:1700000000000", want: "timestamp:1700000000000"},
		{to: "timestamp:2023-11-14T22:13:20Z", want: "timestamp:1700000000000"},
		{to: "sequence:4959", want: "sequence:" + shard + ":4959"},
		{to: "sequence:" + shard + ":4959", want: "sequence:" + shard + ":4959"},
		{to: "sequence:shardId-000000000002:4959", errHas: "not of --shard"},
		{to: "sequence:49x", errHas: "--to"},
		{to: "sequence:", errHas: "--to"},
		// The form reset takes, not the one lease rows record.
		{to: "sequence:abc", errHas: `--to "sequence:abc": want sequence:<sequence number>, the decimal sequence number of a record of --shard ` + shard},
		{to: "sequence:" + shard + ":abc", errHas: "want sequence:<sequence number>"},
		{to: "timestamp:yesterday", errHas: "--to"},
		{to: "timestamp:-5", errHas: "--to"},
		{to: "latest:1", errHas: "--to"},
		{to: "horizon:1", errHas: "--to"},
		{to: "oldest", errHas: "--to"},
	} {
		got, err := resetPosition(c.to, shard, now)
		switch {
		case c.errHas != "":
			var ue usageError
			if err == nil || !strings.Contains(err.Error(), c.errHas) || !errors.As(err, &ue) {
				t.Errorf("--to %s: (%q, %v), want a usage error containing %q", c.to, got, err, c.errHas)
			}
		case err != nil || got != c.want:
			t.Errorf("--to %s = (%q, %v), want %q", c.to, got, err, c.want)
		}
	}
}

func TestResetCmd_MissingFlagsAreNamed(t *testing.T) {
	t.Setenv(envTable, "")
	for _, c := range []struct {
		args []string
		flag string
	}{
		{nil, "--stream"},
		{[]string{"--stream", "s"}, "--shard"},
		{[]string{"--stream", "s", "--shard", "x"}, "--to"},
		{[]string{"--stream", "s", "--shard", "x", "--to", "horizon"}, "--table"},
		{[]string{"--stream", "s", "--shard", "x", "--to", "nowhere", "--table", "t"}, "--to"},
	} {
		err := resetCmd(t.Context(), c.args, io.Discard)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("reset %v: err = %v, want a usage error naming %s", c.args, err, c.flag)
		}
	}
}

// delivered records what a target received, in order, with sequence numbers.
type delivered struct {
	mu   sync.Mutex
	data []string
	seqs map[string]string // data -> sequence number
}

func (d *delivered) target() reader.Target {
	return reader.FuncTarget(func(_ context.Context, b reader.Batch) (int, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, r := range b.Records {
			d.data = append(d.data, string(r.Data))
			d.seqs[string(r.Data)] = aws.ToString(r.SequenceNumber)
		}
		return len(b.Records), nil
	})
}

func (d *delivered) snapshot() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.data)
}

func (d *delivered) waitFor(ctx context.Context, t *testing.T, n int) []string {
	t.Helper()
	for ctx.Err() == nil {
		if got := d.snapshot(); len(got) >= n {
			return got
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("delivered %d records, want %d", len(d.snapshot()), n)
	return nil
}

// TestReset_EndToEndHorizonRedeliversFromOldestAndSequenceOpensThere drives
// the CLI against dynalite while the local runner reads kinesis-local: an
// unforced reset of a live lease is refused naming --force; a forced reset
// to horizon stops the holder and the next loop re-delivers from the oldest
// record; once the lease is free, an unforced reset to a record opens there.
func TestReset_EndToEndHorizonRedeliversFromOldestAndSequenceOpensThere(t *testing.T) {
	kc, dc := testaws.Kinesis(t), testaws.Dynamo(t)
	stream, table := testaws.Name(t), testaws.Name(t)
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	if _, err := shards.CreateIfMissing(ctx, kc, stream, 1); err != nil {
		t.Fatal(err)
	}
	if err := lease.CreateTable(ctx, dc, table); err != nil {
		t.Fatal(err)
	}
	const leaseFor = 2 * time.Second
	store, err := lease.NewDynamoStore(dc, table, func(o *lease.Options) { o.Duration = leaseFor })
	if err != nil {
		t.Fatal(err)
	}
	rec, err := metrics.New(io.Discard)
	if err != nil {
		t.Fatal(err)
	}

	const n = 20
	var entries []ktypes.PutRecordsRequestEntry
	for i := range n {
		entries = append(entries, ktypes.PutRecordsRequestEntry{PartitionKey: aws.String("k"), Data: fmt.Appendf(nil, "r%02d", i)})
	}
	if _, err := kc.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries}); err != nil {
		t.Fatal(err)
	}
	want := make([]string, n)
	for i := range n {
		want[i] = fmt.Sprintf("r%02d", i)
	}

	// The CLI reaches the emulators through the SDK's endpoint variables.
	emulatorEnv(t)
	t.Setenv(envTable, table)
	const shard = "shardId-000000000000"

	got := &delivered{seqs: map[string]string{}}
	start := func() (r *runner.Runner, stop func()) {
		r, err = runner.New(runner.Options{
			Subscriptions:  []coordinator.Subscription{{Stream: stream, Start: "horizon"}},
			Store:          store,
			Kinesis:        kc,
			RelistInterval: 300 * time.Millisecond,
			Reader: reader.Options{
				Target: got.target(), Mapping: reader.Mapping{BatchSize: 5}, PollInterval: 100 * time.Millisecond, RunLength: 2 * time.Second,
				RenewInterval: 500 * time.Millisecond, LeaseDuration: leaseFor, Hooks: rec, Lag: rec.Lag,
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- r.Run(runCtx) }()
		return r, func() { cancel(); <-done }
	}

	r, stop := start()
	first := got.waitFor(ctx, t, n)
	if !slices.Equal(first, want) {
		t.Fatalf("first pass delivered %v, want %v", first, want)
	}

	// While the loop holds the lease, an unforced reset is refused.
	err = resetCmd(ctx, []string{"--stream", stream, "--shard", shard, "--to", "horizon"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("unforced reset of a live lease: err = %v, want one naming --force", err)
	}
	var out strings.Builder
	if err := resetCmd(ctx, []string{"--stream", stream, "--shard", shard, "--to", "horizon", "--force"}, &out); err != nil {
		t.Fatalf("forced reset: %v", err)
	}
	if !strings.Contains(out.String(), "opens at horizon") || !strings.Contains(out.String(), "was cleared") {
		t.Fatalf("forced reset said %q", out.String())
	}
	all := got.waitFor(ctx, t, 2*n)
	if !slices.Equal(all[n:], want) {
		t.Fatalf("after reset to horizon delivered %v, want the stream again from its oldest record %v", all[n:], want)
	}

	// status shows the lag the reader recorded with its checkpoints.
	var st strings.Builder
	if err := statusCmd(ctx, []string{"--stream", stream}, &st); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(st.String()), "\n")
	if len(lines) != 2 || column(lines, "LAG") == "-" {
		t.Fatalf("status after reading:\n%s\nwant a lag on the shard's row", st.String())
	}
	// The loop dies as in a crash: it keeps the lease and stops renewing
	// (a runner stopped gracefully releases its leases instead).
	if r.Kill(stream, shard) == "" {
		t.Fatal("no loop to kill")
	}
	stop()

	// Once the owner has stopped renewing, no --force is needed: reset
	// watches the lease's counter stand still, then resets; a record opens
	// there.
	got.mu.Lock()
	seq10 := got.seqs["r10"]
	got.mu.Unlock()
	out.Reset()
	if err := resetCmd(ctx, []string{"--stream", stream, "--shard", shard, "--to", "sequence:" + seq10}, &out); err != nil {
		t.Fatalf("unforced reset of a lapsed lease: %v", err)
	}
	if !strings.Contains(out.String(), "had stopped renewing") {
		t.Fatalf("reset said %q", out.String())
	}
	_, stop = start()
	defer stop()
	all = got.waitFor(ctx, t, 2*n+10)
	if !slices.Equal(all[2*n:], want[10:]) {
		t.Fatalf("after reset to r10's sequence delivered %v, want %v", all[2*n:], want[10:])
	}
}
