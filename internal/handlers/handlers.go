// Package handlers holds the Lambda handlers behind functions/coordinator and
// functions/shardreader, so that the mains stay a few lines and the handlers
// are tested without Lambda.
package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	ltypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/shardloop/shardloop/internal/awsconf"
	"github.com/shardloop/shardloop/internal/lambdaenv"
	"github.com/shardloop/shardloop/pkg/coordinator"
	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/metrics"
	"github.com/shardloop/shardloop/pkg/reader"
	"github.com/shardloop/shardloop/pkg/shards"
)

// Option configures a handler.
type Option func(*options)

type options struct {
	metrics     io.Writer
	starter     coordinator.Starter
	invocations *Invocations
}

// WithMetrics writes the handler's CloudWatch EMF metric lines to w: stdout
// on Lambda. Without it the metrics are gathered and dropped (the reader's
// lag is still recorded on the lease rows).
func WithMetrics(w io.Writer) Option { return func(o *options) { o.metrics = w } }

// WithStarter makes the coordinator start loops through s instead of Step
// Functions (for a local host of the functions and for tests).
func WithStarter(s coordinator.Starter) Option { return func(o *options) { o.starter = s } }

// WithInvocations records each invocation in flight in in, so that the
// logger NewLogger returned with it puts the request id on every line
// logged during the invocation.
func WithInvocations(in *Invocations) Option { return func(o *options) { o.invocations = in } }

func optionsOf(optFns []Option) options {
	o := options{metrics: io.Discard}
	for _, f := range optFns {
		f(&o)
	}
	return o
}

func newRecorder(log *slog.Logger, o options, perShardLag bool) (*metrics.Recorder, error) {
	return metrics.New(o.metrics, func(mo *metrics.Options) { mo.Logger, mo.PerShardLag = log, perShardLag })
}

// ShardReader runs one bounded reader run per invocation.
type ShardReader struct {
	inv     *Invocations
	opts    reader.Options
	metrics *metrics.Recorder
	arns    *streamARNs
	log     *slog.Logger
	// timeout reads the target's configured timeout (nil when it cannot
	// be read and SHARDLOOP_TARGET_TIMEOUT stands in for it); fence is
	// SHARDLOOP_TARGET_TIMEOUT when set, else 0.
	timeout *TargetTimeout
	fence   time.Duration
}

// NewShardReader builds the SDK clients once, at cold start, within
// awsconf's bounds. Every client honours AWS_ENDPOINT_URL and
// AWS_ENDPOINT_URL_<SERVICE> through cfg. It reads the target's configured
// timeout (GetFunctionConfiguration), which the lease's fence covers: a
// takeover waits out the invocations a crashed holder may have left
// running. env.TargetTimeout, when set, is the fence instead (at most
// reader.MaxFenceCut below the timeout), or stands in for the timeout when
// the configuration cannot be read (a local host without Lambda's control
// API); unset, an unreadable configuration fails the cold start. Each
// record's invokeIdentityArn is env.InvokeIdentityARN (the shardreader's
// role, which infra/ and template/ pass), empty with a warning when unset.
// MillisBehindLatest is published per shard only with env.PerShardLag.
func NewShardReader(ctx context.Context, env lambdaenv.Reader, cfg aws.Config, log *slog.Logger, optFns ...Option) (*ShardReader, error) {
	o := optionsOf(optFns)
	rec, err := newRecorder(log, o, env.PerShardLag)
	if err != nil {
		return nil, err
	}
	store, err := lease.NewDynamoStore(awsconf.NewDynamoDB(cfg), env.Table)
	if err != nil {
		return nil, err
	}
	if env.InvokeIdentityARN == "" {
		log.Warn(lambdaenv.VarInvokeIdentityARN+" is not set: records carry an empty invokeIdentityArn; set it to this function's execution role ARN",
			"var", lambdaenv.VarInvokeIdentityARN)
	}
	h := &ShardReader{inv: o.invocations, metrics: rec, log: log, timeout: NewTargetTimeout(awsconf.NewLambda(cfg), env.Target, "")}
	if env.TargetTimeoutKnown {
		h.fence = env.TargetTimeout
	}
	timeout, err := h.timeout.Get(ctx)
	switch {
	case err != nil && env.TargetTimeoutKnown:
		log.Warn("could not read the target's configuration; taking "+lambdaenv.VarTargetTimeout+" as its timeout", "timeout", env.TargetTimeout, "err", err)
		h.timeout, timeout = nil, env.TargetTimeout
	case err != nil:
		return nil, fmt.Errorf("%w (or set %s to the function's timeout)", err, lambdaenv.VarTargetTimeout)
	}
	if _, err := FenceFor(timeout, h.fence, env.RunLength); err != nil {
		return nil, err
	}
	invoker := reader.LambdaInvoker(awsconf.NewTargetLambda(cfg, timeout))
	if h.timeout != nil {
		invoker = staleOnUpdate{LambdaInvoker: invoker, tt: h.timeout}
	}
	target, err := reader.NewLambdaTarget(invoker, env.Target, func(o *reader.LambdaOptions) {
		o.Region, o.InvokeIdentityARN = cfg.Region, env.InvokeIdentityARN
	})
	if err != nil {
		return nil, err
	}
	kc := awsconf.NewKinesis(cfg)
	opts := reader.Options{
		Kinesis:       kc,
		Store:         store,
		Target:        target,
		Mapping:       reader.Mapping{BatchSize: env.BatchSize},
		PollInterval:  env.PollInterval,
		RunLength:     env.RunLength,
		MaxIterations: env.MaxIterations,
		Hooks:         rec,
		Lag:           rec.Lag, // each checkpoint records the shard's lag, which shardloop status shows
		Logger:        log,
	}
	p := env.ReaderPolicy()
	opts.MaximumRetryAttempts, opts.MaximumRecordAge, opts.BisectBatchOnFunctionError = p.MaximumRetryAttempts, p.MaximumRecordAge, p.BisectBatchOnFunctionError
	opts.MaximumBatchingWindow, opts.Deaggregate = p.MaximumBatchingWindow, p.Deaggregate
	opts.TargetTimeout, opts.Fence = timeout, h.fence
	opts.ParallelizationFactor, opts.TumblingWindow = p.ParallelizationFactor, p.TumblingWindow
	opts.FilterCriteria, opts.ReadAheadBytes = p.FilterCriteria, p.ReadAheadBytes
	if opts.OnFailure, err = OnFailureDestination(env.OnFailure, cfg); err != nil {
		return nil, err
	}
	if env.Coordinator != "" {
		opts.Nudge = NudgeFunc(awsconf.NewLambda(cfg), env.Coordinator, log)
	}
	h.opts, h.arns = opts, &streamARNs{api: kc, arns: map[string]string{}}
	return h, nil
}

