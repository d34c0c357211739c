// Package handlers holds the Lambda handlers behind functions/coordinator and
// functions/shardreader, so that the mains stay a few lines and the handlers
// are tested without Lambda.
package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	ltypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/shardloop/shardloop/internal/lambdaenv"
	"github.com/shardloop/shardloop/pkg/coordinator"
	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/metrics"
	"github.com/shardloop/shardloop/pkg/reader"
)

// Option configures a handler.
type Option func(*options)

type options struct {
	metrics io.Writer
}

// WithMetrics writes the handler's CloudWatch EMF metric lines to w: stdout
// on Lambda. Without it the metrics are gathered and dropped (the reader's
// lag is still recorded on the lease rows).
func WithMetrics(w io.Writer) Option { return func(o *options) { o.metrics = w } }

func newRecorder(log *slog.Logger, optFns []Option) (*metrics.Recorder, error) {
	o := options{metrics: io.Discard}
	for _, f := range optFns {
		f(&o)
	}
	return metrics.New(o.metrics, func(mo *metrics.Options) { mo.Logger = log })
}

// ShardReader runs one bounded reader run per invocation.
type ShardReader struct {
	opts    reader.Options
	metrics *metrics.Recorder
}

// NewShardReader builds the SDK clients once, at cold start. Every client
// honours AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_<SERVICE> through cfg.
func NewShardReader(env lambdaenv.Reader, cfg aws.Config, log *slog.Logger, optFns ...Option) (*ShardReader, error) {
	rec, err := newRecorder(log, optFns)
	if err != nil {
		return nil, err
	}
	lc := lambda.NewFromConfig(cfg)
	dynamo, err := lease.NewDynamoStore(dynamodb.NewFromConfig(cfg), env.Table)
	if err != nil {
		return nil, err
	}
	store := lease.WithLag(dynamo, rec.Lag)
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
		Hooks:         rec,
		Logger:        log,
	}
	p := env.ReaderPolicy()
	opts.MaxRetryAttempts, opts.MaxRecordAge, opts.BisectOnError = p.MaxRetryAttempts, p.MaxRecordAge, p.BisectOnError
	opts.BatchingWindow, opts.Deaggregate = p.BatchingWindow, p.Deaggregate
	if opts.OnFailure, err = OnFailureDestination(env.OnFailure, cfg); err != nil {
		return nil, err
	}
	if env.Coordinator != "" {
		opts.Nudge = NudgeFunc(lc, env.Coordinator, log)
	}
	return &ShardReader{opts: opts, metrics: rec}, nil
}

// OnFailureDestination returns the reader's on-failure destination for an
// SQS queue or SNS topic ARN, nil for an empty one. Only the client the ARN
// names is built; it honours AWS_ENDPOINT_URL_SQS or AWS_ENDPOINT_URL_SNS
// through cfg.
func OnFailureDestination(arn string, cfg aws.Config) (reader.Destination, error) {
	if arn == "" {
		return nil, nil
	}
	a, err := reader.ParseDestinationARN(arn)
	if err != nil {
		return nil, err
	}
	if a.Service == "sqs" {
		return reader.NewDestination(arn, sqs.NewFromConfig(cfg), nil)
	}
	return reader.NewDestination(arn, nil, sns.NewFromConfig(cfg))
}

// Handle runs one iteration of the shard loop: the state in, the next state
// out. (A state handed on by continue-as-new already counts iteration 0.)
func (h *ShardReader) Handle(ctx context.Context, st reader.State) (reader.State, error) {
	defer h.metrics.Flush() // before Lambda freezes the process
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
	c       *coordinator.Coordinator
	window  time.Duration
	metrics *metrics.Recorder
}

// NewCoordinator builds the SDK clients once, at cold start.
func NewCoordinator(env lambdaenv.Coordinator, cfg aws.Config, log *slog.Logger, optFns ...Option) (*Coordinator, error) {
	rec, err := newRecorder(log, optFns)
	if err != nil {
		return nil, err
	}
	store, err := lease.NewDynamoStore(dynamodb.NewFromConfig(cfg), env.Table)
	if err != nil {
		return nil, err
	}
	starter := CountingStarter(coordinator.SFNStarter{Client: sfn.NewFromConfig(cfg), StateMachineARN: env.StateMachineARN}, rec)
	c, err := coordinator.New(coordinator.Config{
		Subscriptions: []coordinator.Subscription{{Stream: env.Stream, Start: env.Start, CreateShards: env.CreateShards}},
		Logger:        log,
	}, store, kinesis.NewFromConfig(cfg), starter)
	if err != nil {
		return nil, err
	}
	return &Coordinator{c: c, window: env.Window, metrics: rec}, nil
}

// CountingStarter counts LeaseTakes: the coordinator starts a loop right
// after it took the shard's lease for the loop's owner, so each loop
// started is one lease taken. A start that fails (the coordinator releases
// the lease again) is not counted.
func CountingStarter(s coordinator.Starter, rec *metrics.Recorder) coordinator.Starter {
	return coordinator.StarterFunc(func(ctx context.Context, loop coordinator.Loop) error {
		if err := s.Start(ctx, loop); err != nil {
			return err
		}
		rec.LeaseTaken(loop.Stream, loop.ShardID)
		return nil
	})
}

// Handle runs one pass for a nudge and a relisting window for anything else
// (the EventBridge schedule).
func (h *Coordinator) Handle(ctx context.Context, event json.RawMessage) error {
	defer h.metrics.Flush() // before Lambda freezes the process
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
