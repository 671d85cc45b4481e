//go:build linux

package live

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeDelayAcct points delay accounting at a file holding v.
func fakeDelayAcct(t *testing.T, v string) (read func() string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "task_delayacct")
	if err := os.WriteFile(path, []byte(v+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	oldPath, oldDir := delayAcctPath, delayAcctDir
	delayAcctPath, delayAcctDir = path, filepath.Join(dir, "run", "delayacct")
	t.Cleanup(func() { delayAcctPath, delayAcctDir = oldPath, oldDir })
	return func() string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
}

// Two runs overlap: the first to end leaves delay accounting on for the
// other, whose requests' disk I/O wait would otherwise go unsplit from
// then on; the last to end sets it back as the first found it.
func TestDelayAccountingStaysOnForAnOverlappingRun(t *testing.T) {
	read := fakeDelayAcct(t, "0")
	var said []string
	notice := func(err error) { said = append(said, err.Error()) }
	restoreA := delayAccounting(notice)
	restoreB := delayAccounting(notice)
	if got := read(); got != "1" {
		t.Fatalf("delay accounting is %s during the runs, want 1", got)
	}
	if len(said) != 1 || !strings.Contains(said[0], "switched on for this run") {
		t.Errorf("said %q, want one notice that it was switched on", said)
	}
	restoreA()
	if got := read(); got != "1" {
		t.Errorf("delay accounting is %s after the first run ended with another still running, want 1", got)
	}
	restoreB()
	if got := read(); got != "0" {
		t.Errorf("delay accounting is %s after the last run ended, want 0 as it was", got)
	}
	// A run after them finds it off again, and restores it again.
	restoreC := delayAccounting(notice)
	if got := read(); got != "1" {
		t.Errorf("delay accounting is %s during a later run, want 1", got)
	}
	restoreC()
	if got := read(); got != "0" {
		t.Errorf("delay accounting is %s after the later run, want 0", got)
	}
}

// On where the runs found it (delayacct on the kernel's command line):
// no run switches it, and none switches it off.
func TestDelayAccountingOnAtBootStaysOn(t *testing.T) {
	read := fakeDelayAcct(t, "1")
	var said []string
	notice := func(err error) { said = append(said, err.Error()) }
	restoreA := delayAccounting(notice)
	restoreB := delayAccounting(notice)
	restoreB()
	restoreA()
	if got := read(); got != "1" {
		t.Errorf("delay accounting is %s, want 1 as it was", got)
	}
	if len(said) != 0 {
		t.Errorf("said %q, want nothing", said)
	}
}

// Where the shared record cannot be kept (no /run), a run still switches
// delay accounting on for itself, says what it cannot promise, and sets
// it back.
func TestDelayAccountingWithoutTheSharedRecord(t *testing.T) {
	read := fakeDelayAcct(t, "0")
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	delayAcctDir = filepath.Join(blocker, "delayacct") // under a file: cannot be made
	var said []string
	restore := delayAccounting(func(err error) { said = append(said, err.Error()) })
	if got := read(); got != "1" {
		t.Errorf("delay accounting is %s during the run, want 1", got)
	}
	restore()
	if got := read(); got != "0" {
		t.Errorf("delay accounting is %s after the run, want 0", got)
	}
	if len(said) != 1 || !strings.Contains(said[0], "even under another numatrace run") {
		t.Errorf("said %q, want one notice of what it cannot promise", said)
	}
}

// A run killed before it restored left its record behind, unlocked: what
// it says (on, as that run found it) is no longer true once the value was
// set since (here switched off by hand), and the next run, alone, says
// and restores what it found itself.
func TestDelayAccountingAfterAKilledRun(t *testing.T) {
	read := fakeDelayAcct(t, "0")
	if err := os.MkdirAll(delayAcctDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(delayAcctDir, "was"), []byte("1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var said []string
	restore := delayAccounting(func(err error) { said = append(said, err.Error()) })
	if got := read(); got != "1" {
		t.Errorf("delay accounting is %s during the run, want 1", got)
	}
	if len(said) != 1 || !strings.Contains(said[0], "(it was 0;") {
		t.Errorf("said %q, want that it was 0", said)
	}
	restore()
	if got := read(); got != "0" {
		t.Errorf("delay accounting is %s after the run, want 0 as it found it", got)
	}
}
