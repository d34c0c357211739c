package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardloop/shardloop/internal/emulators"
)

// errHostClosed is returned by invokes after the host shut down.
var errHostClosed = errors.New("lambda host closed")

// instance is one aws-lambda-rie process hosting one bootstrap. The RIE
// serves one invoke at a time and crashes on overlapping ones, so its pool
// hands it to one caller at a time.
type instance struct {
	name      string
	host      *lambdaHost
	bootstrap string
	env       []string
	timeout   time.Duration // AWS_LAMBDA_FUNCTION_TIMEOUT

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the process exited
	url  string
	gen  uint64 // counts the invokes handed this instance
}

// claim is one invoke's hold on an instance.
type claim struct {
	in  *instance
	gen uint64
}

// claim marks the instance as serving a new invoke.
func (in *instance) claim() claim {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.gen++
	return claim{in, in.gen}
}

// kill kills the instance only while it still serves this claim's invoke,
// so a kill that comes late never hits the next caller's invoke. It
// reports whether it killed.
func (c claim) kill() bool {
	c.in.mu.Lock()
	if c.in.gen != c.gen || c.in.cmd == nil {
		c.in.mu.Unlock()
		return false
	}
	done := c.in.signalLocked()
	c.in.mu.Unlock()
	<-done
	return true
}

// start launches the emulator on two fresh loopback ports and waits until it
// accepts connections. The function itself starts on the first invoke.
func (in *instance) start() error {
	ports, err := emulators.FreePorts(2)
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(in.host.logDir, in.name+".log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close() // the child holds its own descriptor
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	cmd := exec.Command(in.host.rie,
		"--runtime-interface-emulator-address", addr,
		"--runtime-api-address", fmt.Sprintf("127.0.0.1:%d", ports[1]),
		in.host.wrap, in.bootstrap)
	cmd.Dir = filepath.Dir(in.bootstrap)
	cmd.Env = in.env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = procAttr()

	// Under the host's lock, so that close never misses a process.
	in.host.mu.Lock()
	if in.host.closed {
		in.host.mu.Unlock()
		return errHostClosed
	}
	if err := startLocked(cmd); err != nil {
		in.host.mu.Unlock()
		return fmt.Errorf("start %s: %w", in.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	in.mu.Lock()
	first := in.cmd == nil
	in.cmd, in.done, in.url = cmd, done, "http://"+addr+"/2015-03-31/functions/function/invocations"
	in.mu.Unlock()
	if first {
		in.host.procs = append(in.host.procs, in)
	}
	in.host.mu.Unlock()

	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("%s exited before it listened on %s", in.name, addr)
		default:
		}
		if time.Now().After(deadline) {
			killGroup(cmd.Process.Pid)
			return fmt.Errorf("%s did not listen on %s within 10 s", in.name, addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether the process is running.
func (in *instance) alive() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.done == nil {
		return false
	}
	select {
	case <-in.done:
		return false
	default:
		return true
	}
}

// kill ends the emulator and the function it runs at once, as a crashed
// sandbox would, and waits for the emulator. The emulator starts the
// function in a process group of its own: that group is killed first.
func (in *instance) kill() {
	in.mu.Lock()
	done := in.signalLocked()
	in.mu.Unlock()
	<-done
}

// signalLocked sends the kills and returns the channel closed on exit.
func (in *instance) signalLocked() <-chan struct{} {
	if in.cmd == nil || in.cmd.Process == nil {
		closed := make(chan struct{})
		close(closed)
		return closed
	}
	pid := in.cmd.Process.Pid
	for _, child := range childPids(pid) {
		killGroup(child)
	}
	killGroup(pid)
	return in.done
}

// post sends one invoke to the emulator. The request is not tied to the
// caller's cancellation: the emulator must finish an invoke before it takes
// the next, so the instance stays busy until it answers (or dies).
func (in *instance) post(ctx context.Context, payload []byte) (int, []byte, error) {
	in.mu.Lock()
	url := in.url
	in.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), in.timeout+10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(payload))
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w", in.name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: read answer: %w", in.name, err)
	}
	return resp.StatusCode, body, nil
}

// pool is the instances of one function; free holds the idle ones.
type pool struct {
	name    string
	timeout time.Duration // the function's configured timeout
	added   time.Time     // when it was added: its LastModified
	all     []*instance
	free    chan *instance
}

// result is one invoke's answer as Lambda's Invoke API gives it.
type result struct {
	Status        int
	Body          []byte
	FunctionError bool // the function failed: X-Amz-Function-Error
	Instance      string
}

