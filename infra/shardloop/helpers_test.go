package shardloop

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
)

func TestMain(m *testing.M) {
	code := m.Run()
	jsii.Close()
	os.Exit(code)
}

const (
	testAccount = "123456789012"
	testRegion  = "eu-west-1"
	testTarget  = "arn:aws:lambda:eu-west-1:123456789012:function:handle-orders"
)

// definitionFile is the repository's one ASL file, the one the package
// embeds.
func definitionFile(t testing.TB) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "..", DefinitionFileRel))
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// assetDir makes a stand-in for a built function: a folder holding a file
// named bootstrap. Synthesis only hashes and copies it.
func assetDir(t testing.TB, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bootstrap"), []byte("#!/bin/sh\n# stand-in for "+name+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// baseProps are valid props with stand-in code, so that they need no go
// build, and the embedded definition.
func baseProps(t testing.TB) ConsumerProps {
	return ConsumerProps{
		StreamName:      "orders",
		TargetFunction:  testTarget,
		CoordinatorCode: awslambda.Code_FromAsset(jsii.String(assetDir(t, "coordinator")), nil),
		ShardReaderCode: awslambda.Code_FromAsset(jsii.String(assetDir(t, "shardreader")), nil),
	}
}

func newTestStack(app awscdk.App, id string) awscdk.Stack {
	return awscdk.NewStack(app, jsii.String(id), &awscdk.StackProps{
		Env: &awscdk.Environment{Account: jsii.String(testAccount), Region: jsii.String(testRegion)},
	})
}

// cfn is a synthesized CloudFormation template as JSON values.
type cfn struct {
	Resources map[string]resource
	Outputs   map[string]any
}

type resource struct {
	Type       string
	Properties map[string]any
	DependsOn  any
	// DeletionPolicy and UpdateReplacePolicy as CloudFormation writes them.
	DeletionPolicy      string
	UpdateReplacePolicy string
}

var (
	defaultOnce sync.Once
	defaultTmpl cfn
	defaultRaw  []byte
)

// defaultTemplate synthesizes, once per test binary, the stack NewStack
// makes for baseProps. When SHARDLOOP_SYNTH_OUT names a folder the template
// is written there for cfn-lint (make test-infra).
func defaultTemplate(t testing.TB) cfn {
	t.Helper()
	defaultOnce.Do(func() {
		app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
		stack, _, err := NewStack(app, "ShardloopTest", &StackProps{
			StackProps: awscdk.StackProps{Env: &awscdk.Environment{Account: jsii.String(testAccount), Region: jsii.String(testRegion)}},
			Consumer:   baseProps(t),
		})
		if err != nil {
			t.Fatalf("NewStack: %v", err)
		}
		defaultRaw = templateJSON(t, stack)
		if err := json.Unmarshal(defaultRaw, &defaultTmpl); err != nil {
			t.Fatal(err)
		}
		if dir := os.Getenv("SHARDLOOP_SYNTH_OUT"); dir != "" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "ShardloopTest.template.json"), defaultRaw, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	})
	if defaultTmpl.Resources == nil {
		t.Fatal("default template did not synthesize")
	}
	return defaultTmpl
}

func templateJSON(t testing.TB, stack awscdk.Stack) []byte {
	t.Helper()
	raw, err := json.MarshalIndent(assertions.Template_FromStack(stack, nil).ToJSON(), "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// ofType returns the logical ids of the resources of one type.
func (c cfn) ofType(typ string) []string {
	var ids []string
	for id, r := range c.Resources {
		if r.Type == typ {
			ids = append(ids, id)
		}
	}
	return ids
}

// byPrefix finds the one resource of a type whose logical id starts with
// prefix (CDK ids are the construct path plus a hash).
func (c cfn) byPrefix(t testing.TB, typ, prefix string) (string, resource) {
	t.Helper()
	var found []string
	for id, r := range c.Resources {
		if r.Type == typ && strings.HasPrefix(id, prefix) {
			found = append(found, id)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s resources with id %s*: %v, want exactly one", typ, prefix, found)
	}
	return found[0], c.Resources[found[0]]
}

// canon renders a JSON value canonically, for comparing CloudFormation
// expressions.
func canon(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// raw parses a JSON literal, for expected CloudFormation expressions.
func raw(t testing.TB, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad expected JSON %s: %v", s, err)
	}
	return v
}
