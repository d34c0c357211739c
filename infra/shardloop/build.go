package shardloop

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// The functions' main packages, in the module github.com/shardloop/shardloop.
// When CoordinatorCode or ShardReaderCode is nil, NewConsumer builds the
// package from source with the go command, at the version of that module the
// app's go.mod selects.
const (
	CoordinatorPackage = "github.com/shardloop/shardloop/functions/coordinator"
	ShardReaderPackage = "github.com/shardloop/shardloop/functions/shardreader"
)

// buildEnv and buildFlags are those of `make build`: a static linux/arm64
// binary (the functions' architecture) without the RPC mode that
// provided.al2023 does not use, with no file paths, symbols or build id in it,
// so that one source and one module graph give the same bytes and therefore
// the same asset hash.
var (
	buildEnv   = []string{"GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0"}
	buildFlags = []string{"build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w -buildid="}
)

// BuildError reports Lambda code that could not be built from source at
// synth: no go command, a module graph that lacks the functions, or a compile
// error. Output is what the go command printed.
type BuildError struct {
	Packages []string
	Dir      string // the folder the go command ran in: the app's module
	Command  string // the go command line, empty when it did not start
	Output   string
	Err      error
}

func (e *BuildError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "shardloop: building the Lambda code of %s from source", strings.Join(e.Packages, " and "))
	if e.Command != "" {
		fmt.Fprintf(&b, " (%s %s in %s)", strings.Join(buildEnv, " "), e.Command, e.Dir)
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	if e.Output != "" {
		b.WriteString("\n" + e.Output)
	}
	if moduleTrouble(e.Output) {
		fmt.Fprintf(&b, "\nthe app's go.mod and go.sum must cover github.com/shardloop/shardloop and its dependencies: run go mod tidy in %s", e.Dir)
	}
	b.WriteString("\nto deploy code built elsewhere instead, set CoordinatorCode and ShardReaderCode")
	return b.String()
}

func (e *BuildError) Unwrap() error { return e.Err }

// moduleTrouble tells whether the go command's output says that the module
// graph lacks a module or a checksum, which go mod tidy in the app mends.
func moduleTrouble(output string) bool {
	for _, s := range []string{"go mod tidy", "go.sum", "not required", "no required module", "cannot find module providing"} {
		if strings.Contains(output, s) {
			return true
		}
	}
	return false
}

// goBuild builds main packages into Lambda bootstraps with the go command.
type goBuild struct {
	Go  string // the go command, looked up on PATH when it has no separator
	Dir string // where it runs; "" is the working directory, the app's module
}

// run builds pkgs into out/<last path element>/bootstrap, in one go command,
// and returns those folders by package.
func (b goBuild) run(pkgs []string, out string) (map[string]string, error) {
	dir := b.Dir
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, &BuildError{Packages: pkgs, Err: err}
		}
		dir = wd
	}
	goCmd, err := exec.LookPath(b.Go)
	if err != nil {
		return nil, &BuildError{Packages: pkgs, Dir: dir, Err: fmt.Errorf("no go command to build with (install Go): %w", err)}
	}
	bin := filepath.Join(out, "bin")
	args := append(slices.Clone(buildFlags), "-o", bin+string(filepath.Separator))
	args = append(args, pkgs...)
	cmd := exec.Command(goCmd, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), buildEnv...)
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		return nil, &BuildError{Packages: pkgs, Dir: dir, Command: commandLine(b.Go, args), Output: strings.TrimSpace(output.String()), Err: err}
	}
	dirs := make(map[string]string, len(pkgs))
	for _, pkg := range pkgs {
		fn := filepath.Join(out, path.Base(pkg))
		if err := os.MkdirAll(fn, 0o755); err != nil {
			return nil, &BuildError{Packages: pkgs, Dir: dir, Err: err}
		}
		if err := os.Rename(filepath.Join(bin, path.Base(pkg)), filepath.Join(fn, "bootstrap")); err != nil {
			return nil, &BuildError{Packages: pkgs, Dir: dir, Err: err}
		}
		dirs[pkg] = fn
	}
	if err := os.Remove(bin); err != nil {
		return nil, &BuildError{Packages: pkgs, Dir: dir, Err: err}
	}
	return dirs, nil
}

