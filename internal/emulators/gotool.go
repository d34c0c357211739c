package emulators

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// goTool is an emulator written in Go and pinned in a module of its own
// under tools/ (tools/goaws, tools/gofakes3): built with the go command from
// that module, started on a free loopback port, ready when health answers.
type goTool struct {
	kind Kind
	// module is the folder under tools/; envDir the variable that overrides
	// where it is.
	module, envDir string
	// pkg is the main package to build.
	pkg string
	// args are the command line for a port, in dir (a temporary folder
	// the binary runs in, removed once it started).
	args func(port, dir string) ([]string, error)
	// health is the path that answers 200 once the emulator is ready.
	health string
}

// findToolDir returns tools/<module>: env when set, else found by walking up
// from the working directory.
func findToolDir(module, env string) (string, error) {
	if d := os.Getenv(env); d != "" {
		return d, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "tools", module, "go.mod")); err == nil {
			return filepath.Join(d, "tools", module), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("tools/%s not found above %s: set %s", module, wd, env)
		}
	}
}

// start builds the tool from its pinned module (the go command's cache
// makes later builds take a second or two), starts it and waits until it
// answers. dir is the module folder ("" finds it); logPath receives its
// output ("" discards it); timeout bounds the build and the wait.
func (g goTool) start(ctx context.Context, dir, logPath string, timeout time.Duration) (*Process, error) {
	if timeout == 0 {
		timeout = 2 * time.Minute // a cold build compiles the emulator
	}
	if dir == "" {
		var err error
		if dir, err = findToolDir(g.module, g.envDir); err != nil {
			return nil, fmt.Errorf("start %s: %w", g.kind, err)
		}
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("start %s: the go command is needed to build it: %w", g.kind, err)
	}
	tmp, err := os.MkdirTemp("", "shardloop-"+string(g.kind)+"-")
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", g.kind, err)
	}
	defer os.RemoveAll(tmp) // the running binary and its read config need no file
	bin := filepath.Join(tmp, string(g.kind))
	bctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	build := exec.CommandContext(bctx, goBin, "build", "-o", bin, g.pkg)
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("start %s: build in %s: %w\n%s", g.kind, dir, err, out)
	}

	ports, err := FreePorts(1)
	if err != nil {
		return nil, err
	}
	port := strconv.Itoa(ports[0])
	args, err := g.args(port, tmp)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", g.kind, err)
	}
	p := &Process{Kind: g.kind, Endpoint: "http://127.0.0.1:" + port, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir = tmp
	if logPath != "" {
		f, err := os.Create(logPath)
		if err != nil {
			return nil, fmt.Errorf("start %s: log: %w", g.kind, err)
		}
		defer f.Close() // the child holds its own descriptor
		p.cmd.Stdout, p.cmd.Stderr = f, f
	}
	p.cmd.SysProcAttr = procAttr()
	if err := StartTied(p.cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", g.kind, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	if err := p.waitReady(ctx, g.health, timeout); err != nil {
		p.Stop()
		return nil, fmt.Errorf("start %s: %w", g.kind, err)
	}
	return p, nil
}
