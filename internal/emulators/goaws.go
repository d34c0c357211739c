package emulators

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
func FindGoAWSDir() (string, error) { return findToolDir("goaws", "SHARDLOOP_GOAWS_DIR") }

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
	tool := goTool{kind: GoAWS, module: "goaws", envDir: "SHARDLOOP_GOAWS_DIR", pkg: "github.com/Admiral-Piett/goaws/app/cmd", health: "/health",
		args: func(port, dir string) ([]string, error) {
			conf := filepath.Join(dir, "goaws.yaml")
			yaml := fmt.Sprintf("Local:\n  Host: 127.0.0.1\n  Port: %s\n  Region: %s\n  AccountId: %q\n  LogToFile: false\n", port, opts.Region, opts.Account)
			if err := os.WriteFile(conf, []byte(yaml), 0o644); err != nil {
				return nil, fmt.Errorf("config: %w", err)
			}
			return []string{"-config", conf, "Local"}, nil
		}}
	return tool.start(ctx, opts.Dir, opts.LogPath, opts.ReadyTimeout)
}