// invoke runs one synchronous invoke on an idle instance, restarting it
// first if it died (a cold start). acquired, when set, learns which instance
// serves the invoke before it is sent.
func (p *pool) invoke(ctx context.Context, payload []byte, acquired func(claim)) (result, error) {
	var in *instance
	select {
	case in = <-p.free:
	case <-ctx.Done():
		return result{}, ctx.Err()
	}
	defer func() { p.free <- in }()
	cl := in.claim()
	if !in.alive() {
		if err := in.start(); err != nil {
			return result{}, err
		}
	}
	if acquired != nil {
		acquired(cl)
	}
	status, body, err := in.post(ctx, payload)
	if err != nil {
		return result{Instance: in.name}, err
	}
	return result{Status: status, Body: body, FunctionError: isFunctionError(status, body), Instance: in.name}, nil
}

// isFunctionError reads the RIE's answer the way Lambda reports it: the RIE
// answers a function error with 200 and {"errorMessage","errorType"} and a
// timeout with 200 and plain text, without Lambda's X-Amz-Function-Error.
func isFunctionError(status int, body []byte) bool {
	if status != http.StatusOK {
		return false
	}
	b := bytes.TrimSpace(body)
	if bytes.HasPrefix(b, []byte("Task timed out")) {
		return true
	}
	var e struct {
		ErrorType    *string `json:"errorType"`
		ErrorMessage *string `json:"errorMessage"`
	}
	if len(b) > 0 && b[0] == '{' && json.Unmarshal(b, &e) == nil {
		return e.ErrorType != nil || e.ErrorMessage != nil
	}
	return false
}

// lambdaHost serves the Lambda Invoke API on loopback in front of the
// emulators: POST /2015-03-31/functions/{name}/invocations, with
// X-Amz-Invocation-Type Event answered 202 at once and run in the background.
type lambdaHost struct {
	t      testing.TB
	rie    string
	wrap   string // diewithparent
	logDir string
	pools  map[string]*pool // under mu
	srv    *http.Server
	URL    string

	bg     sync.WaitGroup // background (Event) invokes
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	procs  []*instance
	watch  func(name string, payload []byte) // sees each sync invoke once an instance has it
}

// setWatch installs (or, with nil, removes) the watch.
func (h *lambdaHost) setWatch(f func(name string, payload []byte)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.watch = f
}

func newLambdaHost(t testing.TB, bins binaries, logDir string) *lambdaHost {
	ctx, cancel := context.WithCancel(context.Background())
	return &lambdaHost{t: t, rie: bins.RIE, wrap: bins.DieWithParent, logDir: logDir, pools: map[string]*pool{}, ctx: ctx, cancel: cancel}
}

// add starts n instances of a function. env is the function's whole
// environment; AWS_LAMBDA_FUNCTION_TIMEOUT in it bounds each invoke.
func (h *lambdaHost) add(name, bootstrap string, n int, timeout time.Duration, env []string) error {
	env = append(env,
		"AWS_LAMBDA_FUNCTION_NAME="+name,
		fmt.Sprintf("AWS_LAMBDA_FUNCTION_TIMEOUT=%d", int(timeout/time.Second)))
	p := &pool{name: name, timeout: timeout, added: time.Now(), free: make(chan *instance, n)}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		in := &instance{name: fmt.Sprintf("%s-%d", name, i), host: h, bootstrap: bootstrap, env: env, timeout: timeout}
		p.all = append(p.all, in)
		wg.Go(func() { errs[i] = in.start() })
	}
	wg.Wait()
	for _, in := range p.all {
		p.free <- in
	}
	h.mu.Lock()
	h.pools[name] = p
	h.mu.Unlock()
	return errors.Join(errs...)
}

// serve starts the HTTP server.
func (h *lambdaHost) serve() error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /2015-03-31/functions/{name}/invocations", h.handleInvoke)
	mux.HandleFunc("GET /2015-03-31/functions/{name}/configuration", h.handleConfiguration)
	h.srv = &http.Server{Handler: mux}
	h.URL = "http://" + l.Addr().String()
	go func() { _ = h.srv.Serve(l) }()
	return nil
}

// functionName maps a name, name:qualifier or function ARN
// (arn:aws:lambda:region:account:function:name[:qualifier]) to the name.
func functionName(s string) string {
	parts := strings.Split(s, ":")
	if len(parts) >= 7 && parts[0] == "arn" {
		return parts[6]
	}
	return parts[0]
}

func (h *lambdaHost) pool(name string) (*pool, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.pools[name]
	return p, ok
}

// handleConfiguration answers GetFunctionConfiguration with the function's
// name and timeout, as the shardreader reads it at cold start.
func (h *lambdaHost) handleConfiguration(w http.ResponseWriter, r *http.Request) {
	name := functionName(r.PathValue("name"))
	p, ok := h.pool(name)
	if !ok {
		writeLambdaError(w, http.StatusNotFound, "ResourceNotFoundException", "Function not found: "+name)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"FunctionName": name, "Timeout": int(p.timeout / time.Second),
		"LastModified": p.added.UTC().Format("2006-01-02T15:04:05.000-0700")})
}

