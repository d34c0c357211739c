package shardloop

import (
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
