package lambdaenv_test

import (
	"errors"
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
	if r.Table != "leases" || r.Target != "handler" || r.BatchSize != 100 || r.PollInterval != 500*time.Millisecond || r.RunLength != time.Minute || r.MaxIterations != 500 {
		t.Fatalf("reader env = %+v", r)
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
	// No start position set is no start: the checkpoints decide.
	if c.Start != "" || c.Window != 55*time.Second || c.CreateShards != 0 {
		t.Fatalf("coordinator env = %+v", c)
	}
}

func TestReaderFromEnv_FailurePolicyDefaultsKeepRetryingForever(t *testing.T) {
	r, err := lambdaenv.ReaderFromEnv(getenv(map[string]string{"SHARDLOOP_LEASE_TABLE": "t", "SHARDLOOP_TARGET_FUNCTION": "f"}))
	if err != nil {
		t.Fatal(err)
	}
	if r.MaxRetryAttempts != -1 || r.MaxRecordAge != 0 || r.BisectOnError || r.OnFailure != "" || r.BatchingWindow != 0 || r.Deaggregate {
		t.Fatalf("failure policy defaults %+v", r)
	}
	o := r.ReaderPolicy()
	if o.MaxRetryAttempts != nil || o.MaxRecordAge != 0 || o.BisectOnError || o.BatchingWindow != 0 || o.Deaggregate {
		t.Fatalf("reader options %+v, want the zero failure policy", o)
	}
	// What infra/ and template/ write for the defaults parses the same.
	r2, err := lambdaenv.ReaderFromEnv(getenv(map[string]string{"SHARDLOOP_LEASE_TABLE": "t", "SHARDLOOP_TARGET_FUNCTION": "f",
		"SHARDLOOP_MAX_RETRY_ATTEMPTS": "-1", "SHARDLOOP_MAX_RECORD_AGE": "-1", "SHARDLOOP_BISECT_ON_ERROR": "false",
		"SHARDLOOP_BATCHING_WINDOW": "0s", "SHARDLOOP_DEAGGREGATE": "false", "SHARDLOOP_ON_FAILURE_DESTINATION": ""}))
	if err != nil || r2 != r {
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
	if o := r.ReaderPolicy(); o.MaxRetryAttempts == nil || *o.MaxRetryAttempts != 2 {
		t.Fatalf("reader options %+v", o)
	}
	base := map[string]string{"SHARDLOOP_LEASE_TABLE": "t", "SHARDLOOP_TARGET_FUNCTION": "f"}
	for k, v := range map[string]string{
		"SHARDLOOP_MAX_RETRY_ATTEMPTS":     "10001",
		"SHARDLOOP_MAX_RECORD_AGE":         "30s",
		"SHARDLOOP_BISECT_ON_ERROR":        "yes",
		"SHARDLOOP_ON_FAILURE_DESTINATION": "arn:aws:s3:::bucket",
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
