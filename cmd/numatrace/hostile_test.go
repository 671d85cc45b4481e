package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
)

// An error line that names a file (or a cgroup, a process) shows it
// escaped: a file name can hold anything but '/' and NUL.
func TestErrorLineEscapesHostileText(t *testing.T) {
	dir := t.TempDir()
	code, _, stderr := runCLI("report", filepath.Join(dir, "\x1b]0;pwned\x07\n\xff"))
	msg := oneErrorLine(t, stderr)
	if want := "open recording: open " + dir + `/\x1b]0;pwned\x07\x0a\xff: no such file or directory`; code != 2 || msg != want {
		t.Errorf("exit %d, %q: want exit 2 and %q", code, msg, want)
	}
}

// Errors joined by errors.Join keep a line each, escaped one by one; a
// newline inside one of them is escaped.
func TestErrTextKeepsJoinedErrorsApart(t *testing.T) {
	err := &exitError{code: 1, err: errors.Join(errors.New("write output: broken pipe"),
		fmt.Errorf("recording /tmp/a\nb: %w", errors.New("no space left on device")))}
	if got, want := errText(err), "write output: broken pipe\n"+`recording /tmp/a\x0ab: no space left on device`; got != want {
		t.Errorf("errText = %q, want %q", got, want)
	}
	// fmt.Errorf with two %w is not a join: one line.
	err2 := fmt.Errorf("a %w and\x1b %w", errors.New("x"), errors.New("y"))
	if got, want := errText(err2), `a x and\x1b y`; got != want {
		t.Errorf("errText = %q, want %q", got, want)
	}
}
