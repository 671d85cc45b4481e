package target

import (
	"context"

	"golang.org/x/sys/unix"
)

// waitPidfd waits on a pidfd, which becomes readable when the whole thread
// group has exited. ok is false where the kernel has no pidfds (before
// 5.3): the caller then polls /proc.
func waitPidfd(ctx context.Context, pid int) (gone, ok bool) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false, false
	}
	defer unix.Close(fd)
	for ctx.Err() == nil {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if n, err := unix.Poll(fds, 200); err == nil && n > 0 {
			return true, true
		}
	}
	return false, true
}
