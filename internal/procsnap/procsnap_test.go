package procsnap

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/hostfs"
	"github.com/numatrace/numatrace/internal/testutil"
)

func TestReadFixture(t *testing.T) {
	p, err := Read("testdata/proc", "testdata/sys", []uint32{123, 124, 125, 999}, 42)
	if err != nil {
		t.Fatal(err)
	}
	if p.MonoNs != 42 {
		t.Errorf("MonoNs = %d, want 42", p.MonoNs)
	}

	if len(p.Vmstat) != 15 {
		t.Errorf("len(Vmstat) = %d, want 15: %v", len(p.Vmstat), p.Vmstat)
	}
	for k, want := range map[string]int64{"nr_free_pages": 1657569, "numa_hit": 61678984, "numa_pages_migrated": 40, "thp_fault_alloc": 3} {
		if got := p.Vmstat[k]; got != want {
			t.Errorf("Vmstat[%s] = %d, want %d", k, got, want)
		}
	}

	if len(p.Nodes) != 2 {
		t.Fatalf("Nodes = %v, want node0 and node1 only", p.Nodes)
	}
	for node, want := range map[string]map[string]int64{
		"node0": {"numa_hit": 61678984, "numa_miss": 0, "numa_foreign": 12, "interleave_hit": 1131, "local_node": 61678900, "other_node": 84,
			"MemTotal": 7301324, "MemFree": 6630276, "MemUsed": 671048, "FilePages": 507888, "AnonPages": 9160, "HugePages_Total": 2, "HugePages_Free": 0},
		"node1": {"numa_hit": 5000, "numa_miss": 12, "other_node": 10, "MemTotal": 8388608, "MemUsed": 388608, "HugePages_Total": 3, "HugePages_Free": 1},
	} {
		got := p.Nodes[node]
		if len(got) != 6+14 {
			t.Errorf("%s has %d fields, want 20: %v", node, len(got), got)
		}
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("Nodes[%s][%s] = %d (present %v), want %d", node, k, g, ok, v)
			}
		}
	}

	// 124 is a zombie (empty numa_maps) and 999 has exited: both skipped.
	want := map[string]map[string]int64{
		// N0: 10 + 300 + 1*2048/4 + 2; N1: 212 + 2*2048/4 + 2 + 1*1048576/4 + 33
		"123": {"N0": 824, "N1": 263415},
		"125": {"N0": 12, "N1": 0},
	}
	if !maps.EqualFunc(p.Target, want, maps.Equal) {
		t.Errorf("Target = %v, want %v", p.Target, want)
	}
}

func TestReadNoPids(t *testing.T) {
	p, err := Read("testdata/proc", "testdata/sys", nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	if p.Target != nil {
		t.Errorf("Target = %v, want nil", p.Target)
	}
}

func TestReadMissingVmstat(t *testing.T) {
	_, err := Read(t.TempDir(), "testdata/sys", nil, 0)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want one wrapping fs.ErrNotExist", err)
	}
}

