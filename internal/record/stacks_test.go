package record

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
)

// testStacks are the stacks the tests record: shared by several events,
// with a long demangled name, a frame without a symbol, and one that is
// only a note.
func testStacks() []*stall.Stack {
	reclaim := []stall.Frame{
		{Addr: 0xffffffff81100010, Func: "try_to_free_mem_cgroup_pages", Module: stall.KernelModule},
		{Addr: 0xffffffffc0a00010, Func: "ext4_read", Module: "[ext4]"},
	}
	user := []stall.Frame{
		{Addr: 0x7f0000001234, Func: "read", Module: "/usr/lib/x86_64-linux-gnu/libc.so.6", BuildID: "93ac61ec", Offset: 0xf82ab},
		{Addr: 0x555500001000, Func: "db::Cache<" + strings.Repeat("std::string, ", 400) + "int>::get(int)", Module: "/usr/bin/db", BuildID: "abc1", Offset: 0x1000},
		{Addr: 0x555500002000, Module: "/usr/bin/db", BuildID: "abc1", Offset: 0x2000},
	}
	return []*stall.Stack{
		stall.NewStack(reclaim, user, ""),
		stall.NewStack(reclaim[:1], user[:1], "user stack cut at read in libc.so.6: it keeps no frame pointer"),
		stall.NewStack(nil, nil, "kernel stack not taken: the kernel could not walk it"),
	}
}

func writeStackRecording(t testing.TB, n int) (string, []stall.Event) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.ntr")
	w, err := Create(path, testHeader())
	if err != nil {
		t.Fatal(err)
	}
	stacks := testStacks()
	var evs []stall.Event
	for i := 0; i < n; i++ {
		ev := stall.Event{Kind: stall.KindStall, Cause: stall.MemcgReclaim, TsNs: uint64(1e6 + i*1000), DurNs: uint64(2000 + i),
			PID: 1, TID: uint32(1 + i%3), Comm: "db", Node: -1, DstNode: -1, SrcCPU: -1, DstCPU: -1}
		if i%4 != 3 { // every fourth without a stack
			ev.Stack = stacks[i%len(stacks)]
		}
		if i%10 == 9 {
			ev.Cause = stall.RunqWait // a later cause's record, type 9, with a stack
		}
		w.Event(&ev)
		evs = append(evs, ev)
		if i%100 == 99 {
			w.Flush() // each block declares the stacks it uses anew
		}
	}
	if err := w.Close(run.End{}); err != nil {
		t.Fatal(err)
	}
	return path, evs
}

func TestStacksRoundTrip(t *testing.T) {
	path, want := writeStackRecording(t, 1000)
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, _, _ := readAll(t, r)
	if len(got) != len(want) {
		t.Fatalf("read %d events, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i].Stack, want[i].Stack
		if (g == nil) != (w == nil) {
			t.Fatalf("event %d: stack %v, want %v", i, g, w)
		}
		if w == nil {
			continue
		}
		if len(w.User) > 1 && len(w.User[1].Func) != stall.MaxNameBytes {
			t.Fatalf("the long name is %d bytes: NewStack did not cut it", len(w.User[1].Func))
		}
		if !reflect.DeepEqual(g.Kernel, w.Kernel) || !reflect.DeepEqual(g.User, w.User) || g.Note != w.Note || g.Key() != w.Key() {
			t.Fatalf("event %d: stack\n got %+v\nwant %+v", i, g, w)
		}
	}
	if r.Header().Version.Minor != VersionMinor {
		t.Errorf("version %+v", r.Header().Version)
	}
}

// The stack records are additive: a 1.3 reader, which knows thread,
// string and event records only and skips the rest, reads every event as
// it was, without its stack.
func TestStacksAreInvisibleToOlderReaders(t *testing.T) {
	path, want := writeStackRecording(t, 300)
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := olderReaderEvents(t, r, true)
	if len(got) != len(want) {
		t.Fatalf("a 1.3 reader reads %d events, want %d", len(got), len(want))
	}
	for i := range want {
		w := want[i]
		w.Stack = nil
		if g := got[i]; !reflect.DeepEqual(g, w) {
			t.Fatalf("event %d: a 1.3 reader reads\n%+v, want\n%+v", i, g, w)
		}
	}
}

// A stack record that refers to a stack its block never declared, or a
// stack past the limits, is corrupt: the block is skipped, and said.
func TestCorruptStacks(t *testing.T) {
	for _, tc := range []struct {
		name string
		body func(e *blockEncoder) []byte
		rec  byte
	}{
		{"an undeclared stack", func(*blockEncoder) []byte { return []byte{7} }, recEventStack},
		{"too many frames", func(*blockEncoder) []byte { return []byte{1, 0, 0xff, 0x0f} }, recStack},
		{"a truncated frame", func(*blockEncoder) []byte { return []byte{1, 0, 1, 3, 'a'} }, recStack},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newBlockEncoder()
			e.record(tc.rec, tc.body(e))
			d := newBlockDecoder(nil)
			d.reset(e.buf)
			typ, body, _, err := d.next()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.decode(typ, body, &Item{}); !errors.Is(err, errCorrupt) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("decode: %v, want a corrupt record", err)
			}
		})
	}
}

