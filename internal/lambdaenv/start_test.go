package lambdaenv_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/shardloop/shardloop/internal/lambdaenv"
)

// The trigger's spellings of a start are accepted and recorded in the one
// form the lease rows use, so that a start renamed from horizon to
// TRIM_HORIZON is the same start (the same generation), not a new one.
func TestParseStart_TriggerSpellingsAreTheSameStartsAsShardloops(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"TRIM_HORIZON", "horizon"},
		{"horizon", "horizon"},
		{"LATEST", "latest"},
		{"latest", "latest"},
		{"AT_TIMESTAMP:1767366245", "timestamp:1767366245000"},
		{"AT_TIMESTAMP:1767366245.5", "timestamp:1767366245500"},
		{"AT_TIMESTAMP:2026-01-02T15:04:05Z", "timestamp:1767366245000"},
		{"AT_TIMESTAMP:2026-01-02T16:04:05.25+01:00", "timestamp:1767366245250"},
		{"timestamp:1767366245000", "timestamp:1767366245000"},
		{"timestamp:2026-01-02T15:04:05Z", "timestamp:1767366245000"},
		{"sequence:shardId-000000000001:4959", "sequence:shardId-000000000001:4959"},
	} {
		got, err := lambdaenv.ParseStart(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseStart(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestParseStart_RefusesWhatTheTriggerWouldNotTakeSayingWhatItWants(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"AT_TIMESTAMP", "AT_TIMESTAMP:<unix seconds or RFC 3339 time>"},
		{"AT_TIMESTAMP:", "AT_TIMESTAMP:<unix seconds or RFC 3339 time>"},
		{"AT_TIMESTAMP:yesterday", "e.g. AT_TIMESTAMP:1767366245"},
		{"AT_TIMESTAMP:-5", "not before 1970"},
		// Milliseconds where the trigger takes seconds: refused, with the
		// form that takes milliseconds.
		{"AT_TIMESTAMP:1767366245000", "timestamp:1767366245000"},
		{"trim_horizon", "TRIM_HORIZON"},
		{"TRIM_HORIZON:1", "TRIM_HORIZON"},
		{"tip", "TRIM_HORIZON, LATEST or AT_TIMESTAMP"},
	} {
		_, err := lambdaenv.ParseStart(tc.in)
		var we *lambdaenv.WantError
		if !errors.As(err, &we) || !strings.Contains(we.Want, tc.want) {
			t.Errorf("ParseStart(%q) = %v; want a WantError containing %q", tc.in, err, tc.want)
		}
	}
}

// The coordinator's SHARDLOOP_START_POSITION takes the trigger's spellings
// too and hands the coordinator the one form.
func TestCoordinatorFromEnv_StartTakesTheTriggersSpelling(t *testing.T) {
	env := map[string]string{
		lambdaenv.VarStream:       "orders",
		lambdaenv.VarTable:        "leases",
		lambdaenv.VarStateMachine: "arn:aws:states:eu-west-1:123456789012:stateMachine:loop",
		lambdaenv.VarStart:        "TRIM_HORIZON",
	}
	c, err := lambdaenv.CoordinatorFromEnv(func(k string) string { return env[k] })
	if err != nil || c.Start != "horizon" {
		t.Fatalf("CoordinatorFromEnv(TRIM_HORIZON) = start %q, %v; want horizon", c.Start, err)
	}
}

func TestLogFromEnv_LambdasFormatAndLevelJSONAtInfoByDefault(t *testing.T) {
	for _, tc := range []struct {
		format, level string
		json          bool
		want          slog.Level
	}{
		{"", "", true, slog.LevelInfo},
		{"JSON", "DEBUG", true, slog.LevelDebug},
		{"Text", "WARN", false, slog.LevelWarn},
		{"TEXT", "trace", false, lambdaenv.LevelTrace},
		{"json", "FATAL", true, lambdaenv.LevelFatal},
		{"", "ERROR", true, slog.LevelError},
	} {
		env := map[string]string{lambdaenv.VarLogFormat: tc.format, lambdaenv.VarLogLevel: tc.level}
		l, err := lambdaenv.LogFromEnv(func(k string) string { return env[k] })
		if err != nil || l.JSON != tc.json || l.Level != tc.want {
			t.Errorf("%q/%q: %+v, %v; want json %v at %v", tc.format, tc.level, l, err, tc.json, tc.want)
		}
	}
	env := map[string]string{lambdaenv.VarLogFormat: "XML", lambdaenv.VarLogLevel: "LOUD"}
	_, err := lambdaenv.LogFromEnv(func(k string) string { return env[k] })
	for _, want := range []string{`AWS_LAMBDA_LOG_FORMAT="XML": want JSON or Text`, `AWS_LAMBDA_LOG_LEVEL="LOUD": want TRACE, DEBUG, INFO, WARN, ERROR or FATAL`} {
		if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, lambdaenv.ErrEnv) {
			t.Errorf("bad values: %v; want %q", err, want)
		}
	}
}
