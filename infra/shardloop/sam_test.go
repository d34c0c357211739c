package shardloop

import (
	"bufio"
	"debug/buildinfo"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardloop/shardloop/internal/handlers"
	"github.com/shardloop/shardloop/internal/lambdaenv"
)

func samTemplate(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "template", "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// samParam returns a field (Default, MinValue, ...) of a parameter of the
// SAM template, as written.
func samParam(t *testing.T, sam, name, field string) string {
	t.Helper()
	in := false
	sc := bufio.NewScanner(strings.NewReader(sam))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "  "+name+":":
			in = true
		case in && strings.HasPrefix(line, "    "+field+": "):
			return strings.Trim(strings.TrimPrefix(line, "    "+field+": "), `"`)
		case in && !strings.HasPrefix(line, "    "):
			in = false
		}
	}
	t.Fatalf("template/template.yaml: parameter %s has no %s", name, field)
	return ""
}

// The SAM template's defaults and bounds are the functions' (internal/
// lambdaenv), written out because CloudFormation cannot compute them.
func TestSAMTemplate_DefaultsAndTimeoutsAreTheFunctions(t *testing.T) {
	sam := samTemplate(t)
	secs := func(d time.Duration) string { return strconv.Itoa(int(d / time.Second)) }
	for _, tc := range []struct{ param, field, want string }{
		{"RunLengthSeconds", "Default", secs(lambdaenv.DefaultRunLength)},
		{"RunLengthSeconds", "MinValue", secs(lambdaenv.MinRunLength)},
		{"RunLengthSeconds", "MaxValue", secs(lambdaenv.MaxRunLength)},
		{"ShardReaderTimeoutSeconds", "Default", secs(lambdaenv.ShardReaderTimeout(lambdaenv.DefaultRunLength))},
		{"ShardReaderTimeoutSeconds", "MinValue", secs(lambdaenv.ShardReaderTimeout(lambdaenv.MinRunLength))},
		{"CoordinatorTimeoutSeconds", "Default", secs(lambdaenv.CoordinatorTimeout(lambdaenv.DefaultWindow, lambdaenv.DefaultRunLength))},
		{"CoordinatorTimeoutSeconds", "MinValue", secs(lambdaenv.CoordinatorTimeout(lambdaenv.MinWindow, lambdaenv.MinRunLength))},
		{"Window", "Default", "0s"},
		{"PerShardLagMetric", "Default", "false"},
		{"MaxIterations", "Default", strconv.Itoa(lambdaenv.DefaultMaxIterations)},
		{"MaxIterations", "MaxValue", strconv.Itoa(lambdaenv.MaxIterations)},
		{"BatchSize", "Default", strconv.Itoa(lambdaenv.DefaultBatchSize)},
		{"BatchSize", "MaxValue", strconv.Itoa(lambdaenv.MaxBatchSize)},
		{"MaxRetryAttempts", "MaxValue", strconv.Itoa(lambdaenv.MaxRetryAttempts)},
		{"ReadAheadMiB", "Default", strconv.Itoa(lambdaenv.DefaultReadAheadMiB)},
		{"ReadAheadMiB", "MinValue", strconv.Itoa(lambdaenv.MinReadAheadMiB)},
		{"ReadAheadMiB", "MaxValue", strconv.Itoa(lambdaenv.MaxReadAheadMiB)},
	} {
		if got := samParam(t, sam, tc.param, tc.field); got != tc.want {
			t.Errorf("parameter %s %s = %s, want %s", tc.param, tc.field, got, tc.want)
		}
	}
	for _, want := range []string{
		"Timeout: !Ref CoordinatorTimeoutSeconds",
		"SHARDLOOP_WINDOW: !Ref Window",
		"SHARDLOOP_PER_SHARD_LAG: !Ref PerShardLagMetric",
		"SHARDLOOP_READ_AHEAD_MIB: !Ref ReadAheadMiB",
	} {
		if !strings.Contains(sam, want) {
			t.Errorf("template/template.yaml lacks %q", want)
		}
	}
}

