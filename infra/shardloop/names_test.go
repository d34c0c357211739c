package shardloop

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

// synth returns the template of a consumer with props changed by set.
func synth(t *testing.T, set func(*ConsumerProps, awscdk.Stack)) cfn {
	t.Helper()
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	stack := newTestStack(app, "S")
	p := baseProps(t)
	set(&p, stack)
	if _, err := NewConsumer(stack, "C", &p); err != nil {
		t.Fatal(err)
	}
	var tmpl cfn
	if err := json.Unmarshal(templateJSON(t, stack), &tmpl); err != nil {
		t.Fatal(err)
	}
	return tmpl
}

func functionEnv(t *testing.T, tmpl cfn, prefix string) string {
	t.Helper()
	_, fn := tmpl.byPrefix(t, "AWS::Lambda::Function", prefix)
	return canon(t, fn.Properties["Environment"])
}

// The props named as KinesisEventSource names them reach the functions as
// the settings of the same meaning.
func TestNewConsumer_KinesisEventSourceNamesReachTheFunctions(t *testing.T) {
	tmpl := synth(t, func(p *ConsumerProps, _ awscdk.Stack) {
		p.StartingPosition, p.StartingPositionTimestamp = awslambda.StartingPosition_AT_TIMESTAMP, 1767225600.25
		p.MaxBatchingWindow, p.RetryAttempts, p.BisectBatchOnError = 5*time.Second, RetryAttempts(2), true
		p.TumblingWindow, p.MaxRecordAge = 2*time.Minute, time.Hour
	})
	for _, kv := range []string{`"SHARDLOOP_BATCHING_WINDOW":"5s"`, `"SHARDLOOP_MAX_RETRY_ATTEMPTS":"2"`, `"SHARDLOOP_BISECT_ON_ERROR":"true"`,
		`"SHARDLOOP_TUMBLING_WINDOW_SECONDS":"120"`, `"SHARDLOOP_MAX_RECORD_AGE":"3600s"`} {
		if env := functionEnv(t, tmpl, "CShardReader"); !strings.Contains(env, kv) {
			t.Errorf("shardreader environment %s lacks %s", env, kv)
		}
	}
	if env := functionEnv(t, tmpl, "CCoordinator"); !strings.Contains(env, `"SHARDLOOP_START_POSITION":"timestamp:1767225600250"`) {
		t.Errorf("coordinator environment %s: want the start in milliseconds", env)
	}
	for sp, want := range map[awslambda.StartingPosition]string{
		awslambda.StartingPosition_TRIM_HORIZON: `"SHARDLOOP_START_POSITION":"horizon"`,
		awslambda.StartingPosition_LATEST:       `"SHARDLOOP_START_POSITION":"latest"`,
	} {
		env := functionEnv(t, synth(t, func(p *ConsumerProps, _ awscdk.Stack) { p.StartingPosition = sp }), "CCoordinator")
		if !strings.Contains(env, want) {
			t.Errorf("StartingPosition %s: coordinator environment %s lacks %s", sp, env, want)
		}
	}
}

// A stack written with the deprecated names synthesizes the very template
// the new names give: the start keeps its text, so a stack moved from
// StartPosition "horizon" to StartingPosition TRIM_HORIZON starts no new
// generation.
func TestNewConsumer_DeprecatedNamesSynthesizeWhatTheNewNamesDo(t *testing.T) {
	old := synth(t, func(p *ConsumerProps, _ awscdk.Stack) {
		p.StartPosition = "horizon"
		p.BatchingWindow, p.MaxRetryAttempts, p.BisectOnError, p.TumblingWindowInSeconds = 5*time.Second, RetryAttempts(3), true, 60
	})
	renamed := synth(t, func(p *ConsumerProps, _ awscdk.Stack) {
		p.StartingPosition = awslambda.StartingPosition_TRIM_HORIZON
		p.MaxBatchingWindow, p.RetryAttempts, p.BisectBatchOnError, p.TumblingWindow = 5*time.Second, RetryAttempts(3), true, time.Minute
	})
	if a, b := canon(t, old.Resources), canon(t, renamed.Resources); a != b {
		t.Errorf("the deprecated names give another template:\n old %s\n new %s", a, b)
	}
	if env := functionEnv(t, old, "CCoordinator"); !strings.Contains(env, `"SHARDLOOP_START_POSITION":"horizon"`) {
		t.Errorf("coordinator environment %s", env)
	}
	ts := synth(t, func(p *ConsumerProps, _ awscdk.Stack) { p.StartPosition = "timestamp:1767225600000" })
	if env := functionEnv(t, ts, "CCoordinator"); !strings.Contains(env, `"SHARDLOOP_START_POSITION":"timestamp:1767225600000"`) {
		t.Errorf("StartPosition timestamp: coordinator environment %s", env)
	}
}

