package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func parsePolicy(t *testing.T, args ...string) (*policyFlags, error) {
	t.Helper()
	fs := newFlags("run", runSynopsis)
	p := addPolicyFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return p, nil
}

func TestRunFlags_FailurePolicyDefaultsRetryForever(t *testing.T) {
	p, _ := parsePolicy(t)
	o, err := p.options(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if o.MaxRetryAttempts != nil || o.MaxRecordAge != 0 || o.BisectOnError || o.BatchingWindow != 0 || o.Deaggregate || p.destination != "" {
		t.Fatalf("defaults %+v", o)
	}
}

func TestRunFlags_OnFailureRetryAttemptsRecordAgeBisectBatchingWindowDeaggregate(t *testing.T) {
	p, _ := parsePolicy(t, "--max-retry-attempts", "2", "--max-record-age", "1h", "--bisect-on-error", "--batching-window", "5s",
		"--deaggregate", "--on-failure-destination", "arn:aws:sns:us-east-1:000000000000:failed")
	o, err := p.options(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if *o.MaxRetryAttempts != 2 || o.MaxRecordAge != time.Hour || !o.BisectOnError || o.BatchingWindow != 5*time.Second || !o.Deaggregate {
		t.Fatalf("options %+v", o)
	}
	for _, args := range [][]string{
		{"--max-retry-attempts", "-2"}, {"--max-record-age", "10s"}, {"--batching-window", "2m"},
		{"--on-failure-destination", "my-queue"},
	} {
		p, _ := parsePolicy(t, args...)
		_, err := p.options(time.Minute)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("%v: err = %v, want a usage error naming the flag", args, err)
		}
	}
}
