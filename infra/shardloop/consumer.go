package shardloop

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskinesis"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/shardloop/shardloop/internal/handlers"
	"github.com/shardloop/shardloop/internal/lambdaenv"
	"github.com/shardloop/shardloop/pkg/metrics"
)

// Metric names and namespace the functions publish in the embedded metric
// format, with the dimension Stream (and Stream, Shard).
const (
	MetricNamespace = metrics.DefaultNamespace
	StreamDimension = metrics.DimStream
	ShardDimension  = metrics.DimShard
)

// Consumer is a deployed shardloop subscription: one stream, one target.
type Consumer struct {
	// Construct is the scope everything the consumer creates is in.
	Construct constructs.Construct

	Stream       awskinesis.IStream
	LeaseTable   awsdynamodb.ITable
	Coordinator  awslambda.Function
	ShardReader  awslambda.Function
	StateMachine awsstepfunctions.StateMachine
	Schedule     awsevents.Rule
	// FailedExecutions runs the coordinator for each shard loop execution
	// that ends FAILED, TIMED_OUT or ABORTED.
	FailedExecutions awsevents.Rule
	Dashboard        awscloudwatch.Dashboard
	// Alarms by name: TargetErrors, GivenUpBatches, Lag, ExecutionsFailed,
	// CoordinatorErrors, StreamNotFound, StaleConfiguration, BacklogSkipped.
	// Add actions (an SNS topic) to them as needed.
	Alarms map[string]awscloudwatch.Alarm

	// StreamDimensionValue is the value of the Stream dimension the
	// alarms and dashboard read: the stream's name.
	StreamDimensionValue *string
}

// consumers remembers, per app, the streams that already have a consumer.
var consumers = struct {
	sync.Mutex
	byApp map[constructs.IConstruct]map[string]string
}{byApp: map[constructs.IConstruct]map[string]string{}}

