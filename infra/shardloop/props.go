package shardloop

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskinesis"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"

	"github.com/shardloop/shardloop/internal/lambdaenv"
)

// Defaults, as documented on ConsumerProps. They are the defaults the
// functions apply when a variable is unset (internal/lambdaenv).
const (
	DefaultBatchSize     = lambdaenv.DefaultBatchSize
	DefaultPollInterval  = lambdaenv.DefaultPollInterval
	DefaultRunLength     = lambdaenv.DefaultRunLength
	DefaultMaxIterations = lambdaenv.DefaultMaxIterations
	// DefaultWindow is no window: the coordinator passes once per
	// scheduled invocation and otherwise runs for events (a failed
	// execution, a reader's nudge).
	DefaultWindow           = lambdaenv.DefaultWindow
	DefaultMemoryMiB        = 128
	DefaultLagAlarm         = 5 * time.Minute
	DefaultLogRetention     = awslogs.RetentionDays_ONE_MONTH
	DefinitionFileRel       = "template/statemachine.asl.json"
	CoordinatorAssetRel     = "build/coordinator"
	ShardReaderAssetRel     = "build/shardreader"
	ShardReaderSubstitution = "ShardReaderArn"
)

// maxStartingPositionTimestamp: a StartingPositionTimestamp from here on
// (the year 5138) is milliseconds given for seconds.
const maxStartingPositionTimestamp = 1e11

// NoLimit (-1) is the functions' value of MaxRetryAttempts and MaxRecordAge
// when unset: a failing batch is retried until its records expire from the
// stream.
const NoLimit = -1

// Limits checked by validate: the functions' own (internal/lambdaenv), one
// definition each.
const (
	MaxBatchSize = lambdaenv.MaxBatchSize
	// MaxRunLength keeps the shardreader's timeout (run length + 60 s) within
	// Lambda's 15-minute limit.
	MaxRunLength = lambdaenv.MaxRunLength
	MinRunLength = lambdaenv.MinRunLength
	// MinPollInterval keeps one reader within a shard's 5 GetRecords calls
	// per second.
	MinPollInterval = lambdaenv.MinPollInterval
	// MaxIterations bounds the history of one execution: an iteration costs
	// 7 history events, 25 with every Read retried to its limit, so 900
	// iterations stay below 25,000 events even then (see docs/deploy.md).
	MaxIterations = lambdaenv.MaxIterations
	// MinWindow and MaxWindow bound a window when one is given; the
	// coordinator's timeout is then at least the window + 15 s, within
	// 15 min.
	MinWindow = lambdaenv.MinWindow
	MaxWindow = lambdaenv.MaxWindow
	// Failure-policy limits, Lambda's own for its Kinesis trigger.
	MaxRetryAttempts  = lambdaenv.MaxRetryAttempts
	MinRecordAge      = lambdaenv.MinRecordAge
	MaxRecordAge      = lambdaenv.MaxRecordAge
	MaxBatchingWindow = lambdaenv.MaxBatchingWindow
	// DefaultParallelizationFactor and MaxParallelizationFactor bound
	// ParallelizationFactor: the reader's own, Lambda's for its trigger.
	DefaultParallelizationFactor = lambdaenv.DefaultParallelizationFactor
	MaxParallelizationFactor     = lambdaenv.MaxParallelizationFactor
	// MaxTumblingWindowInSeconds bounds TumblingWindowInSeconds, as Lambda's.
	MaxTumblingWindowInSeconds = lambdaenv.MaxTumblingWindowSeconds
	// MaxFilters bounds Filters: the reader's own, Lambda's default quota.
	MaxFilters = lambdaenv.MaxFilters
)

