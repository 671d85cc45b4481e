package doctor_test

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/numatrace/numatrace/internal/doctor"
	"github.com/numatrace/numatrace/internal/doctor/doctortest"
)

// doctor -p reads the process's memory cgroup, on cgroup v1 and v2: the
// finding names the group, its binding limit and what fills it, with the
// files it read and how much the limit's hits grew between the readings,
// and the report carries the reading for attach's and the view's next
// step.
func TestMemoryCgroupAtItsLimit(t *testing.T) {
	for _, c := range []struct {
		machine  string
		title    string
		evidence []string
		fix      string
		version  int
	}{
		{"memcg_v1_at_limit",
			"the cgroup memory/numatrace-e2e-redis reached its limit (160 MiB; usage 159 MiB, 72% of it page cache, failcnt 1,234 (+66 over 1s))",
			[]string{"/sys/fs/cgroup/memory/numatrace-e2e-redis/memory.limit_in_bytes = 167772160",
				"/sys/fs/cgroup/memory/numatrace-e2e-redis/memory.stat total_cache = 120586240",
				"failcnt growth over 1s = 66"},
			"echo 251658240 > /sys/fs/cgroup/memory/numatrace-e2e-redis/memory.limit_in_bytes", 1},
		{"memcg_v2_high",
			"the cgroup system.slice/quote-engine.service reached its memory.high (40 GiB; usage 40 GiB, 20% of it page cache, memory.events high 5,340 (+340 over 1s))",
			[]string{"/sys/fs/cgroup/system.slice/quote-engine.service/memory.high = 42949672960",
				"/sys/fs/cgroup/system.slice/quote-engine.service/memory.events max = 0",
				"memory.events high growth over 1s = 340"},
			"echo 64424509440 > /sys/fs/cgroup/system.slice/quote-engine.service/memory.high", 2},
	} {
		t.Run(c.machine, func(t *testing.T) {
			r := run(t, c.machine)
			f := find(r, "memory_cgroup")
			if f == nil {
				t.Fatalf("no memory_cgroup finding: %v (skipped %v)", titles(r), r.Skipped)
			}
			complete(t, f)
			if f.Severity != doctor.Warn || f.Title != c.title {
				t.Errorf("[%s] %q\nwant [warn] %q", f.Severity, f.Title, c.title)
			}
			for _, e := range c.evidence {
				if !strings.Contains(strings.Join(f.Evidence, "\n"), e) {
					t.Errorf("evidence lacks %q:\n%s", e, strings.Join(f.Evidence, "\n"))
				}
			}
			if !strings.HasPrefix(f.Fix, c.fix) {
				t.Errorf("fix %q, want %q", f.Fix, c.fix)
			}
			if m := r.MemoryCgroup; m == nil || m.Version != c.version || m.LimitBytes == nil {
				t.Errorf("the report's reading: %+v", m)
			}
			var b strings.Builder
			r.Text(&b)
			if !strings.Contains(b.String(), "memory cgroup: the cgroup") {
				t.Errorf("the text does not show the reading:\n%s", b.String())
			}
		})
	}
}

// A group with room to spare (and a service with no limit, as the
// healthy machine's) is no finding, but doctor still says what it read;
// without --pid nothing is read.
func TestMemoryCgroupWithRoom(t *testing.T) {
	for _, machine := range []string{"ok_memcg_roomy", ""} {
		r := run(t, machine)
		if f := find(r, "memory_cgroup"); f != nil {
			t.Errorf("%s: %s", machine, f.Title)
		}
		if r.MemoryCgroup == nil || r.MemoryCgroup.Group != "system.slice/quote-engine.service" {
			t.Errorf("%s: reading %+v", machine, r.MemoryCgroup)
		}
	}
	root, _ := doctortest.Machine(t, "memcg_v1_at_limit")
	r, err := doctor.Run(doctor.Options{Root: root})
	if err != nil || r.MemoryCgroup != nil || find(r, "memory_cgroup") != nil {
		t.Errorf("without --pid: %+v, %v", r, err)
	}
}

// PSI's finding names what to trace next, with no placeholder (it said
// "numatrace attach --cgroup <the group> (which cause?)" in every
// incident of the round-3 trial): the process's group for the group's
// figure; for the machine's, which counts every process, the process,
// or the whole machine when doctor was given none.
func TestPressureNamesWhatToTrace(t *testing.T) {
	root, later := doctortest.Machine(t, "psi_pressure")
	// The machine under pressure too, as the group is.
	for _, dir := range []string{root, later} {
		group, err := os.ReadFile(filepath.Join(dir, "sys/fs/cgroup/system.slice/quote-engine.service/memory.pressure"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "proc/pressure/memory"), group, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		pid  int
		want map[string]string // where the figure was read → its fix
	}{
		{4242, map[string]string{
			"/proc/pressure/memory": "numatrace attach -p 4242 -d 60s (whether its own threads stall, and in which cause: this figure counts every process on the machine)",
			"/sys/fs/cgroup/system.slice/quote-engine.service/memory.pressure": "numatrace attach --cgroup /system.slice/quote-engine.service -d 60s (which of the group's threads stall, and in which cause)",
		}},
		{0, map[string]string{
			"/proc/pressure/memory": "numatrace attach -d 60s (the whole machine: which processes' threads stall, and in which cause)",
		}},
	} {
		r, err := doctor.Run(doctor.Options{Root: root, Later: later, PID: c.pid})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, f := range r.Findings {
			if f.Check == "psi_memory" {
				got[strings.TrimPrefix(strings.SplitN(f.Title, ": ", 2)[0], "memory pressure in ")] = f.Fix
			}
		}
		if !maps.Equal(got, c.want) {
			t.Errorf("pid %d: PSI's findings' fixes %q, want %q", c.pid, got, c.want)
		}
	}
}
