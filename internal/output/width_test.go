package output

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

// widthReports are reports with lines wider than a small terminal.
func widthReports() map[string]*Report {
	return map[string]*Report{"stacks": stackReport(), "discards": discardReport(), "summary": testReport()}
}

// checkNarrow checks that narrow is wide's words in lines of at most w
// cells (a line of one word may be longer).
func checkNarrow(t *testing.T, name, wide, narrow string, w int) {
	t.Helper()
	for i, l := range strings.Split(narrow, "\n") {
		if ansi.StringWidth(l) > w && len(strings.Fields(l)) > 1 {
			t.Errorf("%s: line %d is %d cells, over %d: %q", name, i+1, ansi.StringWidth(l), w, l)
		}
	}
	if strings.Join(strings.Fields(narrow), " ") != strings.Join(strings.Fields(wide), " ") {
		t.Errorf("%s: at %d cells the report says something else:\n%s\nat %d:\n%s", name, w, narrow, Width, wide)
	}
}

// On a terminal narrower than Width the report wraps to its width, and
// says the same; it is never wider than Width.
func TestTextWidthWrapsToANarrowerTerminal(t *testing.T) {
	for name, r := range widthReports() {
		var wide bytes.Buffer
		if err := r.Text(&wide); err != nil {
			t.Fatal(err)
		}
		if widest(wide.String()) <= 80 {
			t.Fatalf("%s: no line over 80 cells to wrap", name)
		}
		for _, w := range []int{80, 60} {
			var narrow bytes.Buffer
			if err := r.TextWidth(&narrow, w); err != nil {
				t.Fatal(err)
			}
			checkNarrow(t, name, wide.String(), narrow.String(), w)
		}
		var wider bytes.Buffer
		r.TextWidth(&wider, 200)
		if wider.String() != wide.String() {
			t.Errorf("%s: at 200 cells the report is not the one at %d", name, Width)
		}
	}
}

// What is not a terminal (a file, a pipe, a buffer) gets Width: the
// report reads the same wherever it is kept.
func TestWidthOfWhatIsNotATerminal(t *testing.T) {
	if got := WidthOf(&bytes.Buffer{}); got != Width {
		t.Errorf("a buffer: %d", got)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if got := WidthOf(w); got != Width {
		t.Errorf("a pipe: %d", got)
	}
	f, err := os.Create(t.TempDir() + "/report.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := WidthOf(f); got != Width {
		t.Errorf("a file: %d", got)
	}
}
