// Package testaws gives tests SDK clients wired to kinesis-local and dynalite
// running on loopback. Each emulator starts on first use, once per test binary,
// and stops when the binary ends: call Main from TestMain.
//
//	func TestMain(m *testing.M) { os.Exit(testaws.Main(m)) }
//
// When the emulators are not installed, tests fail with a message that names
// `make deps`; they never skip.
package testaws

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/shardloop/shardloop/internal/emulators"
)

// Region is the region every test client uses.
const Region = "us-east-1"

type lazy struct {
	once sync.Once
	proc *emulators.Process
	err  error
}

var (
	mu      sync.Mutex
	started = map[emulators.Kind]*lazy{}
)

// Main runs the tests and then stops every emulator this binary started.
func Main(m *testing.M) int {
	code := m.Run()
	StopAll()
	return code
}

// StopAll stops the emulators started so far.
func StopAll() {
	mu.Lock()
	defer mu.Unlock()
	for _, l := range started {
		if l.proc != nil {
			l.proc.Stop()
		}
	}
}

// Endpoint returns the base URL of a running emulator, starting it if needed.
func Endpoint(t testing.TB, kind emulators.Kind) string {
	t.Helper()
	mu.Lock()
	l, ok := started[kind]
	if !ok {
		l = &lazy{}
		started[kind] = l
	}
	mu.Unlock()
	l.once.Do(func() {
		opts := emulators.Options{LogPath: filepath.Join(os.TempDir(), fmt.Sprintf("shardloop-%s-%d.log", kind, os.Getpid()))}
		if kind == emulators.Kinesis {
			// A package's tests share one kinesis-local, whose account
			// allows 50 open shards by default; AWS's default is higher.
			opts.Env = append(opts.Env, "SHARD_LIMIT=1000")
		}
		l.proc, l.err = emulators.Start(context.Background(), kind, opts)
	})
	if l.err != nil {
		t.Fatalf("emulator %s: %v", kind, l.err)
	}
	return l.proc.Endpoint
}

// Config returns an SDK config for a local endpoint with static test credentials.
func Config(endpoint string) aws.Config {
	return aws.Config{
		Region:       Region,
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(endpoint),
	}
}

// Kinesis returns a client for kinesis-local.
func Kinesis(t testing.TB, optFns ...func(*kinesis.Options)) *kinesis.Client {
	t.Helper()
	return kinesis.NewFromConfig(Config(Endpoint(t, emulators.Kinesis)), optFns...)
}

// Dynamo returns a client for dynalite.
func Dynamo(t testing.TB, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	t.Helper()
	return dynamodb.NewFromConfig(Config(Endpoint(t, emulators.DynamoDB)), optFns...)
}

var seq atomic.Int64

// Name returns a name unique within this test binary, derived from the test's
// name, fit for a stream or table (letters, digits, '-', at most 100 chars).
func Name(t testing.TB) string {
	base := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return '-'
	}, t.Name())
	if len(base) > 60 {
		base = base[len(base)-60:]
	}
	return fmt.Sprintf("%s-%d-%d", strings.Trim(base, "-"), time.Now().UnixNano()%1e6, seq.Add(1))
}