// NewConsumer adds a shardloop consumer to scope. Props are validated before
// anything is created: the error names each bad prop. A second consumer of a
// stream that already has one in the same app is an error wrapping
// ErrDuplicateStream.
func NewConsumer(scope constructs.Construct, id string, props *ConsumerProps) (*Consumer, error) {
	if props == nil {
		props = &ConsumerProps{}
	}
	p := props.withDefaults()
	if err := p.resolveAliases(); err != nil {
		return nil, err
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	definition, source := embeddedDefinition, "the embedded definition"
	if p.DefinitionFile != "" {
		b, err := os.ReadFile(p.DefinitionFile)
		if err != nil {
			return nil, &ConfigError{Prop: "DefinitionFile", Reason: err.Error()}
		}
		definition, source = b, p.DefinitionFile
	}
	if !strings.Contains(string(definition), "${"+ShardReaderSubstitution+"}") {
		return nil, &ConfigError{Prop: "DefinitionFile", Reason: fmt.Sprintf("%s has no ${%s} to substitute", source, ShardReaderSubstitution)}
	}
	coordinatorCode, readerCode, err := functionCode(&p)
	if err != nil {
		return nil, err
	}

	stack := awscdk.Stack_Of(scope)
	key := streamKey(stack, &p)
	root := scope.Node().Root()
	path := *scope.Node().Path() + "/" + id
	consumers.Lock()
	seen := consumers.byApp[root]
	if seen == nil {
		seen = map[string]string{}
		consumers.byApp[root] = seen
	}
	if other, ok := seen[key]; key != "" && ok {
		consumers.Unlock()
		return nil, fmt.Errorf("shardloop: %s: stream %s: %w (%s); one deployment reads a stream through one subscription", path, key, ErrDuplicateStream, other)
	}
	if key != "" {
		seen[key] = path
	}
	consumers.Unlock()

	c := &Consumer{Construct: constructs.NewConstruct(scope, jsii.String(id)), Alarms: map[string]awscloudwatch.Alarm{}}
	c.Stream, c.StreamDimensionValue = c.stream(stack, &p)
	c.LeaseTable = c.leaseTable(&p)

	// Deterministic physical names break the cycles coordinator -> state
	// machine -> shardreader -> coordinator (the nudge) and state machine ->
	// its own ARN (continue-as-new): they are referenced as strings.
	base := *awscdk.Names_UniqueResourceName(c.Construct, &awscdk.UniqueResourceNameOptions{MaxLength: jsii.Number(48)})
	coordinatorName := base + "-coordinator"
	stateMachineName := base + "-shard-loop"
	coordinatorArn := stack.FormatArn(&awscdk.ArnComponents{
		Service: jsii.String("lambda"), Resource: jsii.String("function"),
		ResourceName: jsii.String(coordinatorName), ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME,
	})
	stateMachineArn := stack.FormatArn(&awscdk.ArnComponents{
		Service: jsii.String("states"), Resource: jsii.String("stateMachine"),
		ResourceName: jsii.String(stateMachineName), ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME,
	})
	targetArn := c.targetArn(stack, &p)
	streamArn := c.Stream.StreamArn()
	tableArn := c.LeaseTable.TableArn()

	// The shardreader.
	readerLogs := c.logGroup("ShardReaderLogs", nil, &p)
	readerRole := c.role("ShardReaderRole", "lambda.amazonaws.com", "shardloop shardreader: reads one shard, delivers to the target, checkpoints")
	allow(readerRole, "ReadStream", []string{"kinesis:DescribeStreamSummary", "kinesis:GetRecords", "kinesis:GetShardIterator", "kinesis:ListShards"}, streamArn)
	allow(readerRole, "Leases", []string{"dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"}, tableArn)
	allow(readerRole, "InvokeTargetAndNudgeCoordinator", []string{"lambda:InvokeFunction"}, targetArn, coordinatorArn)
	// The target's configured timeout, which the lease's fence covers.
	allow(readerRole, "ReadTargetTimeout", []string{"lambda:GetFunctionConfiguration"}, targetArn)
	allow(readerRole, "Logs", []string{"logs:CreateLogStream", "logs:PutLogEvents"}, readerLogs.LogGroupArn())
	readerEnv := map[string]*string{
		"SHARDLOOP_LEASE_TABLE":          c.LeaseTable.TableName(),
		"SHARDLOOP_TARGET_FUNCTION":      targetArn,
		"SHARDLOOP_COORDINATOR_FUNCTION": jsii.String(coordinatorName),
		"SHARDLOOP_BATCH_SIZE":           jsii.String(strconv.Itoa(p.BatchSize)),
		"SHARDLOOP_POLL_INTERVAL":        jsii.String(envDuration(p.PollInterval)),
		"SHARDLOOP_RUN_LENGTH":           jsii.String(envDuration(p.RunLength)),
		"SHARDLOOP_MAX_ITERATIONS":       jsii.String(strconv.Itoa(p.MaxIterations)),
		lambdaenv.VarPerShardLag:         jsii.String(strconv.FormatBool(p.PerShardLagMetric)),
		lambdaenv.VarReadAheadMiB:        jsii.String(strconv.Itoa(p.ReadAheadMiB)),
		// The records' invokeIdentityArn: the role that invokes the target,
		// as Lambda's own trigger reports its function's role.
		"SHARDLOOP_INVOKE_IDENTITY_ARN": readerRole.RoleArn(),
	}
	for k, v := range failurePolicyEnv(&p) {
		readerEnv[k] = jsii.String(v)
	}
	readerEnv["SHARDLOOP_PARALLELIZATION_FACTOR"] = jsii.String(strconv.Itoa(p.ParallelizationFactor))
	if p.TumblingWindow > 0 {
		readerEnv["SHARDLOOP_TUMBLING_WINDOW_SECONDS"] = jsii.String(strconv.Itoa(int(p.TumblingWindow / time.Second)))
	}
	if len(p.Filters) > 0 {
		readerEnv[lambdaenv.VarFilterCriteria] = jsii.String(filterCriteria(p.Filters))
	}
	if arn := c.onFailure(readerRole, &p); arn != nil {
		readerEnv["SHARDLOOP_ON_FAILURE_DESTINATION"] = arn
	}
	c.ShardReader = awslambda.NewFunction(c.Construct, jsii.String("ShardReader"), &awslambda.FunctionProps{
		Description:  jsii.String("shardloop shardreader: one bounded loop iteration over one shard"),
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String("bootstrap"),
		Code:         readerCode,
		Role:         readerRole,
		MemorySize:   jsii.Number(float64(p.ShardReaderMemoryMiB)),
		Timeout:      awscdk.Duration_Seconds(jsii.Number(lambdaenv.ShardReaderTimeout(p.RunLength).Seconds())),
		LogGroup:     readerLogs,
		// JSON: Lambda's own lines too, and its application log level
		// filters the function's lines by their "level" (internal/handlers).
		LoggingFormat: awslambda.LoggingFormat_JSON,
		Environment:   &readerEnv,
	})
	if p.OnFailure != nil {
		c.onFailureDlq(&p)
	}

	// The state machine, from the one ASL file SAM loads too.
	machineLogs := c.logGroup("ShardLoopLogs", jsii.String("/aws/vendedlogs/states/"+stateMachineName), &p)
	machineRole := c.role("ShardLoopRole", "states.amazonaws.com", "shardloop shard loop: invokes the shardreader, continues as new")
	allow(machineRole, "InvokeShardReader", []string{"lambda:InvokeFunction"}, c.ShardReader.FunctionArn())
	allow(machineRole, "ContinueAsNew", []string{"states:StartExecution"}, stateMachineArn)
	c.StateMachine = awsstepfunctions.NewStateMachine(c.Construct, jsii.String("ShardLoop"), &awsstepfunctions.StateMachineProps{
		StateMachineName: jsii.String(stateMachineName),
		StateMachineType: awsstepfunctions.StateMachineType_STANDARD,
		DefinitionBody:   awsstepfunctions.DefinitionBody_FromString(jsii.String(string(definition))),
		DefinitionSubstitutions: &map[string]*string{
			ShardReaderSubstitution: c.ShardReader.FunctionArn(),
		},
		Role: machineRole,
		Logs: &awsstepfunctions.LogOptions{
			Destination:          machineLogs,
			Level:                p.ExecutionLogLevel,
			IncludeExecutionData: jsii.Bool(false),
		},
	})

	// The coordinator, run every minute and whenever a shard loop's
	// execution fails.
	coordinatorLogs := c.logGroup("CoordinatorLogs", nil, &p)
	coordinatorRole := c.role("CoordinatorRole", "lambda.amazonaws.com", "shardloop coordinator: lists shards, takes leases, starts shard loops")
	allow(coordinatorRole, "ListShards", []string{"kinesis:DescribeStreamSummary", "kinesis:ListShards"}, streamArn)
	// A new StartPosition that would skip records not yet delivered: one read
	// of each such shard counts them (BacklogSkipped).
	allow(coordinatorRole, "CountSkippedBacklog", []string{"kinesis:GetRecords", "kinesis:GetShardIterator"}, streamArn)
	allow(coordinatorRole, "Leases", []string{"dynamodb:BatchGetItem", "dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:Scan", "dynamodb:UpdateItem"}, tableArn)
	allow(coordinatorRole, "StartShardLoops", []string{"states:StartExecution"}, c.StateMachine.StateMachineArn())
	// Its own last update: when its start position was deployed, which
	// orders start generations.
	allow(coordinatorRole, "ReadOwnDeployTime", []string{"lambda:GetFunctionConfiguration"}, coordinatorArn)
	allow(coordinatorRole, "Logs", []string{"logs:CreateLogStream", "logs:PutLogEvents"}, coordinatorLogs.LogGroupArn())
	c.Coordinator = awslambda.NewFunction(c.Construct, jsii.String("Coordinator"), &awslambda.FunctionProps{
		FunctionName:  jsii.String(coordinatorName),
		Description:   jsii.String("shardloop coordinator: takes shard leases and starts one shard loop per shard"),
		Runtime:       awslambda.Runtime_PROVIDED_AL2023(),
		Architecture:  awslambda.Architecture_ARM_64(),
		Handler:       jsii.String("bootstrap"),
		Code:          coordinatorCode,
		Role:          coordinatorRole,
		MemorySize:    jsii.Number(float64(p.CoordinatorMemoryMiB)),
		Timeout:       awscdk.Duration_Seconds(jsii.Number(lambdaenv.CoordinatorTimeout(p.Window, p.RunLength).Seconds())),
		LogGroup:      coordinatorLogs,
		LoggingFormat: awslambda.LoggingFormat_JSON,
		RetryAttempts: jsii.Number(0), // the next minute's run (or a nudge) does the work again
		Environment:   coordinatorEnv(&p, streamArn, c.LeaseTable.TableName(), c.StateMachine.StateMachineArn(), targetArn),
	})
	c.Schedule = awsevents.NewRule(c.Construct, jsii.String("Schedule"), &awsevents.RuleProps{
		Description: jsii.String("shardloop: run the coordinator every minute"),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(1))),
		Targets: &[]awsevents.IRuleTarget{
			awseventstargets.NewLambdaFunction(c.Coordinator, &awseventstargets.LambdaFunctionProps{
				RetryAttempts: jsii.Number(0),
				MaxEventAge:   awscdk.Duration_Minutes(jsii.Number(1)),
			}),
		},
	})
	// A shard loop whose execution fails (its shardreader crashed, timed
	// out or kept being throttled) or is stopped leaves its shard to take
	// over: the coordinator watches that lease until it lapses, then takes
	// it (internal/handlers). The status-change events are AWS service
	// events on the default bus: they cost nothing. Delivery is retried for
	// a few minutes; the schedule's passes take the shard if it is lost.
	c.FailedExecutions = awsevents.NewRule(c.Construct, jsii.String("FailedExecutions"), &awsevents.RuleProps{
		Description: jsii.String("shardloop: run the coordinator when a shard loop execution ends FAILED, TIMED_OUT or ABORTED"),
		EventPattern: &awsevents.EventPattern{
			Source:     jsii.Strings(handlers.ExecutionSource),
			DetailType: jsii.Strings(handlers.ExecutionStatusDetailType),
			Detail: &map[string]any{
				"stateMachineArn": []*string{c.StateMachine.StateMachineArn()},
				"status":          handlers.FailedStatuses,
			},
		},
		Targets: &[]awsevents.IRuleTarget{
			awseventstargets.NewLambdaFunction(c.Coordinator, &awseventstargets.LambdaFunctionProps{
				RetryAttempts: jsii.Number(2),
				MaxEventAge:   awscdk.Duration_Minutes(jsii.Number(5)),
			}),
		},
	})

	c.observe(&p, base)
	c.streamNotFoundAlarm()
	c.staleConfigurationAlarm()
	c.backlogSkippedAlarm()
	return c, nil
}

