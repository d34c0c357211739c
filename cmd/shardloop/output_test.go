package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/internal/testaws"
	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/reader"
	"github.com/shardloop/shardloop/pkg/shards"
)

// -h prints each flag as it is written on the command line and in the
// docs: two dashes, one for a single letter, with its type.
func TestUsage_PrintsFlagsWithTwoDashes(t *testing.T) {
	for cmd, want := range map[string][]string{
		"run":    {"\n  --stream string\n", "\n  --batching-window duration\n", "\n  --batch-size int\n", "\n  --log-format format\n", "\n  -v\n"},
		"status": {"\n  --stream string\n", "\n  -o, --output format\n"},
		"reset":  {"\n  --to string\n", "\n  --force\n"},
		"demo":   {"\n  --keys int\n", "\n  --log-format format\n"},
	} {
		code, stdout, _ := runCLI(t.Context(), cmd, "-h")
		if code != 0 {
			t.Errorf("%s -h: exit %d", cmd, code)
		}
		for _, w := range want {
			if !strings.Contains(stdout, w) {
				t.Errorf("%s -h does not show %q:\n%s", cmd, w, stdout)
			}
		}
		for l := range strings.Lines(stdout) {
			if strings.HasPrefix(l, "  -") && !strings.HasPrefix(l, "  --") && !strings.HasPrefix(l, "  -v") && !strings.HasPrefix(l, "  -o,") {
				t.Errorf("%s -h: a long flag with one dash: %q", cmd, l)
			}
		}
	}
}

// Every value a flag cannot take is refused with the flag, the value and
// the form it wants, exit status 2 and the usage.
func TestFlagParseErrors_NameTheFlagTheValueAndTheExpectedForm(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"run", "--stream", "s", "--batching-window", "30"}, []string{"--batching-window 30: want a Go duration", "30s"}},
		{[]string{"run", "--stream", "s", "--poll-interval=fast"}, []string{"--poll-interval fast: want a Go duration from 200ms", "500ms"}},
		{[]string{"run", "--stream", "s", "--batch-size", "many"}, []string{"--batch-size many: want an integer from 1 to 10000"}},
		{[]string{"run", "--stream", "s", "--bisect-on-error=maybe"}, []string{"--bisect-on-error maybe: want true or false"}},
		{[]string{"run", "--stream", "s", "--log-format", "yaml"}, []string{"--log-format yaml: want text or json"}},
		{[]string{"run", "--stream", "s", "--start", "tip"}, []string{`--start "tip"`, "TRIM_HORIZON, LATEST or AT_TIMESTAMP"}},
		{[]string{"run", "--stream"}, []string{"--stream needs a value: want stream name or ARN"}},
		{[]string{"run", "--stream", "s", "--nope"}, []string{"unknown flag --nope"}},
		{[]string{"status", "--stream", "s", "--table", "t", "-o", "yaml"}, []string{"-o yaml: want table or json"}},
		{[]string{"status", "--stream", "s", "--table", "t", "--output="}, []string{`--output "": want table or json`}},
		{[]string{"demo", "--keys", "1.5"}, []string{"--keys 1.5: want a whole number"}},
		{[]string{"reset", "--stream", "s", "--force=2"}, []string{"--force 2: want true or false"}},
	} {
		code, _, stderr := runCLI(t.Context(), tc.args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2", tc.args, code)
		}
		first, _, _ := strings.Cut(stderr, "\n")
		for _, w := range tc.want {
			if !strings.Contains(first, w) {
				t.Errorf("%v: %q does not contain %q", tc.args, first, w)
			}
		}
		if strings.Contains(stderr, "parse error") || strings.Contains(stderr, "invalid value") {
			t.Errorf("%v: the flag package's own words: %q", tc.args, first)
		}
		if !strings.Contains(stderr, "usage: shardloop "+tc.args[0]) {
			t.Errorf("%v: no usage after the message:\n%s", tc.args, stderr)
		}
	}
}

func TestVersion_PrintsTheBuildsVersionAndRefusesArguments(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		code, stdout, _ := runCLI(t.Context(), args...)
		if code != 0 || !strings.HasPrefix(stdout, "shardloop ") || !strings.Contains(stdout, runtime.Version()) || strings.Count(stdout, "\n") != 1 {
			t.Errorf("%v: exit %d, %q; want one line: shardloop <version> (..., %s, ...)", args, code, stdout, runtime.Version())
		}
	}
	if code, _, stderr := runCLI(t.Context(), "version", "now"); code != 2 || !strings.Contains(stderr, `unexpected argument "now"`) {
		t.Errorf("version now: exit %d, %q; want 2 naming the argument", code, stderr)
	}
}

