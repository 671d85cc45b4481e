package main

import (
	"bytes"
	bin "encoding/binary"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/numatrace/numatrace/internal/record"
	runpkg "github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/testutil"
)

// Crafted recordings, checksums and all, that once made report allocate
// past 6 GB: each is now read within 256 MiB and a few seconds, and says
// what it skipped.
func TestCraftedRecordingsStayBounded(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{ // file: what report must say
		craft(t, dir, "window-1ns", record.Header{StartNs: 1e9, WindowNs: 1}, func(w *record.FileWriter) {
			ev := plainEvent(2e9)
			w.Event(&ev)
		}, runpkg.End{EndNs: 3e9}): "window_ns 1 is under 1 ms",
		craft(t, dir, "event-at-2^63", record.Header{StartNs: 1e9, WindowNs: 1e9}, func(w *record.FileWriter) {
			ev := plainEvent(1<<63 - 5)
			w.Event(&ev)
		}, runpkg.End{EndNs: 3e9}): "timed past any recording's span",
		craft(t, dir, "end-at-2^63", record.Header{StartNs: 1e9, WindowNs: 1e9}, func(w *record.FileWriter) {
			ev := plainEvent(2e9)
			w.Event(&ev)
		}, runpkg.End{EndNs: 1 << 63, DurationNs: 1 << 62}): "timed past any recording's span",
		threadBomb(t, dir, 3_000_000): "over 65536 records in a block",
		// Just inside the span: replay closes 4 million empty windows,
		// in batches.
		craft(t, dir, "event-at-the-span-end", record.Header{StartNs: 1e9, WindowNs: 1e9}, func(w *record.FileWriter) {
			ev := plainEvent(1e9 + (1<<22-2)*1e9)
			w.Event(&ev)
		}, runpkg.End{EndNs: 1e9 + (1<<22-1)*1e9}): "",
		headerStorm(t, dir, 2<<20): "past the end of the file",
		// 28 KB: each block's millions of records were decoded ahead,
		// an item each, and report took 15 GB.
		eventBlocks(t, dir, 4): "over 65536 records in a block",
	}
	// Stacks (1.4): files of 14 to 110 KB whose stacks, kept whole, took
	// report or export to 0.6-4 GiB. Their stalls still report and
	// export, under a stack saying that theirs was left out.
	stackFiles := []string{distinctStacks(t, dir, 100), stackBlocks(t, dir, 6), sharedStack(t, dir, 2000),
		distinctStacksEscaped(t, dir, 100)}
	// Measured in a memory cgroup of its own: the peak of a child's RSS
	// from wait4 includes this test's own, which it shared until exec.
	// The limit only keeps a run gone wrong from taking the machine.
	cg := testutil.MemcgCgroup(t, "numatrace-e2e-crafted", 1<<30)
	for path, want := range files {
		runBounded(t, cg, want, want == "", "report", path, "--json")
	}
	for _, path := range stackFiles {
		// What report and export say, on stderr or in what they write, of
		// stacks past the bounds on what numatrace keeps of them.
		const leftOut = "left out"
		runBounded(t, cg, leftOut, true, "report", path, "--json")
		runBounded(t, cg, leftOut, true, "export", "--format", "folded", path)
		runBounded(t, cg, leftOut, true, "export", "--format", "pprof", path)
	}
}

