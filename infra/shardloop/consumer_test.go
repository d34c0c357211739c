package shardloop

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskinesis"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/jsii-runtime-go"
)

func TestLeaseTable_KeyIsLeaseKeyPayPerRequestWithPITRAndRetained(t *testing.T) {
	tmpl := defaultTemplate(t)
	_, table := tmpl.byPrefix(t, "AWS::DynamoDB::Table", "ConsumerLeaseTable")
	want := raw(t, `{
		"AttributeDefinitions": [{"AttributeName": "lease_key", "AttributeType": "S"}],
		"KeySchema": [{"AttributeName": "lease_key", "KeyType": "HASH"}],
		"BillingMode": "PAY_PER_REQUEST",
		"PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": true}
	}`)
	if got := canon(t, table.Properties); got != canon(t, want) {
		t.Errorf("lease table properties\n got %s\nwant %s", got, canon(t, want))
	}
	if table.DeletionPolicy != "Retain" || table.UpdateReplacePolicy != "Retain" {
		t.Errorf("lease table policies = %q/%q, want Retain/Retain", table.DeletionPolicy, table.UpdateReplacePolicy)
	}
}

func TestFunctions_AreArm64AL2023WithTheFixedEnvironment(t *testing.T) {
	tmpl := defaultTemplate(t)
	if ids := tmpl.ofType("AWS::Lambda::Function"); len(ids) != 2 {
		t.Fatalf("functions: %v, want the coordinator and the shardreader", ids)
	}
	streamArn := raw(t, `{"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":kinesis:eu-west-1:123456789012:stream/orders"]]}`)
	tableID, _ := tmpl.byPrefix(t, "AWS::DynamoDB::Table", "ConsumerLeaseTable")
	machineID, _ := tmpl.byPrefix(t, "AWS::StepFunctions::StateMachine", "ConsumerShardLoop")
	coordinatorID, coordinator := tmpl.byPrefix(t, "AWS::Lambda::Function", "ConsumerCoordinator")
	_, reader := tmpl.byPrefix(t, "AWS::Lambda::Function", "ConsumerShardReader")
	readerRoleID, _ := tmpl.byPrefix(t, "AWS::IAM::Role", "ConsumerShardReaderRole")
	name, _ := coordinator.Properties["FunctionName"].(string)
	if name == "" || len(name) > 64 {
		t.Fatalf("coordinator FunctionName = %v, want a fixed name of at most 64 characters", coordinator.Properties["FunctionName"])
	}

	for _, tc := range []struct {
		name    string
		fn      resource
		timeout float64
		env     map[string]any
	}{
		{"coordinator", coordinator, 635, map[string]any{
			"SHARDLOOP_STREAM":            streamArn,
			"SHARDLOOP_LEASE_TABLE":       map[string]any{"Ref": tableID},
			"SHARDLOOP_STATE_MACHINE_ARN": map[string]any{"Ref": machineID},
			"SHARDLOOP_TARGET_FUNCTION":   testTarget,
			// No start position by default: the variable is left out, and
			// no checkpoint ever moves.
			"SHARDLOOP_BATCH_SIZE":    "100",
			"SHARDLOOP_POLL_INTERVAL": "1s",
			"SHARDLOOP_RUN_LENGTH":    "600s",
			"SHARDLOOP_CREATE_SHARDS": "0",
			"SHARDLOOP_WINDOW":        "0s",
		}},
		{"shardreader", reader, 660, map[string]any{
			"SHARDLOOP_LEASE_TABLE":          map[string]any{"Ref": tableID},
			"SHARDLOOP_TARGET_FUNCTION":      testTarget,
			"SHARDLOOP_COORDINATOR_FUNCTION": name,
			"SHARDLOOP_BATCH_SIZE":           "100",
			"SHARDLOOP_POLL_INTERVAL":        "1s",
			"SHARDLOOP_RUN_LENGTH":           "600s",
			"SHARDLOOP_MAX_ITERATIONS":       "500",
			"SHARDLOOP_PER_SHARD_LAG":        "false",
			"SHARDLOOP_READ_AHEAD_MIB":       "8",
			"SHARDLOOP_INVOKE_IDENTITY_ARN":  map[string]any{"Fn::GetAtt": []any{readerRoleID, "Arn"}},
			"SHARDLOOP_MAX_RETRY_ATTEMPTS":   "-1",
			"SHARDLOOP_MAX_RECORD_AGE":       "-1",
			"SHARDLOOP_BISECT_ON_ERROR":      "false",
			"SHARDLOOP_BATCHING_WINDOW":      "0s",
			"SHARDLOOP_DEAGGREGATE":          "false",
			// One lane: the shard's records in order, as before lanes.
			"SHARDLOOP_PARALLELIZATION_FACTOR": "1",
		}},
	} {
		p := tc.fn.Properties
		if canon(t, p["Architectures"]) != `["arm64"]` || p["Runtime"] != "provided.al2023" || p["Handler"] != "bootstrap" {
			t.Errorf("%s: Architectures %v Runtime %v Handler %v, want [arm64] provided.al2023 bootstrap", tc.name, p["Architectures"], p["Runtime"], p["Handler"])
		}
		if p["Timeout"] != tc.timeout || p["MemorySize"] != float64(128) {
			t.Errorf("%s: Timeout %v MemorySize %v, want %v and 128", tc.name, p["Timeout"], p["MemorySize"], tc.timeout)
		}
		env := p["Environment"].(map[string]any)["Variables"]
		if got, want := canon(t, env), canon(t, tc.env); got != want {
			t.Errorf("%s environment\n got %s\nwant %s", tc.name, got, want)
		}
		if lc := canon(t, p["LoggingConfig"]); !strings.Contains(lc, `"LogFormat":"JSON"`) || !strings.Contains(lc, `"LogGroup":`) {
			t.Errorf("%s: LoggingConfig %s, want JSON into our log group (and retention)", tc.name, lc)
		}
	}
	_ = coordinatorID
}