// coordinatorEnv is the coordinator's environment. Without a StartingPosition
// the variable is left out: no start is configured, and no checkpoint ever
// moves.
func coordinatorEnv(p *ConsumerProps, stream, table, stateMachine, target *string) *map[string]*string {
	env := map[string]*string{
		"SHARDLOOP_STREAM":            stream,
		"SHARDLOOP_LEASE_TABLE":       table,
		"SHARDLOOP_STATE_MACHINE_ARN": stateMachine,
		"SHARDLOOP_TARGET_FUNCTION":   target,
		"SHARDLOOP_BATCH_SIZE":        jsii.String(strconv.Itoa(p.BatchSize)),
		"SHARDLOOP_POLL_INTERVAL":     jsii.String(envDuration(p.PollInterval)),
		"SHARDLOOP_RUN_LENGTH":        jsii.String(envDuration(p.RunLength)), // bounds a watch after a failed loop
		"SHARDLOOP_CREATE_SHARDS":     jsii.String("0"),                      // the stream is created here, by CloudFormation, if at all
		"SHARDLOOP_WINDOW":            jsii.String(envDuration(p.Window)),    // 0s: no window
	}
	if start := p.start(); start != "" {
		env["SHARDLOOP_START_POSITION"] = jsii.String(start)
	}
	return &env
}

