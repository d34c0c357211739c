package handlers

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	ltypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
)

// configFunc is a FunctionConfigAPI as a function.
type configFunc func(in *lambda.GetFunctionConfigurationInput) (*lambda.GetFunctionConfigurationOutput, error)

func (f configFunc) GetFunctionConfiguration(_ context.Context, in *lambda.GetFunctionConfigurationInput, _ ...func(*lambda.Options)) (*lambda.GetFunctionConfigurationOutput, error) {
	return f(in)
}

// invokeFunc is a reader.LambdaInvoker as a function.
type invokeFunc func() error

func (f invokeFunc) Invoke(context.Context, *lambda.InvokeInput, ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	return &lambda.InvokeOutput{StatusCode: 200}, f()
}

func TestTargetTimeout_ReadOnceAMinuteAndAgainAfterAnUpdate(t *testing.T) {
	var mu sync.Mutex
	secs, reads := int32(30), 0
	api := configFunc(func(in *lambda.GetFunctionConfigurationInput) (*lambda.GetFunctionConfigurationOutput, error) {
		mu.Lock()
		defer mu.Unlock()
		reads++
		if aws.ToString(in.FunctionName) != "orders-fn" {
			t.Errorf("read the configuration of %q", aws.ToString(in.FunctionName))
		}
		return &lambda.GetFunctionConfigurationOutput{Timeout: aws.Int32(secs)}, nil
	})
	now := time.Unix(1_800_000_000, 0)
	tt := NewTargetTimeout(api, "orders-fn", "")
	tt.clock = func() time.Time { return now }
	get := func() time.Duration {
		t.Helper()
		d, err := tt.Get(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := get(); d != 30*time.Second {
		t.Fatalf("timeout %s, want 30s", d)
	}
	mu.Lock()
	secs = 45 // the function's timeout is raised
	mu.Unlock()
	now = now.Add(TargetTimeoutTTL - time.Second)
	if d := get(); d != 30*time.Second || reads != 1 {
		t.Fatalf("within the TTL: %s after %d reads, want the cached 30s", d, reads)
	}
	now = now.Add(time.Second)
	if d := get(); d != 45*time.Second || reads != 2 {
		t.Fatalf("past the TTL: %s after %d reads, want 45s read again", d, reads)
	}
	// An Invoke that meets the function being updated makes it stale.
	mu.Lock()
	secs = 60
	mu.Unlock()
	inv := staleOnUpdate{LambdaInvoker: invokeFunc(func() error {
		return &ltypes.ResourceConflictException{Message: aws.String("An update is in progress")}
	}), tt: tt}
	if _, err := inv.Invoke(t.Context(), &lambda.InvokeInput{}); err == nil {
		t.Fatal("the invoke's error was swallowed")
	}
	if d := get(); d != time.Minute || reads != 3 {
		t.Fatalf("after an update conflict: %s after %d reads, want 60s read again", d, reads)
	}
}

func TestTargetTimeout_AnUnreadableConfigurationNamesThePermission(t *testing.T) {
	api := configFunc(func(*lambda.GetFunctionConfigurationInput) (*lambda.GetFunctionConfigurationOutput, error) {
		return nil, errors.New("AccessDeniedException: not authorized")
	})
	_, err := NewTargetTimeout(api, "orders-fn", "").Get(t.Context())
	if err == nil || !strings.Contains(err.Error(), "lambda:GetFunctionConfiguration") || !strings.Contains(err.Error(), "orders-fn") {
		t.Fatalf("err = %v, want it to name the permission and the function", err)
	}
}

func TestFenceFor(t *testing.T) {
	for _, c := range []struct {
		name                      string
		timeout, fence, runLength time.Duration
		want                      time.Duration
		err                       string
	}{
		{"TheTimeoutByDefault", 30 * time.Second, 0, 10 * time.Minute, 30 * time.Second, ""},
		{"ALargerFenceIsTheTimeout", 30 * time.Second, time.Minute, 10 * time.Minute, 30 * time.Second, ""},
		{"ASmallerFenceWithinTheCut", 30 * time.Second, 25 * time.Second, 10 * time.Minute, 25 * time.Second, ""},
		{"ASmallerFenceTooFarBelow", 30 * time.Second, 10 * time.Second, 10 * time.Minute, 0, "at most 6s below"},
		{"ATimeoutAsLongAsARun", 10 * time.Minute, 0, 10 * time.Minute, 0, "shorter than the run length"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := FenceFor(c.timeout, c.fence, c.runLength)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("FenceFor = %s, %v; want %s", got, err, c.want)
			}
		})
	}
}

func TestDeployedAt_IsTheFunctionsLastUpdate(t *testing.T) {
	api := configFunc(func(in *lambda.GetFunctionConfigurationInput) (*lambda.GetFunctionConfigurationOutput, error) {
		return &lambda.GetFunctionConfigurationOutput{LastModified: aws.String("2026-11-30T10:11:12.345+0000")}, nil
	})
	at, err := DeployedAt(t.Context(), api, "shardloop-coordinator")
	if err != nil || !at.Equal(time.Date(2026, 11, 30, 10, 11, 12, 345e6, time.UTC)) {
		t.Fatalf("DeployedAt = %v, %v", at, err)
	}
	bad := configFunc(func(*lambda.GetFunctionConfigurationInput) (*lambda.GetFunctionConfigurationOutput, error) {
		return &lambda.GetFunctionConfigurationOutput{LastModified: aws.String("yesterday")}, nil
	})
	if _, err := DeployedAt(t.Context(), bad, "f"); err == nil || !strings.Contains(err.Error(), "yesterday") {
		t.Fatalf("an unreadable LastModified: err = %v", err)
	}
}