func TestSchedule_RunsTheCoordinatorEveryMinuteWithoutRetries(t *testing.T) {
	tmpl := defaultTemplate(t)
	coordinatorID, _ := tmpl.byPrefix(t, "AWS::Lambda::Function", "ConsumerCoordinator")
	_, rule := tmpl.byPrefix(t, "AWS::Events::Rule", "ConsumerSchedule")
	if rule.Properties["ScheduleExpression"] != "rate(1 minute)" || rule.Properties["State"] != "ENABLED" {
		t.Errorf("schedule = %v %v, want rate(1 minute) ENABLED", rule.Properties["ScheduleExpression"], rule.Properties["State"])
	}
	targets := rule.Properties["Targets"].([]any)
	if len(targets) != 1 {
		t.Fatalf("targets: %v", targets)
	}
	target := targets[0].(map[string]any)
	if got, want := canon(t, target["Arn"]), canon(t, map[string]any{"Fn::GetAtt": []any{coordinatorID, "Arn"}}); got != want {
		t.Errorf("target = %s, want %s", got, want)
	}
	if len(tmpl.ofType("AWS::Lambda::Permission")) != 2 {
		t.Errorf("lambda permissions: %v, want the two rules' alone", tmpl.ofType("AWS::Lambda::Permission"))
	}
}

// The coordinator runs for this state machine's executions that end FAILED,
// TIMED_OUT or ABORTED, and for nothing else of Step Functions: the rule
// filters on the state machine's ARN and the three statuses, and only the
// two rules may invoke the coordinator.
func TestFailedExecutionsRule_InvokesTheCoordinatorForThisStateMachinesFailuresOnly(t *testing.T) {
	tmpl := defaultTemplate(t)
	coordinatorID, _ := tmpl.byPrefix(t, "AWS::Lambda::Function", "ConsumerCoordinator")
	machineID, _ := tmpl.byPrefix(t, "AWS::StepFunctions::StateMachine", "ConsumerShardLoop")
	ruleID, rule := tmpl.byPrefix(t, "AWS::Events::Rule", "ConsumerFailedExecutions")
	want := raw(t, `{
		"source": ["aws.states"],
		"detail-type": ["Step Functions Execution Status Change"],
		"detail": {"stateMachineArn": [{"Ref": "`+machineID+`"}], "status": ["FAILED", "TIMED_OUT", "ABORTED"]}
	}`)
	if got := canon(t, rule.Properties["EventPattern"]); got != canon(t, want) {
		t.Errorf("event pattern\n got %s\nwant %s", got, canon(t, want))
	}
	if rule.Properties["ScheduleExpression"] != nil || rule.Properties["State"] != "ENABLED" {
		t.Errorf("rule = %s, want an enabled pattern rule", canon(t, rule.Properties))
	}
	targets := rule.Properties["Targets"].([]any)
	if len(targets) != 1 {
		t.Fatalf("targets: %v", targets)
	}
	target := targets[0].(map[string]any)
	if got, want := canon(t, target["Arn"]), canon(t, map[string]any{"Fn::GetAtt": []any{coordinatorID, "Arn"}}); got != want {
		t.Errorf("target = %s, want %s", got, want)
	}
	if got := canon(t, target["RetryPolicy"]); got != `{"MaximumEventAgeInSeconds":300,"MaximumRetryAttempts":2}` {
		t.Errorf("retry policy = %s", got)
	}
	var sources []string
	for _, id := range tmpl.ofType("AWS::Lambda::Permission") {
		p := tmpl.Resources[id].Properties
		if canon(t, p["FunctionName"]) != canon(t, map[string]any{"Fn::GetAtt": []any{coordinatorID, "Arn"}}) || p["Principal"] != "events.amazonaws.com" {
			t.Errorf("permission %s = %s, want events.amazonaws.com on the coordinator", id, canon(t, p))
		}
		sources = append(sources, canon(t, p["SourceArn"]))
	}
	if !slices.Contains(sources, canon(t, map[string]any{"Fn::GetAtt": []any{ruleID, "Arn"}})) {
		t.Errorf("permission sources %v lack the rule %s", sources, ruleID)
	}
}

// The per-shard lag metric is off by default; on, the shardreader publishes
// it and the dashboard graphs it, while the Lag alarm keeps reading the
// stream's maximum.
func TestPerShardLagMetric_TurnsOnThePerShardMetricAndItsGraph(t *testing.T) {
	if strings.Contains(string(defaultRaw), "SEARCH(") {
		t.Error("the default dashboard searches per-shard metrics that are not published")
	}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	stack := newTestStack(app, "S")
	p := baseProps(t)
	p.PerShardLagMetric = true
	if _, err := NewConsumer(stack, "C", &p); err != nil {
		t.Fatal(err)
	}
	var tmpl cfn
	if err := json.Unmarshal(templateJSON(t, stack), &tmpl); err != nil {
		t.Fatal(err)
	}
	_, reader := tmpl.byPrefix(t, "AWS::Lambda::Function", "CShardReader")
	if env := canon(t, reader.Properties["Environment"]); !strings.Contains(env, `"SHARDLOOP_PER_SHARD_LAG":"true"`) {
		t.Errorf("shardreader environment %s lacks SHARDLOOP_PER_SHARD_LAG=true", env)
	}
	_, dash := tmpl.byPrefix(t, "AWS::CloudWatch::Dashboard", "CDashboard")
	body := canon(t, dash.Properties["DashboardBody"])
	if !strings.Contains(body, `SEARCH('{Shardloop,Stream,Shard} MetricName=\\\"MillisBehindLatest\\\" Stream=\\\"orders\\\"', 'Maximum', 60)`) {
		t.Errorf("dashboard has no per-shard lag search: %s", body)
	}
	_, lag := tmpl.byPrefix(t, "AWS::CloudWatch::Alarm", "CLagAlarm")
	if got := canon(t, lag.Properties["Dimensions"]); got != `[{"Name":"Stream","Value":"orders"}]` {
		t.Errorf("lag alarm dimensions %s, want the stream's alone", got)
	}
}

// statement is an IAM statement reduced to what least privilege is about.
type statement struct {
	Sid       string
	Actions   []string
	Resources []string // canonical JSON of each resource
}

