//go:build linux

package tracer

import (
	"errors"
	"os"
	"strings"
)

// schedInfoOn says whether the scheduler keeps the run-queue times
// runq_wait reads (task_struct.sched_info): /proc/PID/schedstat shows them,
// and a process that has run has run at least one time slice.
func schedInfoOn() error {
	return schedInfoFrom(os.ReadFile("/proc/self/schedstat"))
}

func schedInfoFrom(b []byte, err error) error {
	if err != nil {
		return errors.New("the kernel keeps no run-queue times: /proc/PID/schedstat is missing (CONFIG_SCHED_INFO is off)")
	}
	f := strings.Fields(string(b))
	if len(f) < 3 || f[2] == "0" {
		return errors.New("the kernel keeps no run-queue times: schedstats and delay accounting are off (sysctl kernel.sched_schedstats=1 turns them on)")
	}
	return nil
}
