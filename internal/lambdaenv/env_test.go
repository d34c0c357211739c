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
	if c.Start != "latest" || c.Window != 55*time.Second || c.CreateShards != 0 {
		t.Fatalf("coordinator env = %+v", c)
	}
}
