package replay

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/output"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
)

// maxReplayHeap bounds the heap one fuzz input may hold at once while it
// replays: the 256 MiB a crafted recording may take as a whole process
// (FORMAT.md §11.6), less the runtime's own.
const maxReplayHeap = 192 << 20

// FuzzReplay replays arbitrary files end to end, as `numatrace report`
// does, text and JSON: never a panic, and never more heap than
// maxReplayHeap, whatever times, windows, threads and snapshots the file
// claims. The reader's own bounds are FuzzReader's (internal/record).
func FuzzReplay(f *testing.F) {
	for _, name := range []string{"memcg-host.ntr", "vm-6.1-bind.ntr", "vm-6.1-thp.ntr"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "recordings", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(stackSeed(f))
	f.Fuzz(func(t *testing.T, data []byte) {
		peak := watchHeap()
		defer func() {
			if n := peak(); n > maxReplayHeap {
				t.Fatalf("replaying %d bytes held %d MiB of heap", len(data), n>>20)
			}
		}()
		r, err := record.NewReader(bytes.NewReader(data))
		if err != nil {
			return // refused with an error: what report prints
		}
		defer r.Close()
		rep, err := Run(context.Background(), r, Options{Workers: 1})
		if err != nil {
			return
		}
		if err := rep.Text(io.Discard); err != nil {
			t.Fatalf("text report: %v", err)
		}
		if err := output.Print(rep, output.NewNDJSON(io.Discard), io.Discard); err != nil {
			t.Fatalf("JSON report: %v", err)
		}
	})
}

// stackSeed is a recording whose stalls carry stacks (format 1.4): the
// shipped ones have none.
func stackSeed(f *testing.F) []byte {
	path := filepath.Join(f.TempDir(), "stacks.ntr")
	w, err := record.Create(path, record.Header{StartNs: 1e9, WindowNs: 1e9, StacksMinNs: 1000})
	if err != nil {
		f.Fatal(err)
	}
	stacks := []*stall.Stack{
		stall.NewStack([]stall.Frame{{Func: "try_to_free_mem_cgroup_pages", Module: stall.KernelModule, Addr: 0xffffffff81000000}},
			[]stall.Frame{{Func: "main", Module: "/bin/db", BuildID: "ab", Offset: 0x10, Addr: 0x401010}}, ""),
		stall.NewStack(nil, nil, "user stack not taken"),
	}
	snap := &stall.Snapshot{}
	for i := range 200 {
		ev := stall.Event{Kind: stall.KindStall, Cause: stall.MemcgReclaim, TsNs: 1e9 + uint64(i)*1e7, DurNs: 2000, PID: 7,
			TID: uint32(7 + i%3), Comm: "db", Node: -1, DstNode: -1, SrcCPU: -1, DstCPU: -1, Stack: stacks[i%len(stacks)]}
		w.Event(&ev)
		snap.Thread(7, ev.TID, "db").Hists[stall.MemcgReclaim] = &stall.Hist{Count: uint64(i/3 + 1), TotalNs: 2000 * uint64(i/3+1)}
	}
	w.Snapshot(record.Snapshot{MonoNs: 3e9, Final: true, Data: snap})
	if err := w.Close(run.End{EndNs: 3e9, DurationNs: 2e9, Events: 200}); err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// watchHeap samples the heap every millisecond until the returned
// function is called, which gives the peak above where it began. It
// collects first: garbage left from before would hide a peak behind the
// collection that frees it.
func watchHeap() func() uint64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	base := read()
	var (
		mu   sync.Mutex
		peak = base
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	note := func() {
		mu.Lock()
		peak = max(peak, read())
		mu.Unlock()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				note()
			}
		}
	}()
	return func() uint64 {
		note()
		close(done)
		wg.Wait()
		return peak - min(base, peak)
	}
}

// The bound is real: a short-lived 64 MiB buffer shows in the peak. The
// peak is above a base read after a collection, and objects that were
// live then (earlier tests' leftovers) may die meanwhile: the buffer's
// own collection frees them, so the peak may fall short of 64 MiB by
// their size (63 MiB once in make test). A sampler that missed the
// buffer would see about nothing.
func TestWatchHeapSeesAPeak(t *testing.T) {
	peak := watchHeap()
	b := make([]byte, 64<<20)
	for i := range b {
		b[i] = 1
	}
	time.Sleep(5 * time.Millisecond)
	b = nil
	runtime.GC()
	if n := peak(); n < 56<<20 {
		t.Fatalf("peak %d MiB while a 64 MiB buffer lived", n>>20)
	}
}
