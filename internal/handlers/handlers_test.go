package handlers_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	ltypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/shardloop/shardloop/internal/handlers"
	"github.com/shardloop/shardloop/pkg/coordinator"
	"github.com/shardloop/shardloop/pkg/metrics"
)

type invokeFunc func(ctx context.Context, in *lambda.InvokeInput, optFns ...func(*lambda.Options)) (*lambda.InvokeOutput, error)

func (f invokeFunc) Invoke(ctx context.Context, in *lambda.InvokeInput, optFns ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	return f(ctx, in, optFns...)
}

func TestNudgeFunc_InvokesCoordinatorAsynchronously(t *testing.T) {
	var got *lambda.InvokeInput
	nudge := handlers.NudgeFunc(invokeFunc(func(_ context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
		got = in
		return &lambda.InvokeOutput{StatusCode: 202}, nil
	}), "shardloop-coordinator", slog.New(slog.DiscardHandler))
	nudge(t.Context())
	if got == nil || aws.ToString(got.FunctionName) != "shardloop-coordinator" || got.InvocationType != ltypes.InvocationTypeEvent {
		t.Fatalf("invoke = %+v, want an Event invoke of shardloop-coordinator", got)
	}
	var ev handlers.NudgeEvent
	if err := json.Unmarshal(got.Payload, &ev); err != nil || !ev.Nudge {
		t.Fatalf("payload %s: want {\"nudge\":true}", got.Payload)
	}
}

func TestNudgeFunc_FailureIsOnlyLogged(t *testing.T) {
	nudge := handlers.NudgeFunc(invokeFunc(func(context.Context, *lambda.InvokeInput, ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
		return nil, errors.New("throttled")
	}), "c", slog.New(slog.DiscardHandler))
	nudge(t.Context()) // must not panic or block
}

func TestCountingStarter_CountsLeaseTakesOfStartedLoopsOnly(t *testing.T) {
	var out strings.Builder
	rec, err := metrics.New(&out)
	if err != nil {
		t.Fatal(err)
	}
	inner := coordinator.StarterFunc(func(_ context.Context, loop coordinator.Loop) error {
		if loop.ShardID == "bad" {
			return errors.New("start execution: throttled")
		}
		return nil
	})
	s := handlers.CountingStarter(inner, rec)
	for _, id := range []string{"s0", "s0", "s1", "bad"} {
		_ = s.Start(t.Context(), coordinator.Loop{Stream: "orders", ShardID: id, Owner: "o-" + id})
	}
	rec.Flush()
	got := map[string]float64{}
	for line := range strings.Lines(out.String()) {
		var v struct {
			Shard      string
			LeaseTakes float64
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		got[v.Shard] = v.LeaseTakes
	}
	if len(got) != 2 || got["s0"] != 2 || got["s1"] != 1 {
		t.Fatalf("LeaseTakes by shard = %v, want s0:2 s1:1 and nothing for the failed start", got)
	}
}

func TestOnFailureDestination_BuildsTheClientTheARNNames(t *testing.T) {
	cfg := aws.Config{Region: "us-east-1"}
	if d, err := handlers.OnFailureDestination("", cfg); d != nil || err != nil {
		t.Fatalf("empty ARN: %v, %v; want no destination", d, err)
	}
	for _, arn := range []string{"arn:aws:sqs:us-east-1:123456789012:failed", "arn:aws:sns:us-east-1:123456789012:failed", "arn:aws:s3:::orders-failed"} {
		if d, err := handlers.OnFailureDestination(arn, cfg); d == nil || err != nil {
			t.Errorf("%s: %v, %v", arn, d, err)
		}
	}
	if _, err := handlers.OnFailureDestination("arn:aws:lambda:us-east-1:123456789012:function:f", cfg); err == nil {
		t.Error("a function ARN was accepted")
	}
}
