package exchange

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Request timing's analysis is platform-neutral: no file of this package
// is left out of a build for another OS, and nothing it depends on
// reaches the kernel, the BPF objects or the tracer, so it is built and
// tested on a laptop as it is on Linux.
func TestExchangeIsPlatformNeutral(t *testing.T) {
	for _, osArch := range [][2]string{{"darwin", "arm64"}, {"windows", "amd64"}, {"linux", "amd64"}} {
		ctx := build.Default
		ctx.GOOS, ctx.GOARCH = osArch[0], osArch[1]
		pkg, err := ctx.ImportDir(".", 0)
		if err != nil {
			t.Fatalf("%s/%s: %v", osArch[0], osArch[1], err)
		}
		if len(pkg.IgnoredGoFiles) > 0 {
			t.Errorf("%s/%s leaves out %v: a build constraint or an OS suffix in a package every OS builds",
				osArch[0], osArch[1], pkg.IgnoredGoFiles)
		}
	}
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}", ".")
	cmd.Env = append(cmd.Environ(), "GOOS=darwin", "GOARCH=arm64")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, "\t")
		for _, imp := range strings.Fields(imports) {
			if kernelFacing(imp) || strings.HasSuffix(imp, "/internal/tracer") {
				t.Errorf("internal/latency/exchange depends on %s: %s imports it", imp, pkg)
			}
		}
	}
}

// kernelFacing says whether a package reaches the kernel, the BPF
// objects or the binaries uprobes attach to.
func kernelFacing(pkg string) bool {
	for _, p := range []string{"github.com/cilium/ebpf", "golang.org/x/sys/unix", "golang.org/x/arch", "debug/elf"} {
		if pkg == p || strings.HasPrefix(pkg, p+"/") {
			return true
		}
	}
	return false
}

// internal/tracer loads, attaches, reads and decodes: each of its files
// reaches the kernel or the BPF objects (imports a package that does, or
// names a declaration of the generated bindings). A file that does
// neither is analysis, which belongs in a platform-neutral package, as
// pairing a socket's writes into exchanges and the pacing estimate
// (once internal/tracer's exchanges.go and pacing.go) belong here.
func TestTracerOnlyDecodes(t *testing.T) {
	const dir = "../../tracer"
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	fset := token.NewFileSet()
	generated := map[string]bool{} // the bindings bpf2go declares
	var parsed []*ast.File
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, "_bpfel.go") {
			for name := range declared(af) {
				generated[name] = true
			}
			continue
		}
		if !ast.IsGenerated(af) {
			parsed = append(parsed, af)
		}
	}
	if len(generated) == 0 {
		t.Fatalf("no bpf2go bindings (*_bpfel.go) in %s", dir)
	}
	for _, af := range parsed {
		if len(af.Decls) == 0 || importsKernelFacing(af) || names(af, generated) {
			continue
		}
		t.Errorf("internal/tracer/%s touches no BPF and no kernel interface: what it does belongs in a platform-neutral package "+
			"(request timing's in internal/latency/exchange), tested on any OS", filepath.Base(fset.Position(af.Pos()).Filename))
	}
}

// declared are a file's top-level names.
func declared(af *ast.File) map[string]bool {
	out := map[string]bool{}
	for _, d := range af.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				out[d.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					out[s.Name.Name] = true
				case *ast.ValueSpec:
					for _, n := range s.Names {
						out[n.Name] = true
					}
				}
			}
		}
	}
	return out
}

func importsKernelFacing(af *ast.File) bool {
	for _, imp := range af.Imports {
		if p, err := strconv.Unquote(imp.Path.Value); err == nil && kernelFacing(p) {
			return true
		}
	}
	return false
}

// names says whether a file uses any of names.
func names(af *ast.File, names map[string]bool) bool {
	found := false
	ast.Inspect(af, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && names[id.Name] {
			found = true
		}
		return !found
	})
	return found
}
