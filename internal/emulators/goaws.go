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

// GoAWS is goaws (github.com/Admiral-Piett/goaws, a Go module pinned in
// tools/goaws/go.mod), an SQS and SNS emulator. Start it with StartGoAWS.
//
// goaws v0.4.5 speaks the query protocol for both services. The SDK's SNS
// client speaks it too; its SQS client speaks JSON unless its Protocol
// option is set to the query protocol
// (awsquery.New(schemas.AmazonSQS), as internal tests do).
const GoAWS Kind = "goaws"

// GoAWSOptions tune StartGoAWS. The zero value is usable.
type GoAWSOptions struct {
	// Dir is the tools/goaws module. Empty means: SHARDLOOP_GOAWS_DIR, else
	// found by walking up from the working directory.
	Dir string
	// Region and Account go into the ARNs and queue URLs goaws hands out.
	// Defaults us-east-1 and 000000000000.
	Region, Account string
	// LogPath receives goaws's output. Empty discards it.
	LogPath string
	// ReadyTimeout bounds the build and the wait for the first healthy
	// answer (default 2 min: a cold build compiles goaws).
	ReadyTimeout time.Duration
}

// FindGoAWSDir returns the tools/goaws module folder.
func FindGoAWSDir() (string, error) {
	if d := os.Getenv("SHARDLOOP_GOAWS_DIR"); d != "" {
		return d, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "tools", "goaws", "go.mod")); err == nil {
			return filepath.Join(d, "tools", "goaws"), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("tools/goaws not found above %s: set SHARDLOOP_GOAWS_DIR", wd)
		}
	}
}

// StartGoAWS builds goaws from its pinned module (the go command's cache
// makes later builds take a second or two), starts it on a free port and
// waits until it answers. SQS and SNS share the one endpoint; queues and
// topics are created through the API.
func StartGoAWS(ctx context.Context, opts GoAWSOptions) (*Process, error) {
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	if opts.Account == "" {
		opts.Account = "000000000000"
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 2 * time.Minute
	}
	dir := opts.Dir
	if dir == "" {
		var err error
		if dir, err = FindGoAWSDir(); err != nil {
			return nil, fmt.Errorf("start %s: %w", GoAWS, err)
		}
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("start %s: the go command is needed to build it: %w", GoAWS, err)
	}
	tmp, err := os.MkdirTemp("", "shardloop-goaws-")
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", GoAWS, err)
	}
	defer os.RemoveAll(tmp) // the running binary and its read config need no file
	bin := filepath.Join(tmp, "goaws")
	bctx, cancel := context.WithTimeout(ctx, opts.ReadyTimeout)
	defer cancel()
	build := exec.CommandContext(bctx, goBin, "build", "-o", bin, "github.com/Admiral-Piett/goaws/app/cmd")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("start %s: build in %s: %w\n%s", GoAWS, dir, err, out)
	}

	ports, err := FreePorts(1)
	if err != nil {
		return nil, err
	}
	port := strconv.Itoa(ports[0])
	conf := filepath.Join(tmp, "goaws.yaml")
	yaml := fmt.Sprintf("Local:\n  Host: 127.0.0.1\n  Port: %s\n  Region: %s\n  AccountId: %q\n  LogToFile: false\n", port, opts.Region, opts.Account)
	if err := os.WriteFile(conf, []byte(yaml), 0o644); err != nil {
		return nil, fmt.Errorf("start %s: config: %w", GoAWS, err)
	}

	p := &Process{Kind: GoAWS, Endpoint: "http://127.0.0.1:" + port, done: make(chan struct{})}
	p.cmd = exec.Command(bin, "-config", conf, "Local")
	p.cmd.Dir = tmp
	if opts.LogPath != "" {
		f, err := os.Create(opts.LogPath)
		if err != nil {
			return nil, fmt.Errorf("start %s: log: %w", GoAWS, err)
		}
		defer f.Close() // the child holds its own descriptor
		p.cmd.Stdout, p.cmd.Stderr = f, f
	}
	p.cmd.SysProcAttr = procAttr()
	if err := StartTied(p.cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", GoAWS, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	if err := p.waitReady(ctx, "/health", opts.ReadyTimeout); err != nil {
		p.Stop()
		return nil, fmt.Errorf("start %s: %w", GoAWS, err)
	}
	return p, nil
}
