package replay

import (
	"context"
	"math/rand"
	"path/filepath"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/engine"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
)

// bigRecording writes n stall events from 2,000 threads over 100 s: the
// mix of a busy machine (mostly mmap_lock and memcg reclaim, some
// compaction and NUMA migration).
func bigRecording(b testing.TB, n int) string {
	path := filepath.Join(b.TempDir(), "big.ntr")
	w, err := record.Create(path, record.Header{StartNs: 1e9, WindowNs: uint64(time.Second), Target: "system-wide"})
	if err != nil {
		b.Fatal(err)
	}
	// As a live session writes them: the kernel's aggregates at the start
	// and at the end, and a lost record where each window closed (a
	// quarter second after its end), at which the replay closes it too.
	w.Snapshot(record.Snapshot{MonoNs: 1e9, Data: &stall.Snapshot{}})
	closes := uint64(2e9) // the end of the first window
	final := &stall.Snapshot{}
	rng := rand.New(rand.NewSource(1))
	causes := []stall.Cause{stall.MmapLock, stall.MmapLock, stall.MmapLock, stall.MemcgReclaim, stall.MemcgReclaim,
		stall.Compaction, stall.NUMAMigration, stall.DirectReclaim}
	span := uint64(100 * time.Second)
	for i := 0; i < n; i++ {
		tid := uint32(1000 + rng.Intn(2000))
		ev := stall.Event{Cause: causes[rng.Intn(len(causes))], TsNs: 1e9 + uint64(i)*span/uint64(n),
			DurNs: uint64(1000 + rng.Intn(200000)), PID: tid - tid%10, TID: tid, Comm: "worker", CPU: uint32(rng.Intn(64)),
			Node: -1, DstNode: -1, SrcCPU: -1, DstCPU: -1, Pass: 1}
		if ev.TsNs >= closes+uint64(engine.Grace) {
			w.Lost(record.Lost{MonoNs: closes})
			closes += uint64(time.Second)
		}
		w.Event(&ev)
		th := final.Thread(ev.PID, ev.TID, ev.Comm)
		if th.Hists[ev.Cause] == nil {
			th.Hists[ev.Cause] = &stall.Hist{}
		}
		th.Hists[ev.Cause].Add(ev.DurNs)
	}
	w.Snapshot(record.Snapshot{MonoNs: 1e9 + span, Final: true, Data: final})
	if err := w.Close(run.End{EndNs: 1e9 + span, DurationNs: span, Events: uint64(n)}); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkReplay replays a large recording as fast as it can through the
// whole pipeline: read, decompress, decode, window aggregation, summary.
// Run it with -cpu 1 for the per-core figure (target: 10 M events/s), and
// with -cpu N for N cores: blocks are then decoded ahead in parallel.
func BenchmarkReplay(b *testing.B) {
	const n = 2_000_000
	path := bigRecording(b, n)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		r, err := record.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		rep, err := Run(context.Background(), r, Options{})
		r.Close()
		if err != nil || rep.Events != n {
			b.Fatalf("%v, %d events", err, rep.Events)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/time.Since(start).Seconds(), "events/s")
}
