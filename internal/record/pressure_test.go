package record

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
)

// The end record keeps what PSI counted, a scope without a figure with
// its reason, and a dirty_throttle stall keeps its limit: a replay
// reports what the live run did.
func TestPressureAndThrottlesRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.ntr")
	w, err := Create(path, testHeader())
	if err != nil {
		t.Fatal(err)
	}
	evs := []stall.Event{
		{Kind: stall.KindStall, Cause: stall.DirtyThrottle, TsNs: 10, DurNs: 4e6, TID: 2, PID: 1, Comm: "w",
			Node: -1, DstNode: -1, SrcCPU: -1, DstCPU: -1, Pages: 900, Limit: 800, AttemptNs: 12e6},
		{Kind: stall.KindStall, Cause: stall.ReclaimThrottle, TsNs: 20, DurNs: 1e5, TID: 2, PID: 1, Comm: "w",
			Node: 0, DstNode: -1, SrcCPU: -1, DstCPU: -1, Reason: "writeback", Nested: true},
		{Kind: stall.KindStall, Cause: stall.MemstallWait, TsNs: 30, DurNs: 2e5, TID: 2, PID: 1, Comm: "w",
			Node: -1, DstNode: -1, SrcCPU: -1, DstCPU: -1, Reason: "thrashing"},
	}
	for i := range evs {
		w.Event(&evs[i])
	}
	// A window close with PSI's total (zero is a reading too), and one
	// where PSI was not read.
	losts := []Lost{{MonoNs: 31, LostEvents: 1, PSISomeNs: 0, PSI: true}, {MonoNs: 32, PSISomeNs: 0}, {MonoNs: 33, PSISomeNs: 9e9, PSI: true}}
	for _, l := range losts {
		w.Lost(l)
	}
	end := run.End{EndNs: 40, DurationNs: 40, Events: 3, Pressure: []run.Pressure{
		{Scope: "system", FromNs: 1, ToNs: 40, SomeNs: 7, FullNs: 3},
		{Scope: "/db", Err: "memory PSI not available: gone"},
	}}
	if err := w.Close(end); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []stall.Event
	var gotLost []Lost
	var gotEnd *run.End
	for {
		it, err := r.Next()
		if err != nil {
			break
		}
		switch it.Kind {
		case ItemEvent:
			got = append(got, it.Event)
		case ItemLost:
			gotLost = append(gotLost, it.Lost)
		case ItemEnd:
			gotEnd = it.End
		}
	}
	if !reflect.DeepEqual(gotLost, losts) {
		t.Errorf("window closes:\n got %+v\nwant %+v", gotLost, losts)
	}
	if !reflect.DeepEqual(got, evs) {
		t.Errorf("events:\n got %+v\nwant %+v", got, evs)
	}
	if gotEnd == nil || !reflect.DeepEqual(gotEnd.Pressure, end.Pressure) {
		t.Errorf("end %+v, want pressure %+v", gotEnd, end.Pressure)
	}
}
