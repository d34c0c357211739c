package shardloop

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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

// The SAM parameter ParallelizationFactor has the reader's bounds and
// reaches the shardreader, as the construct's prop does.
func TestSAMTemplate_ParallelizationFactorHasTheReadersBounds(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "template", "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sam := string(b)
	for _, want := range []string{
		fmt.Sprintf("  ParallelizationFactor:\n    Type: Number\n    Default: %d\n    MinValue: 1\n    MaxValue: %d\n", DefaultParallelizationFactor, MaxParallelizationFactor),
		"SHARDLOOP_PARALLELIZATION_FACTOR: !Ref ParallelizationFactor",
	} {
		if !strings.Contains(sam, want) {
			t.Errorf("template/template.yaml lacks %q", want)
		}
	}
}