// ConsumerProps configures a Consumer. The zero value of every optional field
// means its documented default.
type ConsumerProps struct {
	// The stream: exactly one of Stream, StreamName (a name or an ARN) or
	// CreateShards must say which. With CreateShards > 0 a provisioned stream
	// with that many shards is created, named StreamName when given.
	Stream       awskinesis.IStream
	StreamName   string
	CreateShards int

	// The target Lambda function, invoked with each batch: exactly one of
	// Target or TargetFunction (a function name or ARN, optionally
	// qualified with a version or alias).
	Target         awslambda.IFunction
	TargetFunction string

	// StartingPosition, when set, is a start generation, as
	// KinesisEventSource names it: TRIM_HORIZON, LATEST or AT_TIMESTAMP
	// (with StartingPositionTimestamp), applied once, over the
	// checkpoints, to the shards the stream lists when a deployment with
	// it first runs. Unlike the trigger's it is optional: unset (the
	// default), no checkpoint ever moves and a shard without one opens at
	// the tip. Removing it never rereads or skips anything; changing it
	// applies the new start once (docs/design.md, "Start positions").
	StartingPosition awslambda.StartingPosition
	// StartingPositionTimestamp is the time of AT_TIMESTAMP in seconds
	// since the epoch (fractions to the millisecond), as KinesisEventSource
	// takes it; only with AT_TIMESTAMP.
	StartingPositionTimestamp float64
	// StartPosition is the start in shardloop's spelling: "horizon",
	// "latest" or "timestamp:<unix ms>" (or the trigger's, TRIM_HORIZON,
	// LATEST, AT_TIMESTAMP:<unix seconds>). It is the same start as the
	// StartingPosition it spells, so moving to StartingPosition starts no
	// new generation.
	//
	// Deprecated: use StartingPosition (and StartingPositionTimestamp).
	StartPosition string
	// BatchSize is the most records per GetRecords call and per target
	// invocation: 1 to 10,000, default 100.
	BatchSize int
	// ParallelizationFactor is the number of lanes delivering one shard's
	// records concurrently, by a hash of their partition key, as Lambda's
	// ParallelizationFactor: 1 (default) to 10. One key's records stay in
	// order; a failing record holds back only its lane. A shard then holds
	// up to ParallelizationFactor + 1 concurrent Lambda executions (its
	// shardreader and a target invocation per lane): docs/deploy.md.
	ParallelizationFactor int
	// TumblingWindow, as KinesisEventSource's: 0 (default) for none, else
	// 1 s to 900 s in whole seconds. The target then receives
	// events.KinesisTimeWindowEvent and must answer with a state
	// (events.KinesisTimeWindowEventResponse); the state lives in the lease
	// table (docs/state.md). It needs a ParallelizationFactor of 1, as
	// Lambda's trigger does.
	TumblingWindow time.Duration
	// TumblingWindowInSeconds is TumblingWindow in seconds.
	//
	// Deprecated: use TumblingWindow.
	TumblingWindowInSeconds int
	// Filters is event filtering, as the Patterns of a mapping's
	// FilterCriteria (docs/filtering.md): at most 5, a record passing when
	// any matches. A record that matches none is not delivered; the
	// checkpoint passes it and it counts in FilteredOutEventCount. Each
	// pattern is checked at synth and must be a literal (not a token).
	// Default none: every record is delivered.
	Filters []string
	// PollInterval is the wait after an empty read: at least 200 ms, default 1 s.
	PollInterval time.Duration
	// RunLength bounds one shardreader invocation: 5 s to 14 min, default
	// 10 min. The shardreader's timeout is RunLength + 60 s. Each run costs
	// two state transitions, so a shorter run costs more ($2.16 a
	// shard-month at 1 min, $0.22 at 10 min); a longer one takes longer to
	// bring new shardreader code or settings to every loop (its next run),
	// and the run of an execution that was stopped reads on until its end
	// (docs/deploy.md, "Run length").
	RunLength time.Duration
	// MaxIterations is the number of shardreader invocations per execution
	// before the loop continues as a new execution: 1 to 900, default 500.
	MaxIterations int
	// Window, when set, makes each scheduled coordinator invocation relist
	// shards every 10 s for that long (1 s to 14 min, whole seconds) instead
	// of passing once: the shape before the coordinator ran for events,
	// costing about $4 a month of coordinator compute at 55 s. Default 0, no
	// window. A failed execution's watch and the nudges work either way.
	// The coordinator's timeout is max(Window, RunLength + 20 s) + 15 s.
	Window time.Duration
	// PerShardLagMetric publishes MillisBehindLatest per shard (the Shard
	// dimension), one CloudWatch custom metric per shard ($0.30 a
	// shard-month), and adds a per-shard lag graph to the dashboard.
	// Default false: the metric is the stream's maximum (what the Lag alarm
	// reads); each shard's figure is still in the shardreader's EMF log
	// lines and in shardloop status.
	PerShardLagMetric bool
	// ReadAheadMiB is the shardreader's memory budget for records read and
	// not yet settled, in MiB: reads pause at it, and a read asks for no
	// more records than fit in what is left. 1 to 1024, default 8, which
	// suits the default 128 MB; raise it with ShardReaderMemoryMiB for
	// large records at a high ParallelizationFactor.
	ReadAheadMiB int

	// LeaseTable is an existing lease table (partition key lease_key, a
	// string). When nil a table is created: PAY_PER_REQUEST, point-in-time
	// recovery on, retained when the stack is deleted unless
	// LeaseTableRemovalPolicy says otherwise.
	LeaseTable awsdynamodb.ITable
	// LeaseTableName names an existing lease table, as LeaseTable does.
	LeaseTableName          string
	LeaseTableRemovalPolicy awscdk.RemovalPolicy
	// DisableLeaseTablePITR turns point-in-time recovery off for a created table.
	DisableLeaseTablePITR bool

	// LogRetention of the functions' and state machine's log groups,
	// default one month.
	LogRetention awslogs.RetentionDays
	// ExecutionLogLevel of the state machine, default ERROR.
	ExecutionLogLevel awsstepfunctions.LogLevel

	// Memory of each function in MiB (128 to 10,240), default 128.
	CoordinatorMemoryMiB int
	ShardReaderMemoryMiB int

	// LagAlarmThreshold: the lag alarm fires when MillisBehindLatest stays
	// above it for 5 minutes. Default 5 minutes.
	LagAlarmThreshold time.Duration

	// The failure policy: what happens to a batch the target keeps failing
	// (docs/deploy.md lists each setting with its trade-off). The defaults
	// give nothing up: the shard waits until the batch settles or its
	// records expire from the stream.

	// RetryAttempts gives a failing batch up after this many retries, 0 to
	// 10,000, as KinesisEventSource's; nil (default) or -1 retries until
	// the records expire. shardloop.RetryAttempts(n) builds the pointer.
	RetryAttempts *int
	// MaxRetryAttempts is RetryAttempts.
	//
	// Deprecated: use RetryAttempts.
	MaxRetryAttempts *int
	// MaxRecordAge gives up records older than this instead of delivering
	// them: 60 s to 168 h; 0 (default) is no limit.
	MaxRecordAge time.Duration
	// BisectBatchOnError splits a failing batch in halves, down to single
	// records, so that only the bad records are given up, as
	// KinesisEventSource's. Default false.
	BisectBatchOnError bool
	// BisectOnError is BisectBatchOnError.
	//
	// Deprecated: use BisectBatchOnError.
	BisectOnError bool
	// The on-failure destination that receives a record of each batch given
	// up (stream, shard, sequence numbers, arrival times, the error): at most
	// one of OnFailure (as KinesisEventSource takes it:
	// awslambdaeventsources.NewSqsDlq(queue), NewSnsDlq(topic) or
	// NewS3OnFailureDestination(bucket), which grant the shardreader what
	// they grant Lambda's trigger: for a bucket, read and write),
	// OnFailureDestination (a standard SQS queue, SNS topic or S3 bucket
	// ARN), OnFailureQueue, OnFailureTopic or OnFailureBucket (which grant
	// sending only: GetQueueUrl and SendMessage, Publish, or PutObject on
	// the bucket's objects). An S3 bucket gets one object per batch holding
	// the record and the batch's whole invocation event, as Lambda's
	// trigger writes it. Without one, a given-up batch is logged at error
	// level and counted in GivenUpBatches, and its records are gone.
	OnFailure            awslambda.IEventSourceDlq
	OnFailureDestination string
	OnFailureQueue       awssqs.IQueue
	OnFailureTopic       awssns.ITopic
	OnFailureBucket      awss3.IBucket
	// MaxBatchingWindow: wait up to this long to gather BatchSize records
	// (or 6 MB) before invoking the target, as KinesisEventSource's: 0
	// (default) to 300 s, shorter than RunLength.
	MaxBatchingWindow time.Duration
	// BatchingWindow is MaxBatchingWindow.
	//
	// Deprecated: use MaxBatchingWindow.
	BatchingWindow time.Duration
	// Deaggregate decodes records aggregated by the Kinesis Producer Library
	// into their user records. Default false: aggregated records are
	// reported and skipped.
	Deaggregate bool

	// The Lambda code and the state machine. By default NewConsumer builds
	// both functions from source at synth with the go command on PATH
	// (CoordinatorPackage and ShardReaderPackage, at the version of
	// github.com/shardloop/shardloop the app's go.mod selects, for
	// linux/arm64, reproducibly), and the definition is the one embedded in
	// this package, template/statemachine.asl.json.

	// CoordinatorCode and ShardReaderCode replace the build from source with
	// code built elsewhere (in CI, say): a folder or zip holding an arm64
	// executable named bootstrap, e.g. awslambda.Code_FromAsset.
	CoordinatorCode awslambda.Code
	ShardReaderCode awslambda.Code
	// DefinitionFile replaces the embedded state-machine definition with an
	// ASL file that has a ${ShardReaderArn} to substitute.
	DefinitionFile string
	// ProjectRoot, when set, is a shardloop checkout: the code the props
	// above do not give comes from its build/coordinator and
	// build/shardreader (make build), and the definition from its
	// template/statemachine.asl.json, instead of the build from source and
	// the embedded definition.
	//
	// Deprecated: NewConsumer needs no checkout; leave ProjectRoot empty, and
	// give prebuilt code with CoordinatorCode, ShardReaderCode and
	// DefinitionFile.
	ProjectRoot string
}

