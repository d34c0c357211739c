package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/shardloop/shardloop/internal/emulators"
	"github.com/shardloop/shardloop/internal/testaws"
	"github.com/shardloop/shardloop/pkg/coordinator"
	"github.com/shardloop/shardloop/pkg/lease"
)

// The ASL interpreter test runs template/statemachine.asl.json itself in
// aws-local-stepfunctions (e2e/aslrunner, pinned by its package-lock.json),
// where the e2e test drives the ASL's shape in Go (fakeSFN). The
// interpreter does not implement the optimized integrations: run.mjs serves
// lambda:invoke from the Lambda host (the real shardreader in the RIE) and
// states:startExecution by starting the next execution itself, and the
// ASL's Parameters, OutputPath, Choice rules, intrinsics and context object
// are evaluated by the interpreter.

const (
	aslStateMachineARN = "arn:aws:states:us-east-1:000000000000:stateMachine:shardloop-asl"
	aslShardReaderARN  = "arn:aws:lambda:us-east-1:000000000000:function:shardreader" // the host maps it to "shardreader"
)

var (
	aslRunnerOnce sync.Once
	aslRunnerNode string // node >= 22 from e2e/aslrunner/node_modules
	aslRunnerErr  error
)

// aslRunner returns the node binary and run.mjs, running `npm ci` in
// e2e/aslrunner once per test binary when its node_modules is missing or
// older than the lockfile (offline from the npm cache after the first time).
func aslRunner(t testing.TB) (node, script string) {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "e2e", "aslrunner")
	aslRunnerOnce.Do(func() {
		began := time.Now()
		installed, err := aslRunnerInstall(dir)
		if err != nil {
			aslRunnerErr = err
			return
		}
		if installed {
			t.Logf("npm ci in e2e/aslrunner took %s", time.Since(began).Round(time.Millisecond))
		}
		aslRunnerNode = filepath.Join(dir, "node_modules", ".bin", "node")
		out, err := exec.Command(aslRunnerNode, "--version").Output()
		if err != nil || !strings.HasPrefix(string(out), "v22.") {
			aslRunnerErr = fmt.Errorf("e2e/aslrunner: %s --version: %q, %v; want v22 (the node@22 package of package.json)", aslRunnerNode, out, err)
		}
	})
	if aslRunnerErr != nil {
		t.Fatalf("the ASL interpreter (npm packages of e2e/aslrunner) is not usable: %v\n"+
			"fix: cd e2e/aslrunner && npm ci (needs npm and, the first time, the npm registry)", aslRunnerErr)
	}
	return aslRunnerNode, filepath.Join(dir, "run.mjs")
}