// The SAM template runs the coordinator for the shard loop's failed
// executions with the rule the construct has: this state machine, the
// three statuses.
func TestSAMTemplate_RunsTheCoordinatorForTheShardLoopsFailedExecutions(t *testing.T) {
	sam := samTemplate(t)
	want := "          Type: EventBridgeRule\n          Properties:\n            Pattern:\n" +
		"              source: [" + handlers.ExecutionSource + "]\n" +
		"              detail-type: [" + handlers.ExecutionStatusDetailType + "]\n" +
		"              detail:\n                stateMachineArn: [!Ref ShardLoop]\n" +
		"                status: [" + strings.Join(handlers.FailedStatuses, ", ") + "]\n"
	if !strings.Contains(sam, want) {
		t.Errorf("template/template.yaml lacks the failed-executions rule:\n%s", want)
	}
}

// The SAM template must load the same ASL file as the construct, with the
// same substitution.
func TestSAMTemplate_LoadsTheSameASLFileWithTheSameSubstitution(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "template", "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sam := string(b)
	for _, want := range []string{
		"Type: AWS::Serverless::StateMachine",
		"DefinitionUri: " + filepath.Base(DefinitionFileRel),
		"DefinitionSubstitutions:\n        " + ShardReaderSubstitution + ": !GetAtt ShardReaderFunction.Arn",
		"AttributeName: lease_key",
		"Schedule: rate(1 minute)",
	} {
		if !strings.Contains(sam, want) {
			t.Errorf("template/template.yaml lacks %q", want)
		}
	}
	if strings.Contains(sam, "Definition:") || strings.Contains(sam, "DefinitionString") {
		t.Error("template/template.yaml defines the state machine inline; it must load " + DefinitionFileRel)
	}
}

// The SAM template passes the failure policy to the shardreader, as the
// construct does, and grants sending to the on-failure destination only
// under a condition that it is set.
func TestSAMTemplate_PassesTheFailurePolicyAndGrantsTheDestinationOnlyWhenSet(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "template", "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sam := string(b)
	for _, want := range []string{
		"SHARDLOOP_MAX_RETRY_ATTEMPTS: !Ref MaxRetryAttempts",
		"SHARDLOOP_MAX_RECORD_AGE: !Ref MaxRecordAge",
		"SHARDLOOP_BISECT_ON_ERROR: !Ref BisectOnError",
		"SHARDLOOP_ON_FAILURE_DESTINATION: !If [HasOnFailure, !Ref OnFailureDestination, !Ref AWS::NoValue]",
		"SHARDLOOP_BATCHING_WINDOW: !Ref BatchingWindow",
		"SHARDLOOP_DEAGGREGATE: !Ref Deaggregate",
		"- OnFailureToQueue\n              - Sid: OnFailureDestination\n                Effect: Allow\n                Action: [sqs:GetQueueUrl, sqs:SendMessage]",
		"- OnFailureToTopic\n              - Sid: OnFailureDestination\n                Effect: Allow\n                Action: sns:Publish",
		"- OnFailureToBucket\n              - Sid: OnFailureDestination\n                Effect: Allow\n                Action: s3:PutObject\n                Resource: !Sub \"${OnFailureDestination}/*\"",
	} {
		if !strings.Contains(sam, want) {
			t.Errorf("template/template.yaml lacks %q", want)
		}
	}
}

// The SAM template passes the shardreader its own role's ARN for the
// records' invokeIdentityArn, as the construct does.
func TestSAMTemplate_PassesTheShardReadersRoleAsInvokeIdentity(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "template", "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "SHARDLOOP_INVOKE_IDENTITY_ARN: !GetAtt ShardReaderFunctionRole.Arn"; !strings.Contains(string(b), want) {
		t.Errorf("template/template.yaml lacks %q", want)
	}
}

