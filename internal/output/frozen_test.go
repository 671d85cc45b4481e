package output

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/correlate"
	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/window"
)

// latencyReport is a run of 20 one-second windows with redis's p99 at
// 1 ms, p99.9 at 2 ms and max at 3 ms under a 5 ms SLO, but where tails
// says otherwise ({p99, p99.9, max} in ms, by window); redis's thread
// was frozen in memcg reclaim for memcg ms (by window).
func latencyReport(tails map[int][3]uint64, memcg map[int]uint64) *Report {
	const ms = 1_000_000
	var ws []correlate.Window
	for i := uint64(0); i < 20; i++ {
		w := correlate.Window{Index: i, StartNs: 1e9 + i*1e9,
			Latency: &correlate.Latency{Index: i, Count: 5000, P50Ns: ms / 10, P99Ns: ms, P999Ns: 2 * ms, MaxNs: 3 * ms}}
		if t, ok := tails[int(i)]; ok {
			w.Latency.P99Ns, w.Latency.P999Ns, w.Latency.MaxNs = t[0]*ms, t[1]*ms, t[2]*ms
		}
		if m := memcg[int(i)] * ms; m > 0 {
			w.StallNs[stall.MemcgReclaim] = m
			w.Hits = []correlate.Hits{{Cause: stall.MemcgReclaim, Threads: 1, WorstTID: 7044, WorstNs: m, LongestNs: m, Process: "redis-server"}}
		}
		ws = append(ws, w)
	}
	a := aggregate.New(window.Grid{StartNs: 1e9, LenNs: 1e9})
	return &Report{Target: "pid 7044 (redis-server)", Kernel: "6.18", DurationNs: 20e9, Windows: 20,
		Probes:      []stall.ProbeStatus{{Name: "memcg_reclaim", Attached: true}},
		Summary:     a.Summarize(&stall.Snapshot{}),
		Correlation: correlate.Analyze(ws, correlate.Config{SLONs: 5 * ms, StartNs: 1e9})}
}

// The text report shows the latency it measured, its p99, p99.9 and max
// ranges over the run's windows, whether or not anything spiked; and the
// windows in which p99 held but the tail broke the SLO are named with
// their p99.9 and max, in the text, in the verdict and in the JSON.
func TestTheReportShowsTheLatencyItMeasured(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tails  map[int][3]uint64
		memcg  map[int]uint64
		line   string
		frozen []string // the frozen windows' verdicts' openings, the worst first
	}{
		{"calm", nil, nil,
			"  measured per window: p99 1.00ms to 1.00ms, p99.9 2.00ms to 2.00ms, max 3.00ms to 3.00ms\n", nil},
		{"a spike", map[int][3]uint64{9: {30, 31, 33}}, map[int]uint64{9: 32},
			"  measured per window: p99 1.00ms to 30.00ms, p99.9 2.00ms to 31.00ms, max 3.00ms to 33.00ms\n", nil},
		{"two freezes p99 held through", map[int][3]uint64{4: {1, 38, 42}, 12: {1, 2, 9}}, map[int]uint64{4: 40, 12: 8},
			"  measured per window: p99 1.00ms to 1.00ms, p99.9 2.00ms to 38.00ms, max 3.00ms to 42.00ms\n",
			[]string{"P99 1 ms held at +4s, but P99.9 38 ms and max 42 ms (SLO 5 ms, 37 ms over): memcg_reclaim 40 ms",
				"P99 1 ms held at +12s, but P99.9 2 ms and max 9 ms (SLO 5 ms, 4 ms over): memcg_reclaim 8 ms"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := latencyReport(tc.tails, tc.memcg)
			var b bytes.Buffer
			if err := r.unwrapped(&b); err != nil {
				t.Fatal(err)
			}
			text := b.String()
			at := strings.Index(text, "\nLATENCY (20 windows with requests, ")
			if at < 0 {
				t.Fatalf("no LATENCY section:\n%s", text)
			}
			if lines := strings.SplitAfter(text[at+1:], "\n"); lines[1] != tc.line {
				t.Errorf("the LATENCY section opens with %q, want %q:\n%s", lines[1], tc.line, text[at:])
			}
			var sum struct {
				Headline struct {
					Verdict string `json:"verdict"`
				} `json:"headline"`
				Frozen []struct {
					Index   uint64 `json:"index"`
					P99Ns   uint64 `json:"p99_ns"`
					P999Ns  uint64 `json:"p999_ns"`
					MaxNs   uint64 `json:"max_ns"`
					Verdict string `json:"verdict"`
				} `json:"frozen_windows"`
			}
			var j bytes.Buffer
			if err := NewNDJSON(&j).Summary(r); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(j.Bytes(), &sum); err != nil {
				t.Fatal(err)
			}
			if len(tc.frozen) == 0 {
				if strings.Contains(text, "froze while") || len(sum.Frozen) != 0 || strings.Contains(j.String(), "frozen_windows") {
					t.Errorf("frozen windows where p99.9 and max kept to the SLO:\n%s\n%s", text, j.String())
				}
				return
			}
			if !strings.Contains(text, "  2 windows froze while p99 held (p99.9 or max over the SLO, or a thread that served requests frozen a tenth of the window), the worst first:\n  "+tc.frozen[0]) {
				t.Errorf("the text does not list the frozen windows, the worst first:\n%s", text[at:])
			}
			for _, f := range tc.frozen {
				if !strings.Contains(text, "\n  "+f) {
					t.Errorf("the text lacks %q", f)
				}
			}
			want := "No latency spikes in 20 windows. In 2 windows p99 held but the service froze (p99.9 up to 38 ms, max up to 42 ms): memcg_reclaim covers at least half of them."
			if v := sum.Headline.Verdict; !strings.HasPrefix(v, want) || !strings.Contains(text, "VERDICT: "+want) {
				t.Errorf("verdict %q, want it to open with %q", v, want)
			}
			if len(sum.Frozen) != 2 || sum.Frozen[0].Index != 4 || sum.Frozen[0].P99Ns != 1e6 || sum.Frozen[0].P999Ns != 38e6 ||
				sum.Frozen[0].MaxNs != 42e6 || !strings.HasPrefix(sum.Frozen[0].Verdict, tc.frozen[0]) || sum.Frozen[1].Index != 12 {
				t.Errorf("JSON frozen windows %+v", sum.Frozen)
			}
		})
	}
}
