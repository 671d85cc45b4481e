package correlate

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/stall"
)

const ms = uint64(time.Millisecond)

// windows builds n windows with p99 base, spikes at the given indexes, and
// memcg stalls (in thread tid of process "redis-server") where given.
func build(n int, spikeAt map[uint64]uint64, memcg map[uint64]uint64) ([]Latency, []*aggregate.Window) {
	var lat []Latency
	var ws []*aggregate.Window
	for i := uint64(0); i < uint64(n); i++ {
		p99 := 9 * ms
		if v, ok := spikeAt[i]; ok {
			p99 = v
		}
		lat = append(lat, Latency{Index: i, Count: 1000, P50Ns: ms, P99Ns: p99, MaxNs: p99 * 2})
		w := &aggregate.Window{Index: i, StartNs: 1e9 + i*1e9, EndNs: 2e9 + i*1e9, Threads: map[uint32]*aggregate.ThreadWindow{}}
		if ns, ok := memcg[i]; ok {
			w.Causes[stall.MemcgReclaim] = aggregate.CauseTotal{Count: 10, TotalNs: ns}
			for k, tid := range []uint32{1234, 1235, 1236} {
				share := ns / 2
				if k > 0 {
					share = ns / 4
				}
				tw := &aggregate.ThreadWindow{PID: 1234, TID: tid, Comm: "redis-server", TotalNs: share}
				tw.ByCause[stall.MemcgReclaim] = aggregate.CauseTotal{Count: 3, TotalNs: share}
				w.Threads[tid] = tw
			}
		}
		ws = append(ws, w)
	}
	return lat, ws
}

func TestSpikesExplainedByMemcg(t *testing.T) {
	lat, ws := build(40, map[uint64]uint64{20: 41 * ms, 30: 50 * ms}, map[uint64]uint64{20: 38 * ms, 30: 44 * ms, 7: 100000})
	r := analyze(lat, ws, Config{StartNs: 1e9})
	if len(r.Spikes) != 2 || r.Spikes[0].Index != 20 || r.Spikes[1].Index != 30 {
		t.Fatalf("spikes %+v", r.Spikes)
	}
	sp := r.Spikes[0]
	if sp.BaselineNs != 9*ms || sp.Causes[0].Cause != "memcg_reclaim" || sp.Causes[0].Threads != 3 ||
		sp.Causes[0].WorstTID != 1234 || sp.Causes[0].Process != "redis-server" {
		t.Fatalf("attribution %+v", sp)
	}
	want := "P99 41 ms at +20s (baseline 9 ms): memcg_reclaim 38 ms across 3 threads of redis-server (worst tid 1234: 19 ms); direct_reclaim 0"
	if !strings.HasPrefix(sp.Verdict, want) {
		t.Fatalf("verdict %q\nwant prefix %q", sp.Verdict, want)
	}
	cc := r.Correlation["memcg_reclaim"]
	if cc.SpikeShare != 1 || math.Abs(cc.NormalShare-1.0/38) > 1e-9 || cc.Lift == nil || *cc.Lift < 30 || cc.Spearman == nil || *cc.Spearman <= 0.3 {
		t.Fatalf("memcg correlation %+v", cc)
	}
	if len(r.Explained) != 1 || r.Explained[0] != "memcg_reclaim" || !strings.Contains(r.Conclusion, "explained by memcg_reclaim") {
		t.Fatalf("conclusion %q explained %v", r.Conclusion, r.Explained)
	}
	if c := r.Correlation["compaction"]; c.SpikeShare != 0 || c.Spearman != nil {
		t.Fatalf("compaction never stalled: %+v", c)
	}
}

func TestSpikesWithoutStallsSaySo(t *testing.T) {
	lat, ws := build(40, map[uint64]uint64{20: 41 * ms, 30: 50 * ms}, map[uint64]uint64{5: ms, 6: ms, 7: ms})
	r := analyze(lat, ws, Config{})
	if len(r.Spikes) != 2 || len(r.Explained) != 0 || !strings.Contains(r.Conclusion, "no stall cause explains them") {
		t.Fatalf("%+v", r)
	}
}

func TestNoSpikes(t *testing.T) {
	// Steady latency, and a jump under the floor, are not spikes.
	lat, ws := build(40, map[uint64]uint64{20: 900 * uint64(time.Microsecond)}, nil)
	for i := range lat {
		lat[i].P99Ns /= 100 // 90 µs baseline, 900 µs jump: 10x but under 1 ms
	}
	r := analyze(lat, ws, Config{})
	if len(r.Spikes) != 0 || !strings.Contains(r.Conclusion, "No latency spikes in 40 windows") {
		t.Fatalf("%+v", r)
	}
	if r := analyze(nil, ws, Config{}); !strings.Contains(r.Conclusion, "No latency samples") {
		t.Fatalf("%q", r.Conclusion)
	}
}

func TestKAndFloorAreHonoured(t *testing.T) {
	lat, ws := build(40, map[uint64]uint64{20: 25 * ms}, nil) // 2.8x the 9 ms baseline
	if r := analyze(lat, ws, Config{K: 3}); len(r.Spikes) != 0 {
		t.Fatal("k=3 flagged a 2.8x window")
	}
	if r := analyze(lat, ws, Config{K: 2, FloorNs: 30 * ms}); len(r.Spikes) != 0 {
		t.Fatal("a 25 ms p99 under a 30 ms floor was flagged")
	}
	if r := analyze(lat, ws, Config{K: 2}); len(r.Spikes) != 1 {
		t.Fatal("the 2.8x window was not flagged with k=2")
	}
}

func TestSpearman(t *testing.T) {
	for _, c := range []struct {
		x, y []float64
		want float64
		ok   bool
	}{
		{[]float64{1, 2, 3, 4}, []float64{10, 20, 30, 40}, 1, true},
		{[]float64{1, 2, 3, 4}, []float64{4, 3, 2, 1}, -1, true},
		{[]float64{1, 1, 2, 2}, []float64{1, 1, 2, 2}, 1, true},
		{[]float64{0, 0, 0}, []float64{1, 2, 3}, 0, false},
		{[]float64{1, 2}, []float64{1, 2}, 0, false},
	} {
		got, ok := Spearman(c.x, c.y)
		if ok != c.ok || math.Abs(got-c.want) > 1e-9 {
			t.Errorf("Spearman(%v, %v) = %v, %v; want %v, %v", c.x, c.y, got, ok, c.want, c.ok)
		}
	}
}

// analyze files each window's latency as the engine does when the window
// closes, then runs the analysis over the run.
func analyze(lat []Latency, ws []*aggregate.Window, cfg Config) *Result {
	byIndex := map[uint64]*Latency{}
	for i := range lat {
		byIndex[lat[i].Index] = &lat[i]
	}
	series := make([]Window, 0, len(ws))
	for _, w := range ws {
		w.Latency = byIndex[w.Index]
		series = append(series, Summarize(w))
	}
	return Analyze(series, cfg)
}
