package aggregate

import (
	"testing"

	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/window"
)

type offer struct {
	tid  uint32
	comm string
}

// permutations calls f with every order of offers.
func permutations(offers []offer, f func([]offer)) {
	if len(offers) <= 1 {
		f(offers)
		return
	}
	for i := range offers {
		rest := append(append([]offer{}, offers[:i]...), offers[i+1:]...)
		permutations(rest, func(p []offer) { f(append([]offer{offers[i]}, p...)) })
	}
}

func TestProcessNameIsTheMainThreadsElseTheLowestTids(t *testing.T) {
	for _, c := range []struct {
		offers []offer
		want   string
	}{
		{[]offer{{12, "worker"}, {10, "main"}, {11, "bg"}}, "main"},
		{[]offer{{12, "worker"}, {11, "bg"}, {13, "io"}}, "bg"},
		{[]offer{{10, ""}, {12, "worker"}, {11, "bg"}}, "bg"}, // a thread with no name names nothing
		{[]offer{{10, ""}}, ""},
	} {
		permutations(c.offers, func(order []offer) {
			var p ProcessName
			for _, o := range order {
				p.Offer(10, o.tid, o.comm)
			}
			if p.String() != c.want {
				t.Errorf("offered %v: %q, want %q", order, p.String(), c.want)
			}
		})
	}
}

func TestProcessNameSaysWhenItChanges(t *testing.T) {
	var p ProcessName
	for i, step := range []struct {
		tid     uint32
		comm    string
		changed bool
	}{
		{12, "worker", true},
		{13, "io", false},   // a higher tid
		{11, "bg", true},    // a lower one
		{11, "bg", false},   // the same name again
		{10, "main", true},  // the main thread
		{11, "bg2", false},  // not the main thread
		{10, "main2", true}, // the main thread after an exec
		{10, "", false},     // no name
	} {
		if got := p.Offer(10, step.tid, step.comm); got != step.changed {
			t.Errorf("step %d (tid %d %q): changed %v, want %v", i, step.tid, step.comm, got, step.changed)
		}
	}
	if p.String() != "main2" {
		t.Errorf("name %q, want main2", p.String())
	}
}

// The summary's process name does not depend on the order the snapshot's
// map yields its threads, also when the main thread has no name.
func TestSummarizeNamesAProcessWhateverTheMapOrder(t *testing.T) {
	snap := &stall.Snapshot{Threads: map[uint32]*stall.ThreadStats{}}
	for tid, comm := range map[uint32]string{10: "", 11: "bg", 12: "worker", 13: "io"} {
		snap.Threads[tid] = &stall.ThreadStats{PID: 10, TID: tid, Comm: comm, Hists: map[stall.Cause]*stall.Hist{}}
	}
	for i := 0; i < 200; i++ {
		s := New(window.Grid{StartNs: 0, LenNs: 1e9}).Summarize(snap)
		if len(s.Processes) != 1 || s.Processes[0].Comm != "bg" {
			t.Fatalf("run %d: process named %q, want bg (the lowest tid with a name)", i, s.Processes[0].Comm)
		}
	}
}
