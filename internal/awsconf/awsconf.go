package awsconf

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go/middleware"
)

// Settings bound the calls of one service.
type Settings struct {
	// AttemptTimeout bounds one attempt: signing, connecting, sending the
	// request and reading the whole answer.
	AttemptTimeout time.Duration
	// MaxAttempts bounds the attempts of one call, the first included.
	MaxAttempts int
	// MaxBackoff bounds the wait between two attempts.
	MaxBackoff time.Duration
}

// Budget is the longest one call can take: every attempt running out of
// time, with the longest wait between them.
func (s Settings) Budget() time.Duration {
	return time.Duration(s.MaxAttempts)*s.AttemptTimeout + time.Duration(s.MaxAttempts-1)*s.MaxBackoff
}

func (s Settings) String() string {
	return fmt.Sprintf("%s per attempt, %d attempts, at most %s", s.AttemptTimeout, s.MaxAttempts, s.Budget())
}

// The bounds, per service. Nothing changes them at run time.
var (
	// Kinesis: GetShardIterator, ListShards, DescribeStreamSummary,
	// CreateStream (GetRecords has its own). At most 8.5 s, inside one
	// lease (10 s).
	Kinesis = Settings{AttemptTimeout: 4 * time.Second, MaxAttempts: 2, MaxBackoff: 500 * time.Millisecond}
	// GetRecords: an answer of up to 10 MB (13.4 MB of JSON) must arrive
	// and decode within an attempt, at GetRecordsMinRate. An attempt that
	// timed out is not sent again as it was: the reader asks again for
	// fewer records (pkg/reader). Other failures are sent again once. A read
	// runs under its lease: the reader's run ends it when the lease is
	// lost.
	GetRecords = Settings{AttemptTimeout: 10 * time.Second, MaxAttempts: 2, MaxBackoff: 500 * time.Millisecond}
	// DynamoDB: the lease store. At most 2.1 s, inside one renew interval
	// (3 s): a hung renewal counts as failed before the next one is due.
	DynamoDB = Settings{AttemptTimeout: time.Second, MaxAttempts: 2, MaxBackoff: 100 * time.Millisecond}
	// StepFunctions: the coordinator's StartExecution, idempotent for one
	// execution name and input, so retrying it is safe.
	StepFunctions = Settings{AttemptTimeout: 5 * time.Second, MaxAttempts: 3, MaxBackoff: time.Second}
	// Lambda: the reader's nudge of the coordinator (an asynchronous
	// invoke; a duplicate is one more pass). Not the target: see Target.
	Lambda = Settings{AttemptTimeout: 5 * time.Second, MaxAttempts: 2, MaxBackoff: 500 * time.Millisecond}
	// Destinations: SQS SendMessage, SNS Publish and S3 PutObject of
	// on-failure records.
	Destinations = Settings{AttemptTimeout: 5 * time.Second, MaxAttempts: 3, MaxBackoff: time.Second}
	// STS: the CLI's GetCallerIdentity.
	STS = Settings{AttemptTimeout: 5 * time.Second, MaxAttempts: 2, MaxBackoff: 500 * time.Millisecond}
	// Other: every client built from a Load config that is not one of the
	// above, the credential providers' included.
	Other = Settings{AttemptTimeout: 10 * time.Second, MaxAttempts: 3, MaxBackoff: time.Second}
)

// GetRecordsMinRate is the slowest a GetRecords answer is expected to
// arrive and decode at, in bytes a second of the records' data (a 128 MB
// function has a fraction of a CPU to decode 13.4 MB of JSON with): the
// attempt timeout of GetRecords fits a 10 MB answer at it.
const GetRecordsMinRate = 1 << 20

// The target's invocation.
const (
	// MaxTargetTimeout is Lambda's longest function timeout, the default
	// timeout assumed for a target.
	MaxTargetTimeout = 15 * time.Minute
	// TargetTimeoutMargin is added to the target's timeout for one Invoke
	// attempt: Lambda answers a function that timed out with an error, and
	// that answer must reach us before our own bound.
	TargetTimeoutMargin = 30 * time.Second
	// TargetMaxAttempts bounds the attempts of one Invoke; only an invoke
	// that provably did not run is attempted again (InvokeRetryable).
	TargetMaxAttempts = 3
)

// Target returns the settings of the client that invokes a target whose
// own timeout is targetTimeout (MaxTargetTimeout when zero or longer).
func Target(targetTimeout time.Duration) Settings {
	if targetTimeout <= 0 || targetTimeout > MaxTargetTimeout {
		targetTimeout = MaxTargetTimeout
	}
	return Settings{AttemptTimeout: targetTimeout + TargetTimeoutMargin, MaxAttempts: TargetMaxAttempts, MaxBackoff: 2 * time.Second}
}

// Load is config.LoadDefaultConfig with Other's bounds on every client
// built from the config, the credential providers' included. Clients built
// with this package's constructors get their own service's bounds instead.
func Load(ctx context.Context, optFns ...func(*config.LoadOptions) error) (aws.Config, error) {
	opts := append([]func(*config.LoadOptions) error{
		config.WithRetryer(func() aws.Retryer { return standard(Other) }),
		config.WithAPIOptions([]func(*middleware.Stack) error{attemptTimeout(Other, true)}),
	}, optFns...)
	return config.LoadDefaultConfig(ctx, opts...)
}

// standard is the SDK's standard retryer within s.
func standard(s Settings) aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts, o.MaxBackoff = s.MaxAttempts, s.MaxBackoff
	})
}

// NewKinesis returns a Kinesis client within Kinesis's bounds, and
// GetRecords's for GetRecords.
func NewKinesis(cfg aws.Config, optFns ...func(*kinesis.Options)) *kinesis.Client {
	return newKinesis(cfg, Kinesis, GetRecords, optFns...)
}

