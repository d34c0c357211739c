package handlers_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	ltypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/shardloop/shardloop/internal/handlers"
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
