package shardloop

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/shardloop/shardloop/internal/lambdaenv"
)

// StackProps configures the stack of the shardloop CDK app: one consumer.
type StackProps struct {
	awscdk.StackProps
	Consumer ConsumerProps
}

// NewStack is the stack `cdk deploy` creates from infra/: one Consumer and
// outputs naming what to look at.
func NewStack(scope constructs.Construct, id string, props *StackProps) (awscdk.Stack, *Consumer, error) {
	if props == nil {
		props = &StackProps{}
	}
	sp := props.StackProps
	if sp.Description == nil {
		sp.Description = jsii.String("shardloop: serverless Kinesis consumer (coordinator, shard loops, leases)")
	}
	stack := awscdk.NewStack(scope, jsii.String(id), &sp)
	c, err := NewConsumer(stack, "Consumer", &props.Consumer)
	if err != nil {
		return nil, nil, err
	}
	out := func(name, description string, value *string) {
		awscdk.NewCfnOutput(stack, jsii.String(name), &awscdk.CfnOutputProps{Value: value, Description: jsii.String(description)})
	}
	out("StreamArn", "the stream read", c.Stream.StreamArn())
	out("LeaseTableName", "the lease table", c.LeaseTable.TableName())
	out("CoordinatorFunctionName", "the coordinator Lambda (runs every minute, and when a shard loop execution fails)", c.Coordinator.FunctionName())
	out("ShardReaderFunctionName", "the shardreader Lambda", c.ShardReader.FunctionName())
	out("StateMachineArn", "the shard loop state machine (one execution per shard)", c.StateMachine.StateMachineArn())
	out("DashboardName", "the CloudWatch dashboard", c.Dashboard.DashboardName())
	return stack, c, nil
}

// Context keys read by PropsFromContext: set them in infra/cdk.json or with
// `cdk synth -c key=value` (the Makefile's deploy variables do this).
const (
	CtxStackName         = "stackName"
	CtxStream            = "stream"
	CtxCreateShards      = "createShards"
	CtxTarget            = "targetArn"
	CtxStartPosition     = "startPosition"
	CtxBatchSize         = "batchSize"
	CtxPollInterval      = "pollInterval"
	CtxRunLength         = "runLength"
	CtxMaxIterations     = "maxIterations"
	CtxWindow            = "window"
	CtxLeaseTable        = "leaseTable"
	CtxLeaseTableRemoval = "leaseTableRemovalPolicy"
	CtxLogRetentionDays  = "logRetentionDays"
	CtxExecutionLogLevel = "executionLogLevel"
	CtxCoordinatorMemory = "coordinatorMemory"
	CtxShardReaderMemory = "shardReaderMemory"
	CtxLagAlarm          = "lagAlarmThreshold"
	CtxMaxRetryAttempts  = "maxRetryAttempts"
	CtxMaxRecordAge      = "maxRecordAge"
	CtxBisectOnError     = "bisectOnError"
	CtxOnFailure         = "onFailureDestination"
	CtxBatchingWindow    = "batchingWindow"
	CtxDeaggregate       = "deaggregate"
	CtxParallelization   = "parallelizationFactor"
	CtxPerShardLag       = "perShardLagMetric"
	CtxTumblingWindow    = "tumblingWindowInSeconds"
	CtxReadAheadMiB      = "readAheadMiB"
	// CtxFilterCriteria is Filters as a FilterCriteria in the JSON of
	// Lambda's API: {"Filters": [{"Pattern": "..."}]}.
	CtxFilterCriteria = "filterCriteria"
)

