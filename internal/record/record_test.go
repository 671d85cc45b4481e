package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/wire"
)

func testHeader() Header {
	return Header{Numatrace: "test", StartNs: 1000, WindowNs: 1e9, Target: "pid 1 (x)",
		Probes: []wire.ProbeStatus{{Name: "memcg_reclaim", Attached: true}},
		Host:   Host{Hostname: "h", Kernel: "6.18", CPUs: 2, CPUNode: map[int]int{0: 0, 1: 1}}}
}

// randomEvent makes events that use every field of every cause.
func randomEvent(rng *rand.Rand, ts uint64) stall.Event {
	causes := stall.AllCauses()
	ev := stall.Event{Kind: stall.KindStall, Cause: causes[rng.Intn(len(causes))], TsNs: ts,
		DurNs: uint64(rng.Int63n(1e9)), TID: uint32(100 + rng.Intn(5)), CPU: uint32(rng.Intn(4)),
		Node: -1, DstNode: -1, SrcCPU: -1, DstCPU: -1}
	ev.PID = ev.TID / 2
	ev.Comm = []string{"db", "worker", "", "kswapd0"}[ev.TID%4]
	if rng.Intn(10) == 0 {
		ev.Kind = stall.KindExit
		ev.GroupDead = rng.Intn(2) == 0
	}
	if rng.Intn(2) == 0 {
		ev.Order = int32(rng.Intn(11))
		ev.GFP = rng.Uint32()
		ev.Pages = uint64(rng.Intn(1000))
		ev.CgroupID = rng.Uint64()
		ev.Node = int32(rng.Intn(3) - 1)
		ev.DstNode = int32(rng.Intn(2))
		ev.SrcCPU, ev.DstCPU = int32(rng.Intn(4)), int32(rng.Intn(4))
		ev.Reason = []string{"", "numa_misplaced", "compaction"}[rng.Intn(3)]
		ev.Mode = []string{"", "async", "sync_light"}[rng.Intn(3)]
		ev.Status = []string{"", "success", "complete"}[rng.Intn(3)]
		ev.OtherTID = uint32(rng.Intn(3))
		ev.Pass = uint32(rng.Intn(3))
		ev.AttemptNs = uint64(rng.Intn(1e6))
		ev.SoftLimit, ev.Write, ev.Acquired = rng.Intn(2) == 0, rng.Intn(2) == 0, rng.Intn(2) == 0
		ev.Swap, ev.Stick, ev.Nested = rng.Intn(2) == 0, rng.Intn(2) == 0, rng.Intn(2) == 0
	}
	return ev
}

type written struct {
	path   string
	events []stall.Event
	blocks []int64 // file offset where each block starts
	size   int64
}

// writeRecording writes n events (some out of time order, as the ring
// buffer delivers them) with snapshots and procfs readings between.
func writeRecording(t testing.TB, n int, seed int64) written {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "r.ntr")
	w, err := Create(path, testHeader())
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(seed))
	var evs []stall.Event
	ts := uint64(5000)
	for i := 0; i < n; i++ {
		ts += uint64(rng.Intn(100000))
		jitter := uint64(rng.Intn(3000))
		ev := randomEvent(rng, ts-jitter)
		w.Event(&ev)
		evs = append(evs, ev)
		if i%5000 == 4999 {
			snap := &stall.Snapshot{}
			snap.Thread(1, 2, "x").Hists[stall.MemcgReclaim] = &stall.Hist{Count: uint64(i)}
			if err := w.Snapshot(Snapshot{MonoNs: ts, Data: snap}); err != nil {
				t.Fatal(err)
			}
			w.Procfs(Procfs{MonoNs: ts, Vmstat: map[string]int64{"pgmigrate_success": int64(i)}})
			w.Lost(Lost{MonoNs: ts, LostEvents: uint64(i)})
			w.Flush()
		}
	}
	if err := w.Close(run.End{EndNs: ts + 1, DurationNs: ts, Events: uint64(n)}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []int64
	for i := 0; i+4 <= len(b); i++ {
		if bytes.Equal(b[i:i+4], blockMagic[:]) {
			if _, ok := parseBlockHeader(b[i:]); ok {
				blocks = append(blocks, int64(i))
			}
		}
	}
	return written{path: path, events: evs, blocks: blocks, size: int64(len(b))}
}

