// Package emulators starts the local AWS protocol peers shardloop is tested
// and demonstrated against: kinesis-local (the Kinesis engine LocalStack runs)
// and dynalite (DynamoDB), both installed from npm by `make deps` into
// tools/emulators/node_modules.
//
// Each emulator runs as a child process on a free loopback port. A child is
// tied to its parent with PDEATHSIG, so it dies with the process that started
// it even when that process is killed or panics; Stop ends it earlier.
package emulators

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// ErrNotInstalled reports that the npm packages are missing. Its message
// names the command that installs them.
var ErrNotInstalled = errors.New("local AWS emulators are not installed: run `make deps` (npm ci in tools/emulators)")

// Kind names one emulator.
type Kind string

const (
	Kinesis  Kind = "kinesis-local"
	DynamoDB Kind = "dynalite"
	// Moto is moto_server (Python), which serves Kinesis and DynamoDB, among
	// others, on one port. It is faster than kinesis-local in bulk and is
	// used for volume runs (`make bench`); it is not an npm package: install
	// it with `pip install "moto[server]"`.
	Moto Kind = "moto"
)

// ErrMotoNotInstalled reports that moto_server is not on PATH. Its message
// names the command that installs it.
var ErrMotoNotInstalled = errors.New(`moto_server is not installed: run pip install "moto[server]" (Python 3.9+), then make sure moto_server is on PATH`)

// Options tune a started emulator. The zero value is usable.
type Options struct {
	// Dir is the tools/emulators folder. Empty means: SHARDLOOP_EMULATORS_DIR,
	// else found by walking up from the working directory to go.mod.
	Dir string
	// Env adds variables to the emulator's environment (for kinesis-local,
	// e.g. SHARD_LIMIT=1000).
	Env []string
	// LogPath receives the emulator's stdout and stderr. Empty discards them.
	LogPath string
	// ReadyTimeout bounds the wait for the first healthy answer (default 60 s).
	ReadyTimeout time.Duration
}

// Process is one running emulator.
type Process struct {
	Kind     Kind
	Endpoint string // http://127.0.0.1:PORT

	cmd  *exec.Cmd
	done chan struct{}
	once sync.Once
}

// FindDir returns the tools/emulators folder.
func FindDir() (string, error) {
	if d := os.Getenv("SHARDLOOP_EMULATORS_DIR"); d != "" {
		return d, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "tools", "emulators", "package.json")); err == nil {
			return filepath.Join(d, "tools", "emulators"), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("tools/emulators not found above %s: set SHARDLOOP_EMULATORS_DIR", wd)
		}
	}
}

// Start launches one emulator and waits until it answers.
func Start(ctx context.Context, kind Kind, opts Options) (*Process, error) {
	if kind == Moto {
		return startMoto(ctx, opts)
	}
	dir := opts.Dir
	if dir == "" {
		var err error
		if dir, err = FindDir(); err != nil {
			return nil, err
		}
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 60 * time.Second
	}
	nm := filepath.Join(dir, "node_modules")
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("start %s: node not found on PATH: %w", kind, err)
	}

	var args, env []string
	var port int
	var health string
	switch kind {
	case Kinesis:
		main := filepath.Join(nm, "kinesis-local", "main.js")
		if _, err := os.Stat(main); err != nil {
			return nil, fmt.Errorf("start %s: %s missing: %w", kind, main, ErrNotInstalled)
		}
		ports, err := FreePorts(2)
		if err != nil {
			return nil, err
		}
		port = ports[0]
		args = []string{main}
		env = []string{
			"KINESIS_MOCK_CERT_PATH=" + filepath.Join(nm, "kinesis-local", "server.json"),
			"KINESIS_MOCK_PLAIN_PORT=" + strconv.Itoa(ports[0]),
			"KINESIS_MOCK_TLS_PORT=" + strconv.Itoa(ports[1]),
			"CREATE_STREAM_DURATION=50ms", "DELETE_STREAM_DURATION=50ms",
			"SPLIT_SHARD_DURATION=50ms", "MERGE_SHARDS_DURATION=50ms",
			"UPDATE_SHARD_COUNT_DURATION=50ms", "LOG_LEVEL=WARN",
		}
		health = "/healthcheck"
	case DynamoDB:
		if cli := filepath.Join(nm, "dynalite", "cli.js"); !exists(cli) {
			return nil, fmt.Errorf("start %s: %s missing: %w", kind, cli, ErrNotInstalled)
		}
		// dynalite.js runs dynalite's cli.js, surviving clients that abandon
		// a request (the SDK's attempt timeouts do): see the file.
		cli := filepath.Join(dir, "dynalite.js")
		ports, err := FreePorts(1)
		if err != nil {
			return nil, err
		}
		port = ports[0]
		args = []string{cli, "--host", "127.0.0.1", "--port", strconv.Itoa(port),
			"--createTableMs", "50", "--deleteTableMs", "50", "--updateTableMs", "50"}
		health = "/"
	default:
		return nil, fmt.Errorf("start: unknown emulator %q", kind)
	}

	p := &Process{Kind: kind, Endpoint: fmt.Sprintf("http://127.0.0.1:%d", port), done: make(chan struct{})}
	p.cmd = exec.Command(node, args...)
	p.cmd.Dir = dir
	p.cmd.Env = append(append(os.Environ(), env...), opts.Env...)
	if opts.LogPath != "" {
		f, err := os.Create(opts.LogPath)
		if err != nil {
			return nil, fmt.Errorf("start %s: log: %w", kind, err)
		}
		defer f.Close() // the child holds its own descriptor
		p.cmd.Stdout, p.cmd.Stderr = f, f
	}
	p.cmd.SysProcAttr = procAttr()
	if err := StartTied(p.cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", kind, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()

	if err := p.waitReady(ctx, health, opts.ReadyTimeout); err != nil {
		p.Stop()
		return nil, fmt.Errorf("start %s: %w", kind, err)
	}
	return p, nil
}

