//go:build linux

package tracer

import (
	"errors"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/numatrace/numatrace/internal/stall"
)

// The names stall gives memstall_wait's wait sites are the C enum's, at
// its numbers.
func TestMemstallReasonsMatchTheEnum(t *testing.T) {
	for v, want := range map[typesMemstallReason]string{
		typesMemstallReasonMEMSTALL_OTHER:       "other",
		typesMemstallReasonMEMSTALL_THRASHING:   "thrashing",
		typesMemstallReasonMEMSTALL_MEMORY_HIGH: "memory_high",
		typesMemstallReasonMEMSTALL_SWAP_IN:     "swap_in",
	} {
		if got := stall.MemstallReason(int32(v)); got != want {
			t.Errorf("reason %d is %q, want %q", v, got, want)
		}
	}
	if len(stall.MemstallReasons) != int(typesMemstallReasonMEMSTALL_SITES)+1 {
		t.Errorf("%d names for %d sites and other", len(stall.MemstallReasons), typesMemstallReasonMEMSTALL_SITES)
	}
}

// The tick comes from the kernel's config; a rate of jiffies rounds to
// the HZ a kernel is built with, and one no kernel has is refused.
func TestTickLength(t *testing.T) {
	if hz, err := parseConfigHZ([]byte("# CONFIG_HZ_100 is not set\nCONFIG_HZ_250=y\nCONFIG_HZ=250\n")); err != nil || hz != 250 {
		t.Errorf("config: %d, %v", hz, err)
	}
	if _, err := parseConfigHZ([]byte("CONFIG_HZ_250=y\n")); err == nil {
		t.Error("a config without CONFIG_HZ gave a tick")
	}
	for rate, want := range map[float64]uint64{251.3: 250, 997: 1000, 99.2: 100, 301: 300} {
		if hz, err := nearestHZ(rate); err != nil || hz != want {
			t.Errorf("%v jiffies a second: %d, %v; want %d", rate, hz, err, want)
		}
	}
	if _, err := nearestHZ(600); err == nil {
		t.Error("600 jiffies a second read as a kernel's HZ")
	}
	// Here: the config and the clock agree.
	if _, err := os.Stat("/proc/timer_list"); err == nil {
		ns, err := nsPerJiffy()
		if err != nil {
			t.Fatal(err)
		}
		if hz, err := hzFromTimerList("/proc/timer_list", 200e6); err == nil && uint64(1e9)/hz != ns {
			t.Errorf("the config's tick %d ns, the clock's %d ns", ns, uint64(1e9)/hz)
		}
	}
}

// PSI off reads as a reason, not as a kernel without memory stalls.
func TestPSIOffIsSaid(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{&os.PathError{Op: "read", Path: "/proc/pressure/memory", Err: unix.EOPNOTSUPP}, "psi=1"},
		{&os.PathError{Op: "open", Path: "/proc/pressure/memory", Err: os.ErrNotExist}, "no PSI"},
		{errors.New("odd"), "odd"},
	} {
		err := psiOn(nil, c.err)
		if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.err, err, c.want)
		}
	}
}