// ConfigError reports a prop whose value cannot be deployed.
type ConfigError struct {
	Prop   string // the ConsumerProps field
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("shardloop: %s: %s", e.Prop, e.Reason)
}

// ErrDuplicateStream is wrapped by the error NewConsumer returns for a second
// consumer of one stream in one app.
var ErrDuplicateStream = errors.New("stream already has a consumer in this app")

var (
	streamArn      = regexp.MustCompile(`^arn:aws[a-zA-Z-]*:kinesis:([a-z0-9-]+):([0-9]{12}):stream/([a-zA-Z0-9_.-]{1,128})$`)
	streamName     = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,128}$`)
	functionArn    = regexp.MustCompile(`^arn:aws[a-zA-Z-]*:lambda:[a-z0-9-]+:[0-9]{12}:function:[a-zA-Z0-9_-]{1,64}(:[a-zA-Z0-9$_-]{1,128})?$`)
	tableName      = regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)
	destinationArn = regexp.MustCompile(`^(arn:aws[a-zA-Z-]*:(sqs|sns):[a-z0-9-]+:[0-9]{12}:[a-zA-Z0-9_-]{1,256}(\.fifo)?|arn:aws[a-zA-Z-]*:s3:::[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])$`)
	functionName   = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}(:[a-zA-Z0-9$_-]{1,128})?$`)
)