// commandLine renders a command with the arguments that need it quoted.
func commandLine(name string, args []string) string {
	parts := []string{name}
	for _, a := range args {
		if strings.ContainsAny(a, " \t\"'") {
			a = fmt.Sprintf("%q", a)
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

// buildCache remembers, for the life of the process, the folders the
// functions were built into, by the folder the build ran in and the package:
// the consumers of one app, and the apps of one test binary, share a build.
type buildCache struct {
	mu    sync.Mutex
	build goBuild
	// keep is where the bootstraps are kept, one folder per distinct
	// binary, so that synths that build the same bytes share one folder;
	// "" is the user's cache folder (shardloop/lambda in it).
	keep string
	dirs map[[2]string]string
	runs int // go commands run, for tests
}

// functionBuilds is the cache NewConsumer builds through.
var functionBuilds = newBuildCache(goBuild{Go: "go"}, "")

func newBuildCache(b goBuild, keep string) *buildCache {
	return &buildCache{build: b, keep: keep, dirs: map[[2]string]string{}}
}

// keptFor is how long a kept folder that no synth has used stays.
const keptFor = 7 * 24 * time.Hour

// code returns the folders holding the bootstraps of pkgs, building those
// this process has not built yet in one go command. A failed build is not
// remembered.
func (c *buildCache) code(pkgs ...string) (map[string]string, error) {
	where := c.build.Dir
	if where == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, &BuildError{Packages: pkgs, Err: err}
		}
		where = wd
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	dirs := make(map[string]string, len(pkgs))
	var missing []string
	for _, pkg := range pkgs {
		if dir, ok := c.dirs[[2]string{where, pkg}]; ok {
			dirs[pkg] = dir
		} else {
			missing = append(missing, pkg)
		}
	}
	if len(missing) == 0 {
		return dirs, nil
	}
	fail := func(err error) (map[string]string, error) {
		return nil, &BuildError{Packages: missing, Dir: where, Err: err}
	}
	if c.keep == "" {
		keep, err := defaultKeep()
		if err != nil {
			return fail(err)
		}
		c.keep = keep
	}
	if err := os.MkdirAll(c.keep, 0o755); err != nil {
		return fail(err)
	}
	scratch, err := os.MkdirTemp(c.keep, ".build-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(scratch)
	c.runs++
	b := c.build
	b.Dir = where
	built, err := b.run(missing, scratch)
	if err != nil {
		return nil, err
	}
	for pkg, dir := range built {
		kept, err := keep(c.keep, dir)
		if err != nil {
			return fail(err)
		}
		c.dirs[[2]string{where, pkg}] = kept
		dirs[pkg] = kept
	}
	prune(c.keep, time.Now().Add(-keptFor))
	return dirs, nil
}

// defaultKeep is shardloop/lambda in the user's cache folder or, where there
// is none to write to, a folder of this process's own in the temporary
// folder.
func defaultKeep() (string, error) {
	if cache, err := os.UserCacheDir(); err == nil {
		dir := filepath.Join(cache, "shardloop", "lambda")
		if err := os.MkdirAll(dir, 0o755); err == nil {
			return dir, nil
		}
	}
	return os.MkdirTemp("", "shardloop-lambda-")
}

// keep moves dir, a folder holding a bootstrap, to
// root/<name>-<sha256 of the bootstrap>, or, when another synth has put the
// same bytes there, uses that folder and leaves dir; either way it marks the
// folder used. It never replaces a folder: one whose bootstrap has other
// bytes than its name says is an error.
func keep(root, dir string) (string, error) {
	sum, err := fileSum(filepath.Join(dir, "bootstrap"))
	if err != nil {
		return "", err
	}
	kept := filepath.Join(root, filepath.Base(dir)+"-"+sum)
	same := func() bool {
		have, err := fileSum(filepath.Join(kept, "bootstrap"))
		return err == nil && have == sum
	}
	if !same() {
		if err := os.Rename(dir, kept); err != nil && !same() {
			return "", fmt.Errorf("keeping the bootstrap in %s: %w (a folder there with other contents has to be removed)", kept, err)
		}
	}
	now := time.Now()
	return kept, os.Chtimes(kept, now, now)
}

// prune removes the folders in root that no synth has used since before.
func prune(root string, before time.Time) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		if info, err := e.Info(); err == nil && e.IsDir() && info.ModTime().Before(before) {
			_ = os.RemoveAll(filepath.Join(root, e.Name()))
		}
	}
}

// fileSum is the SHA-256 of a file, in hex.
func fileSum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
