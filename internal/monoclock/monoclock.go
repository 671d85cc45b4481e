// Package monoclock reads CLOCK_MONOTONIC, the clock of the kernel's
// bpf_ktime_get_ns and of every timestamp numatrace's BPF programs write.
package monoclock

import "golang.org/x/sys/unix"

// Ns is CLOCK_MONOTONIC now, in nanoseconds (0 if it cannot be read).
func Ns() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return uint64(ts.Nano())
}