// rolePolicy collects every statement granted to the role with the id prefix:
// its inline policies, attached AWS::IAM::Policy resources, managed policies.
func rolePolicy(t *testing.T, tmpl cfn, rolePrefix string) []statement {
	t.Helper()
	roleID, role := tmpl.byPrefix(t, "AWS::IAM::Role", rolePrefix)
	if role.Properties["ManagedPolicyArns"] != nil || role.Properties["Policies"] != nil {
		t.Errorf("%s: managed or inline policies %v %v, want none", rolePrefix, role.Properties["ManagedPolicyArns"], role.Properties["Policies"])
	}
	var out []statement
	for _, id := range tmpl.ofType("AWS::IAM::Policy") {
		p := tmpl.Resources[id].Properties
		if !strings.Contains(canon(t, p["Roles"]), `"`+roleID+`"`) {
			continue
		}
		for _, s := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			s := s.(map[string]any)
			if s["Effect"] != "Allow" {
				t.Errorf("%s: statement %v is not Allow", rolePrefix, s)
			}
			st := statement{Sid: str(s["Sid"])}
			for _, a := range list(s["Action"]) {
				st.Actions = append(st.Actions, a.(string))
			}
			for _, r := range list(s["Resource"]) {
				st.Resources = append(st.Resources, canon(t, r))
			}
			sort.Strings(st.Actions)
			out = append(out, st)
		}
	}
	for _, id := range tmpl.ofType("AWS::IAM::ManagedPolicy") {
		if strings.Contains(canon(t, tmpl.Resources[id].Properties["Roles"]), `"`+roleID+`"`) {
			t.Errorf("%s: managed policy %s attached", rolePrefix, id)
		}
	}
	return out
}

func list(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return []any{v}
}

func str(v any) string { s, _ := v.(string); return s }

func TestRoles_GrantExactlyTheActionsAndResourcesEachPartNeeds(t *testing.T) {
	tmpl := defaultTemplate(t)
	tableID, _ := tmpl.byPrefix(t, "AWS::DynamoDB::Table", "ConsumerLeaseTable")
	machineID, machine := tmpl.byPrefix(t, "AWS::StepFunctions::StateMachine", "ConsumerShardLoop")
	readerID, _ := tmpl.byPrefix(t, "AWS::Lambda::Function", "ConsumerShardReader")
	_, coordinator := tmpl.byPrefix(t, "AWS::Lambda::Function", "ConsumerCoordinator")
	readerLogs, _ := tmpl.byPrefix(t, "AWS::Logs::LogGroup", "ConsumerShardReaderLogs")
	coordinatorLogs, _ := tmpl.byPrefix(t, "AWS::Logs::LogGroup", "ConsumerCoordinatorLogs")

	join := func(rest string) string {
		return canon(t, map[string]any{"Fn::Join": []any{"", []any{"arn:", map[string]any{"Ref": "AWS::Partition"}, rest}}})
	}
	getAtt := func(id string) string { return canon(t, map[string]any{"Fn::GetAtt": []any{id, "Arn"}}) }
	stream := join(":kinesis:eu-west-1:123456789012:stream/orders")
	table := getAtt(tableID)
	coordinatorArn := join(":lambda:eu-west-1:123456789012:function:" + coordinator.Properties["FunctionName"].(string))
	ownArn := join(":states:eu-west-1:123456789012:stateMachine:" + machine.Properties["StateMachineName"].(string))
	target := canon(t, testTarget)

	for _, tc := range []struct {
		role string
		want []statement
	}{
		{"ConsumerShardReaderRole", []statement{
			{"ReadStream", []string{"kinesis:DescribeStreamSummary", "kinesis:GetRecords", "kinesis:GetShardIterator", "kinesis:ListShards"}, []string{stream}},
			{"Leases", []string{"dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"}, []string{table}},
			{"InvokeTargetAndNudgeCoordinator", []string{"lambda:InvokeFunction"}, []string{target, coordinatorArn}},
			{"ReadTargetTimeout", []string{"lambda:GetFunctionConfiguration"}, []string{target}},
			{"Logs", []string{"logs:CreateLogStream", "logs:PutLogEvents"}, []string{getAtt(readerLogs)}},
		}},
		{"ConsumerCoordinatorRole", []statement{
			{"ListShards", []string{"kinesis:DescribeStreamSummary", "kinesis:ListShards"}, []string{stream}},
			{"CountSkippedBacklog", []string{"kinesis:GetRecords", "kinesis:GetShardIterator"}, []string{stream}},
			{"Leases", []string{"dynamodb:BatchGetItem", "dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:Scan", "dynamodb:UpdateItem"}, []string{table}},
			{"StartShardLoops", []string{"states:StartExecution"}, []string{canon(t, map[string]any{"Ref": machineID})}},
			{"ReadOwnDeployTime", []string{"lambda:GetFunctionConfiguration"}, []string{coordinatorArn}},
			{"Logs", []string{"logs:CreateLogStream", "logs:PutLogEvents"}, []string{getAtt(coordinatorLogs)}},
		}},
		{"ConsumerShardLoopRole", []statement{
			{"InvokeShardReader", []string{"lambda:InvokeFunction"}, []string{getAtt(readerID)}},
			{"ContinueAsNew", []string{"states:StartExecution"}, []string{ownArn}},
			// Log delivery for execution logging: these APIs take no
			// resource, so "*" is their only form.
			{"", []string{"logs:CreateLogDelivery", "logs:DeleteLogDelivery", "logs:DescribeLogGroups", "logs:DescribeResourcePolicies", "logs:GetLogDelivery", "logs:ListLogDeliveries", "logs:PutResourcePolicy", "logs:UpdateLogDelivery"}, []string{`"*"`}},
		}},
	} {
		got := rolePolicy(t, tmpl, tc.role)
		if !reflect.DeepEqual(got, tc.want) {
			g, _ := json.MarshalIndent(got, "", " ")
			w, _ := json.MarshalIndent(tc.want, "", " ")
			t.Errorf("%s statements\n got %s\nwant %s", tc.role, g, w)
		}
		for _, s := range got {
			for _, a := range s.Actions {
				if strings.Contains(a, "*") {
					t.Errorf("%s: wildcard action %s", tc.role, a)
				}
			}
		}
	}
	if n := len(tmpl.ofType("AWS::IAM::Role")); n != 3 {
		t.Errorf("roles: %d, want 3 (coordinator, shardreader, state machine)", n)
	}
}

