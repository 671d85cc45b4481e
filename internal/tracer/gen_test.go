//go:build linux

package tracer

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The BPF build must use only the repository's headers: every bpf2go line
// compiles with -nostdinc, and every #include names a file in bpf/ or
// headers/. A header from a package nobody installed then fails here, not
// on a fresh machine.
func TestBPFBuildIsHermetic(t *testing.T) {
	gen, err := os.ReadFile("gen.go")
	if err != nil {
		t.Fatal(err)
	}
	lines := 0
	for _, l := range strings.Split(string(gen), "\n") {
		if strings.HasPrefix(l, "//go:generate") {
			lines++
			if !strings.Contains(l, "go run ./bpfgen ") {
				t.Errorf("a BPF build outside bpfgen: %s", l)
			}
		}
	}
	if lines != 1 {
		t.Errorf("%d go:generate lines in gen.go, want the one that runs bpfgen", lines)
	}
	if !strings.Contains(strings.Join(cflagsOf(t), " "), "-nostdinc -I../../headers -I../../bpf") {
		t.Errorf("bpfgen builds with %v, not -nostdinc and the repository's headers only", cflagsOf(t))
	}
	include := regexp.MustCompile(`^\s*#\s*include\s*[<"]([^>"]+)[>"]`)
	roots := []string{"../../bpf", "../../headers"}
	for _, root := range roots {
		files, _ := filepath.Glob(filepath.Join(root, "*"))
		more, _ := filepath.Glob(filepath.Join(root, "*", "*"))
		for _, f := range append(files, more...) {
			if !strings.HasSuffix(f, ".h") && !strings.HasSuffix(f, ".c") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range strings.Split(string(src), "\n") {
				m := include.FindStringSubmatch(l)
				if m == nil {
					continue
				}
				found := fileExists(filepath.Join(filepath.Dir(f), m[1]))
				for _, r := range roots {
					found = found || fileExists(filepath.Join(r, m[1]))
				}
				if !found {
					t.Errorf("%s includes %s, which is not in bpf/ or headers/", f, m[1])
				}
			}
		}
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// cflagsOf reads the compiler flags bpfgen passes to bpf2go.
func cflagsOf(t *testing.T) []string {
	src, err := os.ReadFile("bpfgen/main.go")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`var cflags = \[\]string\{([^}]*)\}`).FindSubmatch(src)
	if m == nil {
		t.Fatal("no cflags in bpfgen/main.go")
	}
	var out []string
	for _, f := range strings.Split(string(m[1]), ",") {
		out = append(out, strings.Trim(strings.TrimSpace(f), `"`))
	}
	return out
}