// staleConfigurationAlarm fires when this deployment's start position is
// older than the generation its lease table records (another deployment on
// the table, or a start changed back): its coordinator changes nothing.
func (c *Consumer) staleConfigurationAlarm() {
	c.Alarms["StaleConfiguration"] = awscloudwatch.NewAlarm(c.Construct, jsii.String("StaleConfigurationAlarm"), &awscloudwatch.AlarmProps{
		AlarmDescription: jsii.String("shardloop: this deployment's StartPosition is older than the start generation its lease table records, " +
			"so its coordinator applies none (see docs/operations.md, \"Start generations\")"),
		Metric:             c.metric("StaleConfiguration", "Sum", 5),
		Threshold:          jsii.Number(1),
		EvaluationPeriods:  jsii.Number(1),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
		TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
	})
}

// backlogSkippedAlarm fires when this deployment's new start position moved
// shards past records the previous start had not delivered: they are never
// delivered (the coordinator's WARN line names the shards and counts).
func (c *Consumer) backlogSkippedAlarm() {
	c.Alarms["BacklogSkipped"] = awscloudwatch.NewAlarm(c.Construct, jsii.String("BacklogSkippedAlarm"), &awscloudwatch.AlarmProps{
		AlarmDescription: jsii.String("shardloop: a new StartPosition moved shards past records the previous start had not delivered; " +
			"they will not be delivered (the coordinator's log names the shards and counts; see docs/operations.md, \"Start generations\")"),
		Metric:             c.metric("BacklogSkipped", "Sum", 5),
		Threshold:          jsii.Number(1),
		EvaluationPeriods:  jsii.Number(1),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
		TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
	})
}

