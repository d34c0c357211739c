package handlers_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/shardloop/shardloop/internal/handlers"
	"github.com/shardloop/shardloop/internal/lambdaenv"
)

func withRequest(id string) context.Context {
	return lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: id})
}

// A line logged without a context carries the request id of the one
// invocation in flight; with two in flight it carries none rather than a
// wrong one, and a line logged with a context always carries its own.
func TestNewLogger_RequestIDOfTheInvocationInFlight(t *testing.T) {
	var b strings.Builder
	log, in := handlers.NewLogger(&b, lambdaenv.Log{JSON: true, Level: slog.LevelInfo})
	line := func() map[string]any {
		t.Helper()
		ls := jsonLines(t, b.String())
		b.Reset()
		if len(ls) != 1 {
			t.Fatalf("%d lines, want 1", len(ls))
		}
		return ls[0]
	}
	log.Info("cold start")
	if l := line(); l[handlers.RequestIDKey] != nil || l["message"] != "cold start" || l["level"] != "INFO" || l["timestamp"] == nil {
		t.Errorf("before any invocation: %v", l)
	}
	endA := in.Begin(withRequest("a"))
	log.Info("no context")
	if l := line(); l[handlers.RequestIDKey] != "a" {
		t.Errorf("during invocation a: %v", l)
	}
	endB := in.Begin(withRequest("b"))
	log.With("k", "v").Warn("no context, two in flight")
	if l := line(); l[handlers.RequestIDKey] != nil || l["k"] != "v" {
		t.Errorf("with a and b in flight: %v, want no request id", l)
	}
	log.InfoContext(withRequest("b"), "with context")
	if l := line(); l[handlers.RequestIDKey] != "b" {
		t.Errorf("with b's context: %v", l)
	}
	endA()
	endA() // twice is once
	log.Info("b alone")
	if l := line(); l[handlers.RequestIDKey] != "b" {
		t.Errorf("after a ended: %v", l)
	}
	endB()
	log.Info("after")
	if l := line(); l[handlers.RequestIDKey] != nil {
		t.Errorf("after both ended: %v", l)
	}
	// An invocation without a Lambda context (a test, a local host) adds
	// nothing, and a nil Invocations is a no-op.
	in.Begin(context.Background())()
	(*handlers.Invocations)(nil).Begin(withRequest("x"))()
}

func TestNewLogger_TextFormatAndLevelsAsLambdaNamesThem(t *testing.T) {
	var b strings.Builder
	log, in := handlers.NewLogger(&b, lambdaenv.Log{Level: lambdaenv.LevelTrace})
	defer in.Begin(withRequest("r-1"))()
	log.Log(context.Background(), lambdaenv.LevelTrace, "fine")
	log.Log(context.Background(), lambdaenv.LevelFatal, "dead")
	log.Debug("dbg")
	out := b.String()
	for _, want := range []string{"level=TRACE message=fine requestId=r-1", "level=FATAL message=dead requestId=r-1", "level=DEBUG message=dbg"} {
		if !strings.Contains(out, want) {
			t.Errorf("text log lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	log, _ = handlers.NewLogger(&b, lambdaenv.Log{JSON: true, Level: slog.LevelWarn})
	log.Info("dropped")
	log.Warn("kept")
	if out := b.String(); strings.Contains(out, "dropped") || !strings.Contains(out, "kept") {
		t.Errorf("at WARN: %q", out)
	}
}

func TestInvocations_ConcurrentUse(t *testing.T) {
	var b lockedBuffer
	log, in := handlers.NewLogger(&b, lambdaenv.Log{JSON: true})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			ctx := withRequest(strings.Repeat("x", i+1))
			end := in.Begin(ctx)
			log.InfoContext(ctx, "work")
			log.Info("work")
			end()
		})
	}
	wg.Wait()
	if n := len(jsonLines(t, b.String())); n != 16 {
		t.Errorf("%d lines, want 16", n)
	}
}