// eachRecord hands every record of r's blocks to f, in order, with the
// block's decoder: what a reader of any version walks.
func eachRecord(t *testing.T, r *Reader, f func(d *blockDecoder, typ byte, body []byte)) {
	t.Helper()
	for cur := (*blockDecoder)(nil); ; {
		if cur == nil {
			var err error
			if cur, err = nextBlock(r); err == io.EOF {
				return
			} else if err != nil {
				t.Fatal(err)
			}
		}
		typ, body, done, err := cur.next()
		if err != nil {
			t.Fatal(err)
		}
		if done {
			cur = nil
			continue
		}
		f(cur, typ, body)
	}
}

// olderReaderEvents are the events of r as a reader of an older minor
// version reads them: it knows thread, string and event records (type 9
// too since 1.3, with laterEvents), skips every other type, and fails
// the test on what it would call corrupt.
func olderReaderEvents(t *testing.T, r *Reader, laterEvents bool) []stall.Event {
	t.Helper()
	var got []stall.Event
	eachRecord(t, r, func(cur *blockDecoder, typ byte, body []byte) {
		var err error
		switch {
		case typ == recThread:
			err = cur.thread(body)
		case typ == recString:
			err = cur.str(body)
		case typ == recEvent, typ == recLaterEvent && laterEvents:
			chain := 0
			if typ == recLaterEvent {
				chain = 1
			}
			var ev stall.Event
			ev, err = cur.event(body, chain)
			got = append(got, ev)
		}
		if err != nil {
			t.Fatalf("an older reader would call this corrupt: %v", err)
		}
	})
	return got
}

func readAll(t testing.TB, r *Reader) (evs []stall.Event, items map[Kind]int, end *run.End) {
	t.Helper()
	items = map[Kind]int{}
	for {
		it, err := r.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		items[it.Kind]++
		switch it.Kind {
		case ItemEvent:
			evs = append(evs, it.Event)
		case ItemEnd:
			end = it.End
		}
	}
}

