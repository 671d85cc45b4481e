package latency

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// corePackages are the model and its analysis: what a replay, the view
// and every format are built on. None of them acquires anything, so none
// may link an HTTP client or the Prometheus parser (internal/latency/source
// does that, at the edge).
var corePackages = []string{"latency", "aggregate", "correlate", "engine", "output", "record"}

// forbidden reports whether a package belongs to acquisition only.
func forbidden(pkg string) bool {
	return strings.HasPrefix(pkg, "net/http") || strings.HasPrefix(pkg, "github.com/prometheus/")
}

func TestCorePackagesDoNotImportHTTP(t *testing.T) {
	const mod = "github.com/numatrace/numatrace/internal/"
	for _, p := range corePackages {
		out, err := exec.Command("go", "list", "-deps", "-f",
			"{{.ImportPath}}\t{{if not .Standard}}{{.Dir}}{{end}}\t{{join .Imports \" \"}}", mod+p).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", p, err, out)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			pkg, rest, _ := strings.Cut(line, "\t")
			dir, imports, _ := strings.Cut(rest, "\t")
			if forbidden(pkg) {
				continue
			}
			watch(t, dir)
			// Name the package that brings a forbidden one in, so the
			// failure says where to look.
			for _, imp := range strings.Fields(imports) {
				if forbidden(imp) {
					t.Errorf("internal/%s depends on %s: %s imports it", p, imp, pkg)
				}
			}
		}
	}
}

// watch reads a package's directory and its Go files: go test caches a
// result until a file the test looked at changes, and it cannot see what
// go list read.
func watch(t *testing.T, dir string) {
	if dir == "" {
		return
	}
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f.Name(), ".go") {
			if _, err := os.Stat(filepath.Join(dir, f.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
}
