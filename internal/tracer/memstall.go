//go:build linux

package tracer

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/numatrace/numatrace/internal/symbolize"
)

// memstallSiteNames are the kernel functions each memstall_wait reason
// waits in, by enum memstall_reason (index reason - 1), newest name first:
// the first this kernel has is the site.
var memstallSiteNames = [typesMemstallReasonMEMSTALL_SITES][]string{
	typesMemstallReasonMEMSTALL_THRASHING - 1:   {"folio_wait_bit_common", "wait_on_page_bit_common"},
	typesMemstallReasonMEMSTALL_MEMORY_HIGH - 1: {"mem_cgroup_handle_over_high"},
	typesMemstallReasonMEMSTALL_SWAP_IN - 1:     {"swap_read_folio", "swap_readpage"},
}

// memstallSites are the text ranges of the wait sites in the running
// kernel, for cfg_memstall_site_start/end. A site the kernel does not
// have stays empty, and its waits read "other".
func memstallSites(kallsyms string) (start, end [typesMemstallReasonMEMSTALL_SITES]uint64, err error) {
	k, err := symbolize.LoadKernel(kallsyms)
	if err != nil {
		return start, end, err
	}
	for i, names := range memstallSiteNames {
		for _, n := range names {
			if s, e, ok := k.Range(n); ok {
				start[i], end[i] = s, e
				break
			}
		}
	}
	return start, end, nil
}

// memstallReady says whether the kernel marks memory stalls where a
// program can see them: task_struct.psi_flags (CONFIG_PSI), and PSI
// on (psi=0, or CONFIG_PSI_DEFAULT_DISABLED without psi=1, leaves the bit
// unset for ever).
func memstallReady(kspec *btf.Spec) error {
	if kspec != nil {
		var task *btf.Struct
		if err := kspec.TypeByName("task_struct", &task); err != nil {
			return errors.New("the kernel's BTF has no struct task_struct")
		}
		found := false
		for _, m := range task.Members {
			found = found || m.Name == "psi_flags"
		}
		if !found {
			return errors.New("the kernel does not mark memory stalls on the task (no task_struct.psi_flags: CONFIG_PSI off)")
		}
	}
	return psiOn(os.ReadFile("/proc/pressure/memory"))
}

func psiOn(_ []byte, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EOPNOTSUPP):
		return errors.New("PSI is off (boot with psi=1): the kernel marks no memory stalls")
	case errors.Is(err, os.ErrNotExist):
		return errors.New("the kernel has no PSI (/proc/pressure/memory is missing): it marks no memory stalls")
	}
	return fmt.Errorf("PSI: %w", err)
}

// nsPerJiffy is the kernel's tick length, which dirty-throttle pauses
// are counted in: CONFIG_HZ from the kernel's config where it is
// published, else measured against /proc/timer_list's jiffies.
func nsPerJiffy() (uint64, error) {
	release, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	for _, path := range []string{"/proc/config.gz", "/boot/config-" + strings.TrimSpace(string(release))} {
		if hz, err := hzFromConfig(path); err == nil {
			return uint64(time.Second) / hz, nil
		}
	}
	hz, err := hzFromTimerList("/proc/timer_list", 100*time.Millisecond)
	if err != nil {
		return 0, fmt.Errorf("the kernel's tick length is unknown (no config in /proc/config.gz or /boot, and %v)", err)
	}
	return uint64(time.Second) / hz, nil
}

var configHZ = regexp.MustCompile(`(?m)^CONFIG_HZ=(\d+)$`)

func hzFromConfig(path string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(f)
		if err != nil {
			return 0, err
		}
		r = gz
	}
	b, err := io.ReadAll(io.LimitReader(r, 16<<20))
	if err != nil {
		return 0, err
	}
	return parseConfigHZ(b)
}

func parseConfigHZ(config []byte) (uint64, error) {
	m := configHZ.FindSubmatch(config)
	if m == nil {
		return 0, errors.New("no CONFIG_HZ")
	}
	hz, err := strconv.ParseUint(string(m[1]), 10, 32)
	if err != nil || hz == 0 {
		return 0, fmt.Errorf("bad CONFIG_HZ %q", m[1])
	}
	return hz, nil
}

// hzFromTimerList counts the jiffies that pass in about span and rounds
// the rate to the nearest HZ a kernel can be built with.
func hzFromTimerList(path string, span time.Duration) (uint64, error) {
	j0, t0, err := readJiffies(path)
	if err != nil {
		return 0, err
	}
	time.Sleep(span)
	j1, t1, err := readJiffies(path)
	if err != nil {
		return 0, err
	}
	return nearestHZ(float64(j1-j0) / t1.Sub(t0).Seconds())
}

func nearestHZ(rate float64) (uint64, error) {
	best, bestOff := uint64(0), 0.0
	for _, hz := range []uint64{100, 250, 300, 1000} {
		off := rate/float64(hz) - 1
		if off < 0 {
			off = -off
		}
		if best == 0 || off < bestOff {
			best, bestOff = hz, off
		}
	}
	if bestOff > 0.1 {
		return 0, fmt.Errorf("jiffies advance %.0f a second, no HZ a kernel is built with", rate)
	}
	return best, nil
}

func readJiffies(path string) (uint64, time.Time, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, time.Time{}, err
	}
	defer f.Close()
	now := time.Now()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "jiffies:"); ok {
			j, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return j, now, err
		}
	}
	return 0, now, fmt.Errorf("no jiffies in %s", path)
}
