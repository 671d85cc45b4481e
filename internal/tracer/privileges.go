//go:build linux

package tracer

import (
	"fmt"

	"golang.org/x/sys/unix"
)

const (
	capSysAdmin = 21
	capPerfmon  = 38
	capBPF      = 39
)

// CheckPrivileges fails early, with one clear line, when the process lacks
// the capabilities to load and attach tracing programs.
func CheckPrivileges() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("read capabilities: %w", err)
	}
	has := func(c uint) bool { return data[c/32].Effective&(1<<(c%32)) != 0 }
	if has(capSysAdmin) || (has(capBPF) && has(capPerfmon)) {
		return nil
	}
	return ErrPermission
}
