package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/internal/emulators"
	"github.com/shardloop/shardloop/internal/testaws"
	"github.com/shardloop/shardloop/pkg/shards"
)

// noAWSFiles keeps the developer's own AWS configuration out of a test.
func noAWSFiles(t *testing.T) {
	t.Helper()
	t.Setenv("AWS_REGION", testaws.Region)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// emulatorEnv points the CLI at kinesis-local and dynalite.
func emulatorEnv(t *testing.T) {
	t.Helper()
	noAWSFiles(t)
	t.Setenv("AWS_ENDPOINT_URL_KINESIS", testaws.Endpoint(t, emulators.Kinesis))
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", testaws.Endpoint(t, emulators.DynamoDB))
}

// runCLI runs the command line and returns its exit status, stdout and stderr.
func runCLI(ctx context.Context, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := cli(ctx, args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestCommands_RefuseWordsTheyDoNotTakeAndUnknownFlagsWithStatus2AndUsage(t *testing.T) {
	noAWSFiles(t)
	// A silent endpoint: a command that got past its flags would hang on it
	// for seconds instead of answering at once.
	t.Setenv("AWS_ENDPOINT_URL", silentPeer(t))
	for _, args := range [][]string{
		{"run", "--stream", "s", "--table", "t", "oops", "--target", "fn"},
		{"run", "--stream", "s", "--nope"},
		{"status", "--stream", "s", "--table", "t", "extra"},
		{"status", "--stream", "s", "--table", "t", "-x"},
		{"reset", "--stream", "s", "--shard", "x", "--to", "horizon", "--table", "t", "now"},
		{"reset", "--stream", "s", "--force=maybe"},
		{"demo", "go"},
		{"demo", "--keys", "3", "--fast"},
	} {
		code, stdout, stderr := runCLI(t.Context(), args...)
		if code != 2 {
			t.Errorf("%v: exit status %d, want 2\n%s", args, code, stderr)
			continue
		}
		if stdout != "" {
			t.Errorf("%v: wrote to stdout %q", args, stdout)
		}
		for _, want := range []string{"shardloop " + args[0] + ": ", "usage: shardloop " + args[0], "flags:", "-stream"} {
			if args[0] == "demo" && want == "-stream" {
				want = "-keys"
			}
			if !strings.Contains(stderr, want) {
				t.Errorf("%v: stderr lacks %q:\n%s", args, want, stderr)
			}
		}
	}
	_, _, stderr := runCLI(t.Context(), "run", "--stream", "s", "--table", "t", "oops", "--target", "fn")
	if !strings.Contains(stderr, `unexpected argument "oops"`) || !strings.Contains(stderr, "would be ignored") {
		t.Errorf("a stray word is not named with its consequence:\n%s", stderr)
	}
	if code, stdout, _ := runCLI(t.Context(), "status", "-h"); code != 0 || !strings.Contains(stdout, "usage: shardloop status") {
		t.Errorf("status -h: exit %d, stdout %q; want 0 and the usage", code, stdout)
	}
}

func TestRunFlags_CheckedWithTheFunctionsLimitsNamingTheFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--poll-interval", "50ms"}, []string{"--poll-interval 50ms", "from 200ms to 1m0s", "5 GetRecords calls a second"}},
		{[]string{"--poll-interval", "0s"}, []string{"--poll-interval 0s", "from 200ms"}},
		{[]string{"--run-length", "1s"}, []string{"--run-length 1s", "from 5s to 14m0s"}},
		{[]string{"--batch-size", "0"}, []string{"--batch-size 0", "from 1 to 10000"}},
		{[]string{"--parallelization-factor", "11"}, []string{"--parallelization-factor 11", "from 1 to 10", "ParallelizationFactor"}},
		{[]string{"--parallelization-factor", "0"}, []string{"--parallelization-factor 0", "from 1 to 10"}},
		{[]string{"--create-shards", "-1"}, []string{"--create-shards -1"}},
		{[]string{"--read-ahead-mib", "0"}, []string{"--read-ahead-mib 0", "from 1 to 1024", "MiB of records read"}},
		{[]string{"--confirm-skip"}, []string{"--confirm-skip without --start"}},
		{[]string{"--deployed-at", "2026-12-01 10:00"}, []string{`--deployed-at "2026-12-01 10:00"`, "RFC 3339"}},
		{[]string{"--target-timeout", "16m"}, []string{"--target-timeout 16m0s", "15m0s"}},
		{[]string{"--start", "yesterday"}, []string{`--start "yesterday"`, "RFC 3339"}},
		{[]string{"--start", "timestamp:2024-13-01T00:00:00Z"}, []string{"--start"}},
		{[]string{"--start", "sequence:4959"}, []string{"--start", "sequence:<shard id>:<sequence number>"}},
		{[]string{"--invoke-identity-arn", "arn:aws:iam::000000000000"}, []string{"--invoke-identity-arn", "role/<name>"}},
		{[]string{"--stream", ""}, []string{"--stream is required"}},
	} {
		args := append([]string{"--stream", "orders"}, c.args...)
		_, _, err := parseRunFlags(args)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("%v: err = %v, want a usage error", c.args, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %q lacks %q", c.args, err, w)
			}
		}
		if strings.Contains(err.Error(), "Subscriptions[") || strings.Contains(err.Error(), "coordinator:") {
			t.Errorf("%v: %q names internal fields", c.args, err)
		}
	}
}

