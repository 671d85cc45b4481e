//go:build linux

package live

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// delayAcctPath turns the kernel's per-task delay accounting on and off
// (CONFIG_TASK_DELAY_ACCT, off at boot unless delayacct is on the command
// line): the requests' budgets read their disk I/O wait from it.
var delayAcctPath = "/proc/sys/kernel/task_delayacct"

// delayAcctDir holds what the runs relying on delay accounting share, so
// that one run ending does not switch it off under another: "was", the
// value the first of them found, which every run holds a shared lock on
// for its duration (the last to end sets the value back), and "lock",
// held for a moment while a run starts or ends. A run killed before it
// could restore leaves delay accounting on, as it would alone. The
// record is per mount namespace (/run), the setting the machine's: a run
// in a container and one on the host do not see each other's.
var delayAcctDir = "/run/numatrace/delayacct"

const unsplitIO = "the requests' disk I/O wait is not split from their other waits"

// delayAccounting switches delay accounting on for the run where it is
// off, and says so; restore puts it back as it was once no other run
// needs it. Where it cannot be switched on, the requests' I/O wait goes
// unsplit, and that is said.
func delayAccounting(notice func(error)) (restore func()) {
	now, err := os.ReadFile(delayAcctPath)
	switch {
	case errors.Is(err, os.ErrNotExist):
		notice(fmt.Errorf("the kernel keeps no delay accounting (CONFIG_TASK_DELAY_ACCT): %s", unsplitIO))
		return func() {}
	case err != nil:
		notice(fmt.Errorf("kernel.task_delayacct cannot be read (%v): %s", err, unsplitIO))
		return func() {}
	}
	mu, was, err := openShared()
	if err != nil {
		if isOn(now) {
			return func() {}
		}
		return switchAlone(now, err, notice)
	}
	defer unlock(mu)
	// With "lock" held no run starts or ends: "was" is free only where no
	// run is live, and then what it holds is a killed run's, which may
	// no longer be true (the value set since): this run's reading is.
	var first []byte
	if syscall.Flock(int(was.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
		first = bytes.TrimSpace(now)
		err = writeValue(was, first)
	} else {
		first, err = readValue(was)
	}
	if err == nil {
		err = syscall.Flock(int(was.Fd()), syscall.LOCK_SH)
	}
	if err == nil && !isOn(now) {
		if err = os.WriteFile(delayAcctPath, []byte("1\n"), 0o644); err == nil {
			notice(fmt.Errorf("kernel.task_delayacct switched on for this run, to split the requests' disk I/O wait (it was %s; set back as the last numatrace run ends)", first))
		}
	}
	if err != nil {
		was.Close()
		if !isOn(now) {
			notice(fmt.Errorf("kernel.task_delayacct is off and cannot be switched on (%v): %s", err, unsplitIO))
		}
		return func() {}
	}
	return func() { restoreDelayAccounting(was, notice) }
}

// restoreDelayAccounting sets delay accounting back to the value the
// first run found, if no other run holds "was".
func restoreDelayAccounting(was *os.File, notice func(error)) {
	defer was.Close()
	mu, err := lockDir()
	if err != nil {
		notice(fmt.Errorf("kernel.task_delayacct is left on: %v", err))
		return
	}
	defer unlock(mu)
	if syscall.Flock(int(was.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return // another run relies on it: the last one restores
	}
	first, err := readValue(was)
	if err == nil && len(first) > 0 && !isOn(first) {
		err = os.WriteFile(delayAcctPath, append(first, '\n'), 0o644)
	}
	if err != nil {
		notice(fmt.Errorf("kernel.task_delayacct could not be set back to %s: %v", first, err))
		return
	}
	_ = was.Truncate(0)
}

// switchAlone switches delay accounting on for this run alone, where the
// runs' shared record cannot be kept (why), and sets it back as it ends.
func switchAlone(was []byte, why error, notice func(error)) (restore func()) {
	if err := os.WriteFile(delayAcctPath, []byte("1\n"), 0o644); err != nil {
		notice(fmt.Errorf("kernel.task_delayacct is off and cannot be switched on (%v): %s", err, unsplitIO))
		return func() {}
	}
	notice(fmt.Errorf("kernel.task_delayacct switched on for this run, to split the requests' disk I/O wait (it was %s; set back as numatrace ends, even under another numatrace run: %v)", bytes.TrimSpace(was), why))
	return func() {
		if err := os.WriteFile(delayAcctPath, was, 0o644); err != nil {
			notice(fmt.Errorf("kernel.task_delayacct could not be set back to %s: %v", bytes.TrimSpace(was), err))
		}
	}
}

// openShared takes the directory's lock and opens "was".
func openShared() (mu, was *os.File, err error) {
	if mu, err = lockDir(); err != nil {
		return nil, nil, err
	}
	was, err = os.OpenFile(filepath.Join(delayAcctDir, "was"), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		unlock(mu)
		return nil, nil, err
	}
	return mu, was, nil
}

// lockDir makes the directory (root's alone) where it is missing and
// takes its lock; it follows no symbolic link.
func lockDir() (*os.File, error) {
	if err := os.MkdirAll(delayAcctDir, 0o700); err != nil {
		return nil, err
	}
	mu, err := os.OpenFile(filepath.Join(delayAcctDir, "lock"), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(mu.Fd()), syscall.LOCK_EX); err != nil {
		mu.Close()
		return nil, err
	}
	return mu, nil
}

func unlock(mu *os.File) { mu.Close() } // closing drops the flock

func isOn(v []byte) bool { return bytes.Equal(bytes.TrimSpace(v), []byte("1")) }

func readValue(f *os.File) ([]byte, error) {
	buf := make([]byte, 16)
	n, err := f.ReadAt(buf, 0)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return bytes.TrimSpace(buf[:n]), err
}

func writeValue(f *os.File, v []byte) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt(append(bytes.Clone(v), '\n'), 0)
	return err
}
