package tui

import (
	"strings"
	"testing"

	"github.com/numatrace/numatrace/internal/correlate"
	"github.com/numatrace/numatrace/internal/run"
)

// The Spikes screen says where the latencies come from, in one line cut
// to the width, from the run's description, before the analysis and once
// it is there.
func TestSpikesScreenSaysTheLatencySource(t *testing.T) {
	src := run.LatencySource{Kind: run.LatencyKernel, Detail: "requests on sockets of 0.0.0.0:6379, [::]:6379 (12 connections at start); " +
		"server-side: excludes the network and the client's own queues, but a paced connection's requests held up by a frozen one count from when they were due"}
	s := NewStore(Info{Run: run.Description{Target: "pid 10 (redis)", StartNs: 1, WindowNs: 1e9, Latency: src}}, liveWindowsForTest)
	feed(s)
	for _, analysis := range []*correlate.Result{nil, {Conclusion: "No spikes."}} {
		s.Analysis(analysis)
		m := NewLive(s, Options{NoTicks: true, Now: func() uint64 { return 2e9 }})
		drive(t, m, 80, 24)
		m.Update(keyTab)
		// The source is shown whole, wrapped to the width, never cut.
		var shown []string
		for _, l := range strings.Split(m.View(), "\n") {
			if strings.HasPrefix(l, "latency: ") || len(shown) > 0 && strings.HasPrefix(l, "  ") {
				shown = append(shown, strings.TrimSpace(l))
			} else if len(shown) > 0 {
				break
			}
		}
		if got, want := strings.Join(shown, " "), "latency: "+src.String(); got != want {
			t.Errorf("with analysis %v the Spikes screen's source is %q, want %q\n%s", analysis, got, want, m.View())
		}
	}
}