// OnFailureDestination returns the reader's on-failure destination for an
// SQS queue, SNS topic or S3 bucket ARN, nil for an empty one. Only the
// client the ARN names is built; it honours AWS_ENDPOINT_URL_SQS,
// AWS_ENDPOINT_URL_SNS or AWS_ENDPOINT_URL_S3 through cfg.
func OnFailureDestination(arn string, cfg aws.Config) (reader.Destination, error) {
	if arn == "" {
		return nil, nil
	}
	a, err := reader.ParseDestinationARN(arn)
	if err != nil {
		return nil, err
	}
	switch a.Service {
	case "sqs":
		return reader.NewDestination(arn, awsconf.NewSQS(cfg), nil)
	case "s3":
		return reader.NewS3Destination(arn, awsconf.NewS3(cfg))
	}
	return reader.NewDestination(arn, nil, awsconf.NewSNS(cfg))
}

// Handle runs one iteration of the shard loop: the state in, the next state
// out. (A state handed on by continue-as-new already counts iteration 0.)
// A state without a streamArn (a loop started before the coordinator
// resolved it) gets it from DescribeStreamSummary, once per stream and
// cold start, so the records' eventSourceARN is set; the next state carries
// it on.
func (h *ShardReader) Handle(ctx context.Context, st reader.State) (reader.State, error) {
	defer h.inv.Begin(ctx)()
	defer h.metrics.Flush() // before Lambda freezes the process
	opts, err := h.runOptions(ctx)
	if err != nil {
		return st, err
	}
	if st.StreamARN == "" && st.Stream != "" {
		arn, err := h.arns.get(ctx, st.Stream)
		if err != nil {
			h.log.WarnContext(ctx, "could not resolve the stream's ARN; records carry an empty eventSourceARN", "stream", st.Stream, "err", err)
		}
		st.StreamARN = arn
	}
	return reader.Run(ctx, opts, st)
}

// runOptions are the reader's options for one run, with the target's
// timeout as read now (at most TargetTimeoutTTL old): a function whose
// timeout was raised is fenced by the new one from the next run on. A read
// that fails keeps the last timeout read, with a warning.
func (h *ShardReader) runOptions(ctx context.Context) (reader.Options, error) {
	opts := h.opts
	if h.timeout == nil {
		return opts, nil
	}
	timeout, err := h.timeout.Get(ctx)
	if err != nil {
		h.log.WarnContext(ctx, "could not read the target's timeout again; keeping the last one read", "timeout", opts.TargetTimeout, "err", err)
		return opts, nil
	}
	fence, err := FenceFor(timeout, h.fence, opts.RunLength)
	if err != nil {
		return opts, err
	}
	if timeout != opts.TargetTimeout {
		h.log.InfoContext(ctx, "the target's timeout changed", "was", opts.TargetTimeout, "now", timeout)
	}
	opts.TargetTimeout, opts.Fence = timeout, fence
	return opts, nil
}