// resolveAliases moves each deprecated prop to the prop of
// KinesisEventSource's name it stands for. Both set is an error naming the
// new one.
func (p *ConsumerProps) resolveAliases() error {
	var errs []error
	both := func(newProp, oldProp string) {
		errs = append(errs, &ConfigError{Prop: newProp, Reason: fmt.Sprintf("set %s or its deprecated alias %s, not both", newProp, oldProp)})
	}
	if p.StartPosition != "" {
		if p.StartingPosition != "" || p.StartingPositionTimestamp != 0 {
			both("StartingPosition", "StartPosition")
		} else if sp, ts, err := startingPositionOf(p.StartPosition); err != nil {
			errs = append(errs, &ConfigError{Prop: "StartPosition", Reason: fmt.Sprintf("%q is not latest, horizon or timestamp:<unix ms> (StartPosition is deprecated: use StartingPosition)", p.StartPosition)})
		} else {
			p.StartingPosition, p.StartingPositionTimestamp = sp, ts
		}
		p.StartPosition = ""
	}
	if p.TumblingWindowInSeconds != 0 {
		if p.TumblingWindow != 0 {
			both("TumblingWindow", "TumblingWindowInSeconds")
		} else {
			p.TumblingWindow = time.Duration(p.TumblingWindowInSeconds) * time.Second
		}
		p.TumblingWindowInSeconds = 0
	}
	if p.MaxRetryAttempts != nil {
		if p.RetryAttempts != nil {
			both("RetryAttempts", "MaxRetryAttempts")
		} else {
			p.RetryAttempts = p.MaxRetryAttempts
		}
		p.MaxRetryAttempts = nil
	}
	p.BisectBatchOnError, p.BisectOnError = p.BisectBatchOnError || p.BisectOnError, false
	if p.BatchingWindow != 0 {
		if p.MaxBatchingWindow != 0 {
			both("MaxBatchingWindow", "BatchingWindow")
		} else {
			p.MaxBatchingWindow = p.BatchingWindow
		}
		p.BatchingWindow = 0
	}
	return errors.Join(errs...)
}

