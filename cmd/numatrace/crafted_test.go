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
		threadBomb(t, dir, 3_000_000): "over 131072 threads in a block",
		// Just inside the span: replay closes 4 million empty windows,
		// in batches.
		craft(t, dir, "event-at-the-span-end", record.Header{StartNs: 1e9, WindowNs: 1e9}, func(w *record.FileWriter) {
			ev := plainEvent(1e9 + (1<<22-2)*1e9)
			w.Event(&ev)
		}, runpkg.End{EndNs: 1e9 + (1<<22-1)*1e9}): "",
		headerStorm(t, dir, 2<<20): "past the end of the file",
	}
	// Measured in a memory cgroup of its own: the peak of a child's RSS
	// from wait4 includes this test's own, which it shared until exec.
	cg := testutil.MemcgCgroup(t, "numatrace-e2e-crafted", 0)
	for path, want := range files {
		name := filepath.Base(path)
		if err := os.WriteFile(filepath.Join(cg, "memory.max_usage_in_bytes"), []byte("0"), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("sh", "-c", `echo $$ > "$1/cgroup.procs" && exec "$2" report "$3" --json`, "sh", cg, binary(t), path)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
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
			t.Errorf("%s: report still ran after 60 s", name)
			continue
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
		if want != "" && !strings.Contains(stderr.String(), want) || want == "" && cmd.ProcessState.ExitCode() != 0 {
			t.Errorf("%s: stderr %q does not say %q", name, stderr.String(), want)
		}
	}
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
// (a writer closes blocks at 256 KiB; this one is tens of MB), by hand as
// docs/FORMAT.md lays a file out.
func threadBomb(t *testing.T, dir string, n int) string {
	path := filepath.Join(dir, "thread-bomb.ntr")
	h := []byte(`{"format":"numatrace","version":{"major":1,"minor":3},"start_ns":1000000000,"window_ns":1000000000,"target":"system-wide"}`)
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	var f bytes.Buffer
	f.Write(record.Magic[:])
	f.Write([]byte{1, 0, 3, 0})
	f.Write(bin.LittleEndian.AppendUint32(nil, uint32(len(h))))
	f.Write(h)
	f.Write(bin.LittleEndian.AppendUint32(nil, crc32.Checksum(h, castagnoli)))
	var raw []byte
	for tid := 1; tid <= n; tid++ {
		body := bin.AppendUvarint(nil, uint64(tid))
		body = bin.AppendUvarint(body, uint64(tid))
		body = append(body, 1, 'x')
		raw = append(raw, 1) // a thread record
		raw = bin.AppendUvarint(raw, uint64(len(body)))
		raw = append(raw, body...)
	}
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	payload := enc.EncodeAll(raw, nil)
	f.WriteString("NTBK")
	for _, v := range []uint32{uint32(len(payload)), uint32(len(raw)), uint32(n), crc32.Checksum(payload, castagnoli)} {
		f.Write(bin.LittleEndian.AppendUint32(nil, v))
	}
	f.Write(payload)
	if err := os.WriteFile(path, f.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