// The SAM parameter TumblingWindowInSeconds has the functions' bounds and
// reaches the shardreader; a rule refuses it with more than one lane.
func TestSAMTemplate_TumblingWindowInSecondsHasTheFunctionsBounds(t *testing.T) {
	sam := samTemplate(t)
	for field, want := range map[string]int{"Default": 0, "MinValue": 0, "MaxValue": lambdaenv.MaxTumblingWindowSeconds} {
		if got := samParam(t, sam, "TumblingWindowInSeconds", field); got != strconv.Itoa(want) {
			t.Errorf("parameter TumblingWindowInSeconds %s = %s, want %d", field, got, want)
		}
	}
	for _, want := range []string{"SHARDLOOP_TUMBLING_WINDOW_SECONDS: !Ref TumblingWindowInSeconds", `Assert: !Equals [!Ref ParallelizationFactor, "1"]`} {
		if !strings.Contains(sam, want) {
			t.Errorf("template/template.yaml lacks %q", want)
		}
	}
}

// The SAM parameter ParallelizationFactor has the reader's bounds and
// reaches the shardreader, as the construct's prop does.
func TestSAMTemplate_ParallelizationFactorHasTheReadersBounds(t *testing.T) {
	sam := samTemplate(t)
	for field, want := range map[string]int{"Default": lambdaenv.DefaultParallelizationFactor, "MinValue": 1, "MaxValue": lambdaenv.MaxParallelizationFactor} {
		if got := samParam(t, sam, "ParallelizationFactor", field); got != strconv.Itoa(want) {
			t.Errorf("parameter ParallelizationFactor %s = %s, want %d", field, got, want)
		}
	}
	if want := "SHARDLOOP_PARALLELIZATION_FACTOR: !Ref ParallelizationFactor"; !strings.Contains(sam, want) {
		t.Errorf("template/template.yaml lacks %q", want)
	}
}

// The SAM parameter FilterCriteria reaches the shardreader, which checks it
// at its cold start, and is left out when empty (its default).
func TestSAMTemplate_FilterCriteriaReachesTheShardReader(t *testing.T) {
	sam := samTemplate(t)
	if got := samParam(t, sam, "FilterCriteria", "Default"); got != "" {
		t.Errorf("parameter FilterCriteria Default = %q, want empty: every record delivered", got)
	}
	for _, want := range []string{
		`HasFilterCriteria: !Not [!Equals [!Ref FilterCriteria, ""]]`,
		"SHARDLOOP_FILTER_CRITERIA: !If [HasFilterCriteria, !Ref FilterCriteria, !Ref AWS::NoValue]",
	} {
		if !strings.Contains(sam, want) {
			t.Errorf("template/template.yaml lacks %q", want)
		}
	}
}

// samResource returns the lines of a resource of the SAM template.
func samResource(t *testing.T, sam, name string) []string {
	t.Helper()
	var out []string
	in := false
	for line := range strings.Lines(sam) {
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "  "+name+":":
			in = true
		case in && len(line) > 2 && !strings.HasPrefix(line, "   ") && !strings.HasPrefix(line, "    #"):
			return out
		case in:
			out = append(out, line)
		}
	}
	if !in {
		t.Fatalf("template/template.yaml has no resource %s", name)
	}
	return out
}

