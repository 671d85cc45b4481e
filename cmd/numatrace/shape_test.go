package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// cmd/ is flag parsing and wiring; the work is in the internal packages.
// A function here that grows past 60 lines has started doing the work,
// and a select in the engine or the live loop with more than six cases
// has started to own what belongs to a source.
func TestCommandsStayWiring(t *testing.T) {
	walk(t, ".", func(fset *token.FileSet, n ast.Node) {
		if fn, ok := n.(*ast.FuncDecl); ok {
			if l := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; l > 60 {
				t.Errorf("%s: %s is %d lines (at most 60 in cmd/)", fset.Position(fn.Pos()), fn.Name.Name, l)
			}
		}
	})
	for _, dir := range []string{"../../internal/engine", "../../internal/session", "../../internal/replay"} {
		walk(t, dir, func(fset *token.FileSet, n ast.Node) {
			if s, ok := n.(*ast.SelectStmt); ok && len(s.Body.List) > 6 {
				t.Errorf("%s: a select with %d cases (at most 6)", fset.Position(s.Pos()), len(s.Body.List))
			}
		})
	}
}

// walk visits every node of the non-test Go files in dir.
func walk(t *testing.T, dir string, visit func(*token.FileSet, ast.Node)) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool { visit(fset, n); return true })
	}
}
