package output

import (
	"bytes"
	"testing"

	"github.com/numatrace/numatrace/internal/testutil"
)

// The report printed at the end of a run (attach's, after the view too,
// and replay's and report's) wraps to a terminal narrower than Width,
// and stays Width on a wider one.
func TestPrintWrapsToTheTerminal(t *testing.T) {
	for name, r := range widthReports() {
		var wide bytes.Buffer
		r.Text(&wide)
		for _, cols := range []int{80, 200} {
			tty, written := testutil.Pty(t, cols)
			if err := Print(r, nil, tty); err != nil {
				t.Fatal(err)
			}
			got := written()
			if cols >= Width {
				if got != wide.String() {
					t.Errorf("%s: a %d-column terminal got another report than a file:\n%s", name, cols, got)
				}
				continue
			}
			checkNarrow(t, name, wide.String(), got, cols)
		}
	}
}
