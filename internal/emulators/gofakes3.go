package emulators

import (
	"context"
	"time"
)

// GoFakeS3 is gofakes3 (github.com/johannesboyne/gofakes3, a Go module
// pinned in tools/gofakes3/go.mod), an S3 emulator kept in memory. Start it
// with StartGoFakeS3. Clients must use path-style addressing
// (s3.Options.UsePathStyle) and send seekable bodies.
const GoFakeS3 Kind = "gofakes3"

// GoFakeS3Options tune StartGoFakeS3. The zero value is usable.
type GoFakeS3Options struct {
	// Dir is the tools/gofakes3 module. Empty means: SHARDLOOP_GOFAKES3_DIR,
	// else found by walking up from the working directory.
	Dir string
	// LogPath receives gofakes3's output. Empty discards it.
	LogPath string
	// ReadyTimeout bounds the build and the wait for the first healthy
	// answer (default 2 min: a cold build compiles gofakes3).
	ReadyTimeout time.Duration
}

// StartGoFakeS3 builds gofakes3 from its pinned module, starts it on a
// free port with an in-memory backend and waits until it answers. Buckets
// are created through the API.
func StartGoFakeS3(ctx context.Context, opts GoFakeS3Options) (*Process, error) {
	tool := goTool{kind: GoFakeS3, module: "gofakes3", envDir: "SHARDLOOP_GOFAKES3_DIR", pkg: "github.com/johannesboyne/gofakes3/cmd/gofakes3", health: "/",
		args: func(port, _ string) ([]string, error) {
			return []string{"-backend", "memory", "-host", "127.0.0.1:" + port, "-quiet"}, nil
		}}
	return tool.start(ctx, opts.Dir, opts.LogPath, opts.ReadyTimeout)
}
