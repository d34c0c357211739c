package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

// binaries are the executables the test runs: one bootstrap per function
// (linux, this host's architecture, -tags lambda.norpc) and the emulator.
type binaries struct {
	Coordinator, ShardReader, Target string // bootstrap files
	WindowTarget                     string // the tumbling-window target's
	RIE                              string // aws-lambda-rie
	// DieWithParent runs each bootstrap under the emulator so that the
	// function dies with it (the emulator gives it its own process group).
	DieWithParent string
}

var (
	buildOnce sync.Once
	buildDir  string // removed by TestMain
	built     binaries
	buildErr  error
)

// buildBinaries builds every binary once per test binary, in parallel, and
// returns their paths. Safe to call from parallel tests.
func buildBinaries(t testing.TB) binaries {
	t.Helper()
	buildOnce.Do(func() {
		began := time.Now()
		// Straight to stderr, not t.Logf: `go test ./e2e` shows it while it
		// builds, which takes minutes on a cold build cache.
		fmt.Fprintln(os.Stderr, "e2e: building the coordinator, shardreader and test-target bootstraps and aws-lambda-rie (minutes on a cold build cache, seconds after)")
		built, buildErr = buildAll()
		if buildErr == nil {
			fmt.Fprintf(os.Stderr, "e2e: built in %s\n", time.Since(began).Round(time.Millisecond))
		}
	})
	if buildErr != nil {
		t.Fatalf("build: %v", buildErr)
	}
	return built
}

func buildAll() (binaries, error) {
	root, err := moduleRoot()
	if err != nil {
		return binaries{}, err
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	if buildDir, err = os.MkdirTemp("", "shardloop-e2e-bin-"); err != nil {
		return binaries{}, err
	}
	b := binaries{
		Coordinator:   filepath.Join(buildDir, "coordinator", "bootstrap"),
		ShardReader:   filepath.Join(buildDir, "shardreader", "bootstrap"),
		Target:        filepath.Join(buildDir, "sampletarget", "bootstrap"),
		WindowTarget:  filepath.Join(buildDir, "windowtarget", "bootstrap"),
		RIE:           filepath.Join(buildDir, "aws-lambda-rie"),
		DieWithParent: filepath.Join(buildDir, "diewithparent"),
	}
	lambdaEnv := []string{"GOOS=linux", "GOARCH=" + runtime.GOARCH, "CGO_ENABLED=0"}
	norpc := []string{"-trimpath", "-tags", "lambda.norpc"}
	jobs := []struct {
		out, pkg string
		env      []string
		flags    []string
	}{
		{b.Coordinator, "./functions/coordinator", lambdaEnv, norpc},
		{b.ShardReader, "./functions/shardreader", lambdaEnv, norpc},
		{b.Target, "./e2e/sampletarget", lambdaEnv, norpc},
		{b.WindowTarget, "./e2e/windowtarget", lambdaEnv, norpc},
		{b.DieWithParent, "./e2e/diewithparent", lambdaEnv, nil},
		// The emulator is pinned as a tool in go.mod: this builds offline
		// from the module cache once `make deps` has run (same flags, so
		// the same build cache entries).
		{b.RIE, "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie", nil, nil},
	}
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			args := append([]string{"build"}, j.flags...)
			args = append(args, "-o", j.out, j.pkg)
			cmd := exec.Command(goCmd, args...)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), j.env...)
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("go %v: %v\n%s", args, err, out)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return b, err
		}
	}
	return b, nil
}

// moduleRoot walks up from the working directory to go.mod.
func moduleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("go.mod not found above %s", wd)
		}
	}
}
