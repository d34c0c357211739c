package handlers_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/internal/awsconf"
	"github.com/shardloop/shardloop/internal/emulators"
	"github.com/shardloop/shardloop/internal/handlers"
	"github.com/shardloop/shardloop/internal/lambdaenv"
	"github.com/shardloop/shardloop/internal/testaws"
	"github.com/shardloop/shardloop/pkg/coordinator"
	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/reader"
	"github.com/shardloop/shardloop/pkg/shards"
)

func TestMain(m *testing.M) { os.Exit(testaws.Main(m)) }

// localAWS points the SDK's endpoint variables at the emulators (and at
// lambdaURL for Lambda) and loads the config the functions would.
func localAWS(t *testing.T, lambdaURL string) aws.Config {
	t.Helper()
	t.Setenv("AWS_ENDPOINT_URL_KINESIS", testaws.Endpoint(t, emulators.Kinesis))
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", testaws.Endpoint(t, emulators.DynamoDB))
	if lambdaURL != "" {
		t.Setenv("AWS_ENDPOINT_URL_LAMBDA", lambdaURL)
	}
	t.Setenv("AWS_REGION", testaws.Region)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	cfg, err := awsconf.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// emfCounts sums one metric over the EMF lines written so far.
func emfCounts(t *testing.T, out string, metric string) float64 {
	t.Helper()
	var n float64
	for line := range strings.Lines(out) {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if f, ok := v[metric].(float64); ok {
			n += f
		}
	}
	return n
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A stream that does not exist is not a silent loop: every pass counts
// StreamNotFound once (the stack's alarm watches it) and logs an error
// naming the stream and the variable.
func TestCoordinator_MissingStreamCountsStreamNotFoundOncePerPass(t *testing.T) {
	cfg := localAWS(t, "")
	stream := testaws.Name(t)
	var emf, logs lockedBuffer
	log, invocations := handlers.NewLogger(&logs, lambdaenv.Log{JSON: true})
	h, err := handlers.NewCoordinator(t.Context(), lambdaenv.Coordinator{
		Stream: stream, Table: testaws.Name(t), StateMachineARN: "arn:aws:states:us-east-1:000000000000:stateMachine:loop",
		Start: "latest", Window: time.Second,
	}, cfg, log, handlers.WithMetrics(&emf), handlers.WithInvocations(invocations),
		handlers.WithStarter(coordinator.StarterFunc(func(context.Context, coordinator.Loop) error { return nil })))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		ctx := lambdacontext.NewContext(t.Context(), &lambdacontext.LambdaContext{AwsRequestID: fmt.Sprintf("req-%d", i)})
		if err := h.Handle(ctx, json.RawMessage(`{"nudge":true}`)); err == nil {
			t.Fatal("a nudged pass over a missing stream succeeded")
		}
		if got := emfCounts(t, emf.String(), "StreamNotFound"); got != float64(i+1) {
			t.Fatalf("after %d passes StreamNotFound = %v, want %d\n%s", i+1, got, i+1, emf.String())
		}
	}
	if err := h.Handle(t.Context(), json.RawMessage(scheduleEvent)); err == nil { // the schedule: a 1 s window is one pass
		t.Fatal("a scheduled run over a missing stream succeeded")
	}
	if got := emfCounts(t, emf.String(), "StreamNotFound"); got != 3 {
		t.Fatalf("after 3 passes StreamNotFound = %v, want 3", got)
	}
	if !strings.Contains(emf.String(), `"Stream":"`+stream+`"`) {
		t.Errorf("the metric's Stream dimension is not %s:\n%s", stream, emf.String())
	}
	if l := logs.String(); !strings.Contains(l, "the stream does not exist") || !strings.Contains(l, stream) || !strings.Contains(l, lambdaenv.VarStream) {
		t.Errorf("logs do not say the stream %s is missing and name %s:\n%s", stream, lambdaenv.VarStream, l)
	}
	// The error is logged by the coordinator's pass, which has no Lambda
	// context: it carries the request id of the invocation all the same.
	ids := map[string]bool{}
	for _, l := range jsonLines(t, logs.String()) {
		if l["message"] == nil || l["level"] == nil || l["timestamp"] == nil {
			t.Errorf("a line without Lambda's keys (timestamp, level, message): %v", l)
		}
		if strings.HasPrefix(fmt.Sprint(l["message"]), "the stream does not exist") {
			ids[fmt.Sprint(l[handlers.RequestIDKey])] = true
		}
	}
	if !ids["req-0"] || !ids["req-1"] {
		t.Errorf("the error lines carry request ids %v, want req-0 and req-1 (one per invocation)\n%s", ids, logs.String())
	}
}

// jsonLines parses each line of logs as a JSON object.
func jsonLines(t *testing.T, logs string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for l := range strings.Lines(logs) {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// A coordinator configured with the stream's name starts loops that carry
// its ARN, resolved with DescribeStreamSummary, so the records'
// eventSourceARN is set.
func TestCoordinator_StreamByNameStartsLoopsWithItsARN(t *testing.T) {
	cfg := localAWS(t, "")
	kc, dc := testaws.Kinesis(t), testaws.Dynamo(t)
	stream, table := testaws.Name(t), testaws.Name(t)
	if _, err := shards.CreateIfMissing(t.Context(), kc, stream, 1); err != nil {
		t.Fatal(err)
	}
	if err := lease.CreateTable(t.Context(), dc, table); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var loops []coordinator.Loop
	h, err := handlers.NewCoordinator(t.Context(), lambdaenv.Coordinator{
		Stream: stream, Table: table, StateMachineARN: "arn:aws:states:us-east-1:000000000000:stateMachine:loop",
		Start: "latest", Window: time.Second,
	}, cfg, slog.New(slog.DiscardHandler), handlers.WithStarter(coordinator.StarterFunc(func(_ context.Context, l coordinator.Loop) error {
		mu.Lock()
		defer mu.Unlock()
		loops = append(loops, l)
		return nil
	})))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Handle(t.Context(), json.RawMessage(`{"nudge":true}`)); err != nil {
		t.Fatal(err)
	}
	want, err := handlers.StreamARN(t.Context(), kc, stream)
	if err != nil || !strings.HasPrefix(want, "arn:aws:kinesis:") {
		t.Fatalf("StreamARN = %q, %v", want, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(loops) != 1 || loops[0].StreamARN != want || loops[0].Stream != stream {
		t.Fatalf("loops started %+v, want one for %s with StreamARN %s", loops, stream, want)
	}
}

// lambdaPeer answers the Lambda Invoke API on loopback and keeps each
// payload.
type lambdaPeer struct {
	mu       sync.Mutex
	payloads [][]byte
	timeout  int // the function's configured timeout in seconds; 0: 60
	configs  int // GetFunctionConfiguration calls
}

func (p *lambdaPeer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/configuration") {
		p.mu.Lock()
		p.configs++
		timeout := cmp.Or(p.timeout, 60)
		p.mu.Unlock()
		_, _ = fmt.Fprintf(w, `{"FunctionName":"target-fn","Timeout":%d}`, timeout)
		return
	}
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/2015-03-31/functions/") {
		http.NotFound(w, r)
		return
	}
	b, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	p.payloads = append(p.payloads, b)
	p.mu.Unlock()
	w.Header().Set("X-Amz-Executed-Version", "$LATEST")
	_, _ = w.Write([]byte(`{}`))
}

func (p *lambdaPeer) events(t *testing.T) []map[string]any {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	var recs []map[string]any
	for _, b := range p.payloads {
		var ev struct{ Records []map[string]any }
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatalf("payload %s: %v", b, err)
		}
		recs = append(recs, ev.Records...)
	}
	return recs
}

// A loop state without a streamArn (started before the coordinator
// resolved it) still delivers records whose eventSourceARN is the stream's
// ARN, and whose invokeIdentityArn is the shardreader's role.
func TestShardReader_RecordsCarryTheStreamARNAndTheReadersRole(t *testing.T) {
	peer := &lambdaPeer{timeout: 3}
	srv := httptest.NewServer(peer)
	defer srv.Close()
	cfg := localAWS(t, srv.URL)
	kc, dc := testaws.Kinesis(t), testaws.Dynamo(t)
	stream, table := testaws.Name(t), testaws.Name(t)
	if _, err := shards.CreateIfMissing(t.Context(), kc, stream, 1); err != nil {
		t.Fatal(err)
	}
	if err := lease.CreateTable(t.Context(), dc, table); err != nil {
		t.Fatal(err)
	}
	store, err := lease.NewDynamoStore(dc, table)
	if err != nil {
		t.Fatal(err)
	}
	const shard = "shardId-000000000000"
	if _, err := store.SetStart(t.Context(), stream, shard, lease.Start{Position: "horizon", Generation: "g1", Order: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Take(t.Context(), stream, shard, "loop-1"); err != nil { // the coordinator's take for the loop
		t.Fatal(err)
	}
	if _, err := kc.PutRecord(t.Context(), &kinesis.PutRecordInput{StreamName: aws.String(stream), PartitionKey: aws.String("k"), Data: []byte("r0")}); err != nil {
		t.Fatal(err)
	}
	const role = "arn:aws:iam::000000000000:role/shardloop-reader"
	var logs lockedBuffer
	log, invocations := handlers.NewLogger(&logs, lambdaenv.Log{JSON: true})
	h, err := handlers.NewShardReader(t.Context(), lambdaenv.Reader{
		Table: table, Target: "target-fn", BatchSize: 10, PollInterval: 200 * time.Millisecond, RunLength: 5 * time.Second,
		MaxIterations: 10, MaxRetryAttempts: -1, InvokeIdentityARN: role,
	}, cfg, log, handlers.WithInvocations(invocations))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	coldStart := len(jsonLines(t, logs.String()))
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: "c0ffee-1"})
	next, err := h.Handle(ctx, reader.State{Stream: stream, ShardID: shard, Owner: "loop-1"})
	if err != nil {
		t.Fatal(err)
	}
	want, err := handlers.StreamARN(ctx, kc, stream)
	if err != nil {
		t.Fatal(err)
	}
	recs := peer.events(t)
	if len(recs) != 1 {
		t.Fatalf("delivered %d records, want 1", len(recs))
	}
	if recs[0]["eventSourceARN"] != want || recs[0]["invokeIdentityArn"] != role {
		t.Fatalf("record eventSourceARN %v, invokeIdentityArn %v; want %s, %s", recs[0]["eventSourceARN"], recs[0]["invokeIdentityArn"], want, role)
	}
	if next.StreamARN != want {
		t.Fatalf("next state's streamArn = %q, want %s carried on", next.StreamARN, want)
	}
	// Every line of the invocation, the reader's own included (it logs
	// without the invocation's context), carries its request id.
	lines := jsonLines(t, logs.String())[coldStart:]
	if len(lines) < 2 {
		t.Fatalf("the invocation logged %d lines, want the reader's (opened shard, run done):\n%s", len(lines), logs.String())
	}
	for _, l := range lines {
		if l[handlers.RequestIDKey] != "c0ffee-1" {
			t.Errorf("a line of the invocation without its request id: %v", l)
		}
	}
}

func TestStreamARN_MissingStreamIsResourceNotFound(t *testing.T) {
	_, err := handlers.StreamARN(t.Context(), testaws.Kinesis(t), testaws.Name(t))
	var rnf *ktypes.ResourceNotFoundException
	if !handlers.StreamMissing(err) || !errors.As(err, &rnf) {
		t.Fatalf("err = %v, want a ResourceNotFoundException", err)
	}
}

const scheduleEvent = `{"version":"0","id":"1","detail-type":"Scheduled Event","source":"aws.events","account":"000000000000",` +
	`"time":"2026-01-01T00:00:00Z","region":"us-east-1","resources":["arn:aws:events:us-east-1:000000000000:rule/every-minute"],"detail":{}}`

// executionEvent is the EventBridge event of an execution of stateMachine
// that ended with status, whose input was loop.
func executionEvent(t *testing.T, stateMachine, status string, loop coordinator.Loop) json.RawMessage {
	t.Helper()
	input, err := json.Marshal(loop)
	if err != nil {
		t.Fatal(err)
	}
	exec := strings.Replace(stateMachine, ":stateMachine:", ":execution:", 1) + ":" + loop.Owner
	ev, err := json.Marshal(map[string]any{
		"version": "0", "id": "2", "detail-type": "Step Functions Execution Status Change", "source": "aws.states",
		"account": "000000000000", "time": "2026-01-01T00:00:00Z", "region": "us-east-1", "resources": []string{exec},
		"detail": map[string]any{
			"executionArn": exec, "stateMachineArn": stateMachine, "name": loop.Owner, "status": status,
			"startDate": 1767225600000, "stopDate": 1767225660000, "input": string(input),
			"inputDetails": map[string]any{"included": true}, "output": nil,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// Without a window, the schedule is one pass; a FAILED execution of the
// deployment's state machine makes the coordinator watch that loop's shard
// and take it once its lease has lapsed on the coordinator's own clock (a
// lease duration after it first read the row), while an execution of
// another state machine changes nothing.
func TestCoordinator_FailedExecutionEventTakesItsShardOnceTheLeaseLapses(t *testing.T) {
	cfg := localAWS(t, "")
	kc, dc := testaws.Kinesis(t), testaws.Dynamo(t)
	stream, table := testaws.Name(t), testaws.Name(t)
	if _, err := shards.CreateIfMissing(t.Context(), kc, stream, 1); err != nil {
		t.Fatal(err)
	}
	if err := lease.CreateTable(t.Context(), dc, table); err != nil {
		t.Fatal(err)
	}
	const machine = "arn:aws:states:us-east-1:000000000000:stateMachine:orders-shard-loop"
	var mu sync.Mutex
	var loops []coordinator.Loop
	started := func() []coordinator.Loop {
		mu.Lock()
		defer mu.Unlock()
		return append([]coordinator.Loop(nil), loops...)
	}
	newHandler := func() *handlers.Coordinator {
		h, err := handlers.NewCoordinator(t.Context(), lambdaenv.Coordinator{Stream: stream, Table: table, StateMachineARN: machine, RunLength: 5 * time.Second},
			cfg, slog.New(slog.DiscardHandler), handlers.WithStarter(coordinator.StarterFunc(func(_ context.Context, l coordinator.Loop) error {
				mu.Lock()
				defer mu.Unlock()
				loops = append(loops, l)
				return nil
			})))
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	if err := newHandler().Handle(t.Context(), json.RawMessage(scheduleEvent)); err != nil {
		t.Fatal(err)
	}
	if got := started(); len(got) != 1 {
		t.Fatalf("the scheduled pass started %+v, want one loop", got)
	}
	dead := started()[0]
	// Another instance of the coordinator gets the event (it never saw the row).
	h := newHandler()
	for _, other := range []json.RawMessage{
		executionEvent(t, "arn:aws:states:us-east-1:000000000000:stateMachine:someone-elses", "FAILED", dead),
		executionEvent(t, machine, "SUCCEEDED", dead),
	} {
		begin := time.Now()
		if err := h.Handle(t.Context(), other); err != nil || time.Since(begin) > time.Second || len(started()) != 1 {
			t.Fatalf("an event needing nothing: %v after %v, loops %+v", err, time.Since(begin), started())
		}
	}
	begin := time.Now()
	if err := h.Handle(t.Context(), executionEvent(t, machine, "FAILED", dead)); err != nil {
		t.Fatal(err)
	}
	took := time.Since(begin)
	got := started()
	if len(got) != 2 || got[1].ShardID != dead.ShardID || got[1].Owner == dead.Owner {
		t.Fatalf("loops %+v: want the shard taken over by a new loop", got)
	}
	if took < lease.DefaultDuration || took > lease.DefaultDuration+5*time.Second {
		t.Fatalf("the takeover took %v, want a little over the %v lease", took, lease.DefaultDuration)
	}
}

// An event of a shape the coordinator does not take is an error, not a
// silent pass.
func TestCoordinator_RefusesAnEventItDoesNotTake(t *testing.T) {
	cfg := localAWS(t, "")
	h, err := handlers.NewCoordinator(t.Context(), lambdaenv.Coordinator{Stream: "orders", Table: "t",
		StateMachineARN: "arn:aws:states:us-east-1:000000000000:stateMachine:loop"}, cfg, slog.New(slog.DiscardHandler),
		handlers.WithStarter(coordinator.StarterFunc(func(context.Context, coordinator.Loop) error { return nil })))
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []string{`{}`, `{"source":"aws.s3"}`, `[1]`} {
		if err := h.Handle(t.Context(), json.RawMessage(ev)); !errors.Is(err, handlers.ErrEvent) {
			t.Errorf("event %s: err = %v, want ErrEvent", ev, err)
		}
	}
}

// A deployment whose new StartPosition moves the shards past records the
// previous start has not delivered is not refused (nothing can confirm it),
// but its coordinator logs the shards and counts at WARN and counts
// BacklogSkipped (the stack's alarm watches it), once.
func TestCoordinator_ANewStartThatSkipsABacklogWarnsAndCountsBacklogSkipped(t *testing.T) {
	cfg := localAWS(t, "")
	kc, dc := testaws.Kinesis(t), testaws.Dynamo(t)
	stream, table := testaws.Name(t), testaws.Name(t)
	if _, err := shards.CreateIfMissing(t.Context(), kc, stream, 2); err != nil {
		t.Fatal(err)
	}
	listing, err := shards.List(t.Context(), kc, stream)
	if err != nil {
		t.Fatal(err)
	}
	var es []ktypes.PutRecordsRequestEntry
	for i := range 30 { // 20 on the first shard, 10 on the second
		es = append(es, ktypes.PutRecordsRequestEntry{PartitionKey: aws.String("k"), ExplicitHashKey: aws.String(listing[min(i/20, 1)].HashKeyStart), Data: []byte("x")})
	}
	if _, err := kc.PutRecords(t.Context(), &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: es}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // older than the second a latest start pins before Kinesis's time
	if err := lease.CreateTable(t.Context(), dc, table); err != nil {
		t.Fatal(err)
	}
	store, err := lease.NewDynamoStore(dc, table)
	if err != nil {
		t.Fatal(err)
	}
	noStart := coordinator.StarterFunc(func(context.Context, coordinator.Loop) error { return nil })
	old, err := coordinator.New(coordinator.Config{Subscriptions: []coordinator.Subscription{{Stream: stream, Start: "horizon"}},
		Claim: func(string, shards.Decision) []shards.Shard { return nil }}, store, kc, noStart)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Pass(t.Context()); err != nil {
		t.Fatal(err)
	}

	var emf, logs lockedBuffer
	h, err := handlers.NewCoordinator(t.Context(), lambdaenv.Coordinator{
		Stream: stream, Table: table, StateMachineARN: "arn:aws:states:us-east-1:000000000000:stateMachine:loop", Start: "latest",
	}, cfg, slog.New(slog.NewTextHandler(&logs, nil)), handlers.WithMetrics(&emf), handlers.WithStarter(noStart))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := h.Handle(t.Context(), json.RawMessage(`{"nudge":true}`)); err != nil {
			t.Fatal(err)
		}
	}
	if got := emfCounts(t, emf.String(), "BacklogSkipped"); got != 30 {
		t.Errorf("BacklogSkipped = %v, want the 30 records, counted once\n%s", got, emf.String())
	}
	l := logs.String()
	for _, want := range []string{"level=WARN", "the new start skips records the stream's previous start has not delivered", "records=30",
		"shardId-000000000000: 20 records", "shardId-000000000001: 10 records", "previous_start=horizon"} {
		if !strings.Contains(l, want) {
			t.Errorf("logs lack %q:\n%s", want, l)
		}
	}
}