// samField returns the value of the first "key: value" line of lines at
// the given indentation.
func samField(lines []string, indent int, key string) string {
	prefix := strings.Repeat(" ", indent) + key + ": "
	for _, l := range lines {
		if v, ok := strings.CutPrefix(l, prefix); ok {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// sam build builds each function from source: SAM's go1.x build method on
// the main package CodeUri names, for the provided.al2023 runtime with the
// bootstrap handler. The SAM CLI needs Docker and is not here, so this does
// what its go1.x builder does (go build -o <artifacts>/bootstrap <CodeUri>,
// run in CodeUri, GOOS=linux and GOARCH of the architecture), with the
// environment make sam-build gives it, and checks the executable; make
// test-infra runs sam build itself where the SAM CLI is installed.
func TestSAMTemplate_SamBuildBuildsEachFunctionFromItsMainPackage(t *testing.T) {
	sam := samTemplate(t)
	globals := samResource(t, sam, "Function")
	if samField(globals, 4, "Runtime") != "provided.al2023" || samField(globals, 4, "Handler") != "bootstrap" {
		t.Fatalf("Globals.Function: runtime %q handler %q, want provided.al2023 and bootstrap", samField(globals, 4, "Runtime"), samField(globals, 4, "Handler"))
	}
	for name, pkg := range map[string]string{
		"CoordinatorFunction": "github.com/shardloop/shardloop/functions/coordinator",
		"ShardReaderFunction": "github.com/shardloop/shardloop/functions/shardreader",
	} {
		res := samResource(t, sam, name)
		if got := samField(res, 6, "BuildMethod"); got != "go1.x" {
			t.Errorf("%s: Metadata.BuildMethod %q, want go1.x", name, got)
		}
		if got := samField(res, 8, "LogFormat"); got != "JSON" {
			t.Errorf("%s: LoggingConfig.LogFormat %q, want JSON", name, got)
		}
		codeURI := samField(res, 6, "CodeUri")
		dir := filepath.Join("..", "..", "template", codeURI)
		if _, err := os.Stat(filepath.Join(dir, "main.go")); err != nil {
			t.Errorf("%s: CodeUri %s is not a function's main package: %v", name, codeURI, err)
			continue
		}
		if testing.Short() {
			continue
		}
		abs, err := filepath.Abs(dir)
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "bootstrap")
		cmd := exec.Command("go", "build", "-o", out, abs)
		cmd.Dir = abs
		cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0", "GOFLAGS=-trimpath -tags=lambda.norpc")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: go build as sam build runs it: %v\n%s", name, err, b)
			continue
		}
		checkSAMBootstrap(t, out, pkg)
	}
}

// checkSAMBootstrap checks a bootstrap sam build made: a static linux/arm64
// build of pkg, without cgo and with the lambda.norpc tag.
func checkSAMBootstrap(t *testing.T, path, pkg string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Machine != elf.EM_AARCH64 {
		t.Errorf("%s: machine %v, want arm64", path, f.Machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s: has an interpreter: not static", path)
		}
	}
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if info.Path != pkg || settings["GOOS"] != "linux" || settings["CGO_ENABLED"] != "0" || settings["-tags"] != "lambda.norpc" {
		t.Errorf("%s: a build of %s with %v; want %s, linux, CGO_ENABLED=0, -tags lambda.norpc", path, info.Path, settings, pkg)
	}
}

// The SAM template alarms on BacklogSkipped as the construct does, on the
// stream's name, and lets the coordinator read what it counts.
func TestSAMTemplate_AlarmsOnABacklogSkippedAndLetsTheCoordinatorCountIt(t *testing.T) {
	sam := samTemplate(t)
	for _, want := range []string{
		"  BacklogSkippedAlarm:\n    Type: AWS::CloudWatch::Alarm\n",
		"      Namespace: " + MetricNamespace + "\n      MetricName: BacklogSkipped\n",
		"        - Name: " + StreamDimension + "\n          Value: !If [StreamIsArn, !Select [1, !Split [\"stream/\", !Ref StreamName]], !Ref StreamName]\n",
		"      Threshold: 1\n      ComparisonOperator: GreaterThanOrEqualToThreshold\n",
		"            - Sid: CountSkippedBacklog\n              Effect: Allow\n              Action: [kinesis:GetRecords, kinesis:GetShardIterator]\n",
	} {
		if !strings.Contains(sam, want) {
			t.Errorf("template/template.yaml lacks:\n%s", want)
		}
	}
}
