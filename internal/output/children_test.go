package output

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/window"
)

// childReport is a --pid run of a server whose children stalled:
// memcg reclaim, and optionally compaction too; own is what the server
// stalled itself.
func childReport(own uint64, compaction bool) *Report {
	snap := &stall.Snapshot{Descendants: &stall.Descendants{Stalled: 30, Causes: map[stall.Cause]stall.StallTime{
		stall.MemcgReclaim: {Count: 4800, TotalNs: 1_520_000_000}}}}
	if compaction {
		snap.Descendants.Causes[stall.Compaction] = stall.StallTime{Count: 2, TotalNs: 20_000_000}
	}
	if own > 0 {
		snap.Thread(4242, 4242, "postgres").Hists[stall.MmapLock] = histOf(own)
	}
	return &Report{Target: "pid 4242 (postgres)", Kernel: "6.1.0", DurationNs: 1e10,
		Summary: aggregate.New(window.Grid{LenNs: 1e9}).Summarize(snap)}
}

func TestChildrenHint(t *testing.T) {
	for _, c := range []struct {
		own        uint64
		compaction bool
		want       string
	}{
		{0, false, "pid 4242 (postgres) stalled nothing, but its 30 child processes stalled 1.52s in memcg_reclaim: trace them with --children (-f)"},
		{0, true, "pid 4242 (postgres) stalled nothing, but its 30 child processes stalled 1.54s (memcg_reclaim 1.52s, compaction 20.00ms): trace them with --children (-f)"},
		{3_000_000, false, "pid 4242 (postgres) stalled 3.00ms itself, and its 30 child processes, not traced, stalled 1.52s in memcg_reclaim: trace them with --children (-f)"},
	} {
		if got := childReport(c.own, c.compaction).ChildrenHint(); got != c.want {
			t.Errorf("hint\n got %q\nwant %q", got, c.want)
		}
	}
	one := &aggregate.ChildStalls{Processes: 1, StallNs: 5000, Stalls: [stall.NumCauses]aggregate.StallCount{stall.MemcgReclaim: {Count: 1, TotalNs: 5000}}}
	if got, want := ChildrenHint("pid 7 (sh)", 0, one), "pid 7 (sh) stalled nothing, but its 1 child process stalled 5.0µs in memcg_reclaim: trace them with --children (-f)"; got != want {
		t.Errorf("one child: %q", got)
	}
	// No children stalled, or they were not watched: nothing to say.
	for _, c := range []*aggregate.ChildStalls{nil, {}} {
		if got := ChildrenHint("pid 7 (sh)", 0, c); got != "" {
			t.Errorf("%+v: hint %q", c, got)
		}
	}
}

// The finding: a --pid server that stalled nothing must not read as a
// quiet run; the text report names the children and the flag.
func TestTextSaysTheChildrenStalled(t *testing.T) {
	r := childReport(0, false)
	r.Summary.Children.NotWatched = 3
	var buf bytes.Buffer
	if err := r.unwrapped(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"\npid 4242 (postgres) stalled nothing, but its 30 child processes stalled 1.52s in memcg_reclaim: trace them with --children (-f)\n\nNo stalls or migrations recorded.\n",
		"WARNING: 3 child processes could not be watched (the kernel's set of them is full): what they stalled is not counted below\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// A target with control characters in its name: the hint escapes them.
	r.Target = "pid 4242 (post\x1b]0;x\x07gres)"
	buf.Reset()
	r.unwrapped(&buf)
	if !strings.Contains(buf.String(), "\n"+`pid 4242 (post\x1b]0;x\x07gres) stalled nothing, but`) {
		t.Errorf("target name not escaped in the hint:\n%q", buf.String())
	}
}

func TestSummaryLineHasTheChildren(t *testing.T) {
	var buf bytes.Buffer
	nd := NewNDJSON(&buf)
	if err := nd.Summary(childReport(0, true)); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Children map[string]any `json:"children"`
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"processes_stalled": 30.0, "stall_ns": 1_540_000_000.0, "not_watched": 0.0,
		"stalls": map[string]any{"memcg_reclaim": map[string]any{"count": 4800.0, "total_ns": 1_520_000_000.0},
			"compaction": map[string]any{"count": 2.0, "total_ns": 20_000_000.0}},
		"hint": "pid 4242 (postgres) stalled nothing, but its 30 child processes stalled 1.54s (memcg_reclaim 1.52s, compaction 20.00ms): trace them with --children (-f)"}
	if g, w := mustJSON(t, got.Children), mustJSON(t, want); g != w {
		t.Errorf("children\n got %s\nwant %s", g, w)
	}
	// Not watched (--children, another target): no children key at all.
	buf.Reset()
	nd = NewNDJSON(&buf)
	nd.Summary(&Report{Target: "pid 1 (x) and its descendants"})
	if strings.Contains(buf.String(), `"children"`) {
		t.Errorf("a summary without watched children has them: %s", buf.String())
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
