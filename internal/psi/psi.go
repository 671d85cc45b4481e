// Package psi reads the kernel's memory pressure stall information (PSI)
// for the whole system and for one cgroup v2 group, so that a run can set
// the stall time the kernel counted beside the stall time numatrace timed.
//
// The files are parsed here rather than with prometheus/procfs: its
// PSIStatsForResource reads only /proc/pressure (not a cgroup's
// memory.pressure) and opens paths itself. Every read goes through
// hostfs, confined to the machine's root and bounded.
package psi

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/numatrace/numatrace/internal/hostfs"
	"github.com/numatrace/numatrace/internal/sanitize"
)

// Totals is the memory stall time a PSI file has counted since its scope
// began (boot, or the cgroup's creation).
type Totals struct {
	Some time.Duration // at least one task of the scope stalled on memory
	Full time.Duration // every non-idle task of the scope stalled at once
}

// Scope is one place memory PSI is read from.
type Scope struct {
	// Name is "system", or the cgroup's path in the cgroup2 hierarchy as
	// /proc/PID/cgroup writes it ("/system.slice/redis.service"). It comes
	// from the file system: sanitize it before showing it.
	Name string
	// File is the pressure file, relative to the machine's root.
	File string
}

// SystemName is the Name of the system-wide scope.
const SystemName = "system"

// System is the whole machine: /proc/pressure/memory.
func System() Scope { return Scope{Name: SystemName, File: "proc/pressure/memory"} }

// IsSystem tells the system-wide scope from a cgroup.
func (s Scope) IsSystem() bool { return s.Name == SystemName }

// ErrNotAvailable matches a NotAvailableError with errors.Is.
var ErrNotAvailable = errors.New("memory PSI not available")

// NotAvailableError says why a scope has no memory PSI on this machine: the
// kernel has none, or the scope cannot have any (a cgroup v1 group). It is
// never reported as zero stall.
type NotAvailableError struct {
	Scope  string // Scope.Name, or what was asked for ("pid 42")
	Path   string // the file or directory concerned, as on the machine
	Reason string
	Err    error // the error that showed it, if any
}

func (e *NotAvailableError) Error() string {
	return fmt.Sprintf("memory PSI not available for %s: %s: %s",
		sanitize.Text(e.Scope), sanitize.Text(e.Path), e.Reason)
}

// Unwrap gives ErrNotAvailable and the underlying error, so errors.Is
// finds either.
func (e *NotAvailableError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrNotAvailable}
	}
	return []error{ErrNotAvailable, e.Err}
}

// Read reads the totals of s. A file that is missing, or that the kernel
// refuses to show (EOPNOTSUPP), gives a *NotAvailableError; a file that
// does not parse gives an error naming it and the line.
func Read(root *hostfs.Root, s Scope) (Totals, error) {
	t, err := parse(root, s.File)
	if err == nil {
		return t, nil
	}
	if why := unavailable(root, s, err); why != "" {
		return Totals{}, &NotAvailableError{Scope: s.Name, Path: root.Path(s.File), Reason: why, Err: err}
	}
	return Totals{}, err
}

// unavailable is why err means the kernel has no PSI for s, or "".
func unavailable(root *hostfs.Root, s Scope, err error) string {
	switch {
	case errors.Is(err, syscall.EOPNOTSUPP):
		return "the kernel refuses to show it (EOPNOTSUPP): PSI is disabled, as with psi=0 on its command line"
	case !hostfs.Absent(err):
		return ""
	case s.IsSystem():
		return "missing: the kernel was built without CONFIG_PSI or booted with psi=0"
	case !root.Exists(dirOf(s.File)):
		return "missing: the cgroup no longer exists"
	}
	// Writing 0 to a group's cgroup.pressure hides its pressure files.
	if v, err := root.ReadValue(dirOf(s.File) + "/cgroup.pressure"); err == nil && v == "0" {
		return "missing: PSI is switched off for this cgroup (its cgroup.pressure is 0)"
	}
	return "missing: the kernel was built without CONFIG_PSI or booted with psi=0"
}

func dirOf(file string) string {
	if i := strings.LastIndexByte(file, '/'); i >= 0 {
		return file[:i]
	}
	return "."
}

// parse reads a PSI file:
//
//	some avg10=0.00 avg60=0.00 avg300=0.00 total=12345
//	full avg10=0.00 avg60=0.00 avg300=0.00 total=6789
//
// total is in microseconds; the averages are not needed here.
func parse(root *hostfs.Root, file string) (Totals, error) {
	var t Totals
	var some, full bool
	err := root.Scan(file, hostfs.MaxValue, func(_ int, line string) error {
		f := strings.Fields(line)
		if len(f) == 0 {
			return nil
		}
		if len(f) != 5 || (f[0] != "some" && f[0] != "full") ||
			!strings.HasPrefix(f[1], "avg10=") || !strings.HasPrefix(f[2], "avg60=") || !strings.HasPrefix(f[3], "avg300=") {
			return fmt.Errorf("want \"some|full avg10=.. avg60=.. avg300=.. total=..\", got %s", hostfs.Excerpt(line))
		}
		v, ok := strings.CutPrefix(f[4], "total=")
		us, err := strconv.ParseUint(v, 10, 64)
		if !ok || err != nil || us > math.MaxInt64/uint64(time.Microsecond) {
			return fmt.Errorf("bad total (microseconds): %s", hostfs.Excerpt(f[4]))
		}
		seen, dst := &some, &t.Some
		if f[0] == "full" {
			seen, dst = &full, &t.Full
		}
		if *seen {
			return fmt.Errorf("a second %q line", f[0])
		}
		*seen, *dst = true, time.Duration(us)*time.Microsecond
		return nil
	})
	switch {
	case err != nil:
		return Totals{}, err
	case !some || !full:
		return Totals{}, fmt.Errorf("%s: want a \"some\" and a \"full\" line, got some=%t full=%t",
			sanitize.Text(root.Path(file)), some, full)
	}
	return t, nil
}
