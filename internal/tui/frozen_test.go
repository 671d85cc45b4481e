package tui

import (
	"fmt"
	"strings"
	"testing"

	"github.com/numatrace/numatrace/internal/correlate"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
)

// closedLoopAnalysis is 30 windows of a closed-loop client whose p99
// held at 1 ms, judged against a 5 ms SLO: redis froze in memcg reclaim
// in the windows of frozen (for as many ms as their max, which is ten
// times their p99.9), and p99 broke the SLO in those of spikes.
func closedLoopAnalysis(frozen, spikes []int) *correlate.Result {
	const ms = 1_000_000
	var ws []correlate.Window
	for i := uint64(0); i < 30; i++ {
		ws = append(ws, correlate.Window{Index: i, StartNs: 1 + i*1e9,
			Latency: &correlate.Latency{Index: i, Count: 5000, P50Ns: ms / 10, P99Ns: ms, P999Ns: 2 * ms, MaxNs: 3 * ms}})
	}
	freeze := func(w *correlate.Window, maxMs uint64) {
		w.StallNs[stall.MemcgReclaim] = maxMs * ms
		w.Hits = []correlate.Hits{{Cause: stall.MemcgReclaim, Threads: 1, WorstTID: 7044, WorstNs: maxMs * ms, Process: "redis-server"}}
	}
	for k, i := range frozen {
		l := ws[i].Latency
		l.MaxNs = uint64(20+k) * ms
		l.P999Ns = l.MaxNs / 10
		freeze(&ws[i], uint64(20+k))
	}
	for _, i := range spikes {
		ws[i].Latency.P99Ns, ws[i].Latency.P999Ns, ws[i].Latency.MaxNs = 30*ms, 30*ms, 30*ms
		freeze(&ws[i], 30)
	}
	return correlate.Analyze(ws, correlate.Config{SLONs: 5 * ms, StartNs: 1})
}

// The Spikes screen lists the windows whose p99 held while the service
// froze, the worst first, with their max and p99.9 and what covers them:
// all that fit when nothing spiked, three under the spikes and a line for
// the rest when something did.
func TestSpikesScreenListsFrozenWindows(t *testing.T) {
	for _, tc := range []struct {
		name           string
		frozen, spikes []int
		rows           []string // the frozen windows' rows, the worst first
		more           string
	}{
		{"no spike", []int{3, 8, 21}, nil, []string{
			"+21s        22.00ms   2.20ms  memcg_reclaim 100% · redis-server",
			"+8s         21.00ms   2.10ms  memcg_reclaim 100% · redis-server",
			"+3s         20.00ms   2.00ms  memcg_reclaim 100% · redis-server"}, ""},
		{"under a spike", []int{3, 8, 12, 21, 25}, []int{17}, []string{
			"+25s        24.00ms   2.40ms  memcg_reclaim 100% · redis-server",
			"+21s        23.00ms   2.30ms  memcg_reclaim 100% · redis-server",
			"+12s        22.00ms   2.20ms  memcg_reclaim 100% · redis-server"}, "… 2 more frozen (the report lists them)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStore(Info{Run: run.Description{Target: "pid 7044 (redis-server)", StartNs: 1, WindowNs: 1e9,
				Latency: run.LatencySource{Kind: run.LatencyKernel, Detail: "requests on sockets of 0.0.0.0:6379"}}}, liveWindowsForTest)
			feed(s)
			s.Analysis(closedLoopAnalysis(tc.frozen, tc.spikes))
			m := NewLive(s, Options{NoTicks: true, Now: func() uint64 { return 2e9 }})
			drive(t, m, 80, 24)
			m.Update(keyTab)
			view := m.View()
			want := "FROZEN          MAX    P99.9  COVERED BY (p99 held)\n" + strings.Join(tc.rows, "\n")
			if tc.more != "" {
				want += "\n" + tc.more
			}
			if !strings.Contains(view, want) {
				t.Errorf("the Spikes screen lacks\n%s\n--- in\n%s", want, view)
			}
			if len(tc.spikes) > 0 && !strings.Contains(view, fmt.Sprintf("+%ds", tc.spikes[0])) {
				t.Errorf("the spike is not listed:\n%s", view)
			}
		})
	}
}
