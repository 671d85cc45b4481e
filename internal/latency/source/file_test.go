package source

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/latency"
)

func TestParseLine(t *testing.T) {
	for _, c := range []struct {
		in      string
		ts, lat uint64
		ok      bool
	}{
		{`{"ts_ns":12,"latency_ns":34}`, 12, 34, true},
		{`12 34`, 12, 34, true},
		{"12\t34", 12, 34, true},
		{"12,34", 12, 34, true},
		{`{"ts_ns":12}`, 0, 0, false},
		{`{"ts_ns":`, 0, 0, false},
		{"12", 0, 0, false},
		{"a b", 0, 0, false},
		{"1 2 3", 0, 0, false},
	} {
		ts, lat, err := ParseLine(c.in)
		if (err == nil) != c.ok || ts != c.ts || lat != c.lat {
			t.Errorf("ParseLine(%q) = %d, %d, %v", c.in, ts, lat, err)
		}
	}
}

// Follow picks up lines appended after it started, like tail -f.
func TestFollowGrowingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lat.log")
	os.WriteFile(path, []byte("# from the load generator\n10 1\n{\"ts_ns\":20,\"latency_ns\":2}\nbad line\n"), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var got []latency.Sample
	var bad int
	done := make(chan error, 1)
	go func() {
		done <- Follow(ctx, path, ParseLine, latency.Clock{}, func(s latency.Sample) { mu.Lock(); got = append(got, s); mu.Unlock() },
			func(error) { mu.Lock(); bad++; mu.Unlock() }, nil)
	}()
	time.Sleep(100 * time.Millisecond)
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("30 ")
	time.Sleep(100 * time.Millisecond)
	f.WriteString("3\n")
	f.Close()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == 3 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[2] != (latency.Sample{TsNs: 30, LatencyNs: 3}) || bad != 1 {
		t.Fatalf("samples %v bad %d", got, bad)
	}
}

// A source that blocks (a FIFO no one writes to, like a quiet stdin) does
// not hold up the end of a trace.
func TestFollowReturnsWhileAReadBlocks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err) // a temporary directory takes a FIFO: nothing to skip
	}
	w, err := os.OpenFile(path, os.O_RDWR, 0) // a writer that never writes
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Follow(ctx, path, ParseLine, latency.Clock{}, func(latency.Sample) {}, nil, nil) }()
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Follow did not return while its read blocked")
	}
}

// A line over maxLine (a file with no newline, say) is skipped as one bad
// line and never held whole; the lines around it are read.
func TestFollowSkipsOverlongLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lat.log")
	long := strings.Repeat("x", 5*maxLine)
	os.WriteFile(path, []byte("10 1\n"+long+"\n20 2\n"+long), 0o644) // the last one never ends
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var got []latency.Sample
	var bad []error
	done := make(chan error, 1)
	go func() {
		done <- Follow(ctx, path, ParseLine, latency.Clock{}, func(s latency.Sample) { mu.Lock(); got = append(got, s); mu.Unlock() },
			func(err error) { mu.Lock(); bad = append(bad, err); mu.Unlock() }, nil)
	}()
	time.Sleep(300 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[1] != (latency.Sample{TsNs: 20, LatencyNs: 2}) || len(bad) != 1 || !strings.Contains(bad[0].Error(), "over 64 KiB") {
		t.Fatalf("samples %v, bad %v: want both samples and the first long line reported once", got, bad)
	}
}

// Bad lines are said once and counted: the count is what the report
// shows.
func TestFileSourceCountsSkippedLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lat.log")
	os.WriteFile(path, []byte("10 1\nbad\nworse line\n20 2\nthird bad\n"), 0o644)
	src, err := Config{File: path}.Open(Env{})
	if err != nil {
		t.Fatal(err)
	}
	run := runSource(src, 10)
	for i := 0; i < 2; i++ {
		select {
		case <-run.out:
		case <-time.After(3 * time.Second):
			t.Fatal("no sample")
		}
	}
	time.Sleep(200 * time.Millisecond)
	run.cancel()
	<-run.done
	warned := run.warnings()
	if len(warned) != 1 || !strings.Contains(warned[0], "latency file") || !reflect.DeepEqual(src.Skipped(), []latency.Skip{{Kind: latency.SkipMalformed, N: 3}}) {
		t.Fatalf("warned %v, skipped %v: want one warning and 3 malformed lines counted", warned, src.Skipped())
	}
}
