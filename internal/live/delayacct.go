//go:build linux

package live

import (
	"bytes"
	"errors"
	"fmt"
	"os"
)

// delayAcctPath turns the kernel's per-task delay accounting on and off
// (CONFIG_TASK_DELAY_ACCT, off at boot unless delayacct is on the command
// line): the requests' budgets read their disk I/O wait from it.
var delayAcctPath = "/proc/sys/kernel/task_delayacct"

// delayAccounting switches delay accounting on for the run where it is
// off, and says so; restore puts it back as it was. Where it cannot be
// switched on, the requests' I/O wait goes unsplit, and that is said.
func delayAccounting(notice func(error)) (restore func()) {
	was, err := os.ReadFile(delayAcctPath)
	switch {
	case errors.Is(err, os.ErrNotExist):
		notice(errors.New("the kernel keeps no delay accounting (CONFIG_TASK_DELAY_ACCT): the requests' disk I/O wait is not split from their other waits"))
		return func() {}
	case err != nil:
		notice(fmt.Errorf("kernel.task_delayacct cannot be read (%v): the requests' disk I/O wait is not split from their other waits", err))
		return func() {}
	case bytes.Equal(bytes.TrimSpace(was), []byte("1")):
		return func() {}
	}
	if err := os.WriteFile(delayAcctPath, []byte("1\n"), 0o644); err != nil {
		notice(fmt.Errorf("kernel.task_delayacct is off and cannot be switched on (%v): the requests' disk I/O wait is not split from their other waits", err))
		return func() {}
	}
	notice(errors.New("kernel.task_delayacct switched on for this run, to split the requests' disk I/O wait (it was 0; set back as numatrace ends)"))
	return func() {
		if err := os.WriteFile(delayAcctPath, was, 0o644); err != nil {
			notice(fmt.Errorf("kernel.task_delayacct could not be set back to %s: %v", bytes.TrimSpace(was), err))
		}
	}
}