// A writer closes a block before it declares more stacks than a reader
// takes in one: every event of a run with very many distinct stacks is
// read back with its own.
func TestManyStacksSpanBlocks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.ntr")
	w, err := Create(path, testHeader())
	if err != nil {
		t.Fatal(err)
	}
	n := maxBlockStacks + 100
	for i := 0; i < n; i++ {
		s := stall.NewStack(nil, []stall.Frame{{Func: fmt.Sprintf("f%d", i), Module: "m"}}, "")
		ev := stall.Event{Kind: stall.KindStall, Cause: stall.MemcgReclaim, TsNs: uint64(1e6 + i), DurNs: 1, PID: 1, TID: 1,
			Node: -1, DstNode: -1, SrcCPU: -1, DstCPU: -1, Stack: s}
		w.Event(&ev)
	}
	if err := w.Close(run.End{}); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	evs, _, _ := readAll(t, r)
	if len(evs) != n || len(r.Warnings()) != 0 {
		t.Fatalf("read %d events, want %d; warnings %v", len(evs), n, r.Warnings())
	}
	for i, ev := range evs {
		if ev.Stack == nil || ev.Stack.User[0].Func != fmt.Sprintf("f%d", i) {
			t.Fatalf("event %d: stack %+v", i, ev.Stack)
		}
	}
	if r.Blocks() < 2 {
		t.Errorf("%d blocks: the writer never closed one for its stacks", r.Blocks())
	}
}

// Each block declares its stacks anew; the reader hands out one stack
// for each, however many blocks declare it, so what keeps a replay's
// stacks holds each once.
func TestReaderKeepsAStackOnce(t *testing.T) {
	path, _ := writeStackRecording(t, 1000)
	for _, workers := range []int{1, 4} {
		r, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		r.Parallel(workers)
		evs, _, _ := readAll(t, r)
		r.Close()
		byKey := map[string]map[*stall.Stack]bool{}
		for _, ev := range evs {
			if ev.Stack == nil {
				continue
			}
			if byKey[ev.Stack.Key()] == nil {
				byKey[ev.Stack.Key()] = map[*stall.Stack]bool{}
			}
			byKey[ev.Stack.Key()][ev.Stack] = true
		}
		for _, made := range byKey {
			if len(made) != 1 {
				t.Errorf("%d workers: %d blocks' stacks are read as %d", workers, r.Blocks(), len(made))
				break
			}
		}
	}
}

// bigStack is a kernel stack of 256 frames, each name 4096 bytes, the
// first saying i: about 1 MiB.
func bigStack(i int) *stall.Stack {
	frames := make([]stall.Frame, maxStackFrames)
	for j := range frames {
		frames[j] = stall.Frame{Func: fmt.Sprintf("%d-%s", i, strings.Repeat("f", maxFrameBytes-10)), Module: stall.KernelModule}
	}
	return stall.NewStack(frames, nil, "")
}

