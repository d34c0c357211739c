package userapp

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardloop/shardloop/infra/internal/lambdabin"
)

// The functions' main packages, as the construct builds them.
var functions = map[string]string{
	"OrdersCoordinator": "github.com/shardloop/shardloop/functions/coordinator",
	"OrdersShardReader": "github.com/shardloop/shardloop/functions/shardreader",
}

// template is what the test reads of a synthesized CloudFormation template.
type template struct {
	Resources map[string]struct {
		Type       string
		Properties map[string]any
	}
}

// bootstrap is the staged bootstrap of the one Lambda function whose logical
// id starts with prefix: outdir/asset.<hash>/bootstrap, the hash being its S3
// key's.
func (tmpl template) bootstrap(t *testing.T, outdir, prefix string) string {
	t.Helper()
	var found []string
	var key string
	for id, r := range tmpl.Resources {
		if r.Type == "AWS::Lambda::Function" && strings.HasPrefix(id, prefix) {
			found = append(found, id)
			code, _ := r.Properties["Code"].(map[string]any)
			key, _ = code["S3Key"].(string)
		}
	}
	if len(found) != 1 {
		t.Fatalf("Lambda functions with id %s*: %v, want exactly one", prefix, found)
	}
	if !strings.HasSuffix(key, ".zip") {
		t.Fatalf("%s: code S3Key %q, want an asset <hash>.zip", found[0], key)
	}
	return filepath.Join(outdir, "asset."+strings.TrimSuffix(key, ".zip"), "bootstrap")
}

// cfnLintTool is the cfn-lint to run: $CFN_LINT, else cfn-lint on PATH. When
// there is none the test fails naming it, unless SHARDLOOP_CFN_LINT_OPTIONAL
// is 1: make test-infra sets it, because it treats a missing cfn-lint as its
// other lint steps do, with a NOTICE, and skips the lint.
func cfnLintTool(t *testing.T) (string, bool) {
	t.Helper()
	name := os.Getenv("CFN_LINT")
	if name == "" {
		name = "cfn-lint"
	}
	path, err := exec.LookPath(name)
	if err == nil {
		return path, true
	}
	if os.Getenv("SHARDLOOP_CFN_LINT_OPTIONAL") == "1" {
		t.Logf("NOTICE: %s not found: the user app's template is not linted (pip install cfn-lint)", name)
		return "", false
	}
	t.Fatalf("%s not found (%v): it lints the user app's template; pip install cfn-lint, or set CFN_LINT", name, err)
	return "", false
}

// An app of the user's own, in a folder outside the repository and a module
// of its own that only requires the construct's module (and pins this
// checkout for both shardloop modules, as a user pins a local clone), runs
// and synthesizes with no build/ folder: the functions are built from source
// in the app's module, and the template passes cfn-lint.
func TestUserApp_OutsideTheRepositorySynthesizesWithFunctionsBuiltInItsModule(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles and runs a CDK app of its own: not in -short")
	}
	lint, haveLint := cfnLintTool(t)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	example := filepath.Join(root, "examples", "cdk-app")
	app := t.TempDir()
	if rel, err := filepath.Rel(root, app); err != nil || !strings.HasPrefix(rel, "..") {
		t.Fatalf("the app's folder %s is inside the repository %s: set TMPDIR elsewhere", app, root)
	}
	for _, name := range []string{"main.go", "go.mod", "go.sum", "cdk.json"} {
		b, err := os.ReadFile(filepath.Join(example, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(app, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(env []string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = app
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			hint := ""
			if bytes.Contains(out, []byte("go mod tidy")) {
				hint = "\n(examples/cdk-app/go.mod is not tidy: run go mod tidy there)"
			}
			t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, hint)
		}
		return string(out)
	}
	run(nil, "go", "mod", "edit",
		"-replace=github.com/shardloop/shardloop/infra="+filepath.Join(root, "infra"),
		"-replace=github.com/shardloop/shardloop="+root)

	// Synthesized by the CDK CLI, as a user runs it: cdk.json's app, its
	// feature flags (as cdk init writes them), and nothing said about flags
	// left unconfigured.
	cdk := filepath.Join(root, "infra", "tools", "node_modules", ".bin", "cdk")
	if _, err := os.Stat(cdk); err != nil {
		t.Fatalf("the CDK CLI is not installed (%v): run make deps-infra", err)
	}
	outdir := filepath.Join(app, "cdk.out")
	said := run([]string{"JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20", "CDK_DISABLE_CLI_TELEMETRY=true"},
		cdk, "synth", "--no-notices", "--quiet", "-o", outdir)
	if strings.Contains(said, "feature flag") {
		t.Errorf("cdk synth speaks of feature flags; examples/cdk-app/cdk.json should set them all:\n%s", said)
	}
	if _, err := os.Stat(filepath.Join(app, "build")); err == nil {
		t.Error("the app has a build/ folder")
	}

	path := filepath.Join(outdir, "OrdersConsumer.template.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tmpl template
	if err := json.Unmarshal(raw, &tmpl); err != nil {
		t.Fatal(err)
	}
	for prefix, pkg := range functions {
		info, err := lambdabin.Check(tmpl.bootstrap(t, outdir, prefix), pkg)
		if err != nil {
			t.Error(err)
		}
		if info == nil {
			continue
		}
		// Built in the app's module: the functions' module is replaced
		// with the checkout by the app's go.mod, not by infra's (../),
		// and make build's binaries have it as their main module.
		if info.Main.Path != "github.com/shardloop/shardloop" || info.Main.Replace == nil || info.Main.Replace.Path != root {
			t.Errorf("%s: module %+v (replaced by %+v), want github.com/shardloop/shardloop => %s from the app's go.mod", pkg, info.Main, info.Main.Replace, root)
		}
	}

	if haveLint {
		// W3005 (a DependsOn that a GetAtt already implies) is how CDK
		// orders a function after its role's policy, as in mk/infra.mk.
		cmd := exec.Command(lint, "--ignore-checks", "W3005", "--", path)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("cfn-lint of the user app's template: %v\n%s", err, out)
		}
	}
}
