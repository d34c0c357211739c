package shardloop

import (
	"bytes"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/shardloop/shardloop/infra/internal/lambdabin"
)

// withBuilds makes NewConsumer build through a fresh cache for the length of
// the test, so that the test sees its own go command runs.
func withBuilds(t *testing.T, b goBuild) *buildCache {
	t.Helper()
	saved := functionBuilds
	functionBuilds = newBuildCache(b, t.TempDir())
	t.Cleanup(func() { functionBuilds = saved })
	return functionBuilds
}

// sourceProps are baseProps without code: the functions are built from source.
func sourceProps(t testing.TB) ConsumerProps {
	p := baseProps(t)
	p.CoordinatorCode, p.ShardReaderCode = nil, nil
	return p
}

// bootstrapOf is the staged bootstrap of a function in a synthesized
// assembly: outdir/asset.<hash>/bootstrap, the hash being its S3 key's.
func bootstrapOf(t testing.TB, outdir string, fn resource) string {
	t.Helper()
	code, _ := fn.Properties["Code"].(map[string]any)
	key, _ := code["S3Key"].(string)
	if !strings.HasSuffix(key, ".zip") {
		t.Fatalf("function Code = %v, want an asset with an S3Key <hash>.zip", fn.Properties["Code"])
	}
	return filepath.Join(outdir, "asset."+strings.TrimSuffix(key, ".zip"), "bootstrap")
}

// checkLambdaBinary checks that path is the static, stripped linux/arm64
// build of pkg that make build would make, and returns its build information.
func checkLambdaBinary(t testing.TB, path, pkg string) *buildinfo.BuildInfo {
	t.Helper()
	info, err := lambdabin.Check(path, pkg)
	if err != nil {
		t.Error(err)
	}
	if info == nil {
		t.FailNow()
	}
	return info
}

func TestEmbeddedDefinition_IsTheTemplateFile(t *testing.T) {
	file, err := os.ReadFile(definitionFile(t))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(embeddedDefinition, file) {
		t.Fatalf("infra/shardloop/statemachine.asl.json differs from %s: run go generate ./... in infra", DefinitionFileRel)
	}
}

func TestNewConsumer_DefinitionFileReplacesTheEmbeddedDefinition(t *testing.T) {
	file, err := os.ReadFile(definitionFile(t))
	if err != nil {
		t.Fatal(err)
	}
	own := bytes.Replace(file, []byte(`"Comment": "`), []byte(`"Comment": "my own: `), 1)
	if bytes.Equal(own, file) {
		t.Fatal("the ASL file has no Comment to change")
	}
	path := filepath.Join(t.TempDir(), "loop.asl.json")
	if err := os.WriteFile(path, own, 0o644); err != nil {
		t.Fatal(err)
	}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	stack := newTestStack(app, "S")
	p := baseProps(t)
	p.DefinitionFile = path
	if _, err := NewConsumer(stack, "C", &p); err != nil {
		t.Fatal(err)
	}
	var tmpl cfn
	if err := json.Unmarshal(templateJSON(t, stack), &tmpl); err != nil {
		t.Fatal(err)
	}
	_, machine := tmpl.byPrefix(t, "AWS::StepFunctions::StateMachine", "CShardLoop")
	if machine.Properties["DefinitionString"] != string(own) {
		t.Errorf("DefinitionString is not the bytes of DefinitionFile:\n%v", machine.Properties["DefinitionString"])
	}
}

func TestNewConsumer_WithoutCodeBuildsBothFunctionsFromSourceForLinuxArm64(t *testing.T) {
	builds := withBuilds(t, goBuild{Go: "go"})
	outdir := t.TempDir()
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(outdir)})
	stack := newTestStack(app, "S")
	p := sourceProps(t)
	if _, err := NewConsumer(stack, "C", &p); err != nil {
		t.Fatal(err)
	}
	var tmpl cfn
	if err := json.Unmarshal(templateJSON(t, stack), &tmpl); err != nil {
		t.Fatal(err)
	}
	for prefix, pkg := range map[string]string{"CCoordinator": CoordinatorPackage, "CShardReader": ShardReaderPackage} {
		_, fn := tmpl.byPrefix(t, "AWS::Lambda::Function", prefix)
		info := checkLambdaBinary(t, bootstrapOf(t, outdir, fn), pkg)
		// Built in this module (infra), whose go.mod replaces the
		// functions' module with this checkout.
		if info.Main.Path != "github.com/shardloop/shardloop" || info.Main.Replace == nil || info.Main.Replace.Path != "../" {
			t.Errorf("%s: module %+v (replaced by %+v), want github.com/shardloop/shardloop => ../", pkg, info.Main, info.Main.Replace)
		}
	}
	if builds.runs != 1 {
		t.Errorf("go build ran %d times for both functions, want once", builds.runs)
	}
}