func TestReadNoNUMA(t *testing.T) {
	p, err := Read("testdata/proc", t.TempDir(), []uint32{125}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.Nodes == nil || len(p.Nodes) != 0 {
		t.Errorf("Nodes = %#v, want empty", p.Nodes)
	}
	if got := p.Target["125"]; !maps.Equal(got, map[string]int64{"N0": 12}) {
		t.Errorf("Target[125] = %v", got)
	}
}

func TestReadBrokenNode(t *testing.T) {
	sys := t.TempDir()
	dir := filepath.Join(sys, "devices", "system", "node", "node0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "numastat"), []byte("numa_hit 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read("testdata/proc", sys, nil, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing meminfo: err = %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "meminfo"), []byte("Node 0 MemTotal: lots kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read("testdata/proc", sys, nil, 0); err == nil || !strings.Contains(err.Error(), "meminfo") {
		t.Errorf("bad meminfo: err = %v", err)
	}
}

func TestParseNumaMaps(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     map[string]int64
		bad      bool
	}{
		{name: "empty", in: "", want: nil},
		{name: "no pages", in: "7ffe00000000 default\n", want: map[string]int64{}},
		{name: "base pages", in: "7f12 default anon=512 dirty=512 N0=300 N1=212 kernelpagesize_kB=4\n", want: map[string]int64{"N0": 300, "N1": 212}},
		{name: "2M pages", in: "7f40 default file=/dev/hugepages/x huge dirty=2 N3=2 kernelpagesize_kB=2048\n", want: map[string]int64{"N3": 1024}},
		{name: "64K pages", in: "7f40 default anon=3 N0=3 kernelpagesize_kB=64\n", want: map[string]int64{"N0": 48}},
		{name: "no page size", in: "7f40 default anon=3 N0=3\n", want: map[string]int64{"N0": 3}},
		{name: "sums", in: "1 default N0=1 kernelpagesize_kB=4\n2 default N0=2 kernelpagesize_kB=4\n", want: map[string]int64{"N0": 3}},
		{name: "not a node", in: "1 default file=/N0=5 Nx=3 N=2 N0=1 kernelpagesize_kB=4\n", want: map[string]int64{"N0": 1}},
		{name: "bad count", in: "1 default N0=x kernelpagesize_kB=4\n", bad: true},
		{name: "bad page size", in: "1 default N0=1 kernelpagesize_kB=0\n", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := numaMapsOf(t, tc.in)
			if tc.bad {
				if err == nil {
					t.Fatalf("got %v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (got == nil) != (tc.want == nil) || !maps.Equal(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

// numaMapsOf sums a numa_maps of the given text as Read does: nil for an
// empty one.
func numaMapsOf(t *testing.T, text string) (map[string]int64, error) {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "1", "numa_maps"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	proc, err := hostfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Close()
	s, err := NumaMaps(proc, 1)
	if err != nil || s.Mappings == 0 {
		return nil, err
	}
	out := map[string]int64{}
	for n, p := range s.PerNode() {
		out["N"+strconv.Itoa(n)] = p
	}
	return out, nil
}

func TestParsePairsBad(t *testing.T) {
	for _, in := range []string{"numa_hit\n", "numa_hit 1 2\n", "numa_hit x\n", "numa_hit -1\n"} {
		m := map[string]uint64{}
		var err error
		for i, line := range strings.Split(in, "\n") {
			if err = pairsInto(m)(i+1, line); err != nil {
				break
			}
		}
		if err == nil {
			t.Errorf("%q: got %v, want an error", in, m)
		}
	}
}

// TestReadLive reads this machine's /proc and /sys, with this test's own pid
// and one that cannot exist.
func TestReadLive(t *testing.T) {
	_, err := os.Stat("/proc/vmstat")
	testutil.RequireFeature(t, err == nil, fmt.Sprintf("no /proc/vmstat: %v", err))
	self := uint32(os.Getpid())
	p, err := Read("/proc", "/sys", []uint32{self, 1<<31 - 1}, 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Vmstat) == 0 {
		t.Fatal("empty Vmstat")
	}
	if _, ok := p.Vmstat["nr_free_pages"]; !ok {
		t.Errorf("Vmstat has no nr_free_pages: %v", p.Vmstat)
	}
	_, err = os.Stat("/sys/devices/system/node")
	testutil.RequireFeature(t, err == nil, fmt.Sprintf("kernel without NUMA: %v", err))
	n0, ok := p.Nodes["node0"]
	if !ok {
		t.Fatalf("no node0 in %v", p.Nodes)
	}
	for _, k := range []string{"numa_hit", "numa_miss", "local_node", "other_node", "MemTotal", "MemFree", "MemUsed", "FilePages", "AnonPages"} {
		if _, ok := n0[k]; !ok {
			t.Errorf("node0 has no %s: %v", k, n0)
		}
	}
	if n0["MemTotal"] <= 0 {
		t.Errorf("node0 MemTotal = %d", n0["MemTotal"])
	}
	if len(p.Target) != 1 {
		t.Fatalf("Target = %v, want only this process", p.Target)
	}
	mine := p.Target[strconv.FormatUint(uint64(self), 10)]
	var total int64
	for node, pages := range mine {
		if _, ok := p.Nodes["node"+strings.TrimPrefix(node, "N")]; !ok {
			t.Errorf("Target has %s, which is not in Nodes", node)
		}
		total += pages
	}
	if total <= 0 {
		t.Errorf("this process has %d pages: %v", total, mine)
	}
	t.Logf("vmstat: %d fields; nodes: %d; node0: %d fields; self: %v", len(p.Vmstat), len(p.Nodes), len(n0), mine)
}

// TestReadLiveExited reads a real zombie (exited, not yet waited for) and the
// same pid once reaped: both are skipped without error.
func TestReadLiveExited(t *testing.T) {
	_, err := os.Stat("/proc/self/numa_maps")
	testutil.RequireFeature(t, err == nil, fmt.Sprintf("no numa_maps: %v", err))
	cmd := exec.Command(testutil.RequireTool(t, "true", "coreutils"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := uint32(cmd.Process.Pid)
	stat := fmt.Sprintf("/proc/%d/stat", pid)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(stat)
		if err == nil && strings.Contains(string(b), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			cmd.Wait()
			t.Fatalf("pid %d did not become a zombie: %q, %v", pid, b, err)
		}
	}
	p, err := Read("/proc", "/sys", []uint32{pid}, 0)
	if err != nil {
		t.Fatalf("zombie: %v", err)
	}
	if len(p.Target) != 0 {
		t.Errorf("zombie: Target = %v, want empty", p.Target)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	p, err = Read("/proc", "/sys", []uint32{pid}, 0)
	if err != nil {
		t.Fatalf("reaped: %v", err)
	}
	if len(p.Target) != 0 {
		t.Errorf("reaped: Target = %v, want empty", p.Target)
	}
}

// The kernel prints its counters unsigned; a recording holds int64: a
// value above it is one clear error naming the file and the counter.
func TestReadAboveInt64(t *testing.T) {
	proc := t.TempDir()
	if err := os.WriteFile(filepath.Join(proc, "vmstat"), []byte("numa_hit 1\nnr_free_pages 18446744073709551615\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Read(proc, t.TempDir(), nil, 0)
	if want := filepath.Join(proc, "vmstat") + ": nr_free_pages = 18446744073709551615 is above what a recording holds (int64)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want %q", err, want)
	}
	proc2 := t.TempDir()
	if err := os.WriteFile(filepath.Join(proc2, "vmstat"), []byte("numa_hit 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Read(proc2, t.TempDir(), nil, 0)
	if err != nil || p.Vmstat["numa_hit"] != 1 {
		t.Errorf("%v %v", p, err)
	}
}
