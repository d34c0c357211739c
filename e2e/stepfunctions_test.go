package e2e

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// loopShape is what the driver takes from template/statemachine.asl.json:
// the retry of the Read task on Lambda service errors. loadLoopShape fails
// the test when the ASL no longer has the shape the driver mirrors.
type loopShape struct {
	RetryErrors     []string
	IntervalSeconds float64
	MaxAttempts     int
	BackoffRate     float64
	MaxDelaySeconds float64
}

type aslState struct {
	Type     string
	Resource string
	Next     string
	Default  string
	Retry    []struct {
		ErrorEquals     []string
		IntervalSeconds float64
		MaxAttempts     int
		BackoffRate     float64
		MaxDelaySeconds float64
	}
	Choices []struct {
		And []struct {
			Variable      string
			IsPresent     *bool
			BooleanEquals *bool
		}
		Next string
	}
}

// readASL returns template/statemachine.asl.json as the repository has it.
func readASL(t testing.TB) []byte {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "template", "statemachine.asl.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func loadLoopShape(t testing.TB) loopShape {
	t.Helper()
	var def struct {
		StartAt string
		States  map[string]aslState
	}
	if err := json.Unmarshal(readASL(t), &def); err != nil {
		t.Fatalf("statemachine.asl.json: %v", err)
	}
	bad := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("template/statemachine.asl.json no longer has the shape this test drives (update the driver): "+format, args...)
	}
	read, ok := def.States[def.StartAt]
	if !ok || read.Type != "Task" || read.Resource != "arn:aws:states:::lambda:invoke" {
		bad("StartAt %q is not a lambda:invoke Task", def.StartAt)
	}
	choice, ok := def.States[read.Next]
	if !ok || choice.Type != "Choice" {
		bad("%s.Next %q is not a Choice", def.StartAt, read.Next)
	}
	next := map[string]string{} // variable tested true -> next state
	for _, c := range choice.Choices {
		for _, cond := range c.And {
			if cond.BooleanEquals != nil && *cond.BooleanEquals {
				next[cond.Variable] = c.Next
			}
		}
	}
	if can := def.States[next["$.continueAsNew"]]; can.Resource != "arn:aws:states:::states:startExecution" {
		bad("$.continueAsNew does not lead to a states:startExecution task")
	}
	if next["$.continue"] != def.StartAt {
		bad("$.continue does not lead back to %s", def.StartAt)
	}
	if def.States[choice.Default].Type != "Succeed" {
		bad("the Choice's Default is not a Succeed state")
	}
	for _, r := range read.Retry {
		for _, e := range r.ErrorEquals {
			if e == "Lambda.ServiceException" {
				return loopShape{RetryErrors: r.ErrorEquals, IntervalSeconds: r.IntervalSeconds, MaxAttempts: r.MaxAttempts,
					BackoffRate: r.BackoffRate, MaxDelaySeconds: r.MaxDelaySeconds}
			}
		}
	}
	bad("%s has no Retry on Lambda.ServiceException", def.StartAt)
	return loopShape{}
}

// pause is the full-jitter wait before retry number attempt (1-based).
func (s loopShape) pause(attempt int) time.Duration {
	d := s.IntervalSeconds * math.Pow(s.BackoffRate, float64(attempt-1))
	if s.MaxDelaySeconds > 0 {
		d = min(d, s.MaxDelaySeconds)
	}
	return time.Duration(rand.Float64() * d * float64(time.Second))
}

// Execution statuses.
const (
	running   = "RUNNING"
	succeeded = "SUCCEEDED"
	failed    = "FAILED"
	aborted   = "ABORTED" // killed by the test
)

// execution is one Step Functions execution of the shard loop.
type execution struct {
	Name, ARN    string
	StateMachine string
	Input        json.RawMessage
	Parent       string // the execution that continued as this one
	Shard        string
	Owner        string
	Started      time.Time

	mu         sync.Mutex
	status     string
	iterations int
	lastReason string
	err        error
	current    *claim // the instance serving the Read in flight
	killed     bool
}

// execInfo is a snapshot of an execution.
type execInfo struct {
	Name, Parent, Shard, Owner, Status, LastReason string
	Iterations                                     int
	Err                                            error
	Started                                        time.Time
}

func (e *execution) info() execInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	return execInfo{Name: e.Name, Parent: e.Parent, Shard: e.Shard, Owner: e.Owner, Status: e.status,
		LastReason: e.lastReason, Iterations: e.iterations, Err: e.err, Started: e.Started}
}

// finish ends a running execution with status; it reports whether it did.
func (e *execution) finish(status string, err error) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.status == running {
		e.status, e.err = status, err
		return true
	}
	return false
}