func TestRoundTrip(t *testing.T) {
	w := writeRecording(t, 20000, 1)
	r, err := Open(w.path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if h := r.Header(); h.Target != "pid 1 (x)" || h.Version.Major != VersionMajor || h.Host.CPUNode[1] != 1 {
		t.Fatalf("header %+v", h)
	}
	evs, items, end := readAll(t, r)
	if !reflect.DeepEqual(evs, w.events) {
		for i := range evs {
			if !reflect.DeepEqual(evs[i], w.events[i]) {
				t.Fatalf("event %d differs:\n got %+v\nwant %+v", i, evs[i], w.events[i])
			}
		}
		t.Fatalf("%d events read, %d written", len(evs), len(w.events))
	}
	if items[ItemSnapshot] != 4 || items[ItemProcfs] != 4 || items[ItemLost] != 4 {
		t.Errorf("items %v", items)
	}
	if end == nil || end.Events != 20000 || r.Truncated() || len(r.Warnings()) != 0 {
		t.Errorf("end %+v truncated %v warnings %v", end, r.Truncated(), r.Warnings())
	}
	t.Logf("%d events in %d bytes: %.2f bytes/event, %d blocks", len(evs), w.size, float64(w.size)/float64(len(evs)), r.Blocks())
}

// Cut at every block boundary, and inside blocks: every complete block is
// read, and the reader says where the file stopped.
func TestTruncation(t *testing.T) {
	w := writeRecording(t, 12000, 2)
	full, _ := os.ReadFile(w.path)
	cuts := append([]int64(nil), w.blocks...)
	rng := rand.New(rand.NewSource(3))
	for i := 0; i < 40; i++ {
		cuts = append(cuts, w.blocks[0]+rng.Int63n(w.size-w.blocks[0]))
	}
	for _, cut := range cuts {
		r, err := NewReader(bytes.NewReader(full[:cut]))
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		evs, _, end := readAll(t, r)
		// Events in blocks that end before the cut must all be there.
		complete := 0
		for _, b := range w.blocks {
			if b < cut {
				complete++
			}
		}
		if r.Blocks() < complete-1 || r.Blocks() > complete {
			t.Errorf("cut at %d: %d blocks read, %d started before the cut", cut, r.Blocks(), complete)
		}
		if len(evs) > 0 && !reflect.DeepEqual(evs, w.events[:len(evs)]) {
			t.Errorf("cut at %d: events read are not a prefix of those written", cut)
		}
		atBoundary := false
		for _, b := range w.blocks {
			atBoundary = atBoundary || b == cut
		}
		if end != nil {
			t.Errorf("cut at %d: end record read from a cut file", cut)
		}
		if !atBoundary && !r.Truncated() {
			t.Errorf("cut at %d (inside a block): not reported as cut", cut)
		}
		if !atBoundary && !strings.Contains(strings.Join(r.Warnings(), "\n"), "cut short at byte") {
			t.Errorf("cut at %d: warnings %v", cut, r.Warnings())
		}
	}
}

// A damaged block is skipped with a warning; the blocks after it are read.
func TestCorruptBlockIsSkipped(t *testing.T) {
	w := writeRecording(t, 12000, 4)
	full, _ := os.ReadFile(w.path)
	for _, how := range []string{"payload", "header"} {
		b := append([]byte(nil), full...)
		victim := w.blocks[1]
		if how == "payload" {
			b[victim+blockHeaderSize+10] ^= 0xff
		} else {
			binary.LittleEndian.PutUint32(b[victim+4:], 0xffffffff) // absurd length
		}
		r, err := NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		evs, _, end := readAll(t, r)
		if len(r.Warnings()) == 0 {
			t.Errorf("%s: damage not reported", how)
		}
		if end == nil {
			t.Errorf("%s: the blocks after the damage were not read", how)
		}
		if len(evs) == 0 || len(evs) >= len(w.events) {
			t.Errorf("%s: %d of %d events read", how, len(evs), len(w.events))
		}
	}
}

// A damaged length field loses its own block and no other: longer than
// the file, a little off either way, or ending inside the next block.
// Reading the blocks after it is what a payload flip already gives.
func TestDamagedLengthKeepsLaterBlocks(t *testing.T) {
	w := writeRecording(t, 12000, 4)
	full, _ := os.ReadFile(w.path)
	if len(w.blocks) < 4 {
		t.Fatalf("%d blocks: the test needs a few", len(w.blocks))
	}
	read := func(b []byte) ([]stall.Event, *run.End, []string) {
		r, err := NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		evs, _, end := readAll(t, r)
		return evs, end, r.Warnings()
	}
	victim := w.blocks[1]
	ref := append([]byte(nil), full...)
	ref[victim+blockHeaderSize+10] ^= 0xff
	want, _, _ := read(ref)
	if len(want) == 0 || len(want) >= len(w.events) {
		t.Fatalf("reference: %d of %d events", len(want), len(w.events))
	}
	length := binary.LittleEndian.Uint32(full[victim+4:])
	next := uint32(w.blocks[2] - victim - blockHeaderSize)
	for name, n := range map[string]uint32{
		"past the end":        uint32(len(full)),
		"one more":            length + 1,
		"one less":            length - 1,
		"into the next block": next + 30,
		"flipped high byte":   length ^ 0x00100000,
	} {
		b := append([]byte(nil), full...)
		binary.LittleEndian.PutUint32(b[victim+4:], n)
		evs, end, warns := read(b)
		if !reflect.DeepEqual(evs, want) || end == nil {
			t.Errorf("%s (%d for %d): %d events (want %d), end record read: %v; warnings %q", name, n, length, len(evs), len(want), end != nil, warns)
		}
		if len(warns) == 0 || !strings.Contains(warns[0], fmt.Sprintf("byte %d", victim)) {
			t.Errorf("%s: warnings %q: want the damaged block named", name, warns)
		}
	}
}

// runq_wait events (new in 1.3) go in their own record type with their
// own timestamp chain, so a 1.2 reader, which skips unknown record types,
// reads every other event of the block with its right timestamp. The
// reader here is a 1.2 reader: it decodes type 3 only.
func TestLaterCausesAreInvisibleToOlderReaders(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.ntr")
	w, err := Create(path, testHeader())
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(11))
	var all, old []stall.Event
	for i := 0; i < 3000; i++ {
		ev := randomEvent(rng, uint64(1e6+i*1000+rng.Intn(900)))
		if i%4 == 0 {
			ev.Kind, ev.Cause = stall.KindStall, stall.RunqWait
		} else if ev.Cause >= firstLaterCause {
			ev.Cause = stall.MmapLock
		}
		w.Event(&ev)
		all = append(all, ev)
		if ev.Cause < firstLaterCause || ev.Kind != stall.KindStall {
			old = append(old, ev)
		}
	}
	if err := w.Close(run.End{}); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := olderReaderEvents(t, r, false)
	if len(got) != len(old) {
		t.Fatalf("a 1.2 reader reads %d events, want %d", len(got), len(old))
	}
	for i := range old {
		if got[i].TsNs != old[i].TsNs || got[i].Cause != old[i].Cause || got[i].DurNs != old[i].DurNs {
			t.Fatalf("event %d: a 1.2 reader reads %+v, want %+v", i, got[i], old[i])
		}
	}
	// And today's reader reads them all, in order.
	r2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	evs, _, _ := readAll(t, r2)
	if len(evs) != len(all) {
		t.Fatalf("read %d events, want %d", len(evs), len(all))
	}
	for i := range all {
		if evs[i].TsNs != all[i].TsNs || evs[i].Cause != all[i].Cause {
			t.Fatalf("event %d: %+v, want %+v", i, evs[i], all[i])
		}
	}
}

