package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// runWait waits for c, which has started, for at most limit. A command
// still running then is stuck: its threads' kernel stacks and the
// kernel's list of blocked tasks go into the error before it is killed,
// so a hang in a guest kernel says where it hangs.
func runWait(c *exec.Cmd, limit time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		why := stuck(c.Process.Pid)
		c.Process.Kill()
		select {
		case <-done:
		case <-time.After(10 * time.Second): // unkillable: in the kernel for good
			why += "\n(still not gone 10 s after SIGKILL)"
		}
		return fmt.Errorf("killed after %s; where it was:\n%s", limit, why)
	}
}

// output runs c to completion within limit and returns its stdout.
func output(c *exec.Cmd, limit time.Duration) ([]byte, error) {
	var stdout bytes.Buffer
	c.Stdout = &stdout
	if err := c.Start(); err != nil {
		return nil, err
	}
	err := runWait(c, limit)
	return stdout.Bytes(), err
}

// stuck describes where pid's threads are in the kernel, then asks the
// kernel to log every blocked task (sysrq w), and returns the log's
// newest lines. (Not sysrq l: its NMIs can wedge a software-emulated
// guest.)
func stuck(pid int) string {
	var b strings.Builder
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	for _, task := range tasks {
		comm, _ := os.ReadFile(task + "/comm")
		wchan, _ := os.ReadFile(task + "/wchan")
		stack, _ := os.ReadFile(task + "/stack")
		fmt.Fprintf(&b, "thread %s (%s) wchan %s\n%s", filepath.Base(task), strings.TrimSpace(string(comm)), wchan, stack)
	}
	os.WriteFile("/proc/sysrq-trigger", []byte("w"), 0o200)
	b.WriteString("kernel log:\n")
	b.WriteString(kernelLogTail(120))
	return b.String()
}

// kernelLogTail returns the newest n lines of the kernel log.
func kernelLogTail(n int) string {
	// Raw syscalls: an os.File would park a nonblocking read in Go's
	// poller, which waits for the next message instead of saying EAGAIN.
	fd, err := unix.Open("/dev/kmsg", unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return err.Error()
	}
	defer unix.Close(fd)
	var lines []string
	buf := make([]byte, 8192)
	for {
		k, err := unix.Read(fd, buf)
		if err == unix.EPIPE { // overwritten while read: go on from the next
			continue
		}
		if err != nil || k <= 0 { // EAGAIN: the end of the log
			break
		}
		rec := string(buf[:k])
		if _, msg, ok := strings.Cut(rec, ";"); ok { // "prio,seq,ts,flags;message\n"
			rec = msg
		}
		lines = append(lines, strings.TrimRight(rec, "\n"))
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
