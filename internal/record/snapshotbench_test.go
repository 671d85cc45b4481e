package record

import (
	"fmt"
	"testing"

	"github.com/numatrace/numatrace/internal/stall"
)

// BenchmarkDecodeSnapshot decodes a busy machine's final snapshot: 2,000
// threads with a few histograms each, replay's largest record.
func BenchmarkDecodeSnapshot(b *testing.B) {
	s := &stall.Snapshot{LostPerCPU: make([]uint64, 64), HistCapacity: 16384,
		CauseTotals: map[stall.Cause]*stall.Hist{}}
	for tid := uint32(1000); tid < 3000; tid++ {
		th := s.Thread(tid-tid%10, tid, fmt.Sprint("worker-", tid%7))
		for _, c := range []stall.Cause{stall.MmapLock, stall.MemcgReclaim, stall.Compaction} {
			h := &stall.Hist{}
			for i := uint32(0); i < tid%50; i++ {
				h.Add(uint64(1000 + i*tid))
			}
			th.Hists[c] = h
		}
	}
	body, err := recordJSON(recSnapshot, Snapshot{MonoNs: 1, Final: true, Data: s})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := decodeSnapshot(body); err != nil {
			b.Fatal(err)
		}
	}
}