// runBounded runs numatrace with args, its recording's path among them,
// in cgroup cg: within 256 MiB and 60 s, saying want on stderr or in
// its output, and exiting 0 if succeed.
func runBounded(t *testing.T, cg, want string, succeed bool, args ...string) {
	t.Helper()
	var words []string
	for _, a := range args {
		words = append(words, filepath.Base(a))
	}
	name := strings.Join(words, " ")
	if err := os.WriteFile(filepath.Join(cg, "memory.max_usage_in_bytes"), []byte("0"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", append([]string{"-c", `echo $$ > "$1/cgroup.procs" && shift && exec "$@"`, "sh", cg, binary(t)}, args...)...)
	var stderr bytes.Buffer
	stdout := &watchFor{want: want}
	cmd.Stderr, cmd.Stdout = &stderr, stdout
	start := time.Now()
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Errorf("%s: still ran after 60 s", name)
		return
	}
	b, err := os.ReadFile(filepath.Join(cg, "memory.max_usage_in_bytes"))
	if err != nil {
		t.Fatal(err)
	}
	peak, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %v, peak memory %d MiB, exit %d, stderr %q", name, time.Since(start).Round(time.Millisecond), peak>>20,
		cmd.ProcessState.ExitCode(), strings.TrimSpace(stderr.String()))
	if peak > 256<<20 {
		t.Errorf("%s: peak memory %d MiB, over 256 MiB", name, peak>>20)
	}
	if !strings.Contains(stderr.String(), want) && !stdout.found || succeed && cmd.ProcessState.ExitCode() != 0 {
		t.Errorf("%s: exit %d, neither stderr %q nor the output says %q", name, cmd.ProcessState.ExitCode(), stderr.String(), want)
	}
}

// watchFor looks for want in what is written to it, keeping none of it
// but the end of the last write (the output of a run gone wrong is GBs).
type watchFor struct {
	want  string
	tail  []byte
	found bool
}

func (w *watchFor) Write(p []byte) (int, error) {
	if !w.found {
		w.tail = append(w.tail, p...)
		w.found = bytes.Contains(w.tail, []byte(w.want))
		w.tail = w.tail[max(0, len(w.tail)-len(w.want)):]
	}
	return len(p), nil
}

func plainEvent(ts uint64) stall.Event {
	return stall.Event{Kind: stall.KindStall, Cause: stall.MemcgReclaim, TsNs: ts, DurNs: 1000, PID: 7, TID: 7, Comm: "x",
		Node: -1, DstNode: -1, SrcCPU: -1, DstCPU: -1}
}

// craft writes a recording through the writer, which checks nothing.
func craft(t *testing.T, dir, name string, h record.Header, body func(*record.FileWriter), end runpkg.End) string {
	path := filepath.Join(dir, name+".ntr")
	w, err := record.Create(path, h)
	if err != nil {
		t.Fatal(err)
	}
	w.Snapshot(record.Snapshot{MonoNs: h.StartNs, Data: &stall.Snapshot{}})
	body(w)
	if err := w.Close(end); err != nil {
		t.Fatal(err)
	}
	return path
}

// headerStorm writes a recording of n bytes of block headers back to
// back, each claiming 16 MiB: looking past each failed one from its second
// byte would read the rest of the file once per header.
func headerStorm(t *testing.T, dir string, n int) string {
	path := filepath.Join(dir, "header-storm.ntr")
	w, err := record.Create(path, record.Header{StartNs: 1e9, WindowNs: 1e9})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(runpkg.End{EndNs: 2e9}); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hdr := []byte("NTBK")
	for _, v := range []uint32{16 << 20, 1, 1, 0} {
		hdr = bin.LittleEndian.AppendUint32(hdr, v)
	}
	if _, err := f.Write(bytes.Repeat(hdr, n/len(hdr))); err != nil {
		t.Fatal(err)
	}
	return path
}

// threadBomb writes a valid recording whose one block declares n threads
// (a writer closes blocks at 256 KiB; this one is tens of MB).
func threadBomb(t *testing.T, dir string, n int) string {
	var raw []byte
	for tid := 1; tid <= n; tid++ {
		raw = appendThread(raw, tid, "x")
	}
	return handMade(t, filepath.Join(dir, "thread-bomb.ntr"), 3, func(block func([]byte, int)) { block(raw, n) })
}

