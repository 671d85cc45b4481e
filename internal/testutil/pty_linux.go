package testutil

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Pty opens a pseudo-terminal cols wide: the terminal's end, and what was
// written to it, read from the other end until the terminal is closed.
func Pty(t *testing.T, cols int) (*os.File, func() string) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	fd := int(ptmx.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: uint16(cols), Row: 24}); err != nil {
		t.Fatal(err)
	}
	out := make(chan string)
	go func() {
		var b bytes.Buffer
		io.Copy(&b, ptmx) // ends with EIO once the terminal's end is closed
		out <- b.String()
	}()
	return tty, func() string {
		tty.Close()
		return strings.ReplaceAll(<-out, "\r\n", "\n") // the terminal's line discipline adds the \r
	}
}
