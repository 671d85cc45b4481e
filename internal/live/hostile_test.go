//go:build linux

package live

import (
	"bytes"
	"errors"
	"testing"

	"github.com/numatrace/numatrace/internal/output"
)

// Warnings and the end-of-run note go to stderr escaped: they name
// processes (the target exited), cgroups and files.
func TestStderrLinesEscapeHostileText(t *testing.T) {
	var buf bytes.Buffer
	fe := &frontEnd{stdout: &buf, stderr: &buf}
	fe.warn(errors.New("latency file /tmp/\x1b]0;pwned\x07: no such file or directory"))
	fe.quiet = true
	fe.report(&output.Report{Note: "target pid 7 (new\nline\xff) exited after 1s"}, &buf)
	want := "numatrace: latency file /tmp/\\x1b]0;pwned\\x07: no such file or directory\n" +
		"numatrace: target pid 7 (new\\x0aline\\xff) exited after 1s\n"
	if got := buf.String(); got != want {
		t.Errorf("stderr:\n%q\nwant\n%q", got, want)
	}
}