// An event of a cause a newer minor version added is skipped on its own:
// the events around it in the same block are still read.
func TestNewerCauseIsSkippedNotCorrupt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.ntr")
	w, err := Create(path, testHeader())
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(9))
	var want []stall.Event
	for i := 0; i < 30; i++ {
		ev := randomEvent(rng, uint64(1000+i*1000))
		if i%3 == 1 {
			ev.Cause = stall.NumCauses + 2 // a cause from the future
		} else {
			want = append(want, ev)
		}
		w.Event(&ev)
	}
	if err := w.Close(run.End{}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	got, _, _ := readAll(t, r)
	if len(got) != len(want) {
		t.Fatalf("read %d events, want %d (warnings %v)", len(got), len(want), r.Warnings())
	}
	for i := range want {
		if got[i].TsNs != want[i].TsNs || got[i].Cause != want[i].Cause {
			t.Errorf("event %d: got %+v want %+v", i, got[i], want[i])
		}
	}
	if r.NewerSkipped() != 10 {
		t.Errorf("skipped %d, want 10", r.NewerSkipped())
	}
	if ws := r.Warnings(); len(ws) != 1 || !strings.Contains(ws[0], "newer numatrace") {
		t.Errorf("warnings %q, want one that names a newer numatrace", ws)
	}
}