// aslRunnerInstall runs npm ci unless node_modules is newer than the
// lockfile (the same stamp rule as tools/emulators in the Makefile).
func aslRunnerInstall(dir string) (bool, error) {
	stamp := filepath.Join(dir, "node_modules", ".installed")
	lock, err := os.Stat(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return false, err
	}
	fresh := func() bool {
		st, err := os.Stat(stamp)
		if err != nil || st.ModTime().Before(lock.ModTime()) {
			return false
		}
		for _, p := range []string{"node_modules/.bin/node", "node_modules/aws-local-stepfunctions/package.json"} {
			if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
				return false
			}
		}
		return true
	}
	if fresh() {
		return false, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return false, fmt.Errorf("npm is not on PATH, and e2e/aslrunner/node_modules is missing or older than package-lock.json: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--prefer-offline")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = procAttr()
	if err := startLocked(cmd); err != nil {
		return false, fmt.Errorf("start npm ci: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { killGroup(cmd.Process.Pid) })
	err = cmd.Wait()
	stop()
	if err != nil {
		return true, fmt.Errorf("npm ci in %s failed (%v): %s", dir, errors.Join(err, ctx.Err()), tail(out.String(), 30))
	}
	if err := os.WriteFile(stamp, nil, 0o644); err != nil {
		return true, err
	}
	if !fresh() {
		return true, fmt.Errorf("npm ci in %s succeeded but node_modules lacks node or aws-local-stepfunctions: %s", dir, tail(out.String(), 30))
	}
	return true, nil
}

func tail(s string, lines int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(ls[max(0, len(ls)-lines):], "\n")
}

// aslEvent is one line of run.mjs: an interpreter event or a runner record.
type aslEvent struct {
	Type      string `json:"type"`
	Execution string `json:"execution"`
	State     *struct {
		Name   string          `json:"name"`
		Type   string          `json:"type"`
		Input  json.RawMessage `json:"input"`
		Output json.RawMessage `json:"output"`
	} `json:"state"`
	Input   json.RawMessage `json:"input"`   // ExecutionStarted, StartExecutionNotRun
	Output  json.RawMessage `json:"output"`  // ExecutionSucceeded, ExecutionEnded
	Request json.RawMessage `json:"request"` // StartExecution
	Status  string          `json:"status"`  // ExecutionEnded
	Name    string          `json:"name"`    // StartExecutionNotRun
	ErrName string          `json:"Error"`   // StateFailed, ExecutionFailed
	Cause   json.RawMessage `json:"Cause"`
}

// aslRun is one run of run.mjs.
type aslRun struct {
	t      *testing.T
	cmd    *exec.Cmd
	events chan aslEvent
	stderr *bytes.Buffer
	done   chan struct{} // closed when stdout is drained and the process waited
	err    error
}

// startASLRun starts run.mjs on the real ASL file with the first
// execution's name and input; continue-as-new runs at most maxExecutions.
func startASLRun(t *testing.T, lambdaURL, execName string, input any, maxExecutions int) *aslRun {
	t.Helper()
	node, script := aslRunner(t)
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := json.Marshal(map[string]any{
		"definition": filepath.Join(root, "template", "statemachine.asl.json"),
		// As CDK (infra/shardloop ShardReaderSubstitution) and SAM
		// (DefinitionSubstitutions) do.
		"substitutions":   map[string]string{"ShardReaderArn": aslShardReaderARN},
		"lambdaEndpoint":  lambdaURL,
		"stateMachineArn": aslStateMachineARN,
		"executionName":   execName,
		"input":           input,
		"maxExecutions":   maxExecutions,
	})
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(t.TempDir(), "aslrun.json")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	r := &aslRun{t: t, events: make(chan aslEvent, 1024), stderr: &bytes.Buffer{}, done: make(chan struct{})}
	r.cmd = exec.Command(node, script, cfgPath)
	r.cmd.Dir = filepath.Dir(script)
	r.cmd.Stderr = r.stderr
	r.cmd.SysProcAttr = procAttr() // dies with the test binary
	stdout, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := startLocked(r.cmd); err != nil {
		t.Fatalf("start the ASL runner: %v", err)
	}
	go func() {
		defer close(r.done)
		defer close(r.events)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			var ev aslEvent
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				r.err = fmt.Errorf("runner wrote a line that is not an event: %v: %.300s", err, sc.Text())
				continue
			}
			r.events <- ev
		}
		if err := r.cmd.Wait(); err != nil && r.err == nil {
			r.err = fmt.Errorf("runner: %w", err)
		}
	}()
	t.Cleanup(func() {
		killGroup(r.cmd.Process.Pid)
		for range r.events { // drain, so the reader goroutine ends
		}
		<-r.done
		if t.Failed() && r.stderr.Len() > 0 {
			t.Logf("ASL runner stderr:\n%s", tail(r.stderr.String(), 40))
		}
	})
	return r
}

// collect reads events until the runner is done, calling each (if set) on
// every event, and fails after limit.
func (r *aslRun) collect(limit time.Duration, each func(aslEvent)) []aslEvent {
	r.t.Helper()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	var evs []aslEvent
	for {
		select {
		case ev, ok := <-r.events:
			if !ok {
				<-r.done
				if r.err != nil {
					r.t.Fatalf("ASL runner failed: %v\nstderr:\n%s", r.err, tail(r.stderr.String(), 40))
				}
				if len(evs) == 0 || evs[len(evs)-1].Type != "RunnerDone" {
					r.t.Fatalf("ASL runner ended without RunnerDone\nstderr:\n%s", tail(r.stderr.String(), 40))
				}
				return evs
			}
			evs = append(evs, ev)
			if each != nil {
				each(ev)
			}
		case <-timer.C:
			killGroup(r.cmd.Process.Pid)
			r.t.Fatalf("the ASL run did not end within %s; events so far:\n%s", limit, describeEvents(evs))
		}
	}
}

