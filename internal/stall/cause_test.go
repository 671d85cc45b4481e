package stall

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// The names of the first causes are the NDJSON and recording contract:
// they stay as they are. A new cause comes after them.
var stableNames = []string{
	"direct_reclaim", "memcg_reclaim", "node_reclaim", "compaction",
	"numa_migration", "numa_task_move", "task_migration", "mmap_lock",
}

func TestCauseNamesRoundTrip(t *testing.T) {
	all := AllCauses()
	if len(all) != int(NumCauses) || len(all) < len(stableNames) {
		t.Fatalf("AllCauses has %d causes, NumCauses %d; %d are stable", len(all), NumCauses, len(stableNames))
	}
	seen := map[string]bool{}
	for i, c := range all {
		if c != Cause(i) {
			t.Errorf("AllCauses()[%d] = %d, not in order", i, c)
		}
		name := c.String()
		if i < len(stableNames) && name != stableNames[i] {
			t.Errorf("Cause(%d).String() = %q, want %q", i, name, stableNames[i])
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
	if s, want := NumCauses.String(), fmt.Sprintf("cause(%d)", NumCauses); s != want {
		t.Errorf("NumCauses.String() = %q, want %s", s, want)
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

// Every cause has a whole descriptor, and no two causes look alike in a
// chart or a table: a cause added without one fails here, not as a blank
// column or a zero-value colour in some front end.
func TestDescriptorsComplete(t *testing.T) {
	seen := map[string]Cause{}
	unique := func(kind, v string, c Cause) {
		if prev, ok := seen[kind+":"+v]; ok {
			t.Errorf("%v and %v share the %s %q", prev, c, kind, v)
		}
		seen[kind+":"+v] = c
	}
	for c := Cause(0); c < NumCauses; c++ {
		d := descriptors[c]
		if d.Name == "" || strings.Trim(d.Name, "abcdefghijklmnopqrstuvwxyz_") != "" {
			t.Errorf("cause %d: name %q (want lower_case)", c, d.Name)
		}
		if d.Short == "" || d.Letter == 0 || d.Colour == "" || d.Words == nil {
			t.Errorf("%s: short %q, letter %q, colour %q, words set %v: every one is needed",
				d.Name, d.Short, d.Letter, d.Colour, d.Words != nil)
		}
		if n := len(d.Fields); n < 2 || d.Fields[0].Key != "cpu" || d.Fields[n-1].Key != "nested" {
			t.Errorf("%s: fields must run from cpu to nested, built with fields()", d.Name)
		}
		for _, f := range d.Fields {
			if f.Key == "" || f.Append == nil {
				t.Errorf("%s: a field without a key or a value", d.Name)
			}
		}
		switch d.Counted {
		case CountDurations:
			if d.Advice == "" {
				t.Errorf("%s: a timed cause needs Advice: a report's headline names it with that as its next step", d.Name)
			}
		case CountMoves:
		case CountMigrations:
			unique("count", "migrations", c) // the kernel keeps one count of them per thread
		default:
			t.Errorf("%s: Counted %d: say how its events are counted (CountDurations for a timed cause)", d.Name, d.Counted)
		}
		if d.Checks == nil {
			t.Errorf("%s: no Checks: name the doctor checks whose finding explains it, or noChecks", d.Name)
		}
		for _, check := range d.Checks {
			if check == "" || strings.Trim(check, "abcdefghijklmnopqrstuvwxyz_") != "" {
				t.Errorf("%s: doctor check %q is not a check's name", d.Name, check)
			}
			unique(d.Name+" check", check, c)
		}
		for kind := range d.KindAdvice {
			if !d.SubReason || !slices.Contains(kindsOf(c), kind) || d.KindAdvice[kind] == "" {
				t.Errorf("%s: advice for kind %q, which is not one of its kinds of wait %v", d.Name, kind, kindsOf(c))
			}
		}
		if d.AtLimit != nil {
			if d.AtLimit.Do == nil || d.AtLimit.Do("memory.max") == "" {
				t.Errorf("%s: AtLimit without words", d.Name)
			}
			for _, kind := range d.AtLimit.Kinds {
				if !slices.Contains(kindsOf(c), kind) {
					t.Errorf("%s: AtLimit names kind %q, which is not one of its kinds of wait %v", d.Name, kind, kindsOf(c))
				}
			}
		}
		unique("name", d.Name, c)
		unique("short name", d.Short, c)
		unique("letter", string(d.Letter), c)
		unique("colour", d.Colour, c)
	}
}

// Describe gives each cause's words, then the CPU and nesting.
func TestDescribe(t *testing.T) {
	cases := []struct {
		ev   Event
		want string
	}{
		{Event{Cause: MemcgReclaim, Order: 0, Pages: 32, CPU: 1}, "order 0, reclaimed 32 pages, cpu 1"},
		{Event{Cause: NodeReclaim, Order: 2, Node: 1, CPU: 0, Nested: true}, "order 2, node 1, cpu 0, nested"},
		{Event{Cause: Compaction, Order: 9, Pass: 2, Status: "complete", Mode: "prio_async", CPU: 3},
			"order 9 pass 2, complete, prio_async, cpu 3"},
		{Event{Cause: NUMAMigration, Pages: 512, Reason: "numa_misplaced", Node: 0, DstNode: 1, CPU: 1},
			"512 pages, numa_misplaced, node 0→1, cpu 1"},
		// One page is one page ("reclaimed 1 pages" before).
		{Event{Cause: DirectReclaim, Order: 0, Pages: 1, CPU: 1}, "order 0, reclaimed 1 page, cpu 1"},
		{Event{Cause: NUMAMigration, Pages: 1, Reason: "numa_misplaced", Node: 1, DstNode: 0, CPU: 0},
			"1 page, numa_misplaced, node 1→0, cpu 0"},
		{Event{Cause: NUMATaskMove, SrcCPU: 0, DstCPU: 1, Node: 0, DstNode: 1, Swap: true, OtherTID: 9, CPU: 1},
			"cpu 0→1 node 0→1, swap with 9, cpu 1"},
		{Event{Cause: MmapLock, Write: true, CPU: 2}, "write, failed, cpu 2"},
		{Event{Cause: TaskMigration, CPU: 2}, "cpu 2"},
		{Event{Cause: NumCauses + 3, CPU: 2}, "cpu 2"},
	}
	for _, c := range cases {
		if got := c.ev.Describe(); got != c.want {
			t.Errorf("%v: %q, want %q", c.ev.Cause, got, c.want)
		}
	}
}

// Details are JSON pairs in the descriptor's order; a legitimate zero is
// kept, an absent optional one is left out.
func TestAppendDetails(t *testing.T) {
	ev := Event{Cause: MemcgReclaim, CPU: 3, Order: 0, GFP: 0xcc0, Pages: 0, CgroupID: 7}
	if got := string(ev.AppendDetails(nil)); got != `,"cpu":3,"order":0,"gfp":"0xcc0","pages":0,"cgroup_id":7` {
		t.Errorf("memcg details %s", got)
	}
	ev = Event{Cause: NUMATaskMove, CPU: 1, SrcCPU: -1, DstCPU: 2, Node: 0, DstNode: 1, Stick: true, Nested: true}
	if got := string(ev.AppendDetails(nil)); got != `,"cpu":1,"move":"stick","src_cpu":-1,"dst_cpu":2,"src_node":0,"dst_node":1,"nested":true` {
		t.Errorf("task move details %s", got)
	}
}

func TestParseDurations(t *testing.T) {
	all := func(d time.Duration) (out [NumCauses]uint64) {
		for i := range out {
			out[i] = uint64(d)
		}
		return out
	}
	with := func(base [NumCauses]uint64, kv map[Cause]time.Duration) [NumCauses]uint64 {
		for c, d := range kv {
			base[c] = uint64(d)
		}
		return base
	}
	cases := []struct {
		in   string
		want [NumCauses]uint64
	}{
		{"", [NumCauses]uint64{}},
		{"   ", [NumCauses]uint64{}},
		{"0", [NumCauses]uint64{}},
		{"5us", all(5 * time.Microsecond)},
		{"1.5ms", all(1500 * time.Microsecond)},
		{"mmap_lock=10us", with([NumCauses]uint64{}, map[Cause]time.Duration{MmapLock: 10 * time.Microsecond})},
		{"mmap_lock=10us,compaction=1ms", with([NumCauses]uint64{}, map[Cause]time.Duration{
			MmapLock: 10 * time.Microsecond, Compaction: time.Millisecond})},
		{" mmap_lock = 10us , compaction=0 ", with([NumCauses]uint64{}, map[Cause]time.Duration{
			MmapLock: 10 * time.Microsecond})},
		// A bare duration sets every cause; a named one after it overrides that cause.
		{"5us,mmap_lock=1ms", with(all(5*time.Microsecond), map[Cause]time.Duration{MmapLock: time.Millisecond})},
		{"numa_task_move=1s,direct_reclaim=2ns", with([NumCauses]uint64{}, map[Cause]time.Duration{
			NUMATaskMove: time.Second, DirectReclaim: 2})},
	}
	for _, c := range cases {
		got, err := ParseDurations(c.in)
		if err != nil {
			t.Errorf("ParseDurations(%q): %v", c.in, err)
			continue
		}
		if got != c.want {
			t.Errorf("ParseDurations(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestParseDurationsErrors(t *testing.T) {
	cases := []struct{ in, want string }{
		{"bogus=1s", `unknown cause "bogus"`},
		{"x", `bad duration "x"`},
		{"10", "bad duration"}, // no unit
		{"-1us", "bad duration"},
		{"mmap_lock=-1us", "bad duration"},
		{"mmap_lock=", "bad duration"},
		{"mmap_lock=10us,", "bad duration"}, // empty part
		{"=10us", "unknown cause"},
		{"mmap_lock=10us,bogus=1s", `unknown cause "bogus"`},
		{"mmap_lock=10us=3", "bad duration"},
	}
	for _, c := range cases {
		_, err := ParseDurations(c.in)
		if err == nil {
			t.Errorf("ParseDurations(%q) accepted", c.in)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseDurations(%q) = %q, want it to contain %q", c.in, err, c.want)
		}
	}
}

func TestUntraced(t *testing.T) {
	if u := Untraced(nil); u != ([NumCauses]bool{}) {
		t.Errorf("no probe list: %v, want nothing marked", u)
	}
	u := Untraced([]ProbeStatus{
		{Name: "memcg_reclaim", Attached: true},                                         // before 1.3: named after the cause
		{Name: "memcg_softlimit_reclaim", Cause: MemcgReclaim, Feeds: true},             // failed, but its sibling attached
		{Name: "compaction_begin", Cause: Compaction, Feeds: true, Attached: false},     // failed
		{Name: "runq_switch", Cause: RunqWait, Feeds: true, Attached: true},             // 1.3: names its cause
		{Name: "kswapd_wakeup", Attached: true},                                         // no cause
		{Name: "direct_reclaim_v2", Cause: DirectReclaim, Feeds: false, Attached: true}, // feeds none
	})
	for c := Cause(0); c < NumCauses; c++ {
		want := c != MemcgReclaim && c != RunqWait
		if u[c] != want {
			t.Errorf("%s: untraced %v, want %v", c, u[c], want)
		}
	}
}

// kindsOf are the kinds of wait a cause's Reason names, where the table
// knows them.
func kindsOf(c Cause) []string {
	if c == MemstallWait {
		return MemstallReasons[:]
	}
	return nil
}
