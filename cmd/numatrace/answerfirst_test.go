package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
)

// shippedReport runs `numatrace report` with args on a shipped recording and
// returns its stdout; the command must succeed.
func shippedReport(t *testing.T, name string, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	path := filepath.Join("..", "..", "testdata", "recordings", name)
	if code := run(append(append([]string{"report"}, args...), path), &stdout, &stderr); code != 0 {
		t.Fatalf("report %s: exit %d: %s", name, code, stderr.String())
	}
	return stdout.String()
}

// spikeLines are the verdict lines of the report's LATENCY section, in
// the order printed.
var spikeLine = regexp.MustCompile(`(?m)^  P99 (\d+) ms at `)

// The redis incident's two worst spikes, 204 ms and 110 ms, were hidden
// behind "13 more spikes (see --json)" as the tenth-and-later in time
// order. They come first now, and --top says how many are printed.
func TestReportShowsTheWorstSpikesFirst(t *testing.T) {
	out := shippedReport(t, "redis-memcg-hog.ntr")
	got := spikeLine.FindAllStringSubmatch(out, -1)
	if len(got) != 20 { // --top's default; the recording has 23 spikes
		t.Fatalf("%d spike lines, want 20 (the --top default):\n%s", len(got), out)
	}
	if got[0][1] != "204" || got[1][1] != "110" {
		t.Fatalf("first spikes %s ms, %s ms; want 204 ms then 110 ms:\n%s", got[0][1], got[1][1], out)
	}
	if !strings.Contains(out, "LATENCY (61 windows with requests, 23 spikes, the worst first)") ||
		!strings.Contains(out, "... 3 more spikes, each smaller than those above (--top 23 shows them all;") {
		t.Errorf("the section does not say its order or what it left out:\n%s", out)
	}
	if n := len(spikeLine.FindAllString(shippedReport(t, "redis-memcg-hog.ntr", "--top", "3"), -1)); n != 3 {
		t.Errorf("--top 3 printed %d spikes", n)
	}
	if n := len(spikeLine.FindAllString(shippedReport(t, "redis-memcg-hog.ntr", "--top", "50"), -1)); n != 23 {
		t.Errorf("--top 50 printed %d spikes, want all 23", n)
	}
}

// A spike line names the causes that stalled in it, not every cause at
// 0 ("direct_reclaim 0; node_reclaim 0; ..."), and gives its time to the
// millisecond with the zone: windows are half a second here.
func TestSpikeLinesNameOnlyWhatStalled(t *testing.T) {
	out := shippedReport(t, "redis-memcg-hog.ntr", "--top", "50")
	for _, zero := range []string{"direct_reclaim 0", "node_reclaim 0", "compaction 0", "mmap_lock 0"} {
		if strings.Contains(out, zero) {
			t.Errorf("the report lists %q", zero)
		}
	}
	if !strings.Contains(out, "P99 204 ms at 03:35:05.199 UTC (baseline 1 ms, 202 ms over): memcg_reclaim 4 ms") {
		t.Errorf("the worst spike's line lacks its millisecond time and zone, or its cause:\n%s", out)
	}
}

// No line of any shipped recording's text report is wider than 100
// columns, and none was made to fit by cutting it.
func TestReportFits100Columns(t *testing.T) {
	recs, err := filepath.Glob(filepath.Join("..", "..", "testdata", "recordings", "*.ntr"))
	if err != nil || len(recs) == 0 {
		t.Fatalf("no shipped recordings (%v)", err)
	}
	for _, rec := range recs {
		out := shippedReport(t, filepath.Base(rec), "--top", "1000")
		for i, l := range strings.Split(out, "\n") {
			if w := ansi.StringWidth(l); w > 100 {
				t.Errorf("%s line %d is %d columns: %q", filepath.Base(rec), i+1, w, l)
			}
		}
		if strings.Contains(out, "…") {
			t.Errorf("%s: the text report cuts something short (…)", filepath.Base(rec))
		}
	}
}

// Every report opens with its answer: the verdict, the threads frozen
// longest and what to do next, the same in text and JSON; the JSON has
// the wall clock of the start.
func TestReportOpensWithTheAnswer(t *testing.T) {
	text := shippedReport(t, "redis-memcg-hog.ntr")
	lines := strings.Split(text, "\n")
	if lines[0] != "numatrace: pid 7044 (redis-server) for 30.727s from 03:34:45.199 UTC on 6.18.44-fc-v669" ||
		!strings.HasPrefix(lines[3], "VERDICT: 23 spikes in 61 windows, explained by memcg_reclaim") {
		t.Fatalf("the report does not open with its answer:\n%s", strings.Join(lines[:8], "\n"))
	}
	head := strings.Join(lines[3:14], "\n")
	flat := strings.Join(strings.Fields(head), " ") // the text wraps at 100 columns
	for _, want := range []string{
		"WORST: tid 7044 redis-server (pid 7044) froze 517.95ms, most in memcg_reclaim (517.85ms, longest",
		// A recording from before runs read the target's memory cgroup:
		// the next step says where to read it, not "the cgroup".
		"NEXT: a memory cgroup reached its limit (numatrace read no memory cgroup for this target: `numatrace doctor -p PID` names",
		"for the spikes no stall covers, look outside memory management",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("the headline lacks %q:\n%s", want, head)
		}
	}
	if strings.Contains(head, "jemalloc_bg_thd") {
		t.Errorf("the headline names a bystander with 2.9µs of stalls:\n%s", head)
	}
	var js struct {
		Started  string `json:"started"`
		Headline struct {
			Verdict string `json:"verdict"`
			Worst   []struct {
				TID     uint32 `json:"tid"`
				StallNs uint64 `json:"stall_ns"`
				Cause   string `json:"cause"`
			} `json:"worst_threads"`
			Next string `json:"next"`
		} `json:"headline"`
		Correlation struct {
			Conclusion string `json:"conclusion"`
		} `json:"correlation"`
	}
	if err := json.Unmarshal([]byte(shippedReport(t, "redis-memcg-hog.ntr", "--json")), &js); err != nil {
		t.Fatal(err)
	}
	h := js.Headline
	if h.Verdict != js.Correlation.Conclusion || len(h.Worst) != 1 || h.Worst[0].TID != 7044 ||
		h.Worst[0].StallNs != 517953330 || h.Worst[0].Cause != "memcg_reclaim" || !strings.Contains(h.Next, "memory.max") {
		t.Errorf("JSON headline %+v", h)
	}
	if st, err := time.Parse(time.RFC3339Nano, js.Started); err != nil || st.UTC().Format("15:04:05.000") != "03:34:45.199" {
		t.Errorf("JSON started %q (%v), want the wall clock 03:34:45.199 UTC", js.Started, err)
	}
}

// A recording without latency data ends on a verdict too, not on the
// compaction counters.
func TestReportWithoutLatencyEndsOnAVerdict(t *testing.T) {
	out := strings.TrimRight(shippedReport(t, "vm-6.1-misplaced.ntr"), "\n")
	last := out[strings.LastIndex(out, "\n")+1:]
	want := "VERDICT: Memory management froze 15 threads of 4 processes for 2.46s in 11.477s, most of it"
	if !strings.HasPrefix(out[strings.LastIndex(out, "\nVERDICT: ")+1:], want) {
		t.Errorf("the report ends on %q, want a verdict starting %q", last, want)
	}
	if !strings.HasPrefix(strings.Split(out, "\n")[3], want) {
		t.Errorf("the report does not open with the verdict %q", want)
	}
}
