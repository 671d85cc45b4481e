package stall

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// The domain types carry no format: record, output and wire declare the
// shapes they write and convert at their edge, so a field here can be
// renamed without changing a file format.
func TestDomainTypesHaveNoJSONTags(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range pkgs {
		for name, f := range pkg.Files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if field, ok := n.(*ast.Field); ok && field.Tag != nil && strings.Contains(field.Tag.Value, "json:") {
					t.Errorf("%s: a JSON tag %s: declare the shape in the format's package", fset.Position(field.Pos()), field.Tag.Value)
				}
				return true
			})
		}
	}
}