func TestStateMachine_DefinitionIsTheASLFileWithTheShardReaderSubstituted(t *testing.T) {
	tmpl := defaultTemplate(t)
	readerID, _ := tmpl.byPrefix(t, "AWS::Lambda::Function", "ConsumerShardReader")
	_, machine := tmpl.byPrefix(t, "AWS::StepFunctions::StateMachine", "ConsumerShardLoop")
	file, err := os.ReadFile(definitionFile(t))
	if err != nil {
		t.Fatal(err)
	}
	p := machine.Properties
	if p["DefinitionString"] != string(file) {
		t.Fatalf("DefinitionString is not the bytes of %s:\n%v", DefinitionFileRel, p["DefinitionString"])
	}
	subs := canon(t, p["DefinitionSubstitutions"])
	if want := canon(t, map[string]any{"ShardReaderArn": map[string]any{"Fn::GetAtt": []any{readerID, "Arn"}}}); subs != want {
		t.Errorf("DefinitionSubstitutions = %s, want %s", subs, want)
	}
	if p["StateMachineType"] != "STANDARD" {
		t.Errorf("StateMachineType = %v, want STANDARD", p["StateMachineType"])
	}
	if lc := canon(t, p["LoggingConfiguration"]); !strings.Contains(lc, `"Level":"ERROR"`) || !strings.Contains(lc, `"IncludeExecutionData":false`) {
		t.Errorf("LoggingConfiguration = %s, want ERROR without execution data", lc)
	}

	// After substitution the definition is the loop: Read -> Decide ->
	// (Read | ContinueAsNew -> Done | Done).
	const readerArn = "arn:aws:lambda:eu-west-1:123456789012:function:reader"
	var asl struct {
		StartAt string
		States  map[string]struct {
			Type       string
			Resource   string
			Parameters map[string]any
			OutputPath string
			Retry      []struct{ ErrorEquals []string }
			Next       string
			Default    string
			Choices    []struct{ Next string }
		}
	}
	if err := json.Unmarshal([]byte(strings.ReplaceAll(string(file), "${ShardReaderArn}", readerArn)), &asl); err != nil {
		t.Fatalf("definition after substitution is not JSON: %v", err)
	}
	read, decide, again := asl.States["Read"], asl.States["Decide"], asl.States["ContinueAsNew"]
	if asl.StartAt != "Read" || read.Resource != "arn:aws:states:::lambda:invoke" || read.Parameters["FunctionName"] != readerArn ||
		read.Parameters["Payload.$"] != "$" || read.OutputPath != "$.Payload" || read.Next != "Decide" {
		t.Errorf("Read state = %+v", read)
	}
	retried := map[string]bool{}
	for _, r := range read.Retry {
		for _, e := range r.ErrorEquals {
			retried[e] = true
		}
	}
	for _, e := range []string{"Lambda.ServiceException", "Lambda.AWSLambdaException", "Lambda.SdkClientException", "Lambda.TooManyRequestsException"} {
		if !retried[e] {
			t.Errorf("Read does not retry %s", e)
		}
	}
	if decide.Type != "Choice" || len(decide.Choices) != 2 || decide.Choices[0].Next != "ContinueAsNew" || decide.Choices[1].Next != "Read" || decide.Default != "Done" {
		t.Errorf("Decide state = %+v", decide)
	}
	if again.Resource != "arn:aws:states:::states:startExecution" || again.Parameters["StateMachineArn.$"] != "$$.StateMachine.Id" ||
		again.Parameters["Input.$"] != "$" || again.Next != "Done" || asl.States["Done"].Type != "Succeed" {
		t.Errorf("ContinueAsNew state = %+v", again)
	}
}

func TestAlarms_WatchTargetErrorsLagAndFailedExecutions(t *testing.T) {
	tmpl := defaultTemplate(t)
	machineID, _ := tmpl.byPrefix(t, "AWS::StepFunctions::StateMachine", "ConsumerShardLoop")
	for _, tc := range []struct {
		prefix, namespace, metric, dims string
		threshold                       float64
	}{
		{"ConsumerTargetErrorsAlarm", "Shardloop", "TargetErrors", `[{"Name":"Stream","Value":"orders"}]`, 1},
		{"ConsumerGivenUpBatchesAlarm", "Shardloop", "GivenUpBatches", `[{"Name":"Stream","Value":"orders"}]`, 1},
		{"ConsumerLagAlarm", "Shardloop", "MillisBehindLatest", `[{"Name":"Stream","Value":"orders"}]`, 300000},
		{"ConsumerExecutionsFailedAlarm", "AWS/States", "ExecutionsFailed", `[{"Name":"StateMachineArn","Value":{"Ref":"` + machineID + `"}}]`, 1},
		{"ConsumerStreamNotFoundAlarm", "Shardloop", "StreamNotFound", `[{"Name":"Stream","Value":"orders"}]`, 1},
		{"ConsumerStaleConfigurationAlarm", "Shardloop", "StaleConfiguration", `[{"Name":"Stream","Value":"orders"}]`, 1},
		{"ConsumerBacklogSkippedAlarm", "Shardloop", "BacklogSkipped", `[{"Name":"Stream","Value":"orders"}]`, 1},
		{"ConsumerDroppedEventCountAlarm", "Shardloop", "DroppedEventCount", `[{"Name":"Stream","Value":"orders"}]`, 1},
	} {
		_, a := tmpl.byPrefix(t, "AWS::CloudWatch::Alarm", tc.prefix)
		p := a.Properties
		if p["Namespace"] != tc.namespace || p["MetricName"] != tc.metric || canon(t, p["Dimensions"]) != tc.dims || p["Threshold"] != tc.threshold {
			t.Errorf("%s: %s/%s %s >= %v, want %s/%s %s >= %v", tc.prefix, p["Namespace"], p["MetricName"], canon(t, p["Dimensions"]), p["Threshold"],
				tc.namespace, tc.metric, tc.dims, tc.threshold)
		}
	}
	if len(tmpl.ofType("AWS::CloudWatch::Dashboard")) != 1 {
		t.Error("no dashboard")
	}
}