// lockedStarter runs every exec.Cmd.Start on one OS thread that never exits.
// PDEATHSIG fires when the thread that forked the child ends, and the Go
// runtime may retire threads; a locked, never-returning goroutine keeps the
// signal tied to the life of the process.
var (
	starterOnce sync.Once
	starterCh   chan startReq
)

type startReq struct {
	cmd  *exec.Cmd
	errc chan error
}

// StartTied starts cmd from the one locked thread, so that a PDEATHSIG set in
// cmd.SysProcAttr ends the child with this process. Test harnesses that start
// processes of their own (the Lambda RIE, say) use it too.
func StartTied(cmd *exec.Cmd) error {
	starterOnce.Do(func() {
		starterCh = make(chan startReq)
		go func() {
			runtime.LockOSThread()
			for r := range starterCh {
				r.errc <- r.cmd.Start()
			}
		}()
	})
	errc := make(chan error, 1)
	starterCh <- startReq{cmd, errc}
	return <-errc
}

func (p *Process) waitReady(ctx context.Context, path string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.Endpoint+path, nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("exited before it answered on %s (%v)", p.Endpoint, p.cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("no healthy answer from %s%s within %s", p.Endpoint, path, timeout)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop ends the emulator (SIGTERM, then SIGKILL after 5 s) and waits for it.
func (p *Process) Stop() {
	p.once.Do(func() {
		if p.cmd.Process == nil {
			return
		}
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	})
}

// FreePorts returns n loopback ports free at the time of the call.
func FreePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// startMoto launches moto_server on a free loopback port. opts.Dir is not
// used; opts.Env, LogPath and ReadyTimeout are.
func startMoto(ctx context.Context, opts Options) (*Process, error) {
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 60 * time.Second
	}
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", Moto, ErrMotoNotInstalled)
	}
	ports, err := FreePorts(1)
	if err != nil {
		return nil, err
	}
	p := &Process{Kind: Moto, Endpoint: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), done: make(chan struct{})}
	p.cmd = exec.Command(bin, "-H", "127.0.0.1", "-p", strconv.Itoa(ports[0]))
	p.cmd.Env = append(os.Environ(), opts.Env...)
	if opts.LogPath != "" {
		f, err := os.Create(opts.LogPath)
		if err != nil {
			return nil, fmt.Errorf("start %s: log: %w", Moto, err)
		}
		defer f.Close() // the child holds its own descriptor
		p.cmd.Stdout, p.cmd.Stderr = f, f
	}
	p.cmd.SysProcAttr = procAttr()
	if err := StartTied(p.cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", Moto, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	if err := p.waitReady(ctx, "/moto-api/", opts.ReadyTimeout); err != nil {
		p.Stop()
		return nil, fmt.Errorf("start %s: %w", Moto, err)
	}
	return p, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