func stackEvent(ts uint64, s *stall.Stack) stall.Event {
	return stall.Event{Kind: stall.KindStall, Cause: stall.MemcgReclaim, TsNs: ts, DurNs: 1, PID: 1, TID: 1,
		Node: -1, DstNode: -1, SrcCPU: -1, DstCPU: -1, Stack: s}
}

// A file's stacks past maxFileStackBytes are left out: their stalls read
// with leftOutStack, counted and warned about, while those kept before go
// on being read with theirs. In parallel as in sequence.
func TestReaderBoundsTheStacksItKeeps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.ntr")
	w, err := Create(path, testHeader())
	if err != nil {
		t.Fatal(err)
	}
	n := 2*maxFileStackBytes/bigStack(0).Size() + 1
	stacks := make([]*stall.Stack, n)
	for i := range stacks {
		stacks[i] = bigStack(i)
		ev := stackEvent(uint64(1e6+i), stacks[i])
		w.Event(&ev)
	}
	again := stackEvent(2e6, stacks[0]) // kept: read with its own
	w.Event(&again)
	if err := w.Close(run.End{}); err != nil {
		t.Fatal(err)
	}
	kept := maxFileStackBytes / stacks[0].Size()
	type outcome struct {
		Keys     []string
		Left     StacksLeftOut
		Warnings []string
	}
	var results []outcome
	for _, workers := range []int{1, 4} {
		r, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		r.Parallel(workers)
		evs, _, _ := readAll(t, r)
		r.Close()
		var o outcome
		for i, ev := range evs {
			want := stacks[min(i, n)%n]
			if i < kept || i == n {
				if ev.Stack.Key() != want.Key() {
					t.Fatalf("%d workers: stall %d lost its stack", workers, i)
				}
			} else if !ev.Stack.LeftOut() || !strings.Contains(ev.Stack.Note, "stack left out") {
				t.Fatalf("%d workers: stall %d has stack %q, want one left out", workers, i, ev.Stack.Note)
			}
			o.Keys = append(o.Keys, ev.Stack.Key())
		}
		o.Left, o.Warnings = r.StacksLeftOut(), r.Warnings()
		results = append(results, o)
	}
	want := StacksLeftOut{Stacks: n - kept, Frames: (n - kept) * maxStackFrames, Stalls: n - kept}
	if got := results[0].Left; got != want {
		t.Errorf("left out %+v, want %+v", got, want)
	}
	if ws := results[0].Warnings; len(ws) != 1 || !strings.Contains(ws[0], want.String()[len("stacks left out"):]) {
		t.Errorf("warnings %q, want one saying %q", ws, want)
	}
	if !reflect.DeepEqual(results[0], results[1]) {
		t.Errorf("in parallel %+v %q, in sequence %+v %q", results[1].Left, results[1].Warnings, results[0].Left, results[0].Warnings)
	}
}

// A block's stacks past maxBlockStackBytes are read but not made: a
// writer never makes such a block (it closes one at 256 KiB and a
// stack), but a crafted one would make a reader hold them all, a few
// blocks at once when it decodes ahead.
func TestBlockStacksPastTheirBound(t *testing.T) {
	e := newBlockEncoder()
	n := maxBlockStackBytes/bigStack(0).Size() + 3
	for i := range n {
		ev := stackEvent(uint64(1e6+i), bigStack(i))
		e.event(&ev)
	}
	d := newBlockDecoder(nil)
	d.reset(e.buf)
	it := blockIter{d: d, want: e.records, newer: -1, late: -1, maxTs: ^uint64(0), live: true}
	var made int
	var item Item
	for i := 0; it.next(&item); i++ {
		switch s := item.Event.Stack; {
		case s == leftOutStack:
		case s.Key() == bigStack(i).Key():
			made++
		default:
			t.Fatalf("stall %d: stack %+v", i, s)
		}
	}
	kept := maxBlockStackBytes / bigStack(0).Size()
	want := []blockNote{{kind: noteStacks, count: n - kept, frames: (n - kept) * maxStackFrames}}
	if made != kept || !reflect.DeepEqual(it.notes, want) {
		t.Errorf("%d stacks made, notes %+v; want %d, %+v", made, it.notes, kept, want)
	}
}

