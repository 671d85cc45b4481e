package prose

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestCount(t *testing.T) {
	for _, c := range []struct {
		n    uint64
		want string
	}{{0, "0 windows"}, {1, "1 window"}, {2, "2 windows"}, {11976, "11,976 windows"}, {1234567, "1,234,567 windows"}} {
		if got := Count(c.n, "window"); got != c.want {
			t.Errorf("Count(%d) = %q, want %q", c.n, got, c.want)
		}
	}
	if Were(1) != "was" || Were(0) != "were" || Were(3) != "were" {
		t.Errorf("Were: %q %q %q", Were(1), Were(0), Were(3))
	}
	if got := BadRecords(1); got != "1 ring-buffer record from the kernel could not be read or decoded (an unknown cause, a short record) and was left out" {
		t.Errorf("BadRecords(1) = %q", got)
	}
}

// sources parses the Go files (not the tests) of internal/<pkg>.
func sources(t *testing.T, pkg string) []*ast.File {
	t.Helper()
	dir := filepath.Join("..", pkg)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

const module = "github.com/numatrace/numatrace/internal/"

// The live loop says one sentence the report also says; it takes it
// from here, not from the report's package, which it has no other use
// for.
func TestSessionDoesNotImportOutput(t *testing.T) {
	for _, f := range sources(t, "session") {
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == module+"output" {
				t.Errorf("internal/session imports %s: take its words from internal/prose", p)
			}
		}
	}
}

// latency is a core package: it keeps no English helper for others to
// import. A function that takes a number and a noun and gives a string
// (Count(3, "window")) belongs here.
func TestLatencyExportsNoPluralHelper(t *testing.T) {
	for _, f := range sources(t, "latency") {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !fn.Name.IsExported() {
				continue
			}
			if countsNouns(fn.Type) || fn.Name.Name == "Count" || fn.Name.Name == "Were" || fn.Name.Name == "Plural" {
				t.Errorf("internal/latency exports %s, an English helper: it belongs in internal/prose", fn.Name.Name)
			}
		}
	}
}

// countsNouns reports whether a function is shaped like Count: an
// integer and a string in, a string out.
func countsNouns(ft *ast.FuncType) bool {
	var in []string
	for _, p := range ft.Params.List {
		for range max(len(p.Names), 1) {
			in = append(in, types(p.Type))
		}
	}
	if ft.Results == nil || len(ft.Results.List) != 1 || types(ft.Results.List[0].Type) != "string" || len(in) != 2 || in[1] != "string" {
		return false
	}
	switch in[0] {
	case "int", "int64", "uint", "uint64":
		return true
	}
	return false
}

func types(e ast.Expr) string {
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// prose is a leaf: the core packages import it, so it imports none of
// numatrace's own.
func TestProseIsALeaf(t *testing.T) {
	for _, f := range sources(t, "prose") {
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(p, "github.com/numatrace/") {
				t.Errorf("internal/prose imports %s", p)
			}
		}
	}
}