// StreamDescriber is the Kinesis call StreamARN makes.
type StreamDescriber interface {
	DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
}

// StreamARN returns the ARN of stream (a name or an ARN) as
// DescribeStreamSummary reports it. A stream that does not exist is an
// error that errors.As finds a *types.ResourceNotFoundException in.
func StreamARN(ctx context.Context, api StreamDescriber, stream string) (string, error) {
	in := &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)}
	if isARN(stream) {
		in = &kinesis.DescribeStreamSummaryInput{StreamARN: aws.String(stream)}
	}
	out, err := api.DescribeStreamSummary(ctx, in)
	if err != nil {
		return "", fmt.Errorf("describe stream %s: %w", stream, err)
	}
	if out.StreamDescriptionSummary == nil || aws.ToString(out.StreamDescriptionSummary.StreamARN) == "" {
		return "", fmt.Errorf("describe stream %s: the answer has no StreamARN", stream)
	}
	return aws.ToString(out.StreamDescriptionSummary.StreamARN), nil
}

func isARN(s string) bool { return strings.HasPrefix(s, "arn:") }

// streamARNs caches StreamARN by stream name; failures are not cached.
type streamARNs struct {
	api  StreamDescriber
	mu   sync.Mutex
	arns map[string]string
}

func (c *streamARNs) get(ctx context.Context, stream string) (string, error) {
	c.mu.Lock()
	arn, ok := c.arns[stream]
	c.mu.Unlock()
	if ok {
		return arn, nil
	}
	arn, err := StreamARN(ctx, c.api, stream)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	c.arns[stream] = arn
	c.mu.Unlock()
	return arn, nil
}

// NudgeEvent is the coordinator's payload when a reader asks it to pass.
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
// a failure only costs the child the wait until the next scheduled pass.
func NudgeFunc(client InvokeAPI, coordinatorFn string, log *slog.Logger) func(context.Context) {
	payload, _ := json.Marshal(NudgeEvent{Nudge: true})
	return func(ctx context.Context) {
		_, err := client.Invoke(ctx, &lambda.InvokeInput{
			FunctionName:   aws.String(coordinatorFn),
			InvocationType: ltypes.InvocationTypeEvent,
			Payload:        payload,
		})
		if err != nil {
			log.WarnContext(ctx, "nudge of the coordinator failed; the shard is taken at the next scheduled pass", "err", err)
		}
	}
}

// Coordinator runs the coordinator for the events of a deployment (see
// Handle). Lambda runs one invocation at a time per instance, so Handle is
// not safe for concurrent use.
type Coordinator struct {
	inv          *Invocations
	c            *coordinator.Coordinator
	window       time.Duration
	runLength    time.Duration
	stream       string
	stateMachine string
	metrics      *metrics.Recorder
	log          *slog.Logger
}

// NewCoordinator builds the SDK clients once, at cold start, within
// awsconf's bounds. Each pass that finds no stream of the configured name
// is counted as metrics.StreamNotFound and logged at error level; each pass
// whose start position is older than the stream's recorded generation as
// metrics.StaleConfiguration; the records a new start skipped before they
// were delivered as metrics.BacklogSkipped. The loops it starts carry the stream's ARN
// (the records' eventSourceARN), which every pass reads with
// DescribeStreamSummary.
func NewCoordinator(ctx context.Context, env lambdaenv.Coordinator, cfg aws.Config, log *slog.Logger, optFns ...Option) (*Coordinator, error) {
	o := optionsOf(optFns)
	rec, err := newRecorder(log, o, false)
	if err != nil {
		return nil, err
	}
	var sfnStarter coordinator.Starter = coordinator.SFNStarter{Client: awsconf.NewStepFunctions(cfg), StateMachineARN: env.StateMachineARN}
	if o.starter != nil {
		sfnStarter = o.starter
	}
	store, err := lease.NewDynamoStore(awsconf.NewDynamoDB(cfg), env.Table)
	if err != nil {
		return nil, err
	}
	stream, err := shards.StreamName(env.Stream)
	if err != nil {
		return nil, &lambdaenv.Error{Var: lambdaenv.VarStream, Value: env.Stream, Want: "a stream name or a Kinesis stream ARN"}
	}
	runLength := env.RunLength
	if runLength == 0 {
		runLength = lambdaenv.DefaultRunLength
	}
	h := &Coordinator{inv: o.invocations, window: env.Window, runLength: runLength, stream: stream, stateMachine: env.StateMachineARN, metrics: rec, log: log}
	var deployed time.Time
	if env.Function != "" && env.Start != "" {
		if deployed, err = DeployedAt(ctx, awsconf.NewLambda(cfg), env.Function); err != nil {
			log.Warn("could not read when this configuration was deployed; start generations are ordered by when each was first recorded", "err", err)
		}
	}
	h.c, err = coordinator.New(coordinator.Config{
		Subscriptions: []coordinator.Subscription{{Stream: env.Stream, Start: env.Start, CreateShards: env.CreateShards, DeployedAt: deployed}},
		Logger:        log,
		OnPass:        h.onPass,
	}, store, awsconf.NewKinesis(cfg), CountingStarter(sfnStarter, rec))
	if err != nil {
		return nil, err
	}
	return h, nil
}

