//go:build linux

package tracer

import (
	"errors"
	"os"
	"strings"

	"github.com/cilium/ebpf/btf"
)

// schedInfoOn says whether the scheduler keeps the run-queue times
// runq_wait reads (task_struct.sched_info): /proc/PID/schedstat shows them,
// and a process that has run has run at least one time slice. The
// program reaches the runqueue's clock through the task's cfs_rq, which
// has a pointer to its runqueue only with CONFIG_FAIR_GROUP_SCHED.
func schedInfoOn(kspec *btf.Spec) error {
	if err := schedInfoFrom(os.ReadFile("/proc/self/schedstat")); err != nil {
		return err
	}
	if kspec == nil {
		return nil
	}
	var cfs *btf.Struct
	if err := kspec.TypeByName("cfs_rq", &cfs); err != nil {
		return errors.New("the kernel's BTF has no struct cfs_rq to reach the runqueue clock through")
	}
	for _, m := range cfs.Members {
		if m.Name == "rq" {
			return nil
		}
	}
	return errors.New("the kernel was built without CONFIG_FAIR_GROUP_SCHED: a task's cfs_rq does not lead to its runqueue clock")
}

func schedInfoFrom(b []byte, err error) error {
	if err != nil {
		return errors.New("the kernel keeps no run-queue times: /proc/PID/schedstat is missing (CONFIG_SCHED_INFO is off)")
	}
	f := strings.Fields(string(b))
	if len(f) < 3 || f[2] == "0" {
		return errors.New("the kernel keeps no run-queue times: it has no CONFIG_SCHEDSTATS and delay accounting is off (boot with delayacct)")
	}
	return nil
}