// OnFailure takes what KinesisEventSource's OnFailure takes, and grants the
// shardreader what it grants the trigger's function.
func TestNewConsumer_OnFailureTakesTheEventSourceDestinations(t *testing.T) {
	tmpl := synth(t, func(p *ConsumerProps, s awscdk.Stack) {
		p.OnFailure = awslambdaeventsources.NewSqsDlq(awssqs.NewQueue(s, jsii.String("Failed"), nil))
	})
	qid, _ := tmpl.byPrefix(t, "AWS::SQS::Queue", "Failed")
	queueArn := canon(t, map[string]any{"Fn::GetAtt": []any{qid, "Arn"}})
	if env := functionEnv(t, tmpl, "CShardReader"); !strings.Contains(env, `"SHARDLOOP_ON_FAILURE_DESTINATION":`+queueArn) {
		t.Errorf("shardreader environment %s lacks the queue's ARN %s", env, queueArn)
	}
	sends := false
	for _, s := range rolePolicy(t, tmpl, "CShardReaderRole") {
		for _, a := range s.Actions {
			if a == "sqs:SendMessage" && len(s.Resources) == 1 && s.Resources[0] == queueArn {
				sends = true
			}
		}
	}
	if !sends {
		t.Errorf("the shardreader may not send to the queue: %+v", rolePolicy(t, tmpl, "CShardReaderRole"))
	}

	tmpl = synth(t, func(p *ConsumerProps, s awscdk.Stack) {
		p.OnFailure = awslambdaeventsources.NewS3OnFailureDestination(awss3.NewBucket(s, jsii.String("Failed"), nil))
	})
	bid, _ := tmpl.byPrefix(t, "AWS::S3::Bucket", "Failed")
	if env := functionEnv(t, tmpl, "CShardReader"); !strings.Contains(env, `"SHARDLOOP_ON_FAILURE_DESTINATION":`+canon(t, map[string]any{"Fn::GetAtt": []any{bid, "Arn"}})) {
		t.Errorf("shardreader environment %s lacks the bucket's ARN", env)
	}
	if n := len(tmpl.ofType("AWS::Lambda::EventSourceMapping")); n != 0 {
		t.Errorf("%d event source mappings, want none", n)
	}
}

// The infra app's context key startPosition takes both spellings.
func TestPropsFromContext_StartPositionTakesBothSpellings(t *testing.T) {
	for v, want := range map[string]string{"TRIM_HORIZON": "horizon", "horizon": "horizon", "LATEST": "latest",
		"AT_TIMESTAMP:1767225600": "timestamp:1767225600000", "timestamp:1767225600123": "timestamp:1767225600123"} {
		app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir()), Context: &map[string]any{CtxStartPosition: v}})
		p, err := PropsFromContext(app.Node())
		if err != nil || p.start() != want {
			t.Errorf("context %s=%s: start %q, %v; want %q", CtxStartPosition, v, p.start(), err, want)
		}
	}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir()), Context: &map[string]any{CtxStartPosition: "sequence:shardId-000000000000:1"}})
	if _, err := PropsFromContext(app.Node()); err == nil || !strings.Contains(err.Error(), CtxStartPosition) {
		t.Errorf("a sequence start in context: %v, want an error naming %s", err, CtxStartPosition)
	}
}