func (h *lambdaHost) handleInvoke(w http.ResponseWriter, r *http.Request) {
	name := functionName(r.PathValue("name"))
	p, ok := h.pool(name)
	if !ok {
		writeLambdaError(w, http.StatusNotFound, "ResourceNotFoundException", "Function not found: "+name)
		return
	}
	payload, err := io.ReadAll(r.Body)
	if err != nil {
		writeLambdaError(w, http.StatusBadRequest, "InvalidRequestContentException", err.Error())
		return
	}
	switch r.Header.Get("X-Amz-Invocation-Type") {
	case "Event":
		h.bg.Go(func() {
			res, err := p.invoke(h.ctx, payload, nil)
			switch {
			case errors.Is(err, errHostClosed) || h.ctx.Err() != nil:
			case err != nil:
				h.t.Logf("lambda host: async invoke of %s failed: %v", name, err)
			case res.FunctionError || res.Status != http.StatusOK:
				h.t.Logf("lambda host: async invoke of %s on %s: status %d, function error %v: %s", name, res.Instance, res.Status, res.FunctionError, res.Body)
			}
		})
		w.WriteHeader(http.StatusAccepted)
		return
	case "DryRun":
		w.WriteHeader(http.StatusNoContent)
		return
	}
	res, err := p.invoke(r.Context(), payload, func(claim) {
		h.mu.Lock()
		watch := h.watch
		h.mu.Unlock()
		if watch != nil {
			watch(name, payload)
		}
	})
	if err != nil {
		// The instance crashed or is gone: a Lambda service error, which
		// the SDK retries.
		writeLambdaError(w, http.StatusServiceUnavailable, "ServiceException", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amz-Executed-Version", "$LATEST")
	if res.FunctionError {
		w.Header().Set("X-Amz-Function-Error", "Unhandled")
	}
	w.WriteHeader(res.Status)
	_, _ = w.Write(res.Body)
}

func writeLambdaError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-ErrorType", typ)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"Type": "Service", "message": msg})
}

// invoke is a synchronous invoke from inside the test (the state machine's
// Lambda task, the schedule).
func (h *lambdaHost) invoke(ctx context.Context, name string, payload []byte, acquired func(claim)) (result, error) {
	p, ok := h.pool(name)
	if !ok {
		return result{}, fmt.Errorf("no function %q", name)
	}
	return p.invoke(ctx, payload, acquired)
}

// close stops the server, kills every emulator (no restart after this) and
// waits for the background invokes.
func (h *lambdaHost) close() {
	h.cancel()
	if h.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = h.srv.Shutdown(ctx)
		cancel()
	}
	h.mu.Lock()
	h.closed = true
	procs := h.procs
	h.mu.Unlock()
	for _, in := range procs {
		in.kill()
	}
	h.bg.Wait()
}

// logged reports whether one log line of an instance of function name
// contains every one of wants.
func (h *lambdaHost) logged(name string, wants ...string) bool {
	entries, _ := os.ReadDir(h.logDir)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), name+"-") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(h.logDir, e.Name()))
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			all := true
			for _, w := range wants {
				all = all && strings.Contains(line, w)
			}
			if all {
				return true
			}
		}
	}
	return false
}

// logTails reports the end of each instance's log, for a failed test.
func (h *lambdaHost) logTails(lines int) {
	entries, _ := os.ReadDir(h.logDir)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(h.logDir, e.Name()))
		if err != nil {
			continue
		}
		ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(ls) > lines {
			ls = ls[len(ls)-lines:]
		}
		h.t.Logf("---- %s (last %d lines)\n%s", e.Name(), len(ls), strings.Join(ls, "\n"))
	}
}

// serveHost starts a Lambda host in a fresh work folder and returns it with
// the folder and the file the sample target records into. E2E_LOG_DIR keeps
// the functions' logs (one file per RIE instance) after the test; by default
// they go away with it, and a failed test prints their last lines. Closing
// the host is the caller's, in the order its cleanup needs.
func serveHost(t *testing.T, bins binaries) (host *lambdaHost, work, received string) {
	t.Helper()
	work = t.TempDir()
	logDir := os.Getenv("E2E_LOG_DIR")
	if logDir == "" {
		logDir = filepath.Join(work, "logs")
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	host = newLambdaHost(t, bins, logDir)
	if err := host.serve(); err != nil {
		t.Fatal(err)
	}
	return host, work, filepath.Join(work, "received.jsonl")
}
