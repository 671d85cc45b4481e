package source

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/latency"
)

// follow runs Follow on path in the background and collects what it
// reads, what it finds bad and what it notices.
type follow struct {
	mu      sync.Mutex
	got     []latency.Sample
	bad     []error
	notices []error
	cancel  context.CancelFunc
	done    chan error
}

func startFollow(t *testing.T, path string) *follow {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &follow{cancel: cancel, done: make(chan error, 1)}
	go func() {
		f.done <- Follow(ctx, path, ParseLine, latency.Clock{},
			func(s latency.Sample) { f.mu.Lock(); f.got = append(f.got, s); f.mu.Unlock() },
			func(err error) { f.mu.Lock(); f.bad = append(f.bad, err); f.mu.Unlock() },
			func(err error) { f.mu.Lock(); f.notices = append(f.notices, err); f.mu.Unlock() })
	}()
	t.Cleanup(cancel)
	return f
}

// waitFor waits until n samples were read, or a few seconds.
func (f *follow) waitFor(n int) int {
	deadline := time.Now().Add(5 * time.Second)
	for {
		f.mu.Lock()
		got := len(f.got)
		f.mu.Unlock()
		if got >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop ends Follow, which must return within a second.
func (f *follow) stop(t *testing.T) {
	t.Helper()
	f.cancel()
	select {
	case err := <-f.done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Second):
		t.Fatal("Follow did not return within a second of the end")
	}
}

// appendLines writes samples from..to-1 (ts = i, latency = 1) to path.
func appendLines(t *testing.T, path string, from, to int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&b, "%d 1\n", i)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		t.Fatal(err)
	}
}

// A FIFO that no writer has opened: Follow does not wait in open() for
// one, where the end of the run could not stop it. It reads a writer that
// comes later, and goes on reading after that writer leaves, as from a
// new one.
func TestFollowAFIFOWithoutAWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	f := startFollow(t, path)
	time.Sleep(200 * time.Millisecond)
	f.stop(t) // no writer ever came

	f = startFollow(t, path)
	time.Sleep(100 * time.Millisecond) // no writer yet
	for round := 0; round < 2; round++ {
		w, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(w, "%d 5\n", 10+round)
		w.Close()
		if n := f.waitFor(round + 1); n != round+1 {
			t.Fatalf("writer %d: read %d samples, want %d", round+1, n, round+1)
		}
	}
	f.stop(t)
	if f.got[1] != (latency.Sample{TsNs: 11, LatencyNs: 5}) || len(f.bad) != 0 || len(f.notices) != 0 {
		t.Fatalf("samples %v, bad %v, notices %v", f.got, f.bad, f.notices)
	}
}

// logrotate's create: the file is renamed and a new one takes its name.
// Follow reads what was still written to the old one, then every line of
// the new one, and says so once for two rotations.
func TestFollowAcrossRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "lat.log")
	appendLines(t, path, 0, 100)
	f := startFollow(t, path)
	if n := f.waitFor(100); n != 100 {
		t.Fatalf("read %d of the first 100", n)
	}
	for r := 1; r <= 2; r++ {
		old := fmt.Sprintf("%s.%d", path, r)
		if err := os.Rename(path, old); err != nil {
			t.Fatal(err)
		}
		appendLines(t, old, r*1000, r*1000+50) // the writer had not reopened yet
		appendLines(t, path, r*1000+50, r*1000+100)
		if n := f.waitFor(100 + r*100); n != 100+r*100 {
			t.Fatalf("rotation %d: read %d samples, want %d", r, n, 100+r*100)
		}
	}
	f.stop(t)
	seen := map[uint64]bool{}
	for _, s := range f.got {
		seen[s.TsNs] = true
	}
	if len(seen) != 300 || len(f.bad) != 0 {
		t.Fatalf("%d distinct samples, bad %v", len(seen), f.bad)
	}
	if len(f.notices) != 2 || !strings.Contains(f.notices[0].Error(), "lat.log was rotated") {
		t.Fatalf("notices %v: want each rotation noticed", f.notices)
	}
}

// logrotate's copytruncate: the same file is cut to nothing and written
// again from its start.
func TestFollowAcrossTruncation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lat.log")
	appendLines(t, path, 0, 100)
	f := startFollow(t, path)
	if n := f.waitFor(100); n != 100 {
		t.Fatalf("read %d of the first 100", n)
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	appendLines(t, path, 1000, 1010) // shorter than what was read
	if n := f.waitFor(110); n != 110 {
		t.Fatalf("read %d samples, want 110", n)
	}
	f.stop(t)
	if last := f.got[len(f.got)-1]; last.TsNs != 1009 || len(f.bad) != 0 {
		t.Fatalf("last sample %v, bad %v", last, f.bad)
	}
	if len(f.notices) != 1 || !strings.Contains(f.notices[0].Error(), "lat.log was truncated") {
		t.Fatalf("notices %v", f.notices)
	}
}

// The file source says a rotation once however often it happens.
func TestFileSourceSaysRotationOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lat.log")
	appendLines(t, path, 0, 10)
	src, err := Config{File: path}.Open(Env{})
	if err != nil {
		t.Fatal(err)
	}
	run := runSource(src, 100)
	read := 0
	wait := func(n int) {
		for read < n {
			select {
			case <-run.out:
				read++
			case <-time.After(5 * time.Second):
				t.Fatalf("read %d samples, want %d", read, n)
			}
		}
	}
	wait(10)
	for r := 1; r <= 3; r++ {
		os.Rename(path, fmt.Sprintf("%s.%d", path, r))
		appendLines(t, path, r*100, r*100+10)
		wait(10 + 10*r)
	}
	run.cancel()
	<-run.done
	if warned := run.warnings(); len(warned) != 1 || !strings.HasPrefix(warned[0], "latency file "+path+" was rotated") {
		t.Fatalf("warnings %q: want the rotation said once", warned)
	}
}

// logrotate's copytruncate while lines the reader has not read yet are in
// the file: the truncation takes them from the file, and they are read
// from the copy instead.
func TestFollowTakesUnreadLinesFromTheCopy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lat.log")
	appendLines(t, path, 0, 100)
	f := startFollow(t, path)
	if n := f.waitFor(100); n != 100 {
		t.Fatalf("read %d of the first 100", n)
	}
	for r := 1; r <= 3; r++ {
		from := r * 1000
		appendLines(t, path, from, from+10) // then at once, before the next read:
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		copyName := fmt.Sprintf("%s.%d", path, r)
		if err := os.WriteFile(copyName, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, 0); err != nil {
			t.Fatal(err)
		}
		appendLines(t, path, from+10, from+15)
		if n := f.waitFor(100 + 15*r); n != 100+15*r {
			t.Fatalf("round %d: read %d samples, want %d", r, n, 100+15*r)
		}
		time.Sleep(100 * time.Millisecond) // the next round's lines come after this one's are read
	}
	f.stop(t)
	seen := map[uint64]bool{}
	for _, s := range f.got {
		seen[s.TsNs] = true
	}
	if len(seen) != 145 || len(f.got) != 145 || len(f.bad) != 0 {
		t.Fatalf("%d samples, %d distinct, bad %v", len(f.got), len(seen), f.bad)
	}
	if len(f.notices) != 3 || !strings.HasSuffix(f.notices[0].Error(), "came from its copy lat.log.1)") {
		t.Fatalf("notices %v", f.notices)
	}
}