func TestNewConsumer_ConsumersOfOneProcessShareOneBuild(t *testing.T) {
	builds := withBuilds(t, goBuild{Go: "go"})
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	stack := newTestStack(app, "S")
	codes := map[string][]string{}
	for _, stream := range []string{"orders", "clicks"} {
		p := sourceProps(t)
		p.StreamName = stream
		if _, err := NewConsumer(stack, stream, &p); err != nil {
			t.Fatal(err)
		}
	}
	other := newTestStack(awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())}), "S")
	p := sourceProps(t)
	if _, err := NewConsumer(other, "orders", &p); err != nil {
		t.Fatal(err)
	}
	for _, stack := range []awscdk.Stack{stack, other} {
		var tmpl cfn
		if err := json.Unmarshal(templateJSON(t, stack), &tmpl); err != nil {
			t.Fatal(err)
		}
		for _, id := range tmpl.ofType("AWS::Lambda::Function") {
			kind := "Coordinator"
			if strings.Contains(id, "ShardReader") {
				kind = "ShardReader"
			}
			codes[kind] = append(codes[kind], canon(t, tmpl.Resources[id].Properties["Code"]))
		}
	}
	if builds.runs != 1 {
		t.Errorf("go build ran %d times for three consumers in two apps, want once", builds.runs)
	}
	for kind, c := range codes {
		if len(c) != 3 || c[0] != c[1] || c[1] != c[2] {
			t.Errorf("%s code of the three consumers: %v, want one asset", kind, c)
		}
	}
	if codes["Coordinator"][0] == codes["ShardReader"][0] {
		t.Error("the coordinator and the shardreader have the same code")
	}
}

func TestBuildCache_LaterSynthsUseTheFolderOfTheSameBytesAndOldFoldersGo(t *testing.T) {
	keepDir := t.TempDir()
	old, recent := filepath.Join(keepDir, "coordinator-old"), filepath.Join(keepDir, "shardreader-recent")
	for _, dir := range []string{old, recent} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	unused := time.Now().Add(-keptFor - time.Hour)
	if err := os.Chtimes(old, unused, unused); err != nil {
		t.Fatal(err)
	}
	pkgs := []string{CoordinatorPackage, ShardReaderPackage}
	first, err := newBuildCache(goBuild{Go: "go"}, keepDir).code(pkgs...)
	if err != nil {
		t.Fatal(err)
	}
	second, err := newBuildCache(goBuild{Go: "go"}, keepDir).code(pkgs...) // as the next synth's process would
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range pkgs {
		if first[pkg] != second[pkg] {
			t.Errorf("%s: kept in %s, then in %s: want one folder", pkg, first[pkg], second[pkg])
		}
		if name := filepath.Base(first[pkg]); !regexp.MustCompile(`^(coordinator|shardreader)-[0-9a-f]{64}$`).MatchString(name) {
			t.Errorf("%s: kept in %s, want <function>-<sha256>", pkg, name)
		}
	}
	entries, err := os.ReadDir(keepDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := []string{filepath.Base(first[CoordinatorPackage]), filepath.Base(recent), filepath.Base(first[ShardReaderPackage])}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("kept folders %v, want %v: the two builds, the recent folder, not the one unused for longer than %v, no scratch", names, want, keptFor)
	}
}