// PropsFromContext reads ConsumerProps from CDK context. An empty value
// means the default; a value that does not parse is an error naming the key.
func PropsFromContext(node constructs.Node) (ConsumerProps, error) {
	var p ConsumerProps
	var errs []error
	get := func(key string) string {
		v := node.TryGetContext(jsii.String(key))
		if v == nil {
			return ""
		}
		switch v := v.(type) {
		case string:
			return strings.TrimSpace(v)
		case float64:
			return strconv.FormatFloat(v, 'f', -1, 64)
		default:
			return fmt.Sprint(v)
		}
	}
	integer := func(key string, dst *int) {
		if s := get(key); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("shardloop: context %s: %q is not a whole number", key, s))
			}
			*dst = n
		}
	}
	duration := func(key string, dst *time.Duration) {
		if s := get(key); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("shardloop: context %s: %q is not a Go duration (1s, 500ms, 2m)", key, s))
			}
			*dst = d
		}
	}

	p.StreamName = get(CtxStream)
	integer(CtxCreateShards, &p.CreateShards)
	p.TargetFunction = get(CtxTarget)
	if s := get(CtxStartPosition); s != "" {
		sp, ts, err := startingPositionOf(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("shardloop: context %s: %q is not TRIM_HORIZON, LATEST, AT_TIMESTAMP:<unix seconds>, horizon, latest or timestamp:<unix ms>", CtxStartPosition, s))
		}
		p.StartingPosition, p.StartingPositionTimestamp = sp, ts
	}
	integer(CtxBatchSize, &p.BatchSize)
	duration(CtxPollInterval, &p.PollInterval)
	duration(CtxRunLength, &p.RunLength)
	integer(CtxMaxIterations, &p.MaxIterations)
	integer(CtxReadAheadMiB, &p.ReadAheadMiB)
	duration(CtxWindow, &p.Window)
	p.LeaseTableName = get(CtxLeaseTable)
	switch s := strings.ToLower(get(CtxLeaseTableRemoval)); s {
	case "":
	case "retain", "destroy", "snapshot":
		p.LeaseTableRemovalPolicy = awscdk.RemovalPolicy(strings.ToUpper(s))
	default:
		errs = append(errs, fmt.Errorf("shardloop: context %s: %q is not retain, destroy or snapshot", CtxLeaseTableRemoval, s))
	}
	if s := get(CtxLogRetentionDays); s != "" {
		r, ok := retentionDays[s]
		if !ok {
			errs = append(errs, fmt.Errorf("shardloop: context %s: %q is not a CloudWatch Logs retention in days (1, 3, 5, 7, 14, 30, 60, 90, 180, 365, ...)", CtxLogRetentionDays, s))
		}
		p.LogRetention = r
	}
	switch s := strings.ToUpper(get(CtxExecutionLogLevel)); s {
	case "":
	case "ALL", "ERROR", "FATAL", "OFF":
		p.ExecutionLogLevel = awsstepfunctions.LogLevel(s)
	default:
		errs = append(errs, fmt.Errorf("shardloop: context %s: %q is not ALL, ERROR, FATAL or OFF", CtxExecutionLogLevel, s))
	}
	integer(CtxCoordinatorMemory, &p.CoordinatorMemoryMiB)
	integer(CtxShardReaderMemory, &p.ShardReaderMemoryMiB)
	duration(CtxLagAlarm, &p.LagAlarmThreshold)
	if s := get(CtxMaxRetryAttempts); s != "" {
		var n int
		integer(CtxMaxRetryAttempts, &n)
		p.RetryAttempts = &n
	}
	if s := get(CtxMaxRecordAge); s != "" && s != strconv.Itoa(NoLimit) {
		duration(CtxMaxRecordAge, &p.MaxRecordAge)
	}
	boolean := func(key string, dst *bool) {
		if s := get(key); s != "" {
			b, err := strconv.ParseBool(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("shardloop: context %s: %q is not true or false", key, s))
			}
			*dst = b
		}
	}
	boolean(CtxBisectOnError, &p.BisectBatchOnError)
	p.OnFailureDestination = get(CtxOnFailure)
	duration(CtxBatchingWindow, &p.MaxBatchingWindow)
	boolean(CtxDeaggregate, &p.Deaggregate)
	integer(CtxParallelization, &p.ParallelizationFactor)
	var windowSeconds int
	integer(CtxTumblingWindow, &windowSeconds)
	p.TumblingWindow = time.Duration(windowSeconds) * time.Second
	boolean(CtxPerShardLag, &p.PerShardLagMetric)
	if s := get(CtxFilterCriteria); s != "" {
		f, err := lambdaenv.ParseFilterCriteria(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("shardloop: context %s: %w", CtxFilterCriteria, err))
		}
		p.Filters = f
	}
	return p, errors.Join(errs...)
}

var retentionDays = map[string]awslogs.RetentionDays{
	"1": awslogs.RetentionDays_ONE_DAY, "3": awslogs.RetentionDays_THREE_DAYS, "5": awslogs.RetentionDays_FIVE_DAYS,
	"7": awslogs.RetentionDays_ONE_WEEK, "14": awslogs.RetentionDays_TWO_WEEKS, "30": awslogs.RetentionDays_ONE_MONTH,
	"60": awslogs.RetentionDays_TWO_MONTHS, "90": awslogs.RetentionDays_THREE_MONTHS, "120": awslogs.RetentionDays_FOUR_MONTHS,
	"150": awslogs.RetentionDays_FIVE_MONTHS, "180": awslogs.RetentionDays_SIX_MONTHS, "365": awslogs.RetentionDays_ONE_YEAR,
	"400": awslogs.RetentionDays_THIRTEEN_MONTHS, "545": awslogs.RetentionDays_EIGHTEEN_MONTHS, "731": awslogs.RetentionDays_TWO_YEARS,
	"1827": awslogs.RetentionDays_FIVE_YEARS, "3653": awslogs.RetentionDays_TEN_YEARS, "0": awslogs.RetentionDays_INFINITE,
}