func newKinesis(cfg aws.Config, s, getRecords Settings, optFns ...func(*kinesis.Options)) *kinesis.Client {
	return kinesis.NewFromConfig(cfg, append([]func(*kinesis.Options){func(o *kinesis.Options) {
		o.Retryer, o.RetryMaxAttempts = standard(s), 0
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			if stack.ID() == "GetRecords" { // the operation's stack
				return attemptTimeout(getRecords, false)(stack)
			}
			return attemptTimeout(s, true)(stack)
		})
	}}, optFns...)...)
}

// NewDynamoDB returns a DynamoDB client within DynamoDB's bounds.
func NewDynamoDB(cfg aws.Config, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamodb.NewFromConfig(cfg, append([]func(*dynamodb.Options){func(o *dynamodb.Options) {
		o.Retryer, o.RetryMaxAttempts = standard(DynamoDB), 0
		o.APIOptions = append(o.APIOptions, attemptTimeout(DynamoDB, true))
	}}, optFns...)...)
}

// NewStepFunctions returns a Step Functions client within StepFunctions's
// bounds.
func NewStepFunctions(cfg aws.Config, optFns ...func(*sfn.Options)) *sfn.Client {
	return sfn.NewFromConfig(cfg, append([]func(*sfn.Options){func(o *sfn.Options) {
		o.Retryer, o.RetryMaxAttempts = standard(StepFunctions), 0
		o.APIOptions = append(o.APIOptions, attemptTimeout(StepFunctions, true))
	}}, optFns...)...)
}

// NewLambda returns a Lambda client within Lambda's bounds, for calls that
// are safe to repeat (the nudge). Invoke the target with NewTargetLambda.
func NewLambda(cfg aws.Config, optFns ...func(*lambda.Options)) *lambda.Client {
	return lambda.NewFromConfig(cfg, append([]func(*lambda.Options){func(o *lambda.Options) {
		o.Retryer, o.RetryMaxAttempts = standard(Lambda), 0
		o.APIOptions = append(o.APIOptions, attemptTimeout(Lambda, true))
	}}, optFns...)...)
}

// NewTargetLambda returns the Lambda client that invokes the user's target,
// whose own timeout is targetTimeout (zero: MaxTargetTimeout). Within
// Target(targetTimeout), it sends an Invoke again only when the first
// provably did not run (InvokeRetryable): a throttle, or a request that
// never left this host. A connection reset, an attempt timeout or a 5xx
// may come after the function started, so they are returned, not retried.
func NewTargetLambda(cfg aws.Config, targetTimeout time.Duration, optFns ...func(*lambda.Options)) *lambda.Client {
	return newTargetLambda(cfg, Target(targetTimeout), optFns...)
}

func newTargetLambda(cfg aws.Config, s Settings, optFns ...func(*lambda.Options)) *lambda.Client {
	return lambda.NewFromConfig(cfg, append([]func(*lambda.Options){func(o *lambda.Options) {
		o.Retryer = retry.NewStandard(func(ro *retry.StandardOptions) {
			ro.MaxAttempts, ro.MaxBackoff = s.MaxAttempts, s.MaxBackoff
			ro.Retryables = []retry.IsErrorRetryable{retry.IsErrorRetryableFunc(InvokeRetryable)}
		})
		o.RetryMaxAttempts = 0
		o.APIOptions = append(o.APIOptions, attemptTimeout(s, false))
	}}, optFns...)...)
}

// NewSQS returns an SQS client within Destinations's bounds.
func NewSQS(cfg aws.Config, optFns ...func(*sqs.Options)) *sqs.Client {
	return sqs.NewFromConfig(cfg, append([]func(*sqs.Options){func(o *sqs.Options) {
		o.Retryer, o.RetryMaxAttempts = standard(Destinations), 0
		o.APIOptions = append(o.APIOptions, attemptTimeout(Destinations, true))
	}}, optFns...)...)
}

// NewSNS returns an SNS client within Destinations's bounds.
// NewS3 returns an S3 client within Destinations' bounds (the S3
// on-failure destination). With an endpoint override (AWS_ENDPOINT_URL,
// AWS_ENDPOINT_URL_S3: LocalStack, an emulator) it addresses buckets by
// path, as those expect.
func NewS3(cfg aws.Config, optFns ...func(*s3.Options)) *s3.Client {
	return s3.NewFromConfig(cfg, append([]func(*s3.Options){func(o *s3.Options) {
		o.Retryer, o.RetryMaxAttempts = standard(Destinations), 0
		o.APIOptions = append(o.APIOptions, attemptTimeout(Destinations, true))
		o.UsePathStyle = o.BaseEndpoint != nil || os.Getenv("AWS_ENDPOINT_URL_S3") != "" || os.Getenv("AWS_ENDPOINT_URL") != ""
	}}, optFns...)...)
}

func NewSNS(cfg aws.Config, optFns ...func(*sns.Options)) *sns.Client {
	return sns.NewFromConfig(cfg, append([]func(*sns.Options){func(o *sns.Options) {
		o.Retryer, o.RetryMaxAttempts = standard(Destinations), 0
		o.APIOptions = append(o.APIOptions, attemptTimeout(Destinations, true))
	}}, optFns...)...)
}

// NewSTS returns an STS client within STS's bounds.
func NewSTS(cfg aws.Config, optFns ...func(*sts.Options)) *sts.Client {
	return sts.NewFromConfig(cfg, append([]func(*sts.Options){func(o *sts.Options) {
		o.Retryer, o.RetryMaxAttempts = standard(STS), 0
		o.APIOptions = append(o.APIOptions, attemptTimeout(STS, true))
	}}, optFns...)...)
}