func TestNewConsumer_SecondConsumerOfOneStreamInOneAppFails(t *testing.T) {
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	if _, err := NewConsumer(newTestStack(app, "Blue"), "Orders", ptr(baseProps(t))); err != nil {
		t.Fatal(err)
	}
	// The same stream by ARN, in another stack of the same app.
	p := baseProps(t)
	p.StreamName = "arn:aws:kinesis:eu-west-1:123456789012:stream/orders"
	_, err := NewConsumer(newTestStack(app, "Green"), "Orders", &p)
	if !errors.Is(err, ErrDuplicateStream) || !strings.Contains(err.Error(), "Blue/Orders") {
		t.Fatalf("second consumer: err = %v, want ErrDuplicateStream naming Blue/Orders", err)
	}

	// Another stream, or the same name in another app, is fine.
	p = baseProps(t)
	p.StreamName = "payments"
	if _, err := NewConsumer(newTestStack(app, "Payments"), "Payments", &p); err != nil {
		t.Errorf("other stream: %v", err)
	}
	other := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	if _, err := NewConsumer(newTestStack(other, "Blue"), "Orders", ptr(baseProps(t))); err != nil {
		t.Errorf("same stream in another app: %v", err)
	}
}

func TestNewConsumer_BadPropsFailNamingTheProp(t *testing.T) {
	for _, tc := range []struct {
		prop   string
		change func(*ConsumerProps, awscdk.Stack)
	}{
		{"StreamName", func(p *ConsumerProps, _ awscdk.Stack) { p.StreamName = "" }},
		{"StreamName", func(p *ConsumerProps, _ awscdk.Stack) { p.StreamName = "orders/eu" }},
		{"StreamName", func(p *ConsumerProps, _ awscdk.Stack) { p.StreamName = "arn:aws:kinesis:eu-west-1:123:stream/orders" }},
		{"Stream", func(p *ConsumerProps, s awscdk.Stack) {
			p.Stream = awskinesis.Stream_FromStreamArn(s, jsii.String("S"), jsii.String("arn:aws:kinesis:eu-west-1:123456789012:stream/x"))
		}},
		{"CreateShards", func(p *ConsumerProps, _ awscdk.Stack) { p.CreateShards = -1 }},
		{"TargetFunction", func(p *ConsumerProps, _ awscdk.Stack) { p.TargetFunction = "" }},
		{"TargetFunction", func(p *ConsumerProps, _ awscdk.Stack) {
			p.TargetFunction = "arn:aws:lambda:eu-west-1:123456789012:handle"
		}},
		{"StartingPosition", func(p *ConsumerProps, _ awscdk.Stack) { p.StartingPosition = "trim_horizon" }},
		{"StartingPositionTimestamp", func(p *ConsumerProps, _ awscdk.Stack) {
			p.StartingPosition = awslambda.StartingPosition_AT_TIMESTAMP
		}},
		{"StartingPositionTimestamp", func(p *ConsumerProps, _ awscdk.Stack) { // milliseconds for seconds
			p.StartingPosition, p.StartingPositionTimestamp = awslambda.StartingPosition_AT_TIMESTAMP, 1767225600000
		}},
		{"StartingPositionTimestamp", func(p *ConsumerProps, _ awscdk.Stack) {
			p.StartingPosition, p.StartingPositionTimestamp = awslambda.StartingPosition_LATEST, 1767225600
		}},
		{"StartPosition", func(p *ConsumerProps, _ awscdk.Stack) { p.StartPosition = "trim_horizon" }},
		{"StartPosition", func(p *ConsumerProps, _ awscdk.Stack) { p.StartPosition = "timestamp:yesterday" }},
		{"StartingPosition", func(p *ConsumerProps, _ awscdk.Stack) { // the new prop and its deprecated alias
			p.StartPosition, p.StartingPosition = "horizon", awslambda.StartingPosition_TRIM_HORIZON
		}},
		{"BatchSize", func(p *ConsumerProps, _ awscdk.Stack) { p.BatchSize = 10001 }},
		{"BatchSize", func(p *ConsumerProps, _ awscdk.Stack) { p.BatchSize = -5 }},
		{"ParallelizationFactor", func(p *ConsumerProps, _ awscdk.Stack) { p.ParallelizationFactor = MaxParallelizationFactor + 1 }},
		{"ParallelizationFactor", func(p *ConsumerProps, _ awscdk.Stack) { p.ParallelizationFactor = -1 }},
		{"TumblingWindow", func(p *ConsumerProps, _ awscdk.Stack) { p.TumblingWindow = 901 * time.Second }},
		{"TumblingWindow", func(p *ConsumerProps, _ awscdk.Stack) { p.TumblingWindow = 1500 * time.Millisecond }},
		{"TumblingWindow", func(p *ConsumerProps, _ awscdk.Stack) { p.TumblingWindowInSeconds = 901 }},
		{"TumblingWindow", func(p *ConsumerProps, _ awscdk.Stack) { p.TumblingWindowInSeconds = -1 }},
		{"TumblingWindow", func(p *ConsumerProps, _ awscdk.Stack) { p.TumblingWindowInSeconds, p.TumblingWindow = 60, time.Minute }},
		{"ParallelizationFactor", func(p *ConsumerProps, _ awscdk.Stack) { p.TumblingWindow = time.Minute; p.ParallelizationFactor = 2 }},
		{"PollInterval", func(p *ConsumerProps, _ awscdk.Stack) { p.PollInterval = 50 * time.Millisecond }},
		{"RunLength", func(p *ConsumerProps, _ awscdk.Stack) { p.RunLength = 15 * time.Minute }},
		{"RunLength", func(p *ConsumerProps, _ awscdk.Stack) { p.RunLength = 1500 * time.Millisecond }},
		{"MaxIterations", func(p *ConsumerProps, _ awscdk.Stack) { p.MaxIterations = 5000 }},
		{"ReadAheadMiB", func(p *ConsumerProps, _ awscdk.Stack) { p.ReadAheadMiB = 2048 }},
		{"Window", func(p *ConsumerProps, _ awscdk.Stack) { p.Window = 1500 * time.Millisecond }},
		{"Window", func(p *ConsumerProps, _ awscdk.Stack) { p.Window = 15 * time.Minute }},
		{"Window", func(p *ConsumerProps, _ awscdk.Stack) { p.Window = -time.Second }},
		{"ShardReaderMemoryMiB", func(p *ConsumerProps, _ awscdk.Stack) { p.ShardReaderMemoryMiB = 64 }},
		{"LeaseTableName", func(p *ConsumerProps, _ awscdk.Stack) { p.LeaseTableName = "x" }},
		{"LeaseTable", func(p *ConsumerProps, _ awscdk.Stack) { p.LeaseTableName = "leases"; p.DisableLeaseTablePITR = true }},
		{"DefinitionFile", func(p *ConsumerProps, _ awscdk.Stack) { p.DefinitionFile = "/nonexistent/statemachine.asl.json" }},
		{"RetryAttempts", func(p *ConsumerProps, _ awscdk.Stack) { p.RetryAttempts = RetryAttempts(10001) }},
		{"RetryAttempts", func(p *ConsumerProps, _ awscdk.Stack) { p.MaxRetryAttempts = RetryAttempts(-2) }},
		{"RetryAttempts", func(p *ConsumerProps, _ awscdk.Stack) {
			p.MaxRetryAttempts, p.RetryAttempts = RetryAttempts(2), RetryAttempts(2)
		}},
		{"MaxRecordAge", func(p *ConsumerProps, _ awscdk.Stack) { p.MaxRecordAge = 30 * time.Second }},
		{"MaxRecordAge", func(p *ConsumerProps, _ awscdk.Stack) { p.MaxRecordAge = 8 * 24 * time.Hour }},
		{"MaxBatchingWindow", func(p *ConsumerProps, _ awscdk.Stack) { p.MaxBatchingWindow = 301 * time.Second }},
		{"MaxBatchingWindow", func(p *ConsumerProps, _ awscdk.Stack) { p.RunLength, p.MaxBatchingWindow = time.Minute, time.Minute }}, // = RunLength
		{"MaxBatchingWindow", func(p *ConsumerProps, _ awscdk.Stack) { p.BatchingWindow = 301 * time.Second }},
		{"MaxBatchingWindow", func(p *ConsumerProps, _ awscdk.Stack) {
			p.BatchingWindow, p.MaxBatchingWindow = time.Second, time.Second
		}},
		{"OnFailureDestination", func(p *ConsumerProps, _ awscdk.Stack) { p.OnFailureDestination = "arn:aws:s3:::Not_A_Bucket" }},
		{"OnFailureDestination", func(p *ConsumerProps, _ awscdk.Stack) {
			p.OnFailureDestination = "arn:aws:s3:eu-west-1:123456789012:bucket"
		}},
		{"OnFailureDestination", func(p *ConsumerProps, _ awscdk.Stack) {
			p.OnFailureDestination = "arn:aws:sqs:eu-west-1:123456789012:failed.fifo"
		}},
		{"OnFailure", func(p *ConsumerProps, s awscdk.Stack) {
			p.OnFailureDestination = "arn:aws:sqs:eu-west-1:123456789012:failed"
			p.OnFailureTopic = awssns.Topic_FromTopicArn(s, jsii.String("T"), jsii.String("arn:aws:sns:eu-west-1:123456789012:failed"))
		}},
		{"OnFailure", func(p *ConsumerProps, s awscdk.Stack) {
			p.OnFailureDestination = "arn:aws:sqs:eu-west-1:123456789012:failed"
			p.OnFailure = awslambdaeventsources.NewSnsDlq(awssns.Topic_FromTopicArn(s, jsii.String("T"), jsii.String("arn:aws:sns:eu-west-1:123456789012:failed")))
		}},
	} {
		t.Run(tc.prop, func(t *testing.T) {
			app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
			stack := newTestStack(app, "S")
			p := baseProps(t)
			tc.change(&p, stack)
			c, err := NewConsumer(stack, "C", &p)
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), "shardloop: "+tc.prop+": ") {
				t.Fatalf("err = %v, want a ConfigError naming %s", err, tc.prop)
			}
			if c != nil || len(*stack.Node().Children()) > 1 { // the imported stream of case Stream
				t.Errorf("a rejected consumer left constructs behind")
			}
		})
	}
}

