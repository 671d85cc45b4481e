package output

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/correlate"
	"github.com/numatrace/numatrace/internal/sanitize"
	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/window"
)

// hostileNames are thread names any user can set with prctl(PR_SET_NAME)
// (15 bytes at most), each with the spelling the text report must show.
var hostileNames = []struct{ raw, shown string }{
	{"\x1b]0;pwned\x07", `\x1b]0;pwned\x07`}, // retitles the terminal
	{"\x1b[2Jwipe", `\x1b[2Jwipe`},           // clears the screen
	{"new\nline", `new\x0aline`},             // splits a table row
	{"bad\xffutf8", `bad\xffutf8`},           // breaks alignment
	{"evil\u202egnp", `evil\u202egnp`},       // reverses what follows
}

// hostileReport has one process per name, the first name also in the
// target, the note, and the spike verdict that names its process. name
// picks the raw or the shown spelling.
func hostileReport(name func(i int) string) *Report {
	snap := &stall.Snapshot{}
	for i := range hostileNames {
		pid := uint32(100 + i)
		th := snap.Thread(pid, pid, name(i))
		// Distinct totals: the tables' order does not depend on the name.
		th.Hists[stall.MemcgReclaim] = histOf(uint64(i+1)*10_000, uint64(i+1)*20_000)
		th.Migrations = uint64(i)
	}
	a := aggregate.New(window.Grid{StartNs: 0, LenNs: 1e9})
	a.Add(&stall.Event{Kind: stall.KindExit, PID: 100, TID: 100, Comm: name(0)})
	w := correlate.Window{Index: 0, Latency: &correlate.Latency{Count: 100, P99Ns: 50e6, MaxNs: 60e6}}
	w.StallNs[stall.MemcgReclaim] = 40e6
	w.Hits = []correlate.Hits{{Cause: stall.MemcgReclaim, Threads: 1, WorstTID: 100, WorstNs: 40e6, Process: name(0)}}
	return &Report{
		Target: "cgroup /sys/fs/cgroup/memory/" + name(0), Kernel: "6.18", DurationNs: 3e9,
		Probes:  []stall.ProbeStatus{{Name: "memcg_reclaim", Attached: true}},
		Summary: a.Summarize(snap), Events: 10, Windows: 3,
		Note:        "target pid 100 (" + name(0) + ") exited after 3s",
		Correlation: correlate.Analyze([]correlate.Window{w}, correlate.Config{SLONs: 5e6}),
	}
}

// checkTerminalSafe fails if out holds anything a terminal acts on: a
// control character other than the line ends, invalid UTF-8, or a bidi
// or line-separator character.
func checkTerminalSafe(t *testing.T, what, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s is not valid UTF-8:\n%q", what, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if !sanitize.Safe(line) {
			t.Errorf("%s has a line a terminal acts on: %q", what, line)
		}
	}
}

// A hostile thread name reaches the text report escaped: the report of a
// run whose names are hostile is the report of one whose names are their
// escaped spellings, byte for byte (same rows, same alignment). The JSON
// summary keeps the original characters.
func TestTextEscapesHostileNames(t *testing.T) {
	var got, want bytes.Buffer
	if err := hostileReport(func(i int) string { return hostileNames[i].raw }).unwrapped(&got); err != nil {
		t.Fatal(err)
	}
	if err := hostileReport(func(i int) string { return hostileNames[i].shown }).unwrapped(&want); err != nil {
		t.Fatal(err)
	}
	out := got.String()
	checkTerminalSafe(t, "the report", out)
	if out != want.String() {
		t.Errorf("the report of hostile names differs from that of their escaped spellings:\n--- got\n%s\n--- want\n%s", out, want.String())
	}
	for _, n := range hostileNames {
		if !strings.Contains(out, n.shown) {
			t.Errorf("the report does not show %s", n.shown)
		}
	}
	for _, want := range []string{
		`numatrace: cgroup /sys/fs/cgroup/memory/\x1b]0;pwned\x07 for 3s`,
		`note: target pid 100 (\x1b]0;pwned\x07) exited after 3s`,
		`across 1 thread of \x1b]0;pwned\x07 (worst tid 100`,
		`memcg_reclaim of tid 100 (\x1b]0;pwned\x07):`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}

	var js bytes.Buffer
	if err := NewNDJSON(&js).Summary(hostileReport(func(i int) string { return hostileNames[i].raw })); err != nil {
		t.Fatal(err)
	}
	var sum struct {
		Target  string `json:"target"`
		Threads []struct {
			TID  uint32 `json:"tid"`
			Comm string `json:"comm"`
		} `json:"threads"`
	}
	if err := json.Unmarshal(js.Bytes(), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Target != "cgroup /sys/fs/cgroup/memory/"+hostileNames[0].raw {
		t.Errorf("JSON target %q: want the original bytes", sum.Target)
	}
	for _, th := range sum.Threads {
		// JSON strings are UTF-8: encoding/json writes an invalid byte as U+FFFD.
		if raw := strings.ToValidUTF8(hostileNames[th.TID-100].raw, "\uFFFD"); th.Comm != raw {
			t.Errorf("JSON comm of tid %d is %q, want the original %q", th.TID, th.Comm, raw)
		}
	}
}
