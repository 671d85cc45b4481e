package tui

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/numatrace/numatrace/internal/doctor"
	"github.com/numatrace/numatrace/internal/textwrap"
)

// hyphenated is prose whose flags and names a hyphen-breaking wrapper
// cuts at the widths below: "--min-" on one line, "event" on the next.
const hyphenated = "raise --min-event or pin the process to one node with numactl --cpunodebind=0 --membind=0, then set vm.zone_reclaim_mode=0 on non-NUMA-aware machines"

// whole checks that lines are s broken at its spaces only, each within
// w cells unless it is one word.
func whole(t *testing.T, what string, lines []string, s string, w int) {
	t.Helper()
	var got []string
	for _, l := range lines {
		if ansi.StringWidth(l) > w && strings.Contains(strings.TrimSpace(l), " ") {
			t.Errorf("%s: line %q is over %d cells", what, l, w)
		}
		got = append(got, strings.Fields(l)...)
	}
	if strings.Join(got, " ") != strings.Join(strings.Fields(s), " ") {
		t.Errorf("%s at %d cells broke a word:\n%s", what, w, strings.Join(lines, "\n"))
	}
}

func TestWrapBreaksAtSpacesNotHyphens(t *testing.T) {
	for w := 12; w <= 60; w++ {
		whole(t, "wrap", wrap(hyphenated, w), hyphenated, w)
		lines := hangWrap(hyphenated, w, "  ")
		for i, l := range lines[1:] {
			if !strings.HasPrefix(l, "  ") {
				t.Errorf("hangWrap: line %d %q is not indented", i+1, l)
			}
		}
		whole(t, "hangWrap", lines, hyphenated, w)
	}
}

// The view's prose wraps as the report's and the help's do: with
// textwrap's one wrapper.
func TestWrapIsTextwraps(t *testing.T) {
	for w := 12; w <= 60; w++ {
		if got, want := wrap(hyphenated, w), textwrap.Lines(hyphenated, w); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("at %d cells wrap gives\n%s\ntextwrap.Lines\n%s", w, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// On the System screen a doctor finding's flags stay whole at every
// width.
func TestSystemScreenKeepsFlagsWhole(t *testing.T) {
	finding := "[warn] " + hyphenated
	for w := 40; w <= 80; w++ {
		s := NewStore(liveInfo(&doctor.Report{Findings: []doctor.Finding{{Severity: doctor.Warn, Title: hyphenated}}}), liveWindowsForTest)
		feed(s)
		m := NewLive(s, Options{NoTicks: true})
		m.Update(tea.WindowSizeMsg{Width: w, Height: 60})
		m.Update(keyTab)
		m.Update(keyTab)
		v := ansi.Strip(m.View())
		at := strings.Index(v, "[warn]")
		if at < 0 {
			t.Fatalf("the System screen at %d cells lacks the finding:\n%s", w, v)
		}
		var lines []string
		for _, l := range strings.Split(v[at:], "\n") {
			if strings.TrimSpace(l) == "" {
				break
			}
			lines = append(lines, strings.TrimSpace(l))
		}
		whole(t, "the finding", lines, finding, w)
	}
}

// Every wrapping in the view goes through wrap: no other function calls
// a wrapper of x/ansi or of textwrap.
func TestTheViewHasOneWrapper(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), e.Name(), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				pkg, ok := sel.X.(*ast.Ident)
				if !ok {
					return true
				}
				switch {
				case pkg.Name == "ansi" && strings.Contains(sel.Sel.Name, "wrap"),
					pkg.Name == "ansi" && strings.Contains(sel.Sel.Name, "Wrap"),
					pkg.Name == "textwrap" && fn.Name.Name != "wrap":
					t.Errorf("%s: %s calls %s.%s: the view wraps prose with textwrap's Lines, through wrap", e.Name(), fn.Name.Name, pkg.Name, sel.Sel.Name)
				}
				return true
			})
		}
	}
}