// handMade writes a valid recording of format 1.minor by hand, as
// docs/FORMAT.md lays a file out, with the blocks blocks makes (each its
// raw records and how many), which a writer would not make.
func handMade(t *testing.T, path string, minor byte, blocks func(block func(raw []byte, records int))) string {
	h := []byte(`{"format":"numatrace","version":{"major":1,"minor":` + strconv.Itoa(int(minor)) +
		`},"start_ns":1000000000,"window_ns":1000000000,"target":"system-wide"}`)
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	var f bytes.Buffer
	f.Write(record.Magic[:])
	f.Write([]byte{1, 0, minor, 0})
	f.Write(bin.LittleEndian.AppendUint32(nil, uint32(len(h))))
	f.Write(h)
	f.Write(bin.LittleEndian.AppendUint32(nil, crc32.Checksum(h, castagnoli)))
	enc, err := zstd.NewWriter(nil, zstd.WithWindowSize(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	blocks(func(raw []byte, records int) {
		payload := enc.EncodeAll(raw, nil)
		f.WriteString("NTBK")
		for _, v := range []uint32{uint32(len(payload)), uint32(len(raw)), uint32(records), crc32.Checksum(payload, castagnoli)} {
			f.Write(bin.LittleEndian.AppendUint32(nil, v))
		}
		f.Write(payload)
	})
	if err := os.WriteFile(path, f.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// eventBlocks writes n blocks of 63 MiB of the smallest stall records
// (a writer closes a block at 256 KiB).
func eventBlocks(t *testing.T, dir string, n int) string {
	return handMade(t, filepath.Join(dir, "event-blocks.ntr"), 3, func(block func([]byte, int)) {
		for range n {
			raw := appendThread(nil, 7, "x")
			records := 1
			for dts := uint64(2e9); len(raw) < 63<<20; dts = 1 {
				raw = appendRecord(raw, 3, appendEvent(nil, dts, 7))
				records++
			}
			block(raw, records)
		}
	})
}

// appendRecord appends one record: type, length, body.
func appendRecord(raw []byte, typ byte, body []byte) []byte {
	raw = append(raw, typ)
	raw = bin.AppendUvarint(raw, uint64(len(body)))
	return append(raw, body...)
}

func appendString(b []byte, s string) []byte {
	return append(bin.AppendUvarint(b, uint64(len(s))), s...)
}

func appendThread(raw []byte, tid int, comm string) []byte {
	body := bin.AppendUvarint(nil, uint64(tid))
	body = bin.AppendUvarint(body, uint64(tid))
	return appendRecord(raw, 1, appendString(body, comm))
}

// appendStackRecord appends a stack record (type 10) of id: 256 kernel
// and 256 user frames, each name 4096 bytes of fill, starting with name.
func appendStackRecord(raw []byte, id, name int, fill string) []byte {
	body := bin.AppendUvarint(nil, uint64(id))
	body = appendString(body, "")
	for range 2 {
		body = bin.AppendUvarint(body, 256)
		for range 256 {
			for _, f := range []string{"func", "module"} {
				body = appendString(body, bigName(f, name, fill))
			}
			body = bin.AppendUvarint(body, 0)
			body = appendString(body, bigName("build", name, fill))
			body = bin.AppendUvarint(body, 0)
		}
	}
	return appendRecord(raw, 10, body)
}

// bigName is as long a name as a frame may have, different for each id.
func bigName(what string, id int, fill string) string {
	s := what + strconv.Itoa(id)
	return s + strings.Repeat(fill, (stall.MaxNameBytes-len(s))/len(fill))
}

// bigStack is a stack of n frames each side, every name 4096 bytes of
// fill: with n 256, the largest a recording holds.
func bigStack(id int, fill string, n int) *stall.Stack {
	var sides [2][]stall.Frame
	for i := range sides {
		for range n {
			sides[i] = append(sides[i], stall.Frame{Func: bigName("func", id, fill), Module: bigName("module", id, fill),
				BuildID: bigName("build", id, fill)})
		}
	}
	return stall.NewStack(sides[0], sides[1], "")
}

// distinctStacks writes n stalls, each with a different stack of the
// largest size: a writer puts each in a block of its own.
func distinctStacks(t *testing.T, dir string, n int) string {
	return stallsWithStacks(t, dir, "distinct-stacks", n, func(i int) *stall.Stack { return bigStack(i, "x", 256) })
}

// distinctStacksEscaped is distinctStacks with names JSON escapes, each
// byte in six, in stacks of a quarter the size: as many bytes of them as
// of distinctStacks' are written.
func distinctStacksEscaped(t *testing.T, dir string, n int) string {
	return stallsWithStacks(t, dir, "distinct-stacks-escaped", n, func(i int) *stall.Stack { return bigStack(i, "<\x01", 64) })
}

// sharedStack writes one block in which n threads each stall once, all
// with the same stack of the largest size: each thread's row of the
// stacks holds it.
func sharedStack(t *testing.T, dir string, n int) string {
	return handMade(t, filepath.Join(dir, "shared-stack.ntr"), 4, func(block func([]byte, int)) {
		raw := appendStackRecord(nil, 1, 0, "x")
		for i := range n {
			raw = appendThread(raw, 100+i, "t"+strconv.Itoa(i))
			raw = appendRecord(raw, 11, bin.AppendUvarint(nil, 1))
			dts := uint64(1) // after the first, a nanosecond apart
			if i == 0 {
				dts = 2e9 // from 0, where each block's times start
			}
			raw = appendRecord(raw, 3, appendEvent(nil, dts, 100+i))
		}
		block(raw, 1+3*n)
	})
}

// stallsWithStacks writes n stalls, the i'th with stack(i).
func stallsWithStacks(t *testing.T, dir, name string, n int, stack func(i int) *stall.Stack) string {
	return craft(t, dir, name, record.Header{StartNs: 1e9, WindowNs: 1e9, StacksMinNs: 1000}, func(w *record.FileWriter) {
		for i := range n {
			ev := plainEvent(2e9 + uint64(i))
			ev.Stack = stack(i)
			w.Event(&ev)
		}
	}, runpkg.End{EndNs: 3e9})
}

// stackBlocks writes n blocks of 24 MiB, each three stacks of the
// largest size, with a stall each: a writer closes a block at 256 KiB
// and one stack. (A reader decodes blocks ahead, in two workers here,
// each with a buffer as large as the largest block: blocks of 64 MiB,
// of stacks or anything else, take 128 MiB of that alone.)
func stackBlocks(t *testing.T, dir string, n int) string {
	return handMade(t, filepath.Join(dir, "stack-blocks.ntr"), 4, func(block func([]byte, int)) {
		name := 0 // names differ from block to block; ids are each block's
		for range n {
			raw := appendThread(nil, 7, "x")
			records := 1
			for id := 1; ; id++ {
				next := appendStackRecord(nil, id, name, "x")
				if len(raw)+len(next)+20 > 24<<20 {
					break
				}
				name++
				raw = append(raw, next...)
				raw = appendRecord(raw, 11, bin.AppendUvarint(nil, uint64(id)))
				dts := uint64(1) // after the first, a nanosecond apart
				if id == 1 {
					dts = 2e9 // from 0, where each block's times start
				}
				raw = appendRecord(raw, 3, appendEvent(nil, dts, 7))
				records += 3
			}
			block(raw, records)
		}
	})
}

// appendEvent appends the body of a memcg_reclaim stall of 1 µs in
// thread tid, dts after the block's last.
func appendEvent(b []byte, dts uint64, tid int) []byte {
	b = append(b, byte(stall.MemcgReclaim), 0)
	b = bin.AppendUvarint(b, dts<<1) // zigzag, positive
	b = bin.AppendUvarint(b, 1000)
	b = bin.AppendUvarint(b, uint64(tid))
	return append(b, 0, 0) // cpu 0, no optional fields
}
