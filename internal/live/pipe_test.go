//go:build linux

package live

import (
	"os"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/output"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/testutil"
)

// A terminal on stdout is left as it is, whatever stdin is: the report
// that ends a run (after the view, or with --no-tui) wraps to its width.
// A pipe is watched for its reader going away, and gets the report at
// output.Width.
func TestTheRunsReportFitsTheTerminal(t *testing.T) {
	tty, written := testutil.Pty(t, 80)
	w := endOnBrokenPipe(tty, func() {})
	if w != tty || output.WidthOf(w) != 80 {
		t.Errorf("an 80-column terminal became %T, %d columns wide", w, output.WidthOf(w))
	}
	d := run.Description{Target: "container 3f6b1d2e4c5a of pod shop/web-7d9f8b6c5d-x2x9q (Burstable) on a node with a long name",
		Kernel: "6.18.44", StartNs: 1, WindowNs: 1e9}
	fe := &frontEnd{stdout: w, stderr: os.Stderr, view: true}
	if err := fe.report(output.NewReport(d, run.End{EndNs: 2e9, DurationNs: 2e9}, aggregate.Summary{}, nil, 20), os.Stderr); err != nil {
		t.Fatal(err)
	}
	got := written()
	for _, l := range strings.Split(got, "\n") {
		if ansi.StringWidth(l) > 80 {
			t.Errorf("a line of %d columns on an 80-column terminal: %q", ansi.StringWidth(l), l)
		}
	}
	if !strings.Contains(got, "VERDICT:") {
		t.Errorf("no report:\n%s", got)
	}
	r, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer pw.Close()
	if w := endOnBrokenPipe(pw, func() {}); output.WidthOf(w) != output.Width {
		t.Errorf("a pipe's report is %d columns wide", output.WidthOf(w))
	}
}
