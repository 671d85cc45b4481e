package record

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"testing"

	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/testutil"
)

// smallRecording is a valid recording for seeds.
func smallRecording(t testing.TB) []byte {
	w := writeRecording(t, 300, 7)
	b, err := os.ReadFile(w.path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stackRecording is a valid recording with stack records for seeds.
func stackRecording(t testing.TB) []byte {
	path, _ := writeStackRecording(t, 300)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzReader feeds arbitrary files to the reader: it must never panic,
// never loop, and never allocate past its limits (a block's raw bytes,
// its threads, strings and stacks, §11.6), whatever the file says.
func FuzzReader(f *testing.F) {
	valid := smallRecording(f)
	f.Add(valid)
	f.Add(valid[:len(valid)/2])
	f.Add(valid[:40])
	f.Add(stackRecording(f))
	f.Fuzz(func(t *testing.T, data []byte) {
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		defer func() {
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			if n := after.TotalAlloc - before.TotalAlloc; n > maxFuzzAlloc {
				t.Fatalf("reading %d bytes allocated %d MiB", len(data), n>>20)
			}
		}()
		r, err := NewReader(bytes.NewReader(data))
		if err != nil {
			return
		}
		defer r.Close()
		for i := 0; ; i++ {
			_, err := r.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				t.Fatalf("Next returned %v; damage must be a warning", err)
			}
			if i > 10*len(data)+10 {
				t.Fatal("more items than the input could hold")
			}
		}
	})
}

// maxFuzzAlloc bounds what reading one fuzz input may allocate: a block's
// raw bytes at most, its thread table and items, with room.
const maxFuzzAlloc = maxBlockRaw + 192<<20

// FuzzBlock feeds arbitrary decompressed blocks to the record decoder,
// which the checksum and zstd layers otherwise shield from fuzzing.
func FuzzBlock(f *testing.F) {
	e := newBlockEncoder()
	rng := rand.New(rand.NewSource(8))
	for i := 0; i < 20; i++ {
		ev := randomEvent(rng, uint64(i)*100)
		e.event(&ev)
	}
	e.lost(Lost{MonoNs: 1, LostEvents: 2})
	f.Add(append([]byte(nil), e.buf...))
	f.Add([]byte{recEvent, 3, 0x13, 0, 0})
	e.reset() // stacks, and events that name them
	for i, s := range testStacks() {
		ev := randomEvent(rng, uint64(i)*100)
		ev.Kind, ev.Stack = stall.KindStall, s
		e.event(&ev)
	}
	f.Add(append([]byte(nil), e.buf...))
	f.Fuzz(func(t *testing.T, raw []byte) {
		d := newBlockDecoder(raw)
		for i := 0; i <= len(raw); i++ {
			typ, body, done, err := d.next()
			if done || err != nil {
				return
			}
			var it Item
			d.decode(typ, body, &it)
		}
		t.Fatal("more records than bytes")
	})
}

// TestWriteSeedCorpus regenerates testdata/fuzz from a fresh recording:
// NUMATRACE_WRITE_CORPUS=1 go test -run TestWriteSeedCorpus ./internal/record
func TestWriteSeedCorpus(t *testing.T) {
	testutil.OptIn(t, os.Getenv("NUMATRACE_WRITE_CORPUS") != "", "set NUMATRACE_WRITE_CORPUS=1 to rewrite the seed corpus")
	valid := smallRecording(t)
	for name, b := range map[string][]byte{"valid": valid, "cut-half": valid[:len(valid)/2], "header-only": valid[:60],
		"stacks": stackRecording(t)} {
		dir := filepath.Join("testdata", "fuzz", "FuzzReader")
		os.MkdirAll(dir, 0o755)
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(b)))
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzSnapshotRecord holds the hand-decoded snapshot record to what
// encoding/json makes of the same bytes.
func FuzzSnapshotRecord(f *testing.F) {
	snap := &stall.Snapshot{LostPerCPU: []uint64{3}, HistCapacity: 10}
	snap.Thread(1, 2, "worker").Hists[stall.MemcgReclaim] = &stall.Hist{Count: 2, TotalNs: 9}
	for _, rec := range []Snapshot{{MonoNs: 5, Final: true, Data: snap}, {Data: &stall.Snapshot{}}} {
		b, err := recordJSON(recSnapshot, rec)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"mono_ns":1,"data":{},"data":{"LostEvents":2}}`))
	f.Add([]byte(`{"MONO_NS":1,"data":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		fast, fastErr := decodeSnapshot(b)
		plain, plainErr := snapshotFromJSON(b)
		if (fastErr == nil) != (plainErr == nil) || !reflect.DeepEqual(fast, plain) {
			t.Fatalf("%q: hand-decoded %+v (%v), encoding/json %+v (%v)", b, fast, fastErr, plain, plainErr)
		}
	})
}