func TestNewerMajorIsRefused(t *testing.T) {
	w := writeRecording(t, 10, 5)
	b, _ := os.ReadFile(w.path)
	binary.LittleEndian.PutUint16(b[8:], VersionMajor+1)
	_, err := NewReader(bytes.NewReader(b))
	if !errors.Is(err, ErrNewerFormat) || !strings.Contains(err.Error(), "newer numatrace") {
		t.Fatalf("err %v", err)
	}
	for _, bad := range [][]byte{nil, []byte("hello world, not a trace"), b[:20]} {
		if _, err := NewReader(bytes.NewReader(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestFlightRecorderKeepsTheNewest(t *testing.T) {
	fr, err := NewFlightRecorder(testHeader(), 200<<10, 0)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(6))
	var evs []stall.Event
	for i := 0; i < 60000; i++ {
		ev := randomEvent(rng, uint64(i)*1000)
		fr.Event(&ev)
		evs = append(evs, ev)
	}
	if fr.Held() > 200<<10+targetBlockRaw {
		t.Fatalf("holds %d bytes", fr.Held())
	}
	path := filepath.Join(t.TempDir(), "fr.ntr")
	snap := &stall.Snapshot{}
	d, err := fr.Take(Snapshot{MonoNs: 1, Final: true, Data: snap}, run.End{Note: "SIGUSR1"})
	if err != nil {
		t.Fatal(err)
	}
	// Tracing goes on while the dump is written: what comes after it was
	// taken is not in it.
	for i := 0; i < 20000; i++ {
		ev := randomEvent(rng, uint64(60000+i)*1000)
		fr.Event(&ev)
	}
	fr.Flush()
	if err := d.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, items, end := readAll(t, r)
	if !r.Header().FlightRecorder || end == nil || items[ItemSnapshot] != 1 || len(r.Warnings()) != 0 {
		t.Fatalf("header %+v end %+v items %v warnings %v", r.Header(), end, items, r.Warnings())
	}
	if len(got) == 0 || len(got) >= len(evs) || !reflect.DeepEqual(got, evs[len(evs)-len(got):]) {
		t.Fatalf("kept %d events: want the newest of %d", len(got), len(evs))
	}
	if end.Events != uint64(len(got)) {
		t.Errorf("the end says %d events, the dump holds %d", end.Events, len(got))
	}
}

type refusingSink struct{ took int }

func (s *refusingSink) put(f frame) bool {
	if s.took < 1 {
		s.took++
		return true
	}
	return false // the disk queue is full
}

// When the disk cannot keep up, whole blocks are dropped and counted; the
// tracer never waits.
func TestDropsAreCounted(t *testing.T) {
	w, err := newWriter(testHeader(), &refusingSink{})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(9))
	for i := 0; i < 3; i++ {
		for j := 0; j < 100; j++ {
			ev := randomEvent(rng, uint64(i*1000+j))
			w.Event(&ev)
		}
		w.Flush()
	}
	if w.Dropped() != 200 {
		t.Fatalf("dropped %d events, want the 200 of the two refused blocks", w.Dropped())
	}
	w.Lost(Lost{MonoNs: 1})
	dec := newBlockDecoder(w.enc.buf)
	typ, body, _, _ := dec.next()
	if l, err := dec.lost(body); typ != recLost || err != nil || l.Dropped != 200 {
		t.Fatalf("lost record %+v %v: want the recorder's 200 drops", l, err)
	}
}

// Decoding blocks ahead on several goroutines reads what reading in
// sequence reads: the same items in the same order, the same warnings in
// the same order, on whole files and on damaged and cut ones.
func TestParallelReadsWhatSequentialReads(t *testing.T) {
	w := writeRecording(t, 30000, 11)
	full, _ := os.ReadFile(w.path)
	if len(w.blocks) < 6 {
		t.Fatalf("only %d blocks: the test needs several", len(w.blocks))
	}
	damaged := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), full...)) }
	files := map[string][]byte{
		"whole": full,
		"payload": damaged(func(b []byte) []byte {
			b[w.blocks[2]+blockHeaderSize+7] ^= 0xff
			return b
		}),
		"header": damaged(func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[w.blocks[1]+4:], 0xffffffff)
			return b
		}),
		"cut":         full[:w.blocks[4]+30],
		"at boundary": full[:w.blocks[3]],
		"newer":       newerEvents(t),
	}
	type outcome struct {
		Items    []Item
		Warnings []string
		Blocks   int
		Cut      bool
		Newer    int
	}
	read := func(b []byte, workers int) outcome {
		r, err := NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		r.Parallel(workers)
		if workers > 1 && r.par == nil {
			t.Fatal("Parallel did not start its workers")
		}
		var o outcome
		for {
			it, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			o.Items = append(o.Items, it)
		}
		o.Warnings, o.Blocks, o.Cut, o.Newer = r.Warnings(), r.Blocks(), r.Truncated(), r.NewerSkipped()
		return o
	}
	for name, b := range files {
		seq, par := read(b, 1), read(b, 4)
		if !reflect.DeepEqual(seq, par) {
			t.Errorf("%s: in parallel %d items, %d blocks, warnings %q; in sequence %d items, %d blocks, warnings %q",
				name, len(par.Items), par.Blocks, par.Warnings, len(seq.Items), seq.Blocks, seq.Warnings)
		}
		if name != "whole" && len(seq.Warnings) == 0 && name != "at boundary" {
			t.Errorf("%s: no warning", name)
		}
		if name == "newer" && (seq.Newer != 1000 || seq.Blocks < 6) {
			t.Errorf("newer: %d events skipped in %d blocks, want 1000 in 6 or more", seq.Newer, seq.Blocks)
		}
	}
}