// streamNotFoundAlarm fires when a coordinator pass found no stream to read:
// the functions keep running and read nothing until it exists.
func (c *Consumer) streamNotFoundAlarm() {
	c.Alarms["StreamNotFound"] = awscloudwatch.NewAlarm(c.Construct, jsii.String("StreamNotFoundAlarm"), &awscloudwatch.AlarmProps{
		AlarmDescription:   jsii.String("shardloop: the coordinator found no stream to read; nothing is read until it exists (check the stream's name, region and account)"),
		Metric:             c.metric("StreamNotFound", "Sum", 5),
		Threshold:          jsii.Number(1),
		EvaluationPeriods:  jsii.Number(1),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
		TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
	})
}

// failurePolicyEnv is the shardreader's failure-policy environment, every
// variable set so that a deployed function shows its policy.
func failurePolicyEnv(p *ConsumerProps) map[string]string {
	retries, age := strconv.Itoa(NoLimit), strconv.Itoa(NoLimit)
	if p.RetryAttempts != nil {
		retries = strconv.Itoa(*p.RetryAttempts)
	}
	if p.MaxRecordAge > 0 {
		age = envDuration(p.MaxRecordAge)
	}
	return map[string]string{
		"SHARDLOOP_MAX_RETRY_ATTEMPTS": retries,
		"SHARDLOOP_MAX_RECORD_AGE":     age,
		"SHARDLOOP_BISECT_ON_ERROR":    strconv.FormatBool(p.BisectBatchOnError),
		"SHARDLOOP_BATCHING_WINDOW":    envDuration(p.MaxBatchingWindow),
		"SHARDLOOP_DEAGGREGATE":        strconv.FormatBool(p.Deaggregate),
	}
}