// The fullest block a writer makes (256 KiB of the smallest stacks,
// then the largest stack of names that need no escaping) is within what
// a reader makes of one: a recording gives back every stack it has.
func TestWriterBlocksStayWithinTheReadersBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "full.ntr")
	w, err := Create(path, testHeader())
	if err != nil {
		t.Fatal(err)
	}
	var frames []stall.Frame
	for range maxStackFrames {
		frames = append(frames, stall.Frame{Func: strings.Repeat("f", maxFrameBytes), Module: strings.Repeat("m", maxFrameBytes),
			BuildID: strings.Repeat("b", maxFrameBytes)})
	}
	largest := stall.NewStack(frames, append([]stall.Frame(nil), frames...), strings.Repeat("n", maxFrameBytes))
	small := make([]stall.Frame, maxStackFrames)
	n := 0
	for ; (n+1)*(maxStackFrames*5+50) < targetBlockRaw; n++ { // each small one is 1.3 KB with its stall
		ev := stackEvent(uint64(1e6+n), stall.NewStack(small, nil, strconv.Itoa(n)))
		w.Event(&ev)
	}
	ev := stackEvent(2e6, largest)
	w.Event(&ev)
	if err := w.Close(run.End{}); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	evs, _, _ := readAll(t, r)
	if l := r.StacksLeftOut(); l.Stacks > 0 || len(evs) != n+1 || evs[n].Stack.Key() != largest.Key() || r.Blocks() != 2 { // theirs and the end's
		t.Errorf("%d stalls of %d in %d blocks, the last stack left out: %v; %+v", len(evs), n+1, r.Blocks(), evs[len(evs)-1].Stack.LeftOut(), l)
	}
}

// A serving thread's waits (kind 2, 1.7) round-trip with their part and
// stack, and travel as later events: a 1.2 reader, which reads type 3
// alone, reads every stall of type 3 as it was and meets no wait.
func TestWaitsRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.ntr")
	w, err := Create(path, testHeader())
	if err != nil {
		t.Fatal(err)
	}
	stacks := testStacks()
	var want []stall.Event
	for i := 0; i < 60; i++ {
		ev := stall.Event{Kind: stall.KindStall, Cause: stall.MemcgReclaim, TsNs: uint64(1e6 + i*1000), DurNs: uint64(2000 + i),
			PID: 1, TID: uint32(1 + i%3), Comm: "db", Node: -1, DstNode: -1, SrcCPU: -1, DstCPU: -1}
		if i%3 != 0 {
			ev.Kind, ev.Cause, ev.Reason = stall.KindWait, 0, []string{"disk_io", "other_wait"}[i%2]
			if i%5 != 0 { // some waits carry no stack
				ev.Stack = stacks[i%2]
			}
		}
		w.Event(&ev)
		want = append(want, ev)
	}
	if err := w.Close(run.End{}); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, _, _ := readAll(t, r)
	if len(got) != len(want) {
		t.Fatalf("read %d events, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Kind != w.Kind || g.Cause != w.Cause || g.Reason != w.Reason || g.TsNs != w.TsNs || g.DurNs != w.DurNs || g.TID != w.TID ||
			(g.Stack == nil) != (w.Stack == nil) || w.Stack != nil && g.Stack.Key() != w.Stack.Key() {
			t.Fatalf("event %d: read\n%+v, want\n%+v", i, g, w)
		}
	}
	r2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	older := olderReaderEvents(t, r2, false)
	var stalls int
	for _, ev := range want {
		if ev.Kind == stall.KindStall {
			stalls++
		}
	}
	if len(older) != stalls {
		t.Fatalf("a 1.2 reader reads %d events, want the %d stalls", len(older), stalls)
	}
	for i, ev := range older {
		if ev.Kind != stall.KindStall || ev.TsNs != want[3*i].TsNs {
			t.Fatalf("a 1.2 reader's event %d: %+v, want %+v", i, ev, want[3*i])
		}
	}
}
