package symbolize

import (
	"fmt"
	"os"
	"syscall"
)

// openRegular opens path for reading only if it is a regular file. The
// paths come from another process's mappings, through its root: a FIFO
// or a device put there would block or never end a read, so the open
// does not wait (O_NONBLOCK) and what was opened is checked.
func openRegular(path string) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s is not a regular file", path)
	}
	return f, st, nil
}