// onFailure grants the shardreader what sending to the on-failure
// destination takes, and nothing when there is none: GetQueueUrl and
// SendMessage on the queue, Publish on the topic, or PutObject on the
// bucket's objects, plus the use of its KMS key when it has one. It returns
// the destination's ARN, or nil.
func (c *Consumer) onFailure(role awsiam.Role, p *ConsumerProps) *string {
	const sid = "OnFailureDestination"
	sqsActions := []string{"sqs:GetQueueUrl", "sqs:SendMessage"}
	snsActions := []string{"sns:Publish"}
	s3Actions := []string{"s3:PutObject"}
	switch {
	case p.OnFailureQueue != nil:
		allow(role, sid, sqsActions, p.OnFailureQueue.QueueArn())
		if key := p.OnFailureQueue.EncryptionMasterKey(); key != nil {
			key.Grant(role, jsii.String("kms:Decrypt"), jsii.String("kms:GenerateDataKey"))
		}
		return p.OnFailureQueue.QueueArn()
	case p.OnFailureTopic != nil:
		allow(role, sid, snsActions, p.OnFailureTopic.TopicArn())
		if key := p.OnFailureTopic.MasterKey(); key != nil {
			key.Grant(role, jsii.String("kms:Decrypt"), jsii.String("kms:GenerateDataKey"))
		}
		return p.OnFailureTopic.TopicArn()
	case p.OnFailureBucket != nil:
		allow(role, sid, s3Actions, p.OnFailureBucket.ArnForObjects(jsii.String("*")))
		if key := p.OnFailureBucket.EncryptionKey(); key != nil {
			key.Grant(role, jsii.String("kms:GenerateDataKey"))
		}
		return p.OnFailureBucket.BucketArn()
	case strings.HasPrefix(p.OnFailureDestination, "arn:") && strings.Split(p.OnFailureDestination, ":")[2] == "sqs":
		allow(role, sid, sqsActions, jsii.String(p.OnFailureDestination))
		return jsii.String(p.OnFailureDestination)
	case strings.HasPrefix(p.OnFailureDestination, "arn:") && strings.Split(p.OnFailureDestination, ":")[2] == "s3":
		allow(role, sid, s3Actions, jsii.String(p.OnFailureDestination+"/*"))
		return jsii.String(p.OnFailureDestination)
	case p.OnFailureDestination != "":
		allow(role, sid, snsActions, jsii.String(p.OnFailureDestination))
		return jsii.String(p.OnFailureDestination)
	}
	return nil
}

// onFailureDlq binds OnFailure (an SqsDlq, SnsDlq or
// S3OnFailureDestination of awslambdaeventsources) to the shardreader as
// KinesisEventSource binds it to a mapping's function: it grants the
// shardreader what it grants that function and names the destination,
// which the shardreader's environment then carries. shardloop has no event
// source mapping: the one Bind is given is a reference that creates
// nothing.
func (c *Consumer) onFailureDlq(p *ConsumerProps) {
	mapping := awslambda.EventSourceMapping_FromEventSourceMappingId(c.Construct, jsii.String("OnFailureBinding"), jsii.String("shardloop-has-no-mapping"))
	cfg := p.OnFailure.Bind(mapping, c.ShardReader)
	c.ShardReader.AddEnvironment(jsii.String("SHARDLOOP_ON_FAILURE_DESTINATION"), cfg.Destination, nil)
}

// stream returns the stream to read and the value of its metrics' Stream
// dimension (its name).
func (c *Consumer) stream(stack awscdk.Stack, p *ConsumerProps) (awskinesis.IStream, *string) {
	switch {
	case p.Stream != nil:
		return p.Stream, p.Stream.StreamName()
	case p.CreateShards > 0:
		props := &awskinesis.StreamProps{
			ShardCount: jsii.Number(float64(p.CreateShards)),
			StreamMode: awskinesis.StreamMode_PROVISIONED,
			Encryption: awskinesis.StreamEncryption_MANAGED,
		}
		if p.StreamName != "" {
			props.StreamName = jsii.String(p.StreamName)
		}
		s := awskinesis.NewStream(c.Construct, jsii.String("Stream"), props)
		return s, s.StreamName()
	case strings.HasPrefix(p.StreamName, "arn:"):
		m := streamArn.FindStringSubmatch(p.StreamName)
		return awskinesis.Stream_FromStreamArn(c.Construct, jsii.String("Stream"), jsii.String(p.StreamName)), jsii.String(m[3])
	default:
		arn := stack.FormatArn(&awscdk.ArnComponents{
			Service: jsii.String("kinesis"), Resource: jsii.String("stream"),
			ResourceName: jsii.String(p.StreamName), ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME,
		})
		return awskinesis.Stream_FromStreamArn(c.Construct, jsii.String("Stream"), arn), jsii.String(p.StreamName)
	}
}