func TestNewConsumer_ProjectRootWithoutBootstrapsSaysRunMakeBuild(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(root+"/template", 0o755); err != nil {
		t.Fatal(err)
	}
	file, _ := os.ReadFile(definitionFile(t))
	if err := os.WriteFile(root+"/"+DefinitionFileRel, file, 0o644); err != nil {
		t.Fatal(err)
	}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	_, err := NewConsumer(newTestStack(app, "S"), "C", &ConsumerProps{StreamName: "orders", TargetFunction: "handle-orders", ProjectRoot: root})
	for _, want := range []string{"CoordinatorCode: " + root + "/build/coordinator/bootstrap is missing: run make build", "ShardReaderCode: " + root + "/build/shardreader/bootstrap is missing: run make build"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to say %q", err, want)
		}
	}
}

func TestNewConsumer_CreatedStreamExistingTableAndTargetFunction(t *testing.T) {
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	stack := newTestStack(app, "S")
	p := baseProps(t)
	p.StreamName, p.CreateShards = "clicks", 4
	p.LeaseTableName = "shared-leases"
	p.TargetFunction = "handle-clicks:live"
	p.StartPosition = "timestamp:1767225600000"
	p.PollInterval, p.RunLength, p.MaxIterations = 500*time.Millisecond, 5*time.Minute, 200
	if _, err := NewConsumer(stack, "C", &p); err != nil {
		t.Fatal(err)
	}
	var tmpl cfn
	if err := json.Unmarshal(templateJSON(t, stack), &tmpl); err != nil {
		t.Fatal(err)
	}
	_, s := tmpl.byPrefix(t, "AWS::Kinesis::Stream", "CStream")
	if s.Properties["ShardCount"] != float64(4) || s.Properties["Name"] != "clicks" || canon(t, s.Properties["StreamModeDetails"]) != `{"StreamMode":"PROVISIONED"}` {
		t.Errorf("stream = %s", canon(t, s.Properties))
	}
	if n := len(tmpl.ofType("AWS::DynamoDB::Table")); n != 0 {
		t.Errorf("%d tables created, want none (existing table)", n)
	}
	_, reader := tmpl.byPrefix(t, "AWS::Lambda::Function", "CShardReader")
	env := canon(t, reader.Properties["Environment"])
	for _, want := range []string{
		`"SHARDLOOP_LEASE_TABLE":"shared-leases"`,
		`"SHARDLOOP_POLL_INTERVAL":"500ms"`, `"SHARDLOOP_RUN_LENGTH":"300s"`, `"SHARDLOOP_MAX_ITERATIONS":"200"`,
		`:lambda:eu-west-1:123456789012:function:handle-clicks:live"`,
	} {
		if !strings.Contains(env, want) {
			t.Errorf("shardreader environment %s lacks %s", env, want)
		}
	}
	if reader.Properties["Timeout"] != float64(360) {
		t.Errorf("shardreader timeout = %v, want run length + 60 s = 360", reader.Properties["Timeout"])
	}
	_, coordinator := tmpl.byPrefix(t, "AWS::Lambda::Function", "CCoordinator")
	if !strings.Contains(canon(t, coordinator.Properties["Environment"]), `"SHARDLOOP_START_POSITION":"timestamp:1767225600000"`) {
		t.Errorf("coordinator environment = %s", canon(t, coordinator.Properties["Environment"]))
	}
}