// newerEvents is a recording of several blocks in which every third event
// has a cause from a newer version.
func newerEvents(t *testing.T) []byte {
	path := filepath.Join(t.TempDir(), "newer.ntr")
	w, err := Create(path, testHeader())
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(13))
	for i := 0; i < 3000; i++ {
		ev := randomEvent(rng, uint64(1000+i*1000))
		if i%3 == 1 {
			ev.Cause = stall.NumCauses + 1
		}
		w.Event(&ev)
		if i%500 == 499 {
			w.Flush()
		}
	}
	if err := w.Close(run.End{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Closing a reader part way stops its workers.
func TestParallelCloseMidway(t *testing.T) {
	w := writeRecording(t, 30000, 12)
	r, err := Open(w.path)
	if err != nil {
		t.Fatal(err)
	}
	r.Parallel(3)
	for i := 0; i < 10; i++ {
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- r.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return: a worker is stuck")
	}
}

// A reader on a pipe that goes quiet (replay /dev/stdin) still closes:
// its reading goroutine is blocked in a read that only closing ends.
func TestParallelCloseOnQuietPipe(t *testing.T) {
	w := writeRecording(t, 30000, 14)
	full, _ := os.ReadFile(w.path)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	go pw.Write(full[:w.blocks[2]]) // two blocks, then nothing
	r, err := NewReader(pr)
	if err != nil {
		t.Fatal(err)
	}
	r.closer = pr
	r.Parallel(2)
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Close() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return while the pipe was quiet")
	}
}

// TestEventIntoOverwritesEveryField decodes a bare event over an Event
// with every field set: replay decodes every event into the same one, so
// a field left from the one before would be a wrong value.
func TestEventIntoOverwritesEveryField(t *testing.T) {
	bare := stall.Event{Kind: stall.KindStall, Cause: stall.MmapLock, TsNs: 10, DurNs: 5, PID: 1, TID: 2, Comm: "c",
		Node: -1, DstNode: -1, SrcCPU: -1, DstCPU: -1}
	e := newBlockEncoder()
	e.event(&bare)
	d := newBlockDecoder(nil)
	d.reset(e.buf)
	var dirty stall.Event
	v := reflect.ValueOf(&dirty).Elem()
	for i := 0; i < v.NumField(); i++ {
		switch f := v.Field(i); f.Kind() {
		case reflect.String:
			f.SetString("stale")
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int:
			f.SetInt(7)
		case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uint:
			f.SetUint(7)
		case reflect.Pointer:
			if f.Type() != reflect.TypeFor[*stall.Stack]() {
				t.Fatalf("field %s of type %s: teach this test to set it", v.Type().Field(i).Name, f.Type())
			}
			f.Set(reflect.ValueOf(stall.NewStack(nil, nil, "stale")))
		default:
			t.Fatalf("field %s of kind %s: teach this test to set it", v.Type().Field(i).Name, f.Kind())
		}
	}
	for {
		typ, body, done, err := d.next()
		if done || err != nil {
			t.Fatalf("no event decoded (err %v)", err)
		}
		if typ == recEvent {
			if err := d.eventInto(body, 0, &dirty); err != nil {
				t.Fatal(err)
			}
			break
		}
		if _, err := d.decode(typ, body, &Item{}); err != nil {
			t.Fatal(err)
		}
	}
	if dirty != bare {
		t.Fatalf("decoded over a used event:\n got %+v\nwant %+v", dirty, bare)
	}
}

// The span bound neither wraps nor shrinks for long windows or a start
// near the end of the clock.
func TestSpanEndDoesNotOverflow(t *testing.T) {
	for _, h := range []Header{
		{StartNs: 5, WindowNs: 1 << 42}, {StartNs: 5, WindowNs: 1 << 62}, {StartNs: 1<<64 - 10, WindowNs: 1e9},
		{StartNs: 5, WindowNs: 0}, {StartNs: 5, WindowNs: 1e9},
	} {
		end := spanEnd(h)
		if end <= h.StartNs && h.StartNs < 1<<63 || end-h.StartNs > maxSpanNs && end != 1<<64-1 {
			t.Errorf("%+v: span end %d", h, end)
		}
	}
	if got := spanEnd(Header{StartNs: 5, WindowNs: 1 << 42}); got != 5+maxSpanNs {
		t.Errorf("a 73-minute window: span end %d, want the 366 days", got)
	}
}