func TestRunFlags_StartTakesWhatResetTakesAndNoneByDefault(t *testing.T) {
	for _, c := range []struct{ start, want string }{
		{"", ""},
		{"latest", "latest"},
		{"horizon", "horizon"},
		{"timestamp:1700000000000", "timestamp:1700000000000"},
		{"timestamp:2023-11-14T22:13:20Z", "timestamp:1700000000000"},
		{"sequence:shardId-000000000001:4959", "sequence:shardId-000000000001:4959"},
		// The trigger's words: the same starts.
		{"TRIM_HORIZON", "horizon"},
		{"LATEST", "latest"},
		{"AT_TIMESTAMP:1700000000", "timestamp:1700000000000"},
		{"AT_TIMESTAMP:2023-11-14T22:13:20Z", "timestamp:1700000000000"},
	} {
		args := []string{"--stream", "orders"}
		if c.start != "" {
			args = append(args, "--start", c.start)
		}
		f, _, err := parseRunFlags(args)
		if err != nil || f.start != c.want {
			t.Errorf("--start %q: %q, %v; want %q", c.start, f.start, err, c.want)
		}
	}
	f, _, err := parseRunFlags([]string{"--stream", "orders"})
	if err != nil || f.poll != time.Second || f.batch != 100 || f.targetTimeout != 0 {
		t.Errorf("defaults %+v, %v", f, err)
	}
}

// silentPeer accepts connections, reads what comes and never answers.
func silentPeer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(io.Discard, c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "http://" + ln.Addr().String()
}

// An endpoint that accepts connections and never answers: run and status
// fail on their own, well before the test's minute, naming the endpoint
// and the operation.
func TestRunAndStatus_SilentEndpointFailsInBoundedTimeNamingEndpointAndOperation(t *testing.T) {
	noAWSFiles(t)
	url := silentPeer(t)
	t.Setenv("AWS_ENDPOINT_URL", url)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	type result struct {
		code   int
		stderr string
	}
	cmds := map[string][]string{
		"status": {"status", "--stream", "orders", "--table", "leases"},
		"run":    {"run", "--stream", "orders", "--table", "leases"},
	}
	results := make(chan struct {
		name string
		result
	}, len(cmds))
	for name, args := range cmds {
		go func() {
			code, _, stderr := runCLI(ctx, args...)
			results <- struct {
				name string
				result
			}{name, result{code, stderr}}
		}()
	}
	for range cmds {
		r := <-results
		if ctx.Err() != nil {
			t.Fatalf("%s outlived the test's minute", r.name)
		}
		if r.code != 1 {
			t.Errorf("%s: exit status %d, want 1\n%s", r.name, r.code, r.stderr)
		}
		for _, want := range []string{"Kinesis", "no answer from " + url, "attempt timeout"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%s: stderr lacks %q:\n%s", r.name, want, r.stderr)
			}
		}
	}
}

