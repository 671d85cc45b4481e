package run

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Each percentile goes by its name and comes back from it; the zero
// value is p99, the default, and a name none has is refused.
func TestPercentileNames(t *testing.T) {
	if Percentile(0) != P99 || P99.String() != "p99" {
		t.Errorf("the zero percentile is %q, want p99", Percentile(0))
	}
	seen := map[string]bool{}
	for p := P99; p < numPercentiles; p++ {
		name := p.String()
		if back, ok := ParsePercentile(name); !ok || back != p || seen[name] {
			t.Errorf("%d: %q reads back as %d, %v", p, name, back, ok)
		}
		seen[name] = true
	}
	for _, bad := range []string{"p95", "", "P99"} {
		if _, ok := ParsePercentile(bad); ok {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Every LatencyKind constant but LatencyNone is in LatencyKinds, which
// the tests of every place a source is wired walk: a kind left out of it
// would be checked nowhere.
func TestLatencyKindsListsEveryKind(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var declared []LatencyKind
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			if id, typed := vs.Type.(*ast.Ident); !typed || id.Name != "LatencyKind" {
				return true
			}
			for _, v := range vs.Values {
				if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, _ := strconv.Unquote(lit.Value)
					declared = append(declared, LatencyKind(s))
				}
			}
			return true
		})
	}
	if len(declared) < 2 {
		t.Fatalf("found %d LatencyKind constants: the test no longer reads them", len(declared))
	}
	for _, k := range declared {
		if k != LatencyNone && !slices.Contains(LatencyKinds(), k) {
			t.Errorf("LatencyKind %q is not in LatencyKinds", k)
		}
	}
	if slices.Contains(LatencyKinds(), LatencyNone) {
		t.Error("LatencyKinds holds LatencyNone: no source is not a kind of source")
	}
}
