package tui

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/correlate"
	"github.com/numatrace/numatrace/internal/doctor"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/sanitize"
	"github.com/numatrace/numatrace/internal/stall"
)

// hostileNames are thread names any user can set with prctl(PR_SET_NAME)
// (15 bytes at most), each with the spelling the view must show.
var hostileNames = []struct{ raw, shown string }{
	{"\x1b]0;pwned\x07", `\x1b]0;pwned\x07`}, // retitles the terminal
	{"\x1b[2Jwipe", `\x1b[2Jwipe`},           // clears the screen
	{"new\nline", `new\x0aline`},             // splits a row
	{"bad\xffutf8", `bad\xffutf8`},           // breaks alignment
	{"evil\u202egnp", `evil\u202egnp`},       // reverses what follows
}

// hostileStore is a live store whose threads, target, kernel, spike
// verdict, warning, doctor finding and a stall's detail carry the names
// name picks (raw or shown).
func hostileStore(name func(i int) string) *Store {
	d := run.Description{Target: "cgroup /sys/fs/cgroup/memory/" + name(0), Kernel: "6.18-" + name(1),
		Probes: probes(1, 1), StartNs: 1, WindowNs: 1e9}
	doc := &doctor.Report{Findings: []doctor.Finding{{Severity: doctor.Warn, Title: "memory pressure in /sys/fs/cgroup/" + name(3)}}}
	s := NewStore(Info{Run: d, Machine: Machine{Nodes: 1, CPUNode: map[int]int{0: 0, 1: 0}}, Doctor: doc}, liveWindowsForTest)
	w := &aggregate.Window{Index: 0, StartNs: 0, EndNs: 1e9, Threads: map[uint32]*aggregate.ThreadWindow{}}
	for i := range hostileNames {
		pid := uint32(100 + i)
		dur := uint64(i+1) * 1_000_000 // distinct: the order does not depend on the name
		ev := &stall.Event{Kind: stall.KindStall, Cause: stall.Compaction, TsNs: 5e8, DurNs: dur, PID: pid, TID: pid,
			Comm: name(i), CPU: 1, Pass: 1, Status: name(i), Mode: name(i)}
		s.Stall(ev)
		tw := &aggregate.ThreadWindow{PID: pid, TID: pid, Comm: name(i), TotalNs: dur}
		tw.ByCause[stall.Compaction] = aggregate.CauseTotal{Count: 1, TotalNs: dur, MaxNs: dur}
		w.Threads[pid] = tw
		w.Causes[stall.Compaction].TotalNs += dur
	}
	s.Window(w)
	cw := correlate.Window{Index: 0, Latency: &correlate.Latency{Count: 100, P99Ns: 50e6, MaxNs: 60e6}}
	cw.StallNs[stall.Compaction] = 15e6
	cw.Hits = []correlate.Hits{{Cause: stall.Compaction, Threads: 1, WorstTID: 104, WorstNs: 5e6, Process: name(4)}}
	s.Analysis(correlate.Analyze([]correlate.Window{cw}, correlate.Config{SLONs: 5e6}))
	s.Warn(errors.New("latency file /tmp/" + name(2) + ": no such file or directory"))
	return s
}

// screens renders every screen of a view of s after tracing stopped for
// why, by name: the model's list (the drill-down on the top thread) and
// the overview by process.
func screens(s *Store, why string) map[string]string {
	m := NewLive(s, Options{NoTicks: true, Now: func() uint64 { return 2e9 }})
	m.Update(tea.WindowSizeMsg{Width: 200, Height: 50})
	m.Update(EndedMsg{Why: why})
	out := map[string]string{}
	m.Update(runes("g"))
	out["by process"] = m.View()
	m.Update(runes("g"))
	m.Update(keyEnter)
	for _, sc := range m.screens {
		m.screen = sc
		out[m.name()] = m.View()
	}
	return out
}

// Hostile names reach the view escaped: every screen of a view of them is
// the screen of their escaped spellings, byte for byte, with nothing a
// terminal would act on.
func TestViewEscapesHostileNames(t *testing.T) {
	raw := screens(hostileStore(func(i int) string { return hostileNames[i].raw }), "read /proc/"+hostileNames[0].raw)
	shown := screens(hostileStore(func(i int) string { return hostileNames[i].shown }), "read /proc/"+hostileNames[0].shown)
	for name, v := range raw {
		if !utf8.ValidString(v) {
			t.Errorf("%s screen is not valid UTF-8: %q", name, v)
		}
		for _, line := range strings.Split(v, "\n") {
			if !sanitize.Safe(line) {
				t.Errorf("%s screen has a line a terminal acts on: %q", name, line)
			}
		}
		if v != shown[name] {
			t.Errorf("%s screen of hostile names differs from that of their escaped spellings:\n--- got\n%s\n--- want\n%s", name, v, shown[name])
		}
		if !strings.HasPrefix(v, `numatrace STOPPED: read /proc/\x1b]0;pwned\x07`) {
			t.Errorf("%s screen's header: %q", name, strings.SplitN(v, "\n", 2)[0])
		}
	}
	for _, want := range []struct {
		screen string
		text   string
	}{
		{"Overview", `\x1b[2Jwipe`}, {"Overview", `new\x0aline`}, {"Overview", `bad\xffutf8`}, {"Overview", `evil\u202egnp`},
		{"Overview", `\x1b]0;pwned\x`}, // COMM is 15 wide
		{"by process", `evil\u202egnp`},
		{"Spikes", `compaction 11% · evil\u202egnp`}, {"Spikes", `across 1 thread of evil\u202egnp`},
		{"System", `latency file /tmp/new\x0aline: no such file`}, {"System", `memory pressure in /sys/fs/cgroup/bad\xffutf8`},
		{"drill-down", `tid 104 (evil\u202egnp) of pid 104`}, {"drill-down", `evil\u202egnp, evil\u202egnp`},
	} {
		if !strings.Contains(raw[want.screen], want.text) {
			t.Errorf("%s screen lacks %q:\n%s", want.screen, want.text, raw[want.screen])
		}
	}
	// The status line's warning.
	m := NewLive(hostileStore(func(i int) string { return hostileNames[i].raw }), Options{NoTicks: true})
	lines := strings.Split(m.View(), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, `warning: latency file /tmp/new\x0aline: no such file`) || !strings.HasSuffix(last, "q quit") {
		t.Errorf("status line %q", last)
	}
}