// finish ends e and, for a failed or aborted execution while the fake runs,
// tells the status-change hook, as Step Functions sends EventBridge the
// event the deployment's rule matches.
func (f *fakeSFN) finish(stateMachineARN string, e *execution, status string, err error) {
	if !e.finish(status, err) || (status != failed && status != aborted) || f.ctx.Err() != nil {
		return
	}
	f.mu.Lock()
	hook := f.onEnd
	f.mu.Unlock()
	if hook != nil {
		hook(stateMachineARN, e, status)
	}
}

// setOnEnd installs the hook that learns of each execution that ended
// FAILED or ABORTED.
func (f *fakeSFN) setOnEnd(hook func(stateMachineARN string, e *execution, status string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onEnd = hook
}

var (
	errExecutionExists = errors.New("ExecutionAlreadyExists")
	errKilled          = errors.New("killed by the test")
)

// fakeSFN serves Step Functions' StartExecution on loopback and runs each
// started execution as template/statemachine.asl.json would: Read (invoke
// the shardreader with the state; retry Lambda service errors), then
// Decide: continueAsNew → start a fresh execution with the output and
// succeed; continue → Read again with the output; else succeed.
type fakeSFN struct {
	t        testing.TB
	host     *lambdaHost
	readerFn string
	shape    loopShape
	URL      string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	srv    *http.Server

	mu    sync.Mutex
	execs map[string]*execution
	order []*execution
	onEnd func(stateMachineARN string, e *execution, status string)
}

func newFakeSFN(t testing.TB, host *lambdaHost, readerFn string, shape loopShape) (*fakeSFN, error) {
	ctx, cancel := context.WithCancel(context.Background())
	f := &fakeSFN{t: t, host: host, readerFn: readerFn, shape: shape, ctx: ctx, cancel: cancel, execs: map[string]*execution{}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f.URL = "http://" + l.Addr().String()
	f.srv = &http.Server{Handler: http.HandlerFunc(f.handle)}
	go func() { _ = f.srv.Serve(l) }()
	return f, nil
}

// handle speaks the SDK's JSON 1.0 protocol for StartExecution.
func (f *fakeSFN) handle(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, typ, msg string) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": typ, "message": msg})
	}
	if target := r.Header.Get("X-Amz-Target"); target != "AWSStepFunctions.StartExecution" {
		fail(http.StatusBadRequest, "UnknownOperationException", "the fake serves StartExecution only, not "+target)
		return
	}
	var in struct {
		StateMachineArn string `json:"stateMachineArn"`
		Name            string `json:"name"`
		Input           string `json:"input"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.StateMachineArn == "" {
		fail(http.StatusBadRequest, "ValidationException", fmt.Sprintf("bad StartExecution request: %v", err))
		return
	}
	if in.Input == "" {
		in.Input = "{}"
	}
	e, err := f.start(in.StateMachineArn, in.Name, json.RawMessage(in.Input), "")
	if errors.Is(err, errExecutionExists) {
		fail(http.StatusBadRequest, "ExecutionAlreadyExists", "Execution Already Exists: '"+e.ARN+"'")
		return
	}
	if err != nil {
		fail(http.StatusBadRequest, "InvalidExecutionInput", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"executionArn": e.ARN,
		"startDate":    float64(time.Now().UnixMilli()) / 1000,
	})
}

// start registers an execution and runs it. A name already used returns
// that execution with errExecutionExists.
func (f *fakeSFN) start(stateMachineARN, name string, input json.RawMessage, parent string) (*execution, error) {
	if !json.Valid(input) {
		return nil, fmt.Errorf("input is not JSON: %.100s", input)
	}
	var loop struct {
		ShardID string `json:"shardId"`
		Owner   string `json:"owner"`
	}
	_ = json.Unmarshal(input, &loop)
	f.mu.Lock()
	defer f.mu.Unlock()
	if name == "" {
		name = fmt.Sprintf("exec-%d", len(f.order)+1)
	}
	if e, ok := f.execs[name]; ok {
		return e, errExecutionExists
	}
	if f.ctx.Err() != nil {
		return nil, errors.New("step functions fake stopped")
	}
	arn := strings.Replace(stateMachineARN, ":stateMachine:", ":execution:", 1) + ":" + name
	e := &execution{Name: name, ARN: arn, StateMachine: stateMachineARN, Input: input, Parent: parent, Shard: loop.ShardID, Owner: loop.Owner, Started: time.Now(), status: running}
	f.execs[name] = e
	f.order = append(f.order, e)
	f.wg.Go(func() { f.run(stateMachineARN, e) })
	return e, nil
}

func (f *fakeSFN) run(stateMachineARN string, e *execution) {
	state := e.Input
	for {
		out, err := f.read(e, state)
		if err != nil {
			status := failed
			if errors.Is(err, errKilled) || f.ctx.Err() != nil {
				status = aborted
			} else {
				f.t.Logf("execution %s (shard %s, owner %s) failed: %v", e.Name, e.Shard, e.Owner, err)
			}
			f.finish(stateMachineARN, e, status, err)
			return
		}
		var d struct {
			Continue      bool   `json:"continue"`
			ContinueAsNew bool   `json:"continueAsNew"`
			Reason        string `json:"reason"`
		}
		if err := json.Unmarshal(out, &d); err != nil {
			f.t.Logf("execution %s: shardreader output is not the loop state: %v: %.200s", e.Name, err, out)
			f.finish(stateMachineARN, e, failed, err)
			return
		}
		e.mu.Lock()
		e.iterations++
		e.lastReason = d.Reason
		e.mu.Unlock()
		switch {
		case d.ContinueAsNew:
			// States.Hash($$.Execution.Id, 'SHA-1'): a retried start is
			// idempotent, so an existing execution counts as started.
			sum := sha1.Sum([]byte(e.ARN))
			_, err := f.start(stateMachineARN, hex.EncodeToString(sum[:]), out, e.Name)
			if err != nil && !errors.Is(err, errExecutionExists) {
				f.finish(stateMachineARN, e, failed, fmt.Errorf("continue as new: %w", err))
				return
			}
			f.finish(stateMachineARN, e, succeeded, nil)
			return
		case d.Continue:
			state = out
		default:
			f.finish(stateMachineARN, e, succeeded, nil)
			return
		}
	}
}

// read is the Read task: one shardreader invoke, retried on Lambda service
// errors (the emulator gone, 5xx, 429) as the ASL's Retry says. A function
// error fails the execution, as in the ASL (no Retry for it).
func (f *fakeSFN) read(e *execution, state json.RawMessage) (json.RawMessage, error) {
	for attempt := 0; ; attempt++ {
		e.mu.Lock()
		killed := e.killed
		e.mu.Unlock()
		if killed {
			return nil, errKilled
		}
		res, err := f.host.invoke(f.ctx, f.readerFn, state, func(c claim) {
			e.mu.Lock()
			e.current = &c
			e.mu.Unlock()
		})
		e.mu.Lock()
		e.current, killed = nil, e.killed
		e.mu.Unlock()
		switch {
		case killed:
			return nil, errKilled
		case f.ctx.Err() != nil:
			return nil, f.ctx.Err()
		case err == nil && res.FunctionError:
			return nil, fmt.Errorf("Lambda.Unknown: function error on %s: %.300s", res.Instance, res.Body)
		case err == nil && res.Status == http.StatusOK:
			return res.Body, nil
		case err == nil:
			err = fmt.Errorf("Lambda.ServiceException: status %d from %s: %.300s", res.Status, res.Instance, res.Body)
		}
		if attempt >= f.shape.MaxAttempts {
			return nil, err
		}
		f.t.Logf("execution %s: Read failed, retrying: %v", e.Name, err)
		select {
		case <-time.After(f.shape.pause(attempt + 1)):
		case <-f.ctx.Done():
			return nil, f.ctx.Err()
		}
	}
}

// killMidRead waits until a running execution of shard is inside a Read,
// then kills the emulator serving it (the loop's Lambda sandbox dies) and
// stops driving the execution, so that its lease expires unrenewed.
func (f *fakeSFN) killMidRead(ctx context.Context, shard string) (info execInfo, midRead bool, err error) {
	for {
		for _, e := range f.snapshotExecs() {
			e.mu.Lock()
			c := e.current
			ok := e.Shard == shard && e.status == running && c != nil
			if ok {
				e.killed = true
			}
			e.mu.Unlock()
			if ok {
				// If the Read ended just now, the claim no longer holds and
				// nothing is killed: the execution stops anyway, and its
				// lease expires the same way.
				midRead = c.kill()
				f.finish(e.StateMachine, e, aborted, errKilled)
				return e.info(), midRead, nil
			}
		}
		select {
		case <-ctx.Done():
			return execInfo{}, false, fmt.Errorf("no execution of %s inside a Read to kill: %w", shard, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (f *fakeSFN) snapshotExecs() []*execution {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*execution(nil), f.order...)
}

// executions returns every execution so far, in start order.
func (f *fakeSFN) executions() []execInfo {
	var out []execInfo
	for _, e := range f.snapshotExecs() {
		out = append(out, e.info())
	}
	return out
}

// stop ends every execution's driving; call before the host closes, and
// wait after it (the Reads in flight end when the emulators die).
func (f *fakeSFN) stop() {
	f.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_ = f.srv.Shutdown(ctx)
	cancel()
}

func (f *fakeSFN) wait() { f.wg.Wait() }