// status --output json: one document with the documented fields, the same
// facts as the table.
func TestWriteStatusJSON_HasTheDocumentedFieldsAndStates(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	listing := []shards.Shard{
		{ID: "shardId-000000000000", EndingSequence: "99"},
		{ID: "shardId-000000000001"},
		{ID: "shardId-000000000002", ParentID: "shardId-000000000000"},
		{ID: "shardId-000000000003", EndingSequence: "99"},
		{ID: "shardId-000000000004", ParentID: "shardId-000000000003"},
		{ID: "shardId-000000000005"},
	}
	rows := []lease.Lease{
		{ShardID: "shardId-000000000000", Checkpoint: lease.ShardEnd},
		{ShardID: "shardId-000000000001", Owner: "loop1@r1/run1", Counter: 7, Expiry: now.Add(7 * time.Second), Checkpoint: "42", MillisBehind: 1234, LagAt: now.Add(-time.Second)},
		{ShardID: "shardId-000000000003", Owner: "o3", Expiry: now.Add(-3 * time.Second), Checkpoint: "12", Start: "horizon"},
	}
	views := statusViews(listing, rows, now)
	caught := true
	views[1].Probe = &probe{CaughtUp: caught}
	hs := []lease.Heartbeat{{Runner: "r1", Host: "h", PID: 12, Leases: 1, Counter: 3, BeatAt: now.Add(-2 * time.Second)}}
	var b bytes.Buffer
	if err := writeStatusJSON(&b, "orders", "leases", views, hs, rows, now); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b.String())
	}
	if doc["schema"] != float64(StatusSchemaVersion) || doc["stream"] != "orders" || doc["table"] != "leases" || doc["time"] != "2027-01-15T08:00:00Z" {
		t.Errorf("head of the document: %v", doc)
	}
	shardsOut := doc["shards"].([]any)
	if len(shardsOut) != 6 {
		t.Fatalf("%d shards, want 6:\n%s", len(shardsOut), b.String())
	}
	fields := []string{"shard_id", "parents", "listed", "owner", "lease_expiry", "lease_counter", "checkpoint", "lag_ms", "lag_source", "lag_recorded_at", "caught_up", "opens_at", "state", "detail"}
	byID := map[string]map[string]any{}
	for _, s := range shardsOut {
		m := s.(map[string]any)
		for _, f := range fields {
			if _, ok := m[f]; !ok {
				t.Errorf("shard %v has no %q", m["shard_id"], f)
			}
		}
		byID[m["shard_id"].(string)] = m
	}
	want := map[string]map[string]any{
		"shardId-000000000000": {"state": stateFinished, "checkpoint": "SHARD_END", "lag_ms": nil, "owner": "", "lease_expiry": nil},
		"shardId-000000000001": {"state": stateReading, "owner": "loop1@r1/run1", "lease_counter": float64(7), "lease_expiry": "2027-01-15T08:00:07Z", "lag_ms": float64(0), "lag_source": "probe", "caught_up": true},
		"shardId-000000000002": {"state": stateNotOpened, "parents": []any{"shardId-000000000000"}}, // its parent is read to its end
		"shardId-000000000003": {"state": stateExpired, "opens_at": "horizon", "caught_up": nil},
		"shardId-000000000004": {"state": stateWaiting, "waiting_for": "shardId-000000000003"},
		"shardId-000000000005": {"state": stateNotOpened, "owner": "", "checkpoint": "", "parents": []any{}},
	}
	for id, fs := range want {
		for k, v := range fs {
			got := byID[id][k]
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(v)
			if string(gb) != string(wb) {
				t.Errorf("%s %s = %s, want %s", id, k, gb, wb)
			}
		}
	}
	runners := doc["runners"].([]any)
	if len(runners) != 1 {
		t.Fatalf("runners %v", runners)
	}
	r := runners[0].(map[string]any)
	if r["runner"] != "r1" || r["leases"] != float64(1) || r["leases_at_beat"] != float64(1) || r["last_beat"] != "2027-01-15T07:59:58Z" || r["leaving"] != false || r["pid"] != float64(12) {
		t.Errorf("runner %v", r)
	}
}

