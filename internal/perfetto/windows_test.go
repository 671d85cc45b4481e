package perfetto

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/engine"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/replay"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
)

// windowTotals is a replay's closed windows: the report's.
type windowTotals map[uint64][stall.NumCauses]uint64

func (w windowTotals) Stall(*stall.Event) error { return nil }
func (w windowTotals) Flush() error             { return nil }
func (w windowTotals) Window(win *aggregate.Window) error {
	var t [stall.NumCauses]uint64
	for c := range win.Causes {
		t[c] = win.Causes[c].TotalNs
	}
	w[win.Index] = t
	return nil
}

// The stall_ns counters of every shipped recording's export are the
// report's windows: each timed cause's time in each window, stalls before
// the start in the first and late ones where the live run filed them.
func TestCountersAreTheReportsWindows(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/recordings/*.ntr")
	if len(files) == 0 {
		t.Fatal("no shipped recordings")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r, err := record.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			want := windowTotals{}
			if _, err := replay.Run(context.Background(), r, replay.Options{Sinks: []engine.Sink{want}}); err != nil {
				t.Fatal(err)
			}
			r.Close()
			tr, _, _ := export(t, f, Options{})
			h := r.Header()
			samples := 0
			for _, ev := range tr.TraceEvents {
				if ev.Name != StallCounter {
					continue
				}
				ts, _ := ev.Ts.Float64()
				if ts < 0 {
					t.Fatalf("a window counter at %v µs, before the recording's start", ts)
				}
				idx := uint64(ts*1e3) / h.WindowNs
				var args map[string]uint64
				if err := json.Unmarshal(ev.Args, &args); err != nil {
					t.Fatal(err)
				}
				for name, ns := range args {
					c, err := stall.ParseCause(name)
					if err != nil {
						t.Fatal(err)
					}
					if got := want[idx][c]; got != ns {
						t.Errorf("window %d %s: the export says %d ns, the report's window %d", idx, name, ns, got)
					}
				}
				samples++
			}
			if samples == 0 {
				t.Fatal("no window counters")
			}
		})
	}
}

// A stall that arrives after the live run closed its window (at a lost
// record) counts in the oldest window still open, as in the report.
func TestLateStallCountsWhereTheReportCountsIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "late.ntr")
	w, err := record.Create(path, header())
	if err != nil {
		t.Fatal(err)
	}
	first := ev(stall.MemcgReclaim, 100, 100, "db", 500_000, 200_000)
	late := ev(stall.MemcgReclaim, 100, 100, "db", 1_500_000, 300_000) // ends in window 1
	w.Event(&first)
	w.Lost(record.Lost{MonoNs: startNs + 3_000_000}) // the live run closed windows 0-2 here
	w.Event(&late)
	if err := w.Close(run.End{EndNs: startNs + 4_500_000, DurationNs: 4_500_000, Events: 2}); err != nil {
		t.Fatal(err)
	}
	tr, _, _ := export(t, path, Options{})
	got := map[int64]string{}
	for _, e := range tr.TraceEvents {
		if e.Name == StallCounter {
			ts, _ := e.Ts.Int64()
			got[ts/1000] = string(e.Args)
		}
	}
	want := map[int64]string{0: `{"memcg_reclaim":200000}`, 1: `{"memcg_reclaim":0}`, 2: `{"memcg_reclaim":0}`,
		3: `{"memcg_reclaim":300000}`, 4: `{"memcg_reclaim":0}`, 5: `{"memcg_reclaim":0}`}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("window counters (ms → args) %v, want %v", got, want)
	}
	r, err := record.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rep := windowTotals{}
	if _, err := replay.Run(context.Background(), r, replay.Options{Sinks: []engine.Sink{rep}}); err != nil {
		t.Fatal(err)
	}
	if rep[3][stall.MemcgReclaim] != 300_000 || rep[1][stall.MemcgReclaim] != 0 {
		t.Errorf("the report's windows file the late stall elsewhere: %v", rep)
	}
}
