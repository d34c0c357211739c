// Package handlers holds the Lambda handlers behind functions/coordinator and
// functions/shardreader, so that the mains stay a few lines and the handlers
// are tested without Lambda.
package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	ltypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/shardloop/shardloop/internal/lambdaenv"
	"github.com/shardloop/shardloop/pkg/coordinator"
	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/reader"
)

// ShardReader runs one bounded reader run per invocation.
type ShardReader struct {
	opts reader.Options
}

// NewShardReader builds the SDK clients once, at cold start. Every client
// honours AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_<SERVICE> through cfg.
func NewShardReader(env lambdaenv.Reader, cfg aws.Config, log *slog.Logger) (*ShardReader, error) {
	lc := lambda.NewFromConfig(cfg)
	store, err := lease.NewDynamoStore(dynamodb.NewFromConfig(cfg), env.Table)
	if err != nil {
		return nil, err
	}
	target, err := reader.NewLambdaTarget(lc, env.Target, func(o *reader.LambdaOptions) { o.Region = cfg.Region })
	if err != nil {
		return nil, err
	}
	opts := reader.Options{
		Kinesis:       kinesis.NewFromConfig(cfg),
		Store:         store,
		Target:        target,
		BatchSize:     env.BatchSize,
		PollInterval:  env.PollInterval,
		RunLength:     env.RunLength,
		MaxIterations: env.MaxIterations,
		Logger:        log,
	}
	if env.Coordinator != "" {
		opts.Nudge = NudgeFunc(lc, env.Coordinator, log)
	}
	return &ShardReader{opts: opts}, nil
}

// Handle runs one iteration of the shard loop: the state in, the next state out.
// An input with continueAsNew set is the first state of a fresh execution
// (the state machine's continue-as-new): its iteration count starts again.
func (h *ShardReader) Handle(ctx context.Context, st reader.State) (reader.State, error) {
	if st.ContinueAsNew {
		st.Iteration = 0
	}
	return reader.Run(ctx, h.opts, st)
}

// NudgeEvent is the coordinator's payload when a reader asks it to relist.
type NudgeEvent struct {
	Nudge  bool   `json:"nudge"`
	Stream string `json:"stream,omitempty"`
}

// InvokeAPI is the Lambda call a nudge makes.
type InvokeAPI interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, optFns ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// NudgeFunc returns a reader Nudge that invokes the coordinator
// asynchronously (InvocationType Event): the reader does not wait for it, and
// a failure only costs the child the wait until the next relist.
func NudgeFunc(client InvokeAPI, coordinatorFn string, log *slog.Logger) func(context.Context) {
	payload, _ := json.Marshal(NudgeEvent{Nudge: true})
	return func(ctx context.Context) {
		_, err := client.Invoke(ctx, &lambda.InvokeInput{
			FunctionName:   aws.String(coordinatorFn),
			InvocationType: ltypes.InvocationTypeEvent,
			Payload:        payload,
		})
		if err != nil {
			log.WarnContext(ctx, "nudge of the coordinator failed; children open at the next relist", "err", err)
		}
	}
}

// Coordinator runs the coordinator: a relisting window on the schedule, one
// pass on a nudge.
type Coordinator struct {
	c      *coordinator.Coordinator
	window time.Duration
}

// NewCoordinator builds the SDK clients once, at cold start.
func NewCoordinator(env lambdaenv.Coordinator, cfg aws.Config, log *slog.Logger) (*Coordinator, error) {
	store, err := lease.NewDynamoStore(dynamodb.NewFromConfig(cfg), env.Table)
	if err != nil {
		return nil, err
	}
	starter := coordinator.SFNStarter{Client: sfn.NewFromConfig(cfg), StateMachineARN: env.StateMachineARN}
	c, err := coordinator.New(coordinator.Config{
		Subscriptions: []coordinator.Subscription{{Stream: env.Stream, Start: env.Start, CreateShards: env.CreateShards}},
		Logger:        log,
	}, store, kinesis.NewFromConfig(cfg), starter)
	if err != nil {
		return nil, err
	}
	return &Coordinator{c: c, window: env.Window}, nil
}

// Handle runs one pass for a nudge and a relisting window for anything else
// (the EventBridge schedule).
func (h *Coordinator) Handle(ctx context.Context, event json.RawMessage) error {
	var ev NudgeEvent
	_ = json.Unmarshal(event, &ev) // a scheduled event is not a nudge
	if ev.Nudge {
		_, err := h.c.Pass(ctx)
		if err != nil {
			return fmt.Errorf("nudged pass: %w", err)
		}
		return nil
	}
	return h.c.Run(ctx, h.window)
}
