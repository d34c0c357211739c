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
	if o.MaximumRetryAttempts != nil || o.MaximumRecordAge != 0 || o.BisectBatchOnFunctionError || o.MaximumBatchingWindow != 0 || o.Deaggregate || p.destination != "" {
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
	if *o.MaximumRetryAttempts != 2 || o.MaximumRecordAge != time.Hour || !o.BisectBatchOnFunctionError || o.MaximumBatchingWindow != 5*time.Second || !o.Deaggregate {
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

// A runner restarted by a service manager keeps the deploy time it is
// given, so it is not a newer deployment than one made since; without one
// it is deployed when it starts; a time to come is refused.
func TestDeployTime_GivenKeptNowWithoutOneAndNoTimeToCome(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	f, _, err := parseRunFlags([]string{"--stream", "orders", "--deployed-at", "2026-12-01T10:00:00+02:00"})
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC); !f.deployed.Equal(want) {
		t.Fatalf("--deployed-at parsed as %v, want %v", f.deployed, want)
	}
	for _, c := range []struct {
		given time.Time
		want  time.Time
		err   string
	}{
		{time.Time{}, now, ""},
		{now.Add(-48 * time.Hour), now.Add(-48 * time.Hour), ""},
		{now.Add(30 * time.Second), now.Add(30 * time.Second), ""}, // a host clock a little fast
		{now.Add(2 * time.Minute), time.Time{}, "--deployed-at 2026-12-03T12:02:00Z is later than Kinesis's clock (2026-12-03T12:00:00Z)"},
	} {
		got, err := deployTime(c.given, now)
		if c.err != "" {
			var ue usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: err %v, want a usage error with %q", c.given, err, c.err)
			}
			continue
		}
		if err != nil || !got.Equal(c.want) {
			t.Errorf("%v: %v, %v; want %v", c.given, got, err, c.want)
		}
	}
}