// --log-format json writes run's log lines as JSON objects.
func TestRun_LogFormatJSONWritesOneObjectALine(t *testing.T) {
	stream := testaws.Name(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	emulatorEnv(t)
	w := &watchWriter{ctx: ctx, want: "shardloop running"}
	runCtx, stop := context.WithCancel(ctx)
	w.found = stop
	var out bytes.Buffer
	if err := runCmd(runCtx, []string{"--stream", stream, "--create-shards", "1", "--log-format", "json"}, &out, w); err != nil && ctx.Err() != nil {
		t.Fatalf("run: %v (never logged it was running)", err)
	}
	lines := w.lines()
	if len(lines) < 2 {
		t.Fatalf("log lines: %q", lines)
	}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil || m["msg"] == nil || m["level"] == nil || m["time"] == nil {
			t.Errorf("not a JSON log line with time, level and msg: %q (%v)", l, err)
		}
	}
}

// watchWriter keeps what is written and calls found once a line contains want.
type watchWriter struct {
	ctx   context.Context
	want  string
	found func()
	mu    sync.Mutex
	buf   strings.Builder
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(string(p), w.want) {
		w.found()
	}
	return len(p), nil
}

func (w *watchWriter) lines() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Split(strings.TrimSpace(w.buf.String()), "\n")
}

// shardloop emulators starts both emulators, prints the environment that
// points clients at them, serves until stopped and then stops them.
func TestEmulators_PrintsTheEndpointsServesThemAndStopsThemAtTheEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	var out lockedWriter
	done := make(chan error, 1)
	endpoints := make(chan [2]string, 1)
	go func() {
		done <- emulatorsCmd(runCtx, nil, &out, func(k, d string) { endpoints <- [2]string{k, d} })
	}()
	var eps [2]string
	select {
	case eps = <-endpoints:
	case err := <-done:
		t.Fatalf("emulators: %v", err)
	case <-ctx.Done():
		t.Fatal("the emulators never came up")
	}
	for _, want := range []string{"export AWS_ENDPOINT_URL_KINESIS=" + eps[0] + "\n", "export AWS_ENDPOINT_URL_DYNAMODB=" + eps[1] + "\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	// They serve: a stream and a table made through the printed endpoints.
	t.Setenv("AWS_ENDPOINT_URL_KINESIS", eps[0])
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", eps[1])
	noAWSFiles(t)
	if code, _, stderr := runCLI(ctx, "status", "--stream", "nope", "--table", "t"); code != 1 || !strings.Contains(stderr, "no such stream at "+eps[0]) {
		t.Errorf("status against the printed endpoint: exit %d, %q", code, stderr)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("emulators: %v", err)
	}
	for _, ep := range eps {
		if c, err := net.DialTimeout("tcp", strings.TrimPrefix(ep, "http://"), time.Second); err == nil {
			c.Close()
			t.Errorf("%s still answers after the command ended", ep)
		}
	}
}

type lockedWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestPrintTargets_LoopsPrintingAtOnceWriteWholeLines: every loop of a run
// delivers to the one printing target at once. Each batch is one write under
// a lock: the writer (a plain buffer here, standard output in a run) needs
// no locking, and no line is cut by another shard's.
func TestPrintTargets_LoopsPrintingAtOnceWriteWholeLines(t *testing.T) {
	for name, newTarget := range map[string]func(io.Writer) reader.Target{"records": printTarget, "windows": printWindowTarget} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			tgt := newTarget(&out)
			const loops, batches, perBatch = 4, 50, 5
			var wg sync.WaitGroup
			for l := range loops {
				wg.Go(func() {
					shard := fmt.Sprintf("shardId-%012d", l)
					for i := range batches {
						b := reader.Batch{ShardID: shard}
						for j := range perBatch {
							b.Records = append(b.Records, ktypes.Record{SequenceNumber: aws.String(strconv.Itoa(i*perBatch + j)),
								PartitionKey: aws.String("k"), Data: []byte("d")})
						}
						var err error
						if wt, ok := tgt.(reader.WindowTarget); ok {
							_, _, err = wt.DeliverWindow(t.Context(), reader.WindowBatch{Batch: b, State: json.RawMessage(`{}`)})
						} else {
							_, err = tgt.Deliver(t.Context(), b)
						}
						if err != nil {
							t.Error(err)
						}
					}
				})
			}
			wg.Wait()
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if len(lines) != loops*batches*perBatch {
				t.Fatalf("%d lines, want %d", len(lines), loops*batches*perBatch)
			}
			for _, l := range lines {
				if f := strings.Fields(l); len(f) != 5 || !strings.HasPrefix(f[1], "shardId-") || f[3] != "key=k" || f[4] != "data=d" {
					t.Fatalf("line %q is not one record's", l)
				}
			}
		})
	}
}