// onPass turns what a pass found into metrics and error logs.
func (h *Coordinator) onPass(r coordinator.StreamResult) {
	switch {
	case StreamMissing(r.Err):
		h.metrics.StreamNotFound(r.Stream)
		h.log.Error("the stream does not exist: nothing is read until it does; check "+lambdaenv.VarStream+", the region and the account",
			"stream", r.Stream, "var", lambdaenv.VarStream, "err", r.Err)
	case r.StaleConfiguration:
		h.metrics.StaleConfiguration(r.Stream)
	}
	if len(r.Skipped) > 0 {
		h.metrics.BacklogSkipped(r.Stream, coordinator.Skipped(r.Skipped)) // the pass logged the shards at WARN
	}
}

// StreamMissing reports whether err, however wrapped, says the stream does
// not exist (Kinesis's ResourceNotFoundException).
func StreamMissing(err error) bool {
	return errors.As(err, new(*ktypes.ResourceNotFoundException))
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

// Handle runs the coordinator for one event (see ParseEvent):
//   - the EventBridge schedule: one pass (Once), or with a window a
//     relisting Run for the window;
//   - a reader's nudge: one pass (Once);
//   - a shard loop's execution that ended FAILED, TIMED_OUT or ABORTED (the
//     execution-status rule): a Watch of its shard, for at most
//     lambdaenv.WatchFor(run length), which takes the shard once its lease
//     has lapsed on this coordinator's clock, about a lease duration;
//   - an execution of another state machine, or another status: nothing.
//
// An event of any other shape is an error naming what was expected.
func (h *Coordinator) Handle(ctx context.Context, event json.RawMessage) error {
	defer h.inv.Begin(ctx)()
	defer h.metrics.Flush() // before Lambda freezes the process
	ev, err := ParseEvent(event, h.stateMachine)
	if err != nil {
		return err
	}
	switch ev.Kind {
	case EventIgnored:
		h.log.InfoContext(ctx, "event ignored", "why", ev.Why, "execution", ev.Execution, "status", ev.Status)
		return nil
	case EventSchedule:
		if h.window > 0 {
			return h.c.Run(ctx, h.window)
		}
		if _, _, err := h.c.Once(ctx); err != nil {
			return fmt.Errorf("scheduled pass: %w", err)
		}
		return nil
	case EventNudge:
		if _, _, err := h.c.Once(ctx); err != nil {
			return fmt.Errorf("nudged pass: %w", err)
		}
		return nil
	}
	// EventLoopEnded.
	if ev.Loop.ShardID == "" {
		h.log.WarnContext(ctx, "the execution event carries no input naming the loop; passing once", "execution", ev.Execution, "status", ev.Status)
		if _, _, err := h.c.Once(ctx); err != nil {
			return fmt.Errorf("pass after %s execution %s: %w", ev.Status, ev.Execution, err)
		}
		return nil
	}
	if ev.Loop.Stream != h.stream {
		return fmt.Errorf("execution %s of %s read stream %q, but this coordinator reads %q (%s)", ev.Execution, h.stateMachine, ev.Loop.Stream, h.stream, lambdaenv.VarStream)
	}
	wctx, cancel := context.WithTimeout(ctx, lambdaenv.WatchFor(h.runLength))
	defer cancel()
	res, err := h.c.Watch(wctx, ev.Loop)
	if err != nil {
		return fmt.Errorf("watch after %s execution %s: %w", ev.Status, ev.Execution, err)
	}
	h.log.InfoContext(ctx, "watch after a failed loop done", "execution", ev.Execution, "status", ev.Status,
		"shard_id", ev.Loop.ShardID, "owner", ev.Loop.Owner, "outcome", res.Outcome, "new_owner", res.Started.Owner,
		"held_by", res.Owner, "took", res.Took)
	return nil
}
