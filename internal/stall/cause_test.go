package stall

import (
	"strings"
	"testing"
)

func TestCauseNamesRoundTrip(t *testing.T) {
	want := []string{
		"direct_reclaim", "memcg_reclaim", "node_reclaim", "compaction",
		"numa_migration", "numa_task_move", "task_migration", "mmap_lock",
	}
	all := AllCauses()
	if len(all) != len(want) || len(all) != int(NumCauses) {
		t.Fatalf("AllCauses has %d causes, want %d", len(all), len(want))
	}
	seen := map[string]bool{}
	for i, c := range all {
		if c != Cause(i) {
			t.Errorf("AllCauses()[%d] = %d, not in order", i, c)
		}
		name := c.String()
		if name != want[i] {
			t.Errorf("Cause(%d).String() = %q, want %q", i, name, want[i])
		}
		if seen[name] {
			t.Errorf("duplicate cause name %q", name)
		}
		seen[name] = true
		back, err := ParseCause(name)
		if err != nil || back != c {
			t.Errorf("ParseCause(%q) = %v, %v; want %v", name, back, err, c)
		}
	}
}

func TestCauseStringOutOfRange(t *testing.T) {
	if s := NumCauses.String(); s != "cause(8)" {
		t.Errorf("NumCauses.String() = %q, want cause(8)", s)
	}
	if s := Cause(255).String(); s != "cause(255)" {
		t.Errorf("Cause(255).String() = %q", s)
	}
}

func TestParseCauseRejects(t *testing.T) {
	for _, name := range []string{"", "bogus", "Direct_Reclaim", "mmap_lock ", "cause(8)", "reclaim"} {
		c, err := ParseCause(name)
		if err == nil {
			t.Errorf("ParseCause(%q) = %v, want an error", name, c)
			continue
		}
		if !strings.Contains(err.Error(), "unknown cause") {
			t.Errorf("ParseCause(%q) error %q does not say unknown cause", name, err)
		}
	}
}

func TestTimed(t *testing.T) {
	untimed := map[Cause]bool{NUMATaskMove: true, TaskMigration: true}
	for _, c := range AllCauses() {
		if got := c.Timed(); got == untimed[c] {
			t.Errorf("%v.Timed() = %v", c, got)
		}
	}
}

func TestSnapshotThread(t *testing.T) {
	var s Snapshot // nil map: Thread must create it
	a := s.Thread(10, 11, "")
	if a.PID != 10 || a.TID != 11 || a.Hists == nil {
		t.Fatalf("new thread = %+v", a)
	}
	// Same tid returns the same stats and fills in a missing name, but
	// does not overwrite a known one.
	b := s.Thread(10, 11, "worker")
	if a != b {
		t.Fatalf("second Thread call returned a different *ThreadStats")
	}
	if b.Comm != "worker" {
		t.Errorf("comm = %q, want worker (filled in)", b.Comm)
	}
	s.Thread(10, 11, "other")
	if b.Comm != "worker" {
		t.Errorf("comm = %q, want worker (kept)", b.Comm)
	}
	s.Thread(10, 12, "x")
	if len(s.Threads) != 2 {
		t.Errorf("%d threads, want 2", len(s.Threads))
	}
}
