package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/internal/testaws"
	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/shards"
)

// asCLI, set to 1, makes the test binary run main (see TestMain).
const asCLI = "SHARDLOOP_TEST_AS_CLI"

func TestInterruptible_FirstSignalStopsGracefullyASecondExitsAtOnce(t *testing.T) {
	sigs := make(chan os.Signal, 2)
	var stderr syncBuffer
	exited := make(chan int, 1)
	ctx, stop := interruptible(context.Background(), sigs, &stderr, func(code int) { exited <- code })
	defer stop()
	sigs <- os.Interrupt
	<-ctx.Done()
	if !strings.Contains(stderr.String(), "press Ctrl-C again to exit at once") {
		t.Errorf("after the first signal stderr = %q, want how to exit at once", stderr.String())
	}
	select {
	case code := <-exited:
		t.Fatalf("exited with %d at the first signal", code)
	case <-time.After(50 * time.Millisecond):
	}
	sigs <- syscall.SIGTERM
	if code := <-exited; code != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit status %d after the second signal, want %d", code, 128+int(syscall.SIGTERM))
	}
}

func TestInterruptible_AfterStopASignalDoesNothing(t *testing.T) {
	sigs := make(chan os.Signal, 1)
	ctx, stop := interruptible(context.Background(), sigs, io.Discard, func(code int) { t.Errorf("exit(%d)", code) })
	stop()
	stop()
	if ctx.Err() == nil {
		t.Fatal("the context outlived stop")
	}
	sigs <- os.Interrupt // nobody listens any more: nothing happens
	time.Sleep(20 * time.Millisecond)
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// cliProcess starts the shardloop command (this test binary as main) with
// args against the emulators.
func cliProcess(t *testing.T, env []string, args ...string) (cmd *exec.Cmd, stdout *bufio.Scanner, stderr *syncBuffer) {
	t.Helper()
	cmd = exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), asCLI+"=1"), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr = &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, bufio.NewScanner(out), stderr
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// Ctrl-C on `shardloop run`: exit status 0, every lease released with its
// checkpoint, so the next run takes the shards at once.
func TestRun_CtrlCReleasesTheLeases(t *testing.T) {
	emulatorEnv(t)
	kc, dc := testaws.Kinesis(t), testaws.Dynamo(t)
	stream, table := testaws.Name(t), testaws.Name(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	if _, err := shards.CreateIfMissing(ctx, kc, stream, 2); err != nil {
		t.Fatal(err)
	}
	var entries []ktypes.PutRecordsRequestEntry
	for i := range 20 {
		entries = append(entries, ktypes.PutRecordsRequestEntry{PartitionKey: aws.String(string(rune('a' + i))), Data: []byte("r")})
	}
	if _, err := kc.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries}); err != nil {
		t.Fatal(err)
	}
	cmd, stdout, stderr := cliProcess(t, nil, "run", "--stream", stream, "--table", table, "--start", "horizon", "--poll-interval", "200ms")
	for n := 0; n < 20; n++ {
		if !stdout.Scan() {
			t.Fatalf("run printed %d records, then ended:\n%s", n, stderr.String())
		}
	}
	go func() {
		for stdout.Scan() { // keep the pipe drained until the process ends
		}
	}()
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := exitCode(cmd.Wait()); code != 0 {
		t.Fatalf("exit status %d after Ctrl-C, want 0:\n%s", code, stderr.String())
	}
	store, err := lease.NewDynamoStore(dc, table)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := store.List(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("rows %+v, want two", rows)
	}
	for _, r := range rows {
		if r.Owner != "" || r.Checkpoint == "" {
			t.Errorf("row after Ctrl-C = %+v, want released with a checkpoint", r)
		}
	}
	if hs, err := store.Runners(ctx, stream); err != nil || len(hs) != 0 {
		t.Errorf("heartbeat rows after Ctrl-C = %+v, %v; want none", hs, err)
	}
	if !strings.Contains(stderr.String(), "stopping") {
		t.Errorf("stderr does not say it is stopping:\n%s", stderr.String())
	}
}

// A second Ctrl-C exits at once, while a delivery is still in flight (a
// target that never answers), with status 130; the lease then lapses.
func TestRun_SecondCtrlCExitsAtOnce(t *testing.T) {
	emulatorEnv(t)
	kc, dc := testaws.Kinesis(t), testaws.Dynamo(t)
	stream, table := testaws.Name(t), testaws.Name(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	if _, err := shards.CreateIfMissing(ctx, kc, stream, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(stream), PartitionKey: aws.String("k"), Data: []byte("r0")}); err != nil {
		t.Fatal(err)
	}
	invoked := make(chan struct{})
	var once sync.Once
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if serveConfiguration(w, r) {
			return
		}
		once.Do(func() { close(invoked) })
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(hang)
	cmd, _, stderr := cliProcess(t, []string{"AWS_ENDPOINT_URL_LAMBDA=" + srv.URL},
		"run", "--stream", stream, "--table", table, "--start", "horizon", "--target", "my-fn",
		"--invoke-identity-arn", "arn:aws:iam::000000000000:role/r", "--poll-interval", "200ms")
	select {
	case <-invoked:
	case <-ctx.Done():
		t.Fatalf("the target was never invoked:\n%s", stderr.String())
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(stderr.String(), "press Ctrl-C again") && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		t.Fatalf("run exited (%v) at the first Ctrl-C with a delivery in flight, want it waiting for it:\n%s", err, stderr.String())
	case <-time.After(time.Second):
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if code := exitCode(err); code != 130 {
			t.Fatalf("exit status %d after the second Ctrl-C, want 130:\n%s", code, stderr.String())
		}
	case <-time.After(20 * time.Second): // well before the 30 s a graceful stop would wait
		t.Fatalf("run did not exit at the second Ctrl-C:\n%s", stderr.String())
	}
	store, err := lease.NewDynamoStore(dc, table)
	if err != nil {
		t.Fatal(err)
	}
	row, err := store.Get(ctx, stream, "shardId-000000000000")
	if err != nil {
		t.Fatal(err)
	}
	if row.Owner == "" || row.Checkpoint != "" {
		t.Fatalf("row = %+v, want the lease left to lapse and nothing checkpointed", row)
	}
}