// TestRoles_OnFailureDestinationGrantsOnlySendingToIt checks that the
// shardreader gets exactly the send permission of the destination it is
// given, with the destination in its environment; without one it gets none
// (TestRoles_GrantExactlyTheActionsAndResourcesEachPartNeeds).
func TestRoles_OnFailureDestinationGrantsOnlySendingToIt(t *testing.T) {
	const queueArn = "arn:aws:sqs:eu-west-1:123456789012:orders-failed"
	for _, tc := range []struct {
		name     string
		set      func(*ConsumerProps, awscdk.Stack)
		actions  []string
		arn      func(tmpl cfn) string // canonical env value (and resource, unless resource is set)
		resource func(tmpl cfn) string
	}{
		{"SQSQueueARN", func(p *ConsumerProps, _ awscdk.Stack) { p.OnFailureDestination = queueArn },
			[]string{"sqs:GetQueueUrl", "sqs:SendMessage"}, func(cfn) string { return canon(t, queueArn) }, nil},
		{"SNSTopicConstruct", func(p *ConsumerProps, s awscdk.Stack) {
			p.OnFailureTopic = awssns.NewTopic(s, jsii.String("Failed"), nil)
		}, []string{"sns:Publish"}, func(tmpl cfn) string {
			id, _ := tmpl.byPrefix(t, "AWS::SNS::Topic", "Failed")
			return canon(t, map[string]any{"Ref": id})
		}, nil},
		// A bucket: PutObject on its objects alone.
		{"S3BucketARN", func(p *ConsumerProps, _ awscdk.Stack) { p.OnFailureDestination = "arn:aws:s3:::orders-failed" },
			[]string{"s3:PutObject"}, func(cfn) string { return canon(t, "arn:aws:s3:::orders-failed") },
			func(cfn) string { return canon(t, "arn:aws:s3:::orders-failed/*") }},
		{"S3BucketConstruct", func(p *ConsumerProps, s awscdk.Stack) {
			p.OnFailureBucket = awss3.NewBucket(s, jsii.String("Failed"), nil)
		}, []string{"s3:PutObject"}, func(tmpl cfn) string {
			id, _ := tmpl.byPrefix(t, "AWS::S3::Bucket", "Failed")
			return canon(t, map[string]any{"Fn::GetAtt": []any{id, "Arn"}})
		}, func(tmpl cfn) string {
			id, _ := tmpl.byPrefix(t, "AWS::S3::Bucket", "Failed")
			return canon(t, map[string]any{"Fn::Join": []any{"", []any{map[string]any{"Fn::GetAtt": []any{id, "Arn"}}, "/*"}}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
			stack := newTestStack(app, "S")
			p := baseProps(t)
			p.RetryAttempts, p.MaxRecordAge, p.BisectBatchOnError = RetryAttempts(2), time.Hour, true
			p.MaxBatchingWindow, p.Deaggregate = 5*time.Second, true
			tc.set(&p, stack)
			if _, err := NewConsumer(stack, "C", &p); err != nil {
				t.Fatal(err)
			}
			var tmpl cfn
			if err := json.Unmarshal(templateJSON(t, stack), &tmpl); err != nil {
				t.Fatal(err)
			}
			want, resource := tc.arn(tmpl), tc.arn(tmpl)
			if tc.resource != nil {
				resource = tc.resource(tmpl)
			}
			var found []statement
			for _, s := range rolePolicy(t, tmpl, "CShardReaderRole") {
				if s.Sid == "OnFailureDestination" {
					found = append(found, s)
				}
				for _, a := range s.Actions {
					if strings.HasPrefix(a, "sqs:") || strings.HasPrefix(a, "sns:") || strings.HasPrefix(a, "s3:") {
						if s.Sid != "OnFailureDestination" {
							t.Errorf("statement %s grants %s", s.Sid, a)
						}
					}
				}
			}
			if len(found) != 1 || !reflect.DeepEqual(found[0].Actions, tc.actions) || !reflect.DeepEqual(found[0].Resources, []string{resource}) {
				t.Fatalf("OnFailureDestination statements = %+v, want %v on %s", found, tc.actions, resource)
			}
			if n := len(rolePolicy(t, tmpl, "CCoordinatorRole")); n != 6 {
				t.Errorf("coordinator role has %d statements, want its 6", n)
			}
			_, reader := tmpl.byPrefix(t, "AWS::Lambda::Function", "CShardReader")
			env := canon(t, reader.Properties["Environment"])
			for _, kv := range []string{
				`"SHARDLOOP_ON_FAILURE_DESTINATION":` + want,
				`"SHARDLOOP_MAX_RETRY_ATTEMPTS":"2"`, `"SHARDLOOP_MAX_RECORD_AGE":"3600s"`, `"SHARDLOOP_BISECT_ON_ERROR":"true"`,
				`"SHARDLOOP_BATCHING_WINDOW":"5s"`, `"SHARDLOOP_DEAGGREGATE":"true"`,
			} {
				if !strings.Contains(env, kv) {
					t.Errorf("shardreader environment %s lacks %s", env, kv)
				}
			}
		})
	}
}

// Without a window the coordinator's timeout leaves room for a watch after
// a failed loop (the run length and two leases); with one, for the window
// too, whichever is longer, within Lambda's 15 minutes.
func TestWindow_IsOptionalAndTheCoordinatorsTimeoutFitsAWatchAndTheWindow(t *testing.T) {
	for _, tc := range []struct {
		window, run time.Duration
		timeout     float64
		env         string
	}{
		{0, 0, 635, "0s"},
		{55 * time.Second, 30 * time.Second, 70, "55s"},
		{5 * time.Minute, 30 * time.Second, 315, "300s"},
		{14 * time.Minute, 14 * time.Minute, 875, "840s"},
	} {
		app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
		stack := newTestStack(app, "S")
		p := baseProps(t)
		p.Window, p.RunLength = tc.window, tc.run
		if _, err := NewConsumer(stack, "C", &p); err != nil {
			t.Fatal(err)
		}
		var tmpl cfn
		if err := json.Unmarshal(templateJSON(t, stack), &tmpl); err != nil {
			t.Fatal(err)
		}
		_, coordinator := tmpl.byPrefix(t, "AWS::Lambda::Function", "CCoordinator")
		env := canon(t, coordinator.Properties["Environment"])
		if coordinator.Properties["Timeout"] != tc.timeout || !strings.Contains(env, `"SHARDLOOP_WINDOW":"`+tc.env+`"`) {
			t.Errorf("window %v, run %v: timeout %v, environment %s; want %v and SHARDLOOP_WINDOW=%s", tc.window, tc.run,
				coordinator.Properties["Timeout"], env, tc.timeout, tc.env)
		}
	}
}

func TestPropsFromContext_FailurePolicyKeys(t *testing.T) {
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir()), Context: &map[string]any{
		CtxMaxRetryAttempts: "3", CtxMaxRecordAge: "2h", CtxBisectOnError: "true",
		CtxOnFailure: "arn:aws:sns:eu-west-1:123456789012:failed", CtxBatchingWindow: "10s", CtxDeaggregate: "true",
		CtxPerShardLag: "true", CtxWindow: "0s", CtxReadAheadMiB: "64",
	}})
	p, err := PropsFromContext(app.Node())
	if err != nil {
		t.Fatal(err)
	}
	if p.RetryAttempts == nil || *p.RetryAttempts != 3 || p.MaxRecordAge != 2*time.Hour || !p.BisectBatchOnError ||
		p.OnFailureDestination != "arn:aws:sns:eu-west-1:123456789012:failed" || p.MaxBatchingWindow != 10*time.Second || !p.Deaggregate ||
		!p.PerShardLagMetric || p.Window != 0 || p.ReadAheadMiB != 64 {
		t.Fatalf("props = %+v", p)
	}
	defaults := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir()), Context: &map[string]any{
		CtxMaxRetryAttempts: "-1", CtxMaxRecordAge: "-1", CtxBisectOnError: "false", CtxOnFailure: "", CtxBatchingWindow: "0s",
	}})
	if p, err = PropsFromContext(defaults.Node()); err != nil || p.MaxRecordAge != 0 || p.OnFailureDestination != "" || p.MaxBatchingWindow != 0 {
		t.Fatalf("cdk.json defaults: %+v, %v", p, err)
	}
	bad := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir()), Context: &map[string]any{CtxBisectOnError: "yes please"}})
	if _, err := PropsFromContext(bad.Node()); err == nil || !strings.Contains(err.Error(), CtxBisectOnError) {
		t.Fatalf("bad boolean: err = %v, want one naming %s", err, CtxBisectOnError)
	}
}

