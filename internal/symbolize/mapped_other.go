//go:build !linux

package symbolize

import (
	"errors"
	"os"
)

// openMapped needs Linux's /proc: elsewhere no file is read.
func (u *User) openMapped(pid uint32, m *mapping) (*os.File, error) {
	return nil, errors.New("reading another process's files needs Linux")
}
