// Package lambdabin checks that a file is a Lambda bootstrap as the
// construct builds it, for the infra tests.
package lambdabin

import (
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"fmt"
	"strings"
)

// Check reports how the executable at path is not the static, stripped
// linux/arm64 build of the main package pkg that make build and the
// construct make (GOOS=linux GOARCH=arm64 CGO_ENABLED=0 -tags lambda.norpc
// -trimpath -ldflags='-s -w -buildid='), and returns its build information.
func Check(path, pkg string) (*buildinfo.BuildInfo, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(path+": "+format, args...)) }
	if f.Machine != elf.EM_AARCH64 || f.Class != elf.ELFCLASS64 {
		bad("machine %v class %v, want an arm64 ELF", f.Machine, f.Class)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			bad("has an interpreter: not a static binary")
		}
	}
	// -ldflags is not in the build information of a -trimpath build: check
	// what it does. -s: no symbol table; -w: no DWARF; -buildid=: no build
	// id notes.
	var extra []string
	for _, s := range f.Sections {
		if s.Name == ".symtab" || s.Name == ".note.go.buildid" || s.Name == ".note.gnu.build-id" || strings.HasPrefix(s.Name, ".debug_") || strings.HasPrefix(s.Name, ".zdebug_") {
			extra = append(extra, s.Name)
		}
	}
	if len(extra) > 0 {
		bad("has sections %v: not built with -ldflags='-s -w -buildid='", extra)
	}
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return nil, errors.Join(append(errs, err)...)
	}
	if info.Path != pkg {
		bad("a build of %s, want %s", info.Path, pkg)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	for _, want := range [][2]string{
		{"GOOS", "linux"}, {"GOARCH", "arm64"}, {"CGO_ENABLED", "0"},
		{"-tags", "lambda.norpc"}, {"-trimpath", "true"},
	} {
		if settings[want[0]] != want[1] {
			bad("build setting %s = %q, want %q", want[0], settings[want[0]], want[1])
		}
	}
	return info, errors.Join(errs...)
}