func ptr[T any](v T) *T { return &v }

// ParallelizationFactor reaches the shardreader as
// SHARDLOOP_PARALLELIZATION_FACTOR, from the prop or the context key, within
// the reader's own bounds.
func TestNewConsumer_ParallelizationFactorReachesTheShardReader(t *testing.T) {
	if MaxParallelizationFactor != 10 || DefaultParallelizationFactor != 1 {
		t.Fatalf("bounds %d..%d, want Lambda's 1..10", DefaultParallelizationFactor, MaxParallelizationFactor)
	}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	stack := newTestStack(app, "S")
	p := baseProps(t)
	p.ParallelizationFactor = 4
	if _, err := NewConsumer(stack, "C", &p); err != nil {
		t.Fatal(err)
	}
	var tmpl cfn
	if err := json.Unmarshal(templateJSON(t, stack), &tmpl); err != nil {
		t.Fatal(err)
	}
	_, reader := tmpl.byPrefix(t, "AWS::Lambda::Function", "CShardReader")
	if env := canon(t, reader.Properties["Environment"]); !strings.Contains(env, `"SHARDLOOP_PARALLELIZATION_FACTOR":"4"`) {
		t.Errorf("shardreader environment %s lacks SHARDLOOP_PARALLELIZATION_FACTOR 4", env)
	}
	ctx := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir()), Context: &map[string]any{CtxParallelization: "7"}})
	if cp, err := PropsFromContext(ctx.Node()); err != nil || cp.ParallelizationFactor != 7 {
		t.Errorf("context %s=7: %+v, %v", CtxParallelization, cp.ParallelizationFactor, err)
	}
	bad := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir()), Context: &map[string]any{CtxParallelization: "many"}})
	if _, err := PropsFromContext(bad.Node()); err == nil || !strings.Contains(err.Error(), CtxParallelization) {
		t.Errorf("context %s=many: err = %v, want one naming the key", CtxParallelization, err)
	}
}

// TumblingWindowInSeconds reaches the shardreader as
// SHARDLOOP_TUMBLING_WINDOW_SECONDS, from the prop or the context key.
func TestNewConsumer_TumblingWindowInSecondsReachesTheShardReader(t *testing.T) {
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	stack := newTestStack(app, "S")
	p := baseProps(t)
	p.TumblingWindowInSeconds = 120
	if _, err := NewConsumer(stack, "C", &p); err != nil {
		t.Fatal(err)
	}
	var tmpl cfn
	if err := json.Unmarshal(templateJSON(t, stack), &tmpl); err != nil {
		t.Fatal(err)
	}
	_, reader := tmpl.byPrefix(t, "AWS::Lambda::Function", "CShardReader")
	if env := canon(t, reader.Properties["Environment"]); !strings.Contains(env, `"SHARDLOOP_TUMBLING_WINDOW_SECONDS":"120"`) {
		t.Errorf("shardreader environment %s lacks SHARDLOOP_TUMBLING_WINDOW_SECONDS 120", env)
	}
	ctx := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir()), Context: &map[string]any{CtxTumblingWindow: "60"}})
	if cp, err := PropsFromContext(ctx.Node()); err != nil || cp.TumblingWindow != time.Minute {
		t.Errorf("context %s=60: %+v, %v", CtxTumblingWindow, cp.TumblingWindow, err)
	}
}