func TestRun_MissingStreamIsAnErrorNamingStreamEndpointAndCreateShards(t *testing.T) {
	emulatorEnv(t)
	stream := testaws.Name(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	code, stdout, stderr := runCLI(ctx, "run", "--stream", stream)
	if code != 1 || stdout != "" {
		t.Fatalf("exit status %d, stdout %q; want 1 and nothing printed\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"--stream " + stream, "no such stream at " + testaws.Endpoint(t, emulators.Kinesis), "--create-shards"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

// stsPeer answers GetCallerIdentity (the query protocol) for an
// assumed-role session.
func stsPeer(t *testing.T, arn string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.Form.Get("Action") != "GetCallerIdentity" {
			http.Error(w, "unknown action", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/xml")
		fmt.Fprintf(w, `<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><GetCallerIdentityResult><Arn>%s</Arn><UserId>AROAEXAMPLE:dev</UserId><Account>000000000000</Account></GetCallerIdentityResult><ResponseMetadata><RequestId>1</RequestId></ResponseMetadata></GetCallerIdentityResponse>`, arn)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// lambdaPeer answers the Lambda Invoke API and keeps each payload; each
// invocation takes delay. GetFunctionConfiguration answers a 10 s timeout.
type lambdaPeer struct {
	delay    time.Duration
	mu       sync.Mutex
	payloads [][]byte
	inFlight int
	most     int // invocations in flight at once, at most
}

func (p *lambdaPeer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if serveConfiguration(w, r) {
		return
	}
	b, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	p.inFlight++
	p.most = max(p.most, p.inFlight)
	p.mu.Unlock()
	time.Sleep(p.delay)
	p.mu.Lock()
	p.inFlight--
	p.payloads = append(p.payloads, b)
	p.mu.Unlock()
	w.Header().Set("X-Amz-Executed-Version", "$LATEST")
	_, _ = w.Write([]byte(`{}`))
}

// serveConfiguration answers a GetFunctionConfiguration request with a
// function whose timeout is 10 s, and reports whether r was one.
func serveConfiguration(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/configuration") {
		return false
	}
	_, _ = w.Write([]byte(`{"FunctionName":"my-fn","Timeout":10}`))
	return true
}

func (p *lambdaPeer) records() []map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []map[string]any
	for _, b := range p.payloads {
		var ev struct{ Records []map[string]any }
		if json.Unmarshal(b, &ev) == nil {
			out = append(out, ev.Records...)
		}
	}
	return out
}

// run --stream <name> --target F: the records' eventSourceARN is the
// stream's ARN, and invokeIdentityArn the role of the caller's assumed-role
// session, as Lambda's event would carry them.
func TestRun_RecordsCarryTheStreamARNAndTheCallersRole(t *testing.T) {
	kc := testaws.Kinesis(t)
	stream := testaws.Name(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := shards.CreateIfMissing(ctx, kc, stream, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(stream), PartitionKey: aws.String("k"), Data: []byte("r0")}); err != nil {
		t.Fatal(err)
	}
	emulatorEnv(t)
	peer := &lambdaPeer{}
	srv := httptest.NewServer(peer)
	defer srv.Close()
	t.Setenv("AWS_ENDPOINT_URL_LAMBDA", srv.URL)
	t.Setenv("AWS_ENDPOINT_URL_STS", stsPeer(t, "arn:aws:sts::000000000000:assumed-role/dev-reader/alice"))

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	var stderr string
	go func() {
		defer close(done)
		_, _, stderr = runCLI(runCtx, "run", "--stream", stream, "--target", "my-fn", "--start", "horizon", "--poll-interval", "200ms")
	}()
	for len(peer.records()) == 0 && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	<-done
	recs := peer.records()
	if len(recs) == 0 {
		t.Fatalf("nothing delivered\n%s", stderr)
	}
	out, err := kc.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
	if err != nil {
		t.Fatal(err)
	}
	want := aws.ToString(out.StreamDescriptionSummary.StreamARN)
	if recs[0]["eventSourceARN"] != want {
		t.Errorf("eventSourceARN = %v, want %s", recs[0]["eventSourceARN"], want)
	}
	if got := recs[0]["invokeIdentityArn"]; got != "arn:aws:iam::000000000000:role/dev-reader" {
		t.Errorf("invokeIdentityArn = %v, want the session's role arn:aws:iam::000000000000:role/dev-reader\n%s", got, stderr)
	}
	if !strings.Contains(stderr, "caller's identity") {
		t.Errorf("the log does not say where invokeIdentityArn came from:\n%s", stderr)
	}
}

func TestInvokeIdentityOf_AssumedRoleBecomesTheRoleARN(t *testing.T) {
	for _, c := range []struct{ caller, want string }{
		{"arn:aws:sts::123456789012:assumed-role/shardloop-reader/i-0abc", "arn:aws:iam::123456789012:role/shardloop-reader"},
		{"arn:aws-cn:sts::123456789012:assumed-role/r/s", "arn:aws-cn:iam::123456789012:role/r"},
		{"arn:aws:iam::123456789012:user/alice", "arn:aws:iam::123456789012:user/alice"},
		{"arn:aws:iam::123456789012:root", "arn:aws:iam::123456789012:root"},
	} {
		if got, _ := invokeIdentityOf(c.caller); got != c.want {
			t.Errorf("invokeIdentityOf(%s) = %s, want %s", c.caller, got, c.want)
		}
	}
	if _, note := invokeIdentityOf("arn:aws:sts::123456789012:assumed-role/r/s"); !strings.Contains(note, "path") {
		t.Errorf("the note on an assumed role does not say its path is unknown: %q", note)
	}
}

// run --parallelization-factor 4: four lanes invoke the target at once,
// and each key's records still arrive in the order they were put.
func TestRun_ParallelizationFactorInvokesTheTargetFromLanesKeepingEachKeysOrder(t *testing.T) {
	kc := testaws.Kinesis(t)
	stream := testaws.Name(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := shards.CreateIfMissing(ctx, kc, stream, 1); err != nil {
		t.Fatal(err)
	}
	const n, keys = 200, 20
	var entries []ktypes.PutRecordsRequestEntry
	for i := range n {
		entries = append(entries, ktypes.PutRecordsRequestEntry{PartitionKey: aws.String(fmt.Sprint("key-", i%keys)), Data: []byte(fmt.Sprint(i))})
	}
	if _, err := kc.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries}); err != nil {
		t.Fatal(err)
	}
	emulatorEnv(t)
	peer := &lambdaPeer{delay: 100 * time.Millisecond}
	srv := httptest.NewServer(peer)
	defer srv.Close()
	t.Setenv("AWS_ENDPOINT_URL_LAMBDA", srv.URL)
	t.Setenv("AWS_ENDPOINT_URL_STS", stsPeer(t, "arn:aws:sts::000000000000:assumed-role/dev-reader/alice"))

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	var stderr string
	go func() {
		defer close(done)
		_, _, stderr = runCLI(runCtx, "run", "--stream", stream, "--target", "my-fn", "--start", "horizon",
			"--batch-size", "10", "--parallelization-factor", "4")
	}()
	for len(peer.records()) < n && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	<-done
	recs := peer.records()
	if len(recs) < n {
		t.Fatalf("delivered %d of %d\n%s", len(recs), n, stderr)
	}
	last := map[string]int{}
	for _, r := range recs {
		k := r["kinesis"].(map[string]any)
		key := k["partitionKey"].(string)
		data, _ := base64.StdEncoding.DecodeString(k["data"].(string))
		var i int
		fmt.Sscan(string(data), &i)
		if prev, ok := last[key]; ok && i <= prev {
			t.Fatalf("%s: record %d after %d", key, i, prev)
		}
		last[key] = i
	}
	peer.mu.Lock()
	most := peer.most
	peer.mu.Unlock()
	if most < 2 || most > 4 {
		t.Errorf("at most %d invocations at once, want 2 to 4 (the factor)", most)
	}
}