func TestBuildCache_NeverReplacesAKeptFolderWithOtherBytes(t *testing.T) {
	keepDir := t.TempDir()
	dirs, err := newBuildCache(goBuild{Go: "go"}, keepDir).code(CoordinatorPackage)
	if err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(dirs[CoordinatorPackage], "bootstrap")
	if err := os.WriteFile(planted, []byte("not what the name says"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = newBuildCache(goBuild{Go: "go"}, keepDir).code(CoordinatorPackage)
	var be *BuildError
	if !errors.As(err, &be) || !strings.Contains(err.Error(), "a folder there with other contents has to be removed") {
		t.Fatalf("err = %v, want a BuildError saying the folder has to be removed", err)
	}
	if b, _ := os.ReadFile(planted); string(b) != "not what the name says" {
		t.Error("the folder was replaced")
	}
}

func TestGoBuild_SameSourceGivesTheSameBytesAndTheSameAssetHash(t *testing.T) {
	b := goBuild{Go: "go"}
	pkgs := []string{CoordinatorPackage, ShardReaderPackage}
	first, err := b.run(pkgs, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.run(pkgs, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, dirs := range []map[string]string{first, second} {
		stack := newTestStack(awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())}), "S")
		p := baseProps(t)
		p.CoordinatorCode = awslambda.Code_FromAsset(jsii.String(dirs[CoordinatorPackage]), nil)
		p.ShardReaderCode = awslambda.Code_FromAsset(jsii.String(dirs[ShardReaderPackage]), nil)
		if _, err := NewConsumer(stack, "C", &p); err != nil {
			t.Fatal(err)
		}
		var tmpl cfn
		if err := json.Unmarshal(templateJSON(t, stack), &tmpl); err != nil {
			t.Fatal(err)
		}
		for _, prefix := range []string{"CCoordinator", "CShardReader"} {
			_, fn := tmpl.byPrefix(t, "AWS::Lambda::Function", prefix)
			keys = append(keys, canon(t, fn.Properties["Code"]))
		}
	}
	for _, pkg := range pkgs {
		a, err := os.ReadFile(filepath.Join(first[pkg], "bootstrap"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(second[pkg], "bootstrap"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s: two builds of the same source differ", pkg)
		}
	}
	if keys[0] != keys[2] || keys[1] != keys[3] {
		t.Errorf("asset of the first build %v, of the second %v: want the same", keys[:2], keys[2:])
	}
}

func TestNewConsumer_WithoutAGoCommandFailsNamingItAndCreatesNothing(t *testing.T) {
	withBuilds(t, goBuild{Go: "go"})
	t.Setenv("PATH", t.TempDir())
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	stack := newTestStack(app, "S")
	p := baseProps(t)
	p.CoordinatorCode = nil // the shardreader's is given: only the coordinator is built
	c, err := NewConsumer(stack, "C", &p)
	var be *BuildError
	if !errors.As(err, &be) || !errors.Is(err, exec.ErrNotFound) {
		t.Fatalf("err = %v, want a BuildError wrapping exec.ErrNotFound", err)
	}
	msg := err.Error()
	for _, want := range []string{"shardloop: building the Lambda code of " + CoordinatorPackage + " from source", "no go command", "set CoordinatorCode and ShardReaderCode"} {
		if !strings.Contains(msg, want) {
			t.Errorf("err = %q, want it to say %q", msg, want)
		}
	}
	if strings.Contains(msg, ShardReaderPackage) {
		t.Errorf("err = %q names the shardreader, whose code was given", msg)
	}
	if c != nil || len(*stack.Node().Children()) != 0 {
		t.Error("a consumer whose code could not be built left constructs behind")
	}
}

func TestNewConsumer_WithBothCodesGivenNeedsNoGoCommand(t *testing.T) {
	builds := withBuilds(t, goBuild{Go: "go"})
	t.Setenv("PATH", t.TempDir())
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	p := baseProps(t)
	if _, err := NewConsumer(newTestStack(app, "S"), "C", &p); err != nil {
		t.Fatal(err)
	}
	if builds.runs != 0 {
		t.Errorf("go build ran %d times with both codes given", builds.runs)
	}
}

// fakeModule writes a module of Go files into a temporary folder.
func fakeModule(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Nothing to look up anywhere: the go command fails as it would offline.
	t.Setenv("GOPROXY", "off")
	t.Setenv("GOFLAGS", "-mod=readonly")
	t.Setenv("GOWORK", "off")
	return dir
}

func TestNewConsumer_CompileErrorFailsWithTheCommandAndTheCompilerOutput(t *testing.T) {
	dir := fakeModule(t, map[string]string{
		"go.mod":                        "module github.com/shardloop/shardloop\n\ngo 1.26\n",
		"functions/coordinator/main.go": "package main\n\nfunc main() { notDefined() }\n",
		"functions/shardreader/main.go": "package main\n\nfunc main() {}\n",
	})
	withBuilds(t, goBuild{Go: "go", Dir: dir})
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	p := sourceProps(t)
	_, err := NewConsumer(newTestStack(app, "S"), "C", &p)
	var be *BuildError
	if !errors.As(err, &be) {
		t.Fatalf("err = %v, want a BuildError", err)
	}
	msg := err.Error()
	for _, want := range []string{
		CoordinatorPackage + " and " + ShardReaderPackage,
		"GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build -tags lambda.norpc -trimpath \"-ldflags=-s -w -buildid=\" -o ",
		" in " + dir + "): exit status 1",
		"functions/coordinator/main.go:3:15: undefined: notDefined",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("err = %q, want it to say %q", msg, want)
		}
	}
}

func TestNewConsumer_AppModuleWithoutTheFunctionsModuleSaysRunGoModTidy(t *testing.T) {
	dir := fakeModule(t, map[string]string{"go.mod": "module example.com/app\n\ngo 1.26\n"})
	withBuilds(t, goBuild{Go: "go", Dir: dir})
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	p := sourceProps(t)
	_, err := NewConsumer(newTestStack(app, "S"), "C", &p)
	var be *BuildError
	if !errors.As(err, &be) || !strings.Contains(err.Error(), "cover github.com/shardloop/shardloop and its dependencies: run go mod tidy in "+dir) {
		t.Fatalf("err = %v, want a BuildError saying to run go mod tidy in %s", err, dir)
	}
}
