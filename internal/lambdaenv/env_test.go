package lambdaenv_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shardloop/shardloop/internal/lambdaenv"
)

func getenv(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestReaderFromEnv_DefaultsAndValues(t *testing.T) {
	r, err := lambdaenv.ReaderFromEnv(getenv(map[string]string{
		"SHARDLOOP_LEASE_TABLE": "leases", "SHARDLOOP_TARGET_FUNCTION": "handler",
		"SHARDLOOP_POLL_INTERVAL": "500ms",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if r.Table != "leases" || r.Target != "handler" || r.BatchSize != 100 || r.PollInterval != 500*time.Millisecond || r.RunLength != 10*time.Minute || r.MaxIterations != 500 || r.PerShardLag {
		t.Fatalf("reader env = %+v", r)
	}
	if r.TargetTimeoutKnown || r.ReaderPolicy().TargetTimeout != 0 {
		t.Fatalf("target timeout known without SHARDLOOP_TARGET_TIMEOUT: %+v", r)
	}
	if r.ReadAheadMiB != 8 || r.ReaderPolicy().ReadAheadBytes != 8<<20 {
		t.Fatalf("read-ahead budget without SHARDLOOP_READ_AHEAD_MIB: %d MiB, %d bytes; want 8 MiB", r.ReadAheadMiB, r.ReaderPolicy().ReadAheadBytes)
	}
	r, err = lambdaenv.ReaderFromEnv(getenv(map[string]string{
		"SHARDLOOP_LEASE_TABLE": "leases", "SHARDLOOP_TARGET_FUNCTION": "handler", "SHARDLOOP_READ_AHEAD_MIB": "64",
	}))
	if err != nil || r.ReaderPolicy().ReadAheadBytes != 64<<20 {
		t.Fatalf("with SHARDLOOP_READ_AHEAD_MIB=64: %+v, %v; want a 64 MiB budget", r, err)
	}
	r, err = lambdaenv.ReaderFromEnv(getenv(map[string]string{
		"SHARDLOOP_LEASE_TABLE": "leases", "SHARDLOOP_TARGET_FUNCTION": "handler", "SHARDLOOP_TARGET_TIMEOUT": "30s",
	}))
	if err != nil || r.ReaderPolicy().TargetTimeout != 30*time.Second {
		t.Fatalf("with SHARDLOOP_TARGET_TIMEOUT=30s: %+v, %v; want the reader to know it", r, err)
	}
}

func TestFromEnv_ErrorsNameTheVariable(t *testing.T) {
	cases := []struct {
		env  map[string]string
		coor bool
		want []string
	}{
		{map[string]string{}, false, []string{"SHARDLOOP_LEASE_TABLE is not set", "SHARDLOOP_TARGET_FUNCTION is not set"}},
		{map[string]string{"SHARDLOOP_LEASE_TABLE": "t", "SHARDLOOP_TARGET_FUNCTION": "f", "SHARDLOOP_BATCH_SIZE": "0"}, false, []string{`SHARDLOOP_BATCH_SIZE="0": want an integer from 1 to 10000`}},
		{map[string]string{"SHARDLOOP_LEASE_TABLE": "t", "SHARDLOOP_TARGET_FUNCTION": "f", "SHARDLOOP_RUN_LENGTH": "20m"}, false, []string{`SHARDLOOP_RUN_LENGTH="20m"`}},
		{map[string]string{"SHARDLOOP_LEASE_TABLE": "t", "SHARDLOOP_TARGET_FUNCTION": "f", "SHARDLOOP_READ_AHEAD_MIB": "0"}, false, []string{`SHARDLOOP_READ_AHEAD_MIB="0": want an integer from 1 to 1024`}},
		{map[string]string{"SHARDLOOP_LEASE_TABLE": "t", "SHARDLOOP_TARGET_FUNCTION": "f", "SHARDLOOP_TARGET_TIMEOUT": "11m"}, false, []string{`SHARDLOOP_TARGET_TIMEOUT="11m": want a timeout shorter than the run length`}},
		{map[string]string{"SHARDLOOP_STREAM": "s", "SHARDLOOP_LEASE_TABLE": "t"}, true, []string{"SHARDLOOP_STATE_MACHINE_ARN is not set"}},
		{map[string]string{"SHARDLOOP_STREAM": "s", "SHARDLOOP_LEASE_TABLE": "t", "SHARDLOOP_STATE_MACHINE_ARN": "a", "SHARDLOOP_START_POSITION": "yesterday"}, true, []string{`SHARDLOOP_START_POSITION="yesterday"`}},
	}
	for _, c := range cases {
		var err error
		if c.coor {
			_, err = lambdaenv.CoordinatorFromEnv(getenv(c.env))
		} else {
			_, err = lambdaenv.ReaderFromEnv(getenv(c.env))
		}
		if !errors.Is(err, lambdaenv.ErrEnv) {
			t.Fatalf("%v: err = %v, want ErrEnv", c.env, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: err %q does not contain %q", c.env, err, w)
			}
		}
	}
}

func TestCoordinatorFromEnv_Defaults(t *testing.T) {
	c, err := lambdaenv.CoordinatorFromEnv(getenv(map[string]string{
		"SHARDLOOP_STREAM": "arn:aws:kinesis:eu-west-1:123456789012:stream/orders", "SHARDLOOP_LEASE_TABLE": "t",
		"SHARDLOOP_STATE_MACHINE_ARN": "arn:aws:states:eu-west-1:123456789012:stateMachine:loop",
	}))
	if err != nil {
		t.Fatal(err)
	}
	// No start position set is no start: the checkpoints decide. No window:
	// one pass per scheduled invocation.
	if c.Start != "" || c.Window != 0 || c.CreateShards != 0 || c.RunLength != lambdaenv.DefaultRunLength {
		t.Fatalf("coordinator env = %+v", c)
	}
}

func TestCoordinatorFromEnv_WindowIsOptional(t *testing.T) {
	base := map[string]string{
		"SHARDLOOP_STREAM": "orders", "SHARDLOOP_LEASE_TABLE": "t",
		"SHARDLOOP_STATE_MACHINE_ARN": "arn:aws:states:eu-west-1:123456789012:stateMachine:loop",
	}
	with := func(k, v string) map[string]string {
		m := map[string]string{k: v}
		for bk, bv := range base {
			m[bk] = bv
		}
		return m
	}
	for _, tc := range []struct {
		value string
		want  time.Duration
	}{{"0s", 0}, {"0", 0}, {"55s", 55 * time.Second}, {"14m", 14 * time.Minute}} {
		c, err := lambdaenv.CoordinatorFromEnv(getenv(with("SHARDLOOP_WINDOW", tc.value)))
		if err != nil || c.Window != tc.want {
			t.Errorf("SHARDLOOP_WINDOW=%s: window %v, %v; want %v", tc.value, c.Window, err, tc.want)
		}
	}
	for _, bad := range []string{"500ms", "15m", "-1s", "soon"} {
		_, err := lambdaenv.CoordinatorFromEnv(getenv(with("SHARDLOOP_WINDOW", bad)))
		if !errors.Is(err, lambdaenv.ErrEnv) || !strings.Contains(err.Error(), "SHARDLOOP_WINDOW") || !strings.Contains(err.Error(), "0s (no window") {
			t.Errorf("SHARDLOOP_WINDOW=%s: err = %v, want one naming the variable and the no-window form", bad, err)
		}
	}
	c, err := lambdaenv.CoordinatorFromEnv(getenv(with("SHARDLOOP_RUN_LENGTH", "20m")))
	if !errors.Is(err, lambdaenv.ErrEnv) || !strings.Contains(err.Error(), "SHARDLOOP_RUN_LENGTH") {
		t.Errorf("SHARDLOOP_RUN_LENGTH=20m: %+v, %v; want it refused", c, err)
	}
}

// Every function timeout the limits allow fits Lambda's 15 minutes, and a
// watch always fits its invocation.
func TestTimeouts_FitLambdasLimitAndTheWatch(t *testing.T) {
	for _, run := range []time.Duration{lambdaenv.MinRunLength, lambdaenv.DefaultRunLength, lambdaenv.MaxRunLength} {
		for _, window := range []time.Duration{0, lambdaenv.MinWindow, lambdaenv.MaxWindow} {
			c := lambdaenv.CoordinatorTimeout(window, run)
			if c > 15*time.Minute || c < window || c <= lambdaenv.WatchFor(run) {
				t.Errorf("window %v, run %v: coordinator timeout %v", window, run, c)
			}
		}
		if r := lambdaenv.ShardReaderTimeout(run); r > 15*time.Minute || r <= run {
			t.Errorf("run %v: shardreader timeout %v", run, r)
		}
	}
	if got := lambdaenv.CoordinatorTimeout(0, lambdaenv.DefaultRunLength); got != 10*time.Minute+35*time.Second {
		t.Errorf("default coordinator timeout %v, want 10m35s", got)
	}
}

func TestReaderFromEnv_FailurePolicyDefaultsKeepRetryingForever(t *testing.T) {
	r, err := lambdaenv.ReaderFromEnv(getenv(map[string]string{"SHARDLOOP_LEASE_TABLE": "t", "SHARDLOOP_TARGET_FUNCTION": "f"}))
	if err != nil {
		t.Fatal(err)
	}
	if r.MaxRetryAttempts != -1 || r.MaxRecordAge != 0 || r.BisectOnError || r.OnFailure != "" || r.BatchingWindow != 0 || r.Deaggregate || r.PerShardLag {
		t.Fatalf("failure policy defaults %+v", r)
	}
	o := r.ReaderPolicy()
	if o.MaximumRetryAttempts != nil || o.MaximumRecordAge != 0 || o.BisectBatchOnFunctionError || o.MaximumBatchingWindow != 0 || o.Deaggregate {
		t.Fatalf("reader options %+v, want the zero failure policy", o)
	}
	// What infra/ and template/ write for the defaults parses the same.
	r2, err := lambdaenv.ReaderFromEnv(getenv(map[string]string{"SHARDLOOP_LEASE_TABLE": "t", "SHARDLOOP_TARGET_FUNCTION": "f",
		"SHARDLOOP_MAX_RETRY_ATTEMPTS": "-1", "SHARDLOOP_MAX_RECORD_AGE": "-1", "SHARDLOOP_BISECT_ON_ERROR": "false",
		"SHARDLOOP_BATCHING_WINDOW": "0s", "SHARDLOOP_DEAGGREGATE": "false", "SHARDLOOP_ON_FAILURE_DESTINATION": "",
		"SHARDLOOP_PER_SHARD_LAG": "false", "SHARDLOOP_FILTER_CRITERIA": ""}))
	if err != nil || !reflect.DeepEqual(r2, r) {
		t.Fatalf("explicit defaults: %+v, %v; want %+v", r2, err, r)
	}
}

func TestReaderFromEnv_OnFailureRetryAttemptsRecordAgeBisectBatchingWindowDeaggregate(t *testing.T) {
	r, err := lambdaenv.ReaderFromEnv(getenv(map[string]string{
		"SHARDLOOP_LEASE_TABLE":            "t",
		"SHARDLOOP_TARGET_FUNCTION":        "f",
		"SHARDLOOP_MAX_RETRY_ATTEMPTS":     "2",
		"SHARDLOOP_MAX_RECORD_AGE":         "3600s",
		"SHARDLOOP_BISECT_ON_ERROR":        "true",
		"SHARDLOOP_ON_FAILURE_DESTINATION": "arn:aws:sqs:eu-west-1:123456789012:failed",
		"SHARDLOOP_BATCHING_WINDOW":        "5s",
		"SHARDLOOP_DEAGGREGATE":            "true",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if r.MaxRetryAttempts != 2 || r.MaxRecordAge != time.Hour || !r.BisectOnError || r.OnFailure != "arn:aws:sqs:eu-west-1:123456789012:failed" ||
		r.BatchingWindow != 5*time.Second || !r.Deaggregate {
		t.Fatalf("reader env %+v", r)
	}
	if o := r.ReaderPolicy(); o.MaximumRetryAttempts == nil || *o.MaximumRetryAttempts != 2 {
		t.Fatalf("reader options %+v", o)
	}
	base := map[string]string{"SHARDLOOP_LEASE_TABLE": "t", "SHARDLOOP_TARGET_FUNCTION": "f"}
	for k, v := range map[string]string{
		"SHARDLOOP_MAX_RETRY_ATTEMPTS":     "10001",
		"SHARDLOOP_MAX_RECORD_AGE":         "30s",
		"SHARDLOOP_BISECT_ON_ERROR":        "yes",
		"SHARDLOOP_ON_FAILURE_DESTINATION": "arn:aws:lambda:us-east-1:123456789012:function:f",
		"SHARDLOOP_BATCHING_WINDOW":        "301s",
		"SHARDLOOP_DEAGGREGATE":            "1",
	} {
		env := map[string]string{k: v}
		for bk, bv := range base {
			env[bk] = bv
		}
		_, err := lambdaenv.ReaderFromEnv(getenv(env))
		if !errors.Is(err, lambdaenv.ErrEnv) || !strings.Contains(err.Error(), k+"=") {
			t.Errorf("%s=%s: err = %v, want one naming the variable", k, v, err)
		}
	}
	_, err = lambdaenv.ReaderFromEnv(getenv(map[string]string{"SHARDLOOP_LEASE_TABLE": "t", "SHARDLOOP_TARGET_FUNCTION": "f",
		"SHARDLOOP_BATCHING_WINDOW": "90s", "SHARDLOOP_RUN_LENGTH": "60s"}))
	if err == nil || !strings.Contains(err.Error(), "SHARDLOOP_BATCHING_WINDOW") {
		t.Errorf("a window longer than the run: err = %v", err)
	}
}

func TestReaderFromEnv_InvokeIdentityAndTargetTimeout(t *testing.T) {
	base := map[string]string{"SHARDLOOP_LEASE_TABLE": "t", "SHARDLOOP_TARGET_FUNCTION": "f"}
	r, err := lambdaenv.ReaderFromEnv(getenv(base))
	if err != nil {
		t.Fatal(err)
	}
	if r.InvokeIdentityARN != "" || r.TargetTimeout != 15*time.Minute {
		t.Fatalf("defaults: identity %q, target timeout %s; want none and Lambda's 15m maximum", r.InvokeIdentityARN, r.TargetTimeout)
	}
	env := map[string]string{"SHARDLOOP_INVOKE_IDENTITY_ARN": "arn:aws:iam::123456789012:role/service-role/reader", "SHARDLOOP_TARGET_TIMEOUT": "30s"}
	for k, v := range base {
		env[k] = v
	}
	if r, err = lambdaenv.ReaderFromEnv(getenv(env)); err != nil || r.InvokeIdentityARN != env["SHARDLOOP_INVOKE_IDENTITY_ARN"] || r.TargetTimeout != 30*time.Second {
		t.Fatalf("set: %+v, %v", r, err)
	}
	for k, v := range map[string]string{
		"SHARDLOOP_INVOKE_IDENTITY_ARN": "arn:aws:iam::000000000000",
		"SHARDLOOP_TARGET_TIMEOUT":      "16m",
	} {
		bad := map[string]string{k: v}
		for bk, bv := range base {
			bad[bk] = bv
		}
		if _, err := lambdaenv.ReaderFromEnv(getenv(bad)); !errors.Is(err, lambdaenv.ErrEnv) || !strings.Contains(err.Error(), k+"=") {
			t.Errorf("%s=%s: err = %v, want one naming the variable", k, v, err)
		}
	}
}

func TestReaderFromEnv_PollIntervalBelowAShardsReadRateIsRefused(t *testing.T) {
	_, err := lambdaenv.ReaderFromEnv(getenv(map[string]string{"SHARDLOOP_LEASE_TABLE": "t", "SHARDLOOP_TARGET_FUNCTION": "f", "SHARDLOOP_POLL_INTERVAL": "50ms"}))
	if !errors.Is(err, lambdaenv.ErrEnv) || !strings.Contains(err.Error(), "from 200ms to 1m0s") || !strings.Contains(err.Error(), "5 GetRecords calls a second") {
		t.Fatalf("err = %v, want the range and its reason", err)
	}
}

func TestCoordinatorFromEnv_StartTakesAnRFC3339TimeAsUnixMillis(t *testing.T) {
	c, err := lambdaenv.CoordinatorFromEnv(getenv(map[string]string{
		"SHARDLOOP_STREAM": "orders", "SHARDLOOP_LEASE_TABLE": "t",
		"SHARDLOOP_STATE_MACHINE_ARN": "arn:aws:states:eu-west-1:123456789012:stateMachine:loop",
		"SHARDLOOP_START_POSITION":    "timestamp:2023-11-14T22:13:20Z",
	}))
	if err != nil || c.Start != "timestamp:1700000000000" {
		t.Fatalf("start = %q, %v; want timestamp:1700000000000", c.Start, err)
	}
}

func TestParseStart_EmptyMeansNoneConfigured(t *testing.T) {
	if s, err := lambdaenv.ParseStart(""); s != "" || err != nil {
		t.Fatalf("ParseStart(\"\") = %q, %v; want it unchanged", s, err)
	}
	var we *lambdaenv.WantError
	if _, err := lambdaenv.ParseStart("sequence:4959"); !errors.As(err, &we) || !strings.Contains(we.Want, "sequence:<shard id>:<sequence number>") {
		t.Fatalf("ParseStart(sequence without shard) = %v", err)
	}
}

func TestReaderFromEnv_ParallelizationFactorIsOneByDefaultAndOneToTen(t *testing.T) {
	base := map[string]string{"SHARDLOOP_LEASE_TABLE": "t", "SHARDLOOP_TARGET_FUNCTION": "f"}
	r, err := lambdaenv.ReaderFromEnv(getenv(base))
	if err != nil || r.ParallelizationFactor != 1 || r.ReaderPolicy().ParallelizationFactor != 1 {
		t.Fatalf("default: %+v, %v; want factor 1", r, err)
	}
	for _, v := range []string{"1", "4", "10"} {
		env := map[string]string{"SHARDLOOP_PARALLELIZATION_FACTOR": v}
		for k, bv := range base {
			env[k] = bv
		}
		r, err := lambdaenv.ReaderFromEnv(getenv(env))
		if err != nil || fmt.Sprint(r.ReaderPolicy().ParallelizationFactor) != v {
			t.Errorf("SHARDLOOP_PARALLELIZATION_FACTOR=%s: %+v, %v", v, r, err)
		}
	}
	for _, v := range []string{"0", "11", "-1", "two"} {
		env := map[string]string{"SHARDLOOP_PARALLELIZATION_FACTOR": v}
		for k, bv := range base {
			env[k] = bv
		}
		_, err := lambdaenv.ReaderFromEnv(getenv(env))
		if !errors.Is(err, lambdaenv.ErrEnv) || !strings.Contains(err.Error(), "SHARDLOOP_PARALLELIZATION_FACTOR=") || !strings.Contains(err.Error(), "from 1 to 10") {
			t.Errorf("SHARDLOOP_PARALLELIZATION_FACTOR=%s: err = %v, want one naming the variable and 1 to 10", v, err)
		}
	}
}