// startingPositionOf reads a start in any spelling lambdaenv.ParseStart
// takes, except a sequence (a record of one shard: no subscription start),
// as KinesisEventSource's StartingPosition and StartingPositionTimestamp.
func startingPositionOf(s string) (awslambda.StartingPosition, float64, error) {
	start, err := lambdaenv.ParseStart(s)
	if err != nil {
		return "", 0, err
	}
	switch {
	case start == "horizon":
		return awslambda.StartingPosition_TRIM_HORIZON, 0, nil
	case start == "latest":
		return awslambda.StartingPosition_LATEST, 0, nil
	case strings.HasPrefix(start, "timestamp:"):
		ms, err := strconv.ParseInt(strings.TrimPrefix(start, "timestamp:"), 10, 64)
		if err != nil {
			return "", 0, err
		}
		return awslambda.StartingPosition_AT_TIMESTAMP, float64(ms) / 1000, nil
	}
	return "", 0, fmt.Errorf("%q is not a start of the whole stream", s)
}

// start is the coordinator's SHARDLOOP_START_POSITION for the props'
// StartingPosition, in the form the lease rows record ("" for none): the
// same text whichever prop spelled it, since it names the generation.
func (p *ConsumerProps) start() string {
	switch p.StartingPosition {
	case awslambda.StartingPosition_TRIM_HORIZON:
		return "horizon"
	case awslambda.StartingPosition_LATEST:
		return "latest"
	case awslambda.StartingPosition_AT_TIMESTAMP:
		return "timestamp:" + strconv.FormatInt(int64(math.Round(p.StartingPositionTimestamp*1000)), 10)
	}
	return ""
}

// withDefaults returns a copy of p with every unset optional field at its
// default.
func (p ConsumerProps) withDefaults() ConsumerProps {
	if p.BatchSize == 0 {
		p.BatchSize = DefaultBatchSize
	}
	if p.ParallelizationFactor == 0 {
		p.ParallelizationFactor = DefaultParallelizationFactor
	}
	if p.PollInterval == 0 {
		p.PollInterval = DefaultPollInterval
	}
	if p.RunLength == 0 {
		p.RunLength = DefaultRunLength
	}
	if p.MaxIterations == 0 {
		p.MaxIterations = DefaultMaxIterations
	}
	if p.ReadAheadMiB == 0 {
		p.ReadAheadMiB = lambdaenv.DefaultReadAheadMiB
	}
	if p.LeaseTableRemovalPolicy == "" {
		p.LeaseTableRemovalPolicy = awscdk.RemovalPolicy_RETAIN
	}
	if p.LogRetention == "" {
		p.LogRetention = DefaultLogRetention
	}
	if p.ExecutionLogLevel == "" {
		p.ExecutionLogLevel = awsstepfunctions.LogLevel_ERROR
	}
	if p.CoordinatorMemoryMiB == 0 {
		p.CoordinatorMemoryMiB = DefaultMemoryMiB
	}
	if p.ShardReaderMemoryMiB == 0 {
		p.ShardReaderMemoryMiB = DefaultMemoryMiB
	}
	if p.LagAlarmThreshold == 0 {
		p.LagAlarmThreshold = DefaultLagAlarm
	}
	return p
}

