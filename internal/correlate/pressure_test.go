package correlate

import (
	"strings"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/stall"
)

// Spikes no probe explains send the reader outside memory management only
// when PSI agrees: where PSI of the target's own group counted memory
// stall in their windows, the verdict says memory is still the likely
// cause. A machine-wide PSI is every process's: it is said as such, and
// never taken for the target's.
func TestUncoveredSpikesAskPSI(t *testing.T) {
	for _, c := range []struct {
		name     string
		psi      uint64 // ns in each spike window; 0 and unread: no reading
		read     bool
		own      bool // the target's own group's PSI
		want     string
		wantSpik string
	}{
		{"no PSI", 0, false, true, "no stall cause explains them: look outside memory management (CPU, locks, I/O, the network).", "No stall in it: look elsewhere"},
		{"PSI quiet", 2 * ms, true, true, "look outside memory management (CPU, locks, I/O, the network); PSI agrees (4 ms of memory stall in their windows).", "No stall in it: look elsewhere"},
		{"PSI stalled", 400 * ms, true, true, "yet PSI counted 800 ms of memory stall in the target's group in their windows (40% of their time), which no probe timed: memory management is still the likely cause",
			"PSI counted 400 ms of memory stall in the target's group in the window that no probe timed"},
		{"machine-wide PSI quiet", 0, true, false, "look outside memory management (CPU, locks, I/O, the network); PSI agrees (no memory stall in their windows).",
			"No stall in it: look elsewhere"},
		{"machine-wide PSI stalled", 400 * ms, true, false, "look outside memory management (CPU, locks, I/O, the network); PSI counted 800 ms of memory stall machine-wide in their windows (every process's on the machine, not the target's alone).",
			"No stall in it: look elsewhere"},
	} {
		t.Run(c.name, func(t *testing.T) {
			lat, ws := build(40, map[uint64]uint64{20: 41 * ms, 30: 50 * ms}, map[uint64]uint64{5: ms})
			for _, w := range ws {
				w.HasPressure = c.read
				if w.Index == 20 || w.Index == 30 {
					w.PressureNs = c.psi
				}
			}
			r := analyze(lat, ws, Config{WindowNs: uint64(time.Second), PressureOwn: c.own})
			if len(r.Spikes) != 2 || len(r.Explained) != 0 {
				t.Fatalf("spikes %d, explained %v", len(r.Spikes), r.Explained)
			}
			if !strings.Contains(r.Conclusion, c.want) {
				t.Errorf("conclusion %q\nwant %q", r.Conclusion, c.want)
			}
			if c.read && strings.Contains(c.want, "likely") && strings.Contains(r.Conclusion, "look outside") {
				t.Errorf("the conclusion still sends the reader outside memory management: %q", r.Conclusion)
			}
			if !c.own && strings.Contains(r.Conclusion, "likely cause") {
				t.Errorf("machine-wide PSI taken for the target's: %q", r.Conclusion)
			}
			if !strings.Contains(r.Spikes[0].Verdict, c.wantSpik) {
				t.Errorf("spike verdict %q\nwant %q", r.Spikes[0].Verdict, c.wantSpik)
			}
		})
	}
}

// A spike covered by memstall_wait is charged to it with its kind of
// wait, in the spike's verdict and the run's.
func TestMemstallWaitIsChargedWithItsKind(t *testing.T) {
	lat, ws := build(40, map[uint64]uint64{20: 41 * ms, 30: 50 * ms}, nil)
	for _, w := range ws {
		if w.Index != 20 && w.Index != 30 {
			continue
		}
		ns := 35 * ms
		w.Causes[stall.MemstallWait] = aggregate.CauseTotal{Count: 40, TotalNs: ns, MaxNs: 3 * ms, Reason: "thrashing"}
		tw := &aggregate.ThreadWindow{PID: 77, TID: 77, Comm: "reader", TotalNs: ns}
		tw.ByCause[stall.MemstallWait] = aggregate.CauseTotal{Count: 40, TotalNs: ns, MaxNs: 3 * ms, Reason: "thrashing"}
		w.Threads[77] = tw
	}
	r := analyze(lat, ws, Config{WindowNs: uint64(time.Second)})
	if len(r.Spikes) != 2 {
		t.Fatalf("spikes %+v", r.Spikes)
	}
	if v := r.Spikes[0].Verdict; !strings.Contains(v, "memstall_wait (thrashing) 35 ms across 1 thread of reader") {
		t.Errorf("spike verdict %q", v)
	}
	if !strings.Contains(r.Conclusion, "explained by memstall_wait (thrashing)") || len(r.Explained) != 1 || r.Explained[0] != stall.MemstallWait {
		t.Errorf("conclusion %q, explained %v", r.Conclusion, r.Explained)
	}
}