// streamKey names the stream for the one-consumer-per-stream check:
// region/account/name where they are known at synth, else the construct
// path of the given stream. A stream created by this consumer is new, so
// it needs no key unless it is named.
func streamKey(stack awscdk.Stack, p *ConsumerProps) string {
	here := func(name string) string { return *stack.Region() + "/" + *stack.Account() + "/" + name }
	switch {
	case p.Stream != nil:
		if arn := *p.Stream.StreamArn(); !isToken(arn) {
			if m := streamArn.FindStringSubmatch(arn); m != nil {
				return m[1] + "/" + m[2] + "/" + m[3]
			}
		}
		if name := *p.Stream.StreamName(); !isToken(name) {
			return here(name)
		}
		return "construct:" + *p.Stream.Node().Path()
	case strings.HasPrefix(p.StreamName, "arn:"):
		m := streamArn.FindStringSubmatch(p.StreamName)
		return m[1] + "/" + m[2] + "/" + m[3]
	case p.StreamName != "":
		return here(p.StreamName)
	default:
		return ""
	}
}

func (c *Consumer) leaseTable(p *ConsumerProps) awsdynamodb.ITable {
	switch {
	case p.LeaseTable != nil:
		return p.LeaseTable
	case p.LeaseTableName != "":
		return awsdynamodb.Table_FromTableName(c.Construct, jsii.String("LeaseTable"), jsii.String(p.LeaseTableName))
	}
	return awsdynamodb.NewTable(c.Construct, jsii.String("LeaseTable"), &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("lease_key"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(!p.DisableLeaseTablePITR),
		},
		RemovalPolicy: p.LeaseTableRemovalPolicy,
	})
}

// targetArn is the target's ARN; a bare name is placed in this stack's
// account and region.
func (c *Consumer) targetArn(stack awscdk.Stack, p *ConsumerProps) *string {
	switch {
	case p.Target != nil:
		return p.Target.FunctionArn()
	case strings.HasPrefix(p.TargetFunction, "arn:") || isToken(p.TargetFunction):
		return jsii.String(p.TargetFunction)
	}
	return stack.FormatArn(&awscdk.ArnComponents{
		Service: jsii.String("lambda"), Resource: jsii.String("function"),
		ResourceName: jsii.String(p.TargetFunction), ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME,
	})
}

func (c *Consumer) logGroup(id string, name *string, p *ConsumerProps) awslogs.LogGroup {
	return awslogs.NewLogGroup(c.Construct, jsii.String(id), &awslogs.LogGroupProps{
		LogGroupName:  name,
		Retention:     p.LogRetention,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
}

func (c *Consumer) role(id, service, description string) awsiam.Role {
	return awsiam.NewRole(c.Construct, jsii.String(id), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String(service), nil),
		Description: jsii.String(description),
	})
}

func allow(role awsiam.Role, sid string, actions []string, resources ...*string) {
	role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String(sid),
		Effect:    awsiam.Effect_ALLOW,
		Actions:   jsii.Strings(actions...),
		Resources: &resources,
	}))
}

// functionCode is the code of the two functions: the props' own when given,
// else the bootstraps under ProjectRoot when that is set, else a build from
// source (once per process).
func functionCode(p *ConsumerProps) (coordinator, reader awslambda.Code, err error) {
	coordinator, reader = p.CoordinatorCode, p.ShardReaderCode
	asset := func(dir string) awslambda.Code { return awslambda.Code_FromAsset(jsii.String(dir), nil) }
	if p.ProjectRoot != "" {
		if coordinator == nil {
			coordinator = asset(filepath.Join(p.ProjectRoot, CoordinatorAssetRel))
		}
		if reader == nil {
			reader = asset(filepath.Join(p.ProjectRoot, ShardReaderAssetRel))
		}
		return coordinator, reader, nil
	}
	var pkgs []string
	if coordinator == nil {
		pkgs = append(pkgs, CoordinatorPackage)
	}
	if reader == nil {
		pkgs = append(pkgs, ShardReaderPackage)
	}
	if len(pkgs) == 0 {
		return coordinator, reader, nil
	}
	dirs, err := functionBuilds.code(pkgs...)
	if err != nil {
		return nil, nil, err
	}
	if coordinator == nil {
		coordinator = asset(dirs[CoordinatorPackage])
	}
	if reader == nil {
		reader = asset(dirs[ShardReaderPackage])
	}
	return coordinator, reader, nil
}