// validate checks props that withDefaults has filled. It looks at files
// only where they are given: DefinitionFile, and the bootstraps under a
// ProjectRoot.
func (p *ConsumerProps) validate() error {
	var errs []error
	bad := func(prop, format string, args ...any) {
		errs = append(errs, &ConfigError{Prop: prop, Reason: fmt.Sprintf(format, args...)})
	}

	switch n := btoi(p.Stream != nil) + btoi(p.StreamName != "") + btoi(p.CreateShards != 0); {
	case p.Stream != nil && (p.StreamName != "" || p.CreateShards != 0):
		bad("Stream", "give Stream alone, or StreamName and/or CreateShards")
	case n == 0:
		bad("StreamName", "no stream: set Stream, StreamName (a name or ARN), or CreateShards")
	}
	if p.StreamName != "" && !isToken(p.StreamName) {
		switch {
		case strings.HasPrefix(p.StreamName, "arn:"):
			if !streamArn.MatchString(p.StreamName) {
				bad("StreamName", "%q is not a Kinesis stream ARN (arn:aws:kinesis:<region>:<account>:stream/<name>)", p.StreamName)
			} else if p.CreateShards != 0 {
				bad("StreamName", "a stream to create is named, not given by ARN")
			}
		case !streamName.MatchString(p.StreamName):
			bad("StreamName", "%q is not a stream name (1-128 of a-z A-Z 0-9 _ . -)", p.StreamName)
		}
	}
	if p.CreateShards < 0 || p.CreateShards > 500 {
		bad("CreateShards", "%d is outside 1..500 (0 = use an existing stream)", p.CreateShards)
	}

	switch {
	case p.Target != nil && p.TargetFunction != "":
		bad("Target", "give Target or TargetFunction, not both")
	case p.Target == nil && p.TargetFunction == "":
		bad("TargetFunction", "no target: set Target or TargetFunction (a function name or ARN)")
	case p.TargetFunction != "" && !isToken(p.TargetFunction):
		if strings.HasPrefix(p.TargetFunction, "arn:") {
			if !functionArn.MatchString(p.TargetFunction) {
				bad("TargetFunction", "%q is not a Lambda function ARN", p.TargetFunction)
			}
		} else if !functionName.MatchString(p.TargetFunction) {
			bad("TargetFunction", "%q is not a Lambda function name", p.TargetFunction)
		}
	}

	switch ts := p.StartingPositionTimestamp; p.StartingPosition {
	case "", awslambda.StartingPosition_TRIM_HORIZON, awslambda.StartingPosition_LATEST:
		if ts != 0 {
			bad("StartingPositionTimestamp", "%v is set, but StartingPosition is %q: a timestamp goes with AT_TIMESTAMP only", ts, p.StartingPosition)
		}
	case awslambda.StartingPosition_AT_TIMESTAMP:
		if ts <= 0 || ts >= maxStartingPositionTimestamp || math.IsNaN(ts) {
			bad("StartingPositionTimestamp", "%v: AT_TIMESTAMP needs a time in seconds since the epoch, after 1970 and before the year 5000 (milliseconds given by mistake?)", ts)
		}
	default:
		bad("StartingPosition", "%q is not TRIM_HORIZON, LATEST or AT_TIMESTAMP (awslambda.StartingPosition_*), or unset for none", p.StartingPosition)
	}
	if p.BatchSize < 1 || p.BatchSize > MaxBatchSize {
		bad("BatchSize", "%d is outside 1..%d", p.BatchSize, MaxBatchSize)
	}
	if f := p.ParallelizationFactor; f < 1 || f > MaxParallelizationFactor {
		bad("ParallelizationFactor", "%d is outside 1..%d (0: the default, %d)", f, MaxParallelizationFactor, DefaultParallelizationFactor)
	}
	secs := int(p.TumblingWindow / time.Second)
	switch err := lambdaenv.CheckTumblingWindow(secs, p.ParallelizationFactor); {
	case p.TumblingWindow%time.Second != 0 || lambdaenv.TumblingWindowLimit.Check(secs) != nil:
		bad("TumblingWindow", "%v is outside 0s..%ds in whole seconds (0: none)", p.TumblingWindow, MaxTumblingWindowInSeconds)
	case err != nil:
		bad("ParallelizationFactor", "%d with TumblingWindow %v: want %s", p.ParallelizationFactor, p.TumblingWindow, lambdaenv.TumblingWindowWant)
	}
	if reason := p.checkFilters(); reason != "" {
		bad("Filters", "%s", reason)
	}
	if p.PollInterval < MinPollInterval {
		bad("PollInterval", "%v is below %v (a shard serves 5 reads per second to all its consumers)", p.PollInterval, MinPollInterval)
	} else if p.PollInterval >= p.RunLength {
		bad("PollInterval", "%v is not shorter than RunLength %v", p.PollInterval, p.RunLength)
	}
	if p.RunLength < MinRunLength || p.RunLength > MaxRunLength {
		bad("RunLength", "%v is outside %v..%v (the shardreader's timeout is RunLength + 60s, at most 15m)", p.RunLength, MinRunLength, MaxRunLength)
	} else if p.RunLength%time.Second != 0 {
		bad("RunLength", "%v is not a whole number of seconds", p.RunLength)
	}
	if p.MaxIterations < 1 || p.MaxIterations > MaxIterations {
		bad("MaxIterations", "%d is outside 1..%d (an execution keeps at most 25,000 history events)", p.MaxIterations, MaxIterations)
	}
	if err := lambdaenv.ReadAheadMiBLimit.Check(p.ReadAheadMiB); err != nil {
		bad("ReadAheadMiB", "%d: %v", p.ReadAheadMiB, err)
	}
	if p.Window != 0 && (p.Window < MinWindow || p.Window > MaxWindow) {
		bad("Window", "%v is outside %v..%v (0: no window)", p.Window, MinWindow, MaxWindow)
	} else if p.Window%time.Second != 0 {
		bad("Window", "%v is not a whole number of seconds", p.Window)
	}
	for _, m := range []struct {
		prop string
		mib  int
	}{{"CoordinatorMemoryMiB", p.CoordinatorMemoryMiB}, {"ShardReaderMemoryMiB", p.ShardReaderMemoryMiB}} {
		if m.mib < 128 || m.mib > 10240 {
			bad(m.prop, "%d is outside 128..10240", m.mib)
		}
	}
	if p.LagAlarmThreshold < time.Second {
		bad("LagAlarmThreshold", "%v is below 1s", p.LagAlarmThreshold)
	}
	if n := p.RetryAttempts; n != nil && (*n < -1 || *n > MaxRetryAttempts) {
		bad("RetryAttempts", "%d is outside 0..%d (nil or -1: retry until the records expire)", *n, MaxRetryAttempts)
	}
	if a := p.MaxRecordAge; a != 0 && (a < MinRecordAge || a > MaxRecordAge) {
		bad("MaxRecordAge", "%v is outside %v..%v (0: no limit)", a, MinRecordAge, MaxRecordAge)
	} else if a%time.Second != 0 {
		bad("MaxRecordAge", "%v is not a whole number of seconds", a)
	}
	if w := p.MaxBatchingWindow; w < 0 || w > MaxBatchingWindow {
		bad("MaxBatchingWindow", "%v is outside 0s..%v", w, MaxBatchingWindow)
	} else if w != 0 && w >= p.RunLength {
		bad("MaxBatchingWindow", "%v is not shorter than RunLength %v: a batch is gathered within one shardreader run", w, p.RunLength)
	}
	switch n := btoi(p.OnFailure != nil) + btoi(p.OnFailureDestination != "") + btoi(p.OnFailureQueue != nil) + btoi(p.OnFailureTopic != nil) + btoi(p.OnFailureBucket != nil); {
	case n > 1:
		bad("OnFailure", "give one of OnFailure, OnFailureDestination, OnFailureQueue, OnFailureTopic or OnFailureBucket")
	case p.OnFailureDestination != "" && isToken(p.OnFailureDestination):
		bad("OnFailureDestination", "an ARN known only at deploy time: give OnFailureQueue, OnFailureTopic or OnFailureBucket instead, so the grant can be made")
	case p.OnFailureDestination != "" && !destinationArn.MatchString(p.OnFailureDestination):
		bad("OnFailureDestination", "%q is not an SQS queue ARN (arn:aws:sqs:<region>:<account>:<queue>), an SNS topic ARN (arn:aws:sns:<region>:<account>:<topic>) or an S3 bucket ARN (arn:aws:s3:::<bucket>)", p.OnFailureDestination)
	case strings.HasSuffix(p.OnFailureDestination, ".fifo"),
		p.OnFailureQueue != nil && p.OnFailureQueue.Fifo() != nil && *p.OnFailureQueue.Fifo(),
		p.OnFailureTopic != nil && p.OnFailureTopic.Fifo() != nil && *p.OnFailureTopic.Fifo():
		bad("OnFailureDestination", "a FIFO queue or topic needs a message group id, which the shardreader does not send: use a standard one")
	}
	switch p.LeaseTableRemovalPolicy {
	case awscdk.RemovalPolicy_RETAIN, awscdk.RemovalPolicy_DESTROY, awscdk.RemovalPolicy_SNAPSHOT, awscdk.RemovalPolicy_RETAIN_ON_UPDATE_OR_DELETE:
	default:
		bad("LeaseTableRemovalPolicy", "%q is not a removal policy", p.LeaseTableRemovalPolicy)
	}
	if p.LeaseTable != nil && p.LeaseTableName != "" {
		bad("LeaseTable", "give LeaseTable or LeaseTableName, not both")
	}
	if p.LeaseTableName != "" && !isToken(p.LeaseTableName) && !tableName.MatchString(p.LeaseTableName) {
		bad("LeaseTableName", "%q is not a DynamoDB table name (3-255 of a-z A-Z 0-9 _ . -)", p.LeaseTableName)
	}
	if (p.LeaseTable != nil || p.LeaseTableName != "") && (p.DisableLeaseTablePITR || p.LeaseTableRemovalPolicy != awscdk.RemovalPolicy_RETAIN) {
		bad("LeaseTable", "an existing table keeps its own point-in-time recovery and removal policy")
	}

	if p.ProjectRoot != "" {
		if p.DefinitionFile == "" {
			p.DefinitionFile = filepath.Join(p.ProjectRoot, DefinitionFileRel)
		}
		if p.CoordinatorCode == nil {
			if err := checkBootstrap(filepath.Join(p.ProjectRoot, CoordinatorAssetRel)); err != nil {
				bad("CoordinatorCode", "%v", err)
			}
		}
		if p.ShardReaderCode == nil {
			if err := checkBootstrap(filepath.Join(p.ProjectRoot, ShardReaderAssetRel)); err != nil {
				bad("ShardReaderCode", "%v", err)
			}
		}
	}
	if p.DefinitionFile != "" {
		if _, err := os.Stat(p.DefinitionFile); err != nil {
			bad("DefinitionFile", "%v", err)
		}
	}
	return errors.Join(errs...)
}

// checkBootstrap reports a missing Lambda bootstrap under ProjectRoot with
// the way to make it.
func checkBootstrap(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "bootstrap")); err != nil {
		return fmt.Errorf("%s/bootstrap is missing: run make build first, or leave ProjectRoot empty to build from source", dir)
	}
	return nil
}

func isToken(s string) bool { return *awscdk.Token_IsUnresolved(s) }

// RetryAttempts returns n as a ConsumerProps.RetryAttempts.
func RetryAttempts(n int) *int { return &n }

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// envDuration formats d the way the functions document their defaults
// ("1s", "60s", "500ms"); time.ParseDuration reads it back.
func envDuration(d time.Duration) string {
	switch {
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	case d%time.Millisecond == 0:
		return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
	default:
		return d.String()
	}
}