func describeEvents(evs []aslEvent) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "  %-12.12s %s", ev.Execution, ev.Type)
		if ev.State != nil {
			fmt.Fprintf(&b, " %s", ev.State.Name)
		}
		if ev.ErrName != "" {
			fmt.Fprintf(&b, " %s: %.300s", ev.ErrName, ev.Cause)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// path is the states an execution entered, in order.
func statePath(evs []aslEvent, exec string) []string {
	var out []string
	for _, ev := range evs {
		if ev.Execution == exec && ev.Type == "StateEntered" && ev.State != nil {
			out = append(out, ev.State.Name)
		}
	}
	return out
}

// loopState is the part of reader.State the test checks (docs/state.md).
type loopState struct {
	Stream        string `json:"stream"`
	ShardID       string `json:"shardId"`
	Owner         string `json:"owner"`
	Iteration     int    `json:"iteration"`
	Continue      bool   `json:"continue"`
	ContinueAsNew bool   `json:"continueAsNew"`
	Reason        string `json:"reason"`
	Checkpoint    string `json:"checkpoint"`
	Records       int    `json:"records"`
}

// readOutputs is the output of each Read state of exec (after its
// OutputPath), in order.
func readOutputs(t *testing.T, evs []aslEvent, exec string) []loopState {
	t.Helper()
	var out []loopState
	for _, ev := range evs {
		if ev.Execution == exec && ev.Type == "StateExited" && ev.State != nil && ev.State.Name == "Read" {
			var s loopState
			if err := json.Unmarshal(ev.State.Output, &s); err != nil {
				t.Fatalf("Read's output in the interpreter is not the loop state (OutputPath $.Payload): %v: %.300s", err, ev.State.Output)
			}
			out = append(out, s)
		}
	}
	return out
}

func findEvent(evs []aslEvent, exec, typ string) (aslEvent, bool) {
	for _, ev := range evs {
		if ev.Execution == exec && ev.Type == typ {
			return ev, true
		}
	}
	return aslEvent{}, false
}

// TestASLInInterpreterLoopsAndContinuesAsNewWithTheRealShardReader runs
// template/statemachine.asl.json in aws-local-stepfunctions with its Read
// task served by the real shardreader in the Runtime Interface Emulator
// (kinesis-local, dynalite, the sample target): one loop that reaches
// continue-as-new and is continued by a second execution, and one loop that
// finds its lease held by another owner and ends.
func TestASLInInterpreterLoopsAndContinuesAsNewWithTheRealShardReader(t *testing.T) {
	if !supported {
		t.Skip("the Lambda bootstraps are linux binaries")
	}
	began := time.Now()
	aslRunner(t) // install first: a missing package fails before the build
	bins := buildBinaries(t)
	kin := testaws.Kinesis(t)
	ddb := testaws.Dynamo(t)
	kinURL := testaws.Endpoint(t, emulators.Kinesis)
	ddbURL := testaws.Endpoint(t, emulators.DynamoDB)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	table := testaws.Name(t)
	if err := lease.CreateTable(ctx, ddb, table); err != nil {
		t.Fatal(err)
	}
	store, err := lease.NewDynamoStore(ddb, table)
	if err != nil {
		t.Fatal(err)
	}
	host, work, received := serveHost(t, bins)
	t.Cleanup(func() {
		host.close()
		if t.Failed() {
			host.logTails(30)
		}
	})
	base := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + work, "TMPDIR=" + os.TempDir(),
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		"AWS_EC2_METADATA_DISABLED=true",
	}
	env := func(extra ...string) []string { return append(slices.Clone(base), extra...) }
	if err := errors.Join(
		host.add("shardreader", bins.ShardReader, 1, 15*time.Second, env(
			"AWS_ENDPOINT_URL_KINESIS="+kinURL,
			"AWS_ENDPOINT_URL_DYNAMODB="+ddbURL,
			"AWS_ENDPOINT_URL_LAMBDA="+host.URL,
			"SHARDLOOP_LEASE_TABLE="+table,
			"SHARDLOOP_TARGET_FUNCTION="+targetARN,
			"SHARDLOOP_BATCH_SIZE=25",
			"SHARDLOOP_RUN_LENGTH=5s", // the least lambdaenv accepts
			"SHARDLOOP_POLL_INTERVAL=200ms",
			"SHARDLOOP_MAX_ITERATIONS=2",
		)),
		host.add("target", bins.Target, 1, 4*time.Second, env("E2E_RECORD_FILE="+received)),
	); err != nil {
		t.Fatal(err)
	}
	t.Logf("setup (npm packages, build, emulators, 2 RIE instances) took %s", time.Since(began).Round(time.Millisecond))
	if shape := loadASLRead(t); shape.TimeoutSeconds == nil {
		// Not a bug in the ASL: Step Functions' default is 99999999 s and
		// the Lambda timeout bounds the Read. An interpreter that follows
		// the ASL spec's default (60 s, as aws-local-stepfunctions does)
		// fails a Read of the default SHARDLOOP_RUN_LENGTH (60 s) with
		// States.Timeout; this test's runs are 5 s.
		t.Logf("note: the Read task has no TimeoutSeconds; aws-local-stepfunctions (and the ASL spec) default it to 60 s, Step Functions to 99999999 s")
	}

	// newShard creates a 1-shard stream and returns the coordinator's first
	// state for it, the lease taken as the coordinator takes it (start
	// position recorded for the subscription generation, then the take).
	newShard := func(t *testing.T, leaseOwner string) (coordinator.Loop, *producer) {
		t.Helper()
		stream := testaws.Name(t)
		if _, err := kin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(stream), ShardCount: aws.Int32(1)}); err != nil {
			t.Fatal(err)
		}
		waitActive(ctx, t, kin, stream)
		sum, err := kin.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
		if err != nil {
			t.Fatal(err)
		}
		shard := "shardId-000000000000"
		const gen = "asl-e2e-1"
		if _, err := store.SetStart(ctx, stream, shard, lease.Start{Position: "horizon", Generation: gen, Order: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Take(ctx, stream, shard, leaseOwner); err != nil {
			t.Fatal(err)
		}
		loop := coordinator.Loop{Stream: stream, StreamARN: aws.ToString(sum.StreamDescriptionSummary.StreamARN), ShardID: shard, Owner: coordinator.OwnerID(shard)}
		return loop, &producer{kin: kin, stream: stream, next: map[string]int{}, sent: map[string]sent{}}
	}

	t.Run("ReadReadContinueAsNew", func(t *testing.T) {
		owner := coordinator.OwnerID("shardId-000000000000")
		loop, p := newShard(t, owner)
		loop.Owner = owner
		if err := p.wave(ctx, 1, 60); err != nil {
			t.Fatal(err)
		}
		first := loop.Owner // the coordinator names the execution after the owner
		runStart := time.Now()
		run := startASLRun(t, host.URL, first, loop, 2)
		var waveErr error
		evs := run.collect(60*time.Second, func(ev aslEvent) {
			// Records that arrive once the loop has continued as new: the
			// second execution must read them from the state handed on.
			if ev.Type == "ExecutionStarted" && ev.Execution != first {
				waveErr = p.wave(ctx, 2, 40)
			}
		})
		t.Logf("two executions in the interpreter took %s", time.Since(runStart).Round(time.Millisecond))
		if waveErr != nil {
			t.Fatal(waveErr)
		}

		// ContinueAsNew's StartExecution, as the interpreter evaluated its
		// Parameters: this state machine, a name hashed from this
		// execution's id, the state as input.
		var starts []json.RawMessage
		for _, ev := range evs {
			if ev.Type == "StartExecution" {
				starts = append(starts, ev.Request)
			}
		}
		if len(starts) != 2 {
			t.Fatalf("%d StartExecution requests, want 2 (one per execution)\n%s", len(starts), describeEvents(evs))
		}
		var req struct {
			StateMachineArn, Name string
			Input                 json.RawMessage
		}
		if err := json.Unmarshal(starts[0], &req); err != nil {
			t.Fatal(err)
		}
		second := req.Name
		t.Logf("ContinueAsNew of %.16s… asked StartExecution(%s, name %s)", first, req.StateMachineArn, req.Name)
		if req.StateMachineArn != aslStateMachineARN {
			t.Errorf("StartExecution of %s, want this state machine %s ($$.StateMachine.Id)", req.StateMachineArn, aslStateMachineARN)
		}
		if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(second) {
			t.Errorf("StartExecution name %q, want the 40 hex digits of States.Hash($$.Execution.Id, 'SHA-1')", second)
		}
		// Step Functions computes a true SHA-1. aws-local-stepfunctions
		// 3.0.0's States.Hash is wrong for inputs of 56 bytes or more (an
		// execution ARN is longer; two of this test's ARNs that differ only
		// in the owner's last 16 hex digits even hash alike), so only the
		// form is checked above. One loop per runner: no name collides here.
		sum := sha1.Sum([]byte(strings.Replace(aslStateMachineARN, ":stateMachine:", ":execution:", 1) + ":" + first))
		if want := hex.EncodeToString(sum[:]); second != want {
			t.Logf("interpreter limitation: States.Hash gave %s where SHA-1 of the execution ARN is %s (its SHA-1 is wrong for inputs of 56 bytes or more)", second, want)
		}

		for _, name := range []string{first, second} {
			t.Logf("execution %.16s…: %s", name, strings.Join(statePath(evs, name), " → "))
		}
		want := []string{"Read", "Decide", "Read", "Decide", "ContinueAsNew", "Done"}
		for _, name := range []string{first, second} {
			if got := statePath(evs, name); !slices.Equal(got, want) {
				t.Errorf("execution %s went %v, want %v (SHARDLOOP_MAX_ITERATIONS=2)\n%s", name, got, want, describeEvents(evs))
			}
			end, ok := findEvent(evs, name, "ExecutionEnded")
			if !ok || end.Status != "SUCCEEDED" {
				t.Errorf("execution %s ended %q, want SUCCEEDED: %s %.300s", name, end.Status, end.ErrName, end.Cause)
			}
		}
		if t.Failed() {
			t.FailNow()
		}

		// The Read outputs (OutputPath $.Payload applied by the interpreter).
		for _, name := range []string{first, second} {
			outs := readOutputs(t, evs, name)
			if len(outs) != 2 {
				t.Fatalf("execution %s: %d Read outputs, want 2", name, len(outs))
			}
			if s := outs[0]; !s.Continue || s.ContinueAsNew || s.Iteration != 1 || s.Reason != "continue" || s.Owner != owner {
				t.Errorf("execution %s: first Read returned %+v, want continue, iteration 1, owner %s", name, s, owner)
			}
			if s := outs[1]; !s.Continue || !s.ContinueAsNew || s.Iteration != 0 || s.Owner != owner {
				t.Errorf("execution %s: second Read returned %+v, want continueAsNew with iteration reset to 0 and owner %s", name, s, owner)
			}
		}

		var handed loopState
		if err := json.Unmarshal(req.Input, &handed); err != nil {
			t.Fatalf("StartExecution Input is not the loop state: %v: %s", err, req.Input)
		}
		lastRead := readOutputs(t, evs, first)[1]
		if handed != lastRead {
			t.Errorf("state handed on %+v, want the last Read's output %+v", handed, lastRead)
		}
		if handed.Owner != owner || handed.Iteration != 0 || handed.Checkpoint == "" || handed.Stream != loop.Stream || handed.ShardID != loop.ShardID {
			t.Errorf("state handed on %+v: want owner %s kept, iteration 0, a checkpoint, stream %s shard %s", handed, owner, loop.Stream, loop.ShardID)
		}
		started, _ := findEvent(evs, second, "ExecutionStarted")
		if !jsonEqual(started.Input, req.Input) {
			t.Errorf("the second execution started with %s, not the StartExecution input %s", started.Input, req.Input)
		}
		if notRun, ok := findEvent(evs, second, "StartExecutionNotRun"); !ok {
			t.Errorf("the second execution's continue-as-new was not recorded")
		} else {
			var s loopState
			_ = json.Unmarshal(notRun.Input, &s)
			t.Logf("the second execution would continue as %s with records %d, checkpoint %s", notRun.Name, s.Records, s.Checkpoint)
		}
		if out, ok := findEvent(evs, first, "ExecutionSucceeded"); ok {
			t.Logf("the first execution's output (ContinueAsNew's StartExecution result, passed on by Done): %s", out.Output)
		}

		// Every record reached the target, in key order, and the lease row
		// is the loop's with the last record checkpointed.
		// (The first subtest: the target has received nothing else.)
		checkDelivery(t, p, readReceived(t, received))
		row, err := store.Get(ctx, loop.Stream, loop.ShardID)
		if err != nil {
			t.Fatal(err)
		}
		lastSeq := p.sent[p.order[len(p.order)-1]].seq
		if lease.LoopOwner(row.Owner) != owner || row.Checkpoint != lastSeq {
			t.Errorf("lease row owner %s checkpoint %s, want the loop %s with the last record %s", row.Owner, row.Checkpoint, owner, lastSeq)
		}
	})

	t.Run("LeaseLostEndsInDone", func(t *testing.T) {
		loop, p := newShard(t, "someone-else")
		if err := p.wave(ctx, 1, 10); err != nil {
			t.Fatal(err)
		}
		before := len(readReceived(t, received))
		run := startASLRun(t, host.URL, loop.Owner, loop, 1)
		evs := run.collect(30*time.Second, nil)
		got := statePath(evs, loop.Owner)
		t.Logf("execution %.16s…: %s", loop.Owner, strings.Join(got, " → "))
		if want := []string{"Read", "Decide", "Done"}; !slices.Equal(got, want) {
			t.Errorf("execution went %v, want %v\n%s", got, want, describeEvents(evs))
		}
		outs := readOutputs(t, evs, loop.Owner)
		if len(outs) != 1 || outs[0].Continue || outs[0].ContinueAsNew || outs[0].Reason != "lease_lost" {
			t.Errorf("Read returned %+v, want continue false, reason lease_lost", outs)
		}
		if end, _ := findEvent(evs, loop.Owner, "ExecutionEnded"); end.Status != "SUCCEEDED" {
			t.Errorf("execution ended %q (%s %.300s), want SUCCEEDED", end.Status, end.ErrName, end.Cause)
		}
		if ev, ok := findEvent(evs, loop.Owner, "StartExecution"); ok {
			t.Errorf("a loop that lost its lease continued as new: %s", ev.Request)
		}
		if n := len(readReceived(t, received)); n != before {
			t.Errorf("the loop without the lease delivered %d records", n-before)
		}
		row, err := store.Get(ctx, loop.Stream, loop.ShardID)
		if err != nil {
			t.Fatal(err)
		}
		if row.Owner != "someone-else" {
			t.Errorf("lease owner %q after lease_lost, want someone-else untouched", row.Owner)
		}
	})
	t.Logf("whole test: %s", time.Since(began).Round(time.Millisecond))
}

// loadASLRead returns the fields of the ASL's Read task this test notes.
func loadASLRead(t testing.TB) (read struct{ TimeoutSeconds *int }) {
	t.Helper()
	var def struct {
		States map[string]struct{ TimeoutSeconds *int }
	}
	if err := json.Unmarshal(readASL(t), &def); err != nil {
		t.Fatal(err)
	}
	return def.States["Read"]
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
