// Package embedcheck holds one test: no struct type in the module, its
// tests included, embeds an interface it does not fully implement itself.
//
// A decorator that embeds an interface forwards every method it does not
// declare, so a method added to the interface later passes straight
// through it: the compiler cannot tell what the decorator forgot (a killed
// loop's dead store let CheckpointWindow through; the simulator's Lambda
// shape hid a renewal that carries a checkpoint). A wrapper that declares
// every method of the interface it wraps breaks its build instead when the
// interface grows. The test type-checks every package of the module with
// go/types, importing the packages it depends on from the export data go
// list builds, and names each embedding with the methods it leaves to the
// embedded value.
package embedcheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// listed is what go list says of one package.
type listed struct {
	ImportPath string
	Dir        string
	Export     string
	GoFiles    []string
	ImportMap  map[string]string // for a test's packages: an import path to the variant it is
	Standard   bool
	Module     *struct{ Main bool }
	Error      *struct{ Err string }
}

// finding is one struct type that embeds an interface and leaves some of
// its methods to the embedded value.
type finding struct {
	Pos     string // file:line of the embedded field, relative to the module
	Type    string // the struct type, package-qualified
	Embeds  string // the embedded interface
	Missing []string
}

func (f finding) String() string {
	return fmt.Sprintf("%s: %s embeds %s and does not declare %s", f.Pos, f.Type, f.Embeds, strings.Join(f.Missing, ", "))
}

func TestModule_NoStructEmbedsAnInterfaceItDoesNotImplement(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the whole module")
	}
	root := moduleRoot(t)
	pkgs := goList(t, root)
	found, err := check(root, pkgs)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("%s\n\tdeclare them on the wrapper (forwarding the ones it does not mean to change), or embed a smaller interface it implements whole", f)
	}
}

// moduleRoot is the directory of the module's go.mod.
func moduleRoot(t *testing.T) string {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		t.Fatal("not in a module")
	}
	return filepath.Dir(gomod)
}

// goList lists the module's packages, their tests' packages (a package
// compiled with its _test.go files, an external test package) and every
// package they import, with the export data of each (go list -export
// builds what is not cached).
func goList(t *testing.T, root string) []listed {
	cmd := exec.Command("go", "list", "-e", "-deps", "-test", "-export", "-json=ImportPath,Dir,Export,GoFiles,ImportMap,Standard,Module,Error", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		if p.Error != nil {
			t.Fatalf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// check type-checks the module's packages among pkgs from source and
// returns what they embed without implementing, ordered by position.
func check(root string, pkgs []listed) ([]finding, error) {
	exports := map[string]string{}
	for _, p := range pkgs {
		exports[p.ImportPath] = p.Export
	}
	fset := token.NewFileSet()
	seen := map[string]bool{} // a finding in a file two variants of a package share is one
	var found []finding
	for _, p := range pkgs {
		if p.Standard || p.Module == nil || !p.Module.Main || strings.HasSuffix(p.ImportPath, ".test") {
			continue // the standard library, other modules, a test's generated main
		}
		imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
			if v, ok := p.ImportMap[path]; ok {
				path = v
			}
			file, ok := exports[path]
			if !ok || file == "" {
				return nil, fmt.Errorf("no export data for %s", path)
			}
			return os.Open(file)
		})
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				return nil, err
			}
			files = append(files, f)
		}
		info := &types.Info{Defs: map[*ast.Ident]types.Object{}}
		conf := types.Config{Importer: imp}
		if _, err := conf.Check(p.ImportPath, fset, files, info); err != nil {
			return nil, fmt.Errorf("type-check %s: %w", p.ImportPath, err)
		}
		for _, obj := range info.Defs {
			tn, ok := obj.(*types.TypeName)
			if !ok || tn.IsAlias() {
				continue
			}
			for _, f := range embeddings(root, fset, tn) {
				if key := f.String(); !seen[key] {
					seen[key] = true
					found = append(found, f)
				}
			}
		}
	}
	slices.SortFunc(found, func(a, b finding) int { return strings.Compare(a.Pos, b.Pos) })
	return found, nil
}

// embeddings are the interfaces the struct type tn names embeds with
// methods tn does not declare itself (on T or *T).
func embeddings(root string, fset *token.FileSet, tn *types.TypeName) []finding {
	named, ok := tn.Type().(*types.Named)
	if !ok {
		return nil
	}
	st, ok := named.Underlying().(*types.Struct)
	if !ok {
		return nil
	}
	declared := map[string]bool{}
	for m := range named.Methods() {
		declared[m.Name()] = true
	}
	var found []finding
	for i := range st.NumFields() {
		field := st.Field(i)
		if !field.Embedded() {
			continue
		}
		iface, ok := field.Type().Underlying().(*types.Interface)
		if !ok {
			continue
		}
		var missing []string
		for m := range iface.Methods() {
			if !declared[m.Name()] {
				missing = append(missing, m.Name())
			}
		}
		if len(missing) == 0 {
			continue
		}
		slices.Sort(missing)
		pos := fset.Position(field.Pos())
		file := pos.Filename
		if rel, err := filepath.Rel(root, file); err == nil {
			file = rel
		}
		found = append(found, finding{
			Pos:  fmt.Sprintf("%s:%d", filepath.ToSlash(file), pos.Line),
			Type: tn.Pkg().Name() + "." + tn.Name(),
			Embeds: types.TypeString(field.Type(), func(p *types.Package) string {
				if p == tn.Pkg() {
					return ""
				}
				return p.Name()
			}),
			Missing: missing,
		})
	}
	return found
}

// TestEmbeddings_NamesWhatAWrapperLeavesToTheEmbeddedValue holds the check
// itself to its rule on a package written for it: an embedding is named
// with the methods the struct does not declare (on T or *T), and only an
// embedded interface counts.
func TestEmbeddings_NamesWhatAWrapperLeavesToTheEmbeddedValue(t *testing.T) {
	const src = `package p

type Store interface {
	Take() error
	Renew() error
	Window() error
}

type Small interface{ Take() error }

// forgets embeds Store and declares two of its three methods.
type forgets struct{ Store }

func (forgets) Take() error   { return nil }
func (*forgets) Renew() error { return nil }

// whole declares every method of what it embeds.
type whole struct{ Small }

func (whole) Take() error { return nil }

// field holds the store as a field: nothing is forwarded unseen.
type field struct{ s Store }

// inner embeds a struct, not an interface.
type inner struct{ whole }

func f() {
	// local cannot declare methods: all of Small is forwarded.
	type local struct{ Small }
	_ = local{}
}
`
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	info := &types.Info{Defs: map[*ast.Ident]types.Object{}}
	if _, err := (&types.Config{}).Check("p", fset, []*ast.File{file}, info); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, obj := range info.Defs {
		if tn, ok := obj.(*types.TypeName); ok {
			for _, f := range embeddings("", fset, tn) {
				got = append(got, f.String())
			}
		}
	}
	slices.Sort(got)
	want := []string{
		"p.go:12: p.forgets embeds Store and does not declare Window",
		"p.go:30: p.local embeds Small and does not declare Take",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
