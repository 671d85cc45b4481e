package replay

import (
	"bytes"
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
)

// What a live run left out belongs to the run: its recording carries the
// counts (the samples themselves are never recorded), and the replay's
// report shows them as the live one did. A window the live run skipped
// (a counter reset) is skipped in the replay too, not taken for one in
// which nothing completed.
func TestReplayCarriesWhatTheRunLeftOut(t *testing.T) {
	const sec = uint64(time.Second)
	start := 100 * sec
	path := filepath.Join(t.TempDir(), "run.ntr")
	h := record.Header{StartNs: start, WindowNs: sec, Target: "pid 7 (db)", SpikeK: 2,
		Started: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	w, err := record.Create(path, h)
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(0); i < 10; i++ {
		st := latency.Stats{Index: i, Count: 100, P50Ns: 1e6, P99Ns: 1e6, MaxNs: 1e6}
		if i == 5 {
			st = latency.Stats{Index: i, Skipped: "counter reset"}
		}
		if err := w.Latency(st); err != nil {
			t.Fatal(err)
		}
		w.Lost(record.Lost{MonoNs: start + (i+1)*sec})
	}
	w.Snapshot(record.Snapshot{MonoNs: start + 10*sec, Final: true, Data: &stall.Snapshot{}})
	acct := &latency.Account{StartNs: start, EndNs: start + 10*sec, Windows: 9, SkippedWindows: 1, Late: 4,
		Skipped: []latency.Skip{{Kind: latency.SkipResets, N: 1}}}
	if err := w.Close(run.End{EndNs: start + 10*sec, DurationNs: 10 * sec, Windows: 10, Latency: acct, BadRecords: 2}); err != nil {
		t.Fatal(err)
	}
	r, err := record.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rep, err := Run(context.Background(), r, Options{TopThreads: 20})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rep.Latency, acct) || rep.BadRecords != 2 {
		t.Fatalf("replayed account %+v, bad records %d", rep.Latency, rep.BadRecords)
	}
	if c := rep.Correlation; len(c.Spikes) != 0 || c.Windows != 9 {
		t.Fatalf("%d spikes over %d windows: %s", len(c.Spikes), c.Windows, c.Conclusion)
	}
	var text bytes.Buffer
	rep.Text(&text)
	for _, want := range []string{
		"WARNING: 4 latency samples came after their window had closed",
		"WARNING: 1 window left out of the analysis rather than misread",
		"WARNING: 1 counter reset of the latency histogram (the service restarted?)",
		"WARNING: 2 ring-buffer records from the kernel could not be read or decoded",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the replayed report does not say %q:\n%s", want, text.String())
		}
	}
}
