package latency

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

	"github.com/numatrace/numatrace/internal/stall"
)

func TestSummarizeNearestRank(t *testing.T) {
	var v []uint64
	for i := uint64(1); i <= 100; i++ {
		v = append(v, i*1000)
	}
	s := Summarize(3, v)
	if s.Count != 100 || s.P50Ns != 50000 || s.P99Ns != 99000 || s.MaxNs != 100000 || s.Index != 3 {
		t.Fatalf("%+v", s)
	}
	if s := Summarize(0, []uint64{7}); s.P50Ns != 7 || s.P99Ns != 7 {
		t.Fatalf("%+v", s)
	}
}

func TestWindows(t *testing.T) {
	w := NewWindows(1000, 100, 0)
	for _, s := range []Sample{{TsNs: 1000, LatencyNs: 5}, {TsNs: 1099, LatencyNs: 7}, {TsNs: 1100, LatencyNs: 9}, {TsNs: 999, LatencyNs: 1}, {TsNs: 1350, LatencyNs: 3}} {
		w.Add(s)
	}
	if a := w.Account(); a.Before != 1 || a.OutsideMinNs != 999 {
		t.Fatalf("before %d at %d", a.Before, a.OutsideMinNs)
	}
	if s := w.Take(0); s.Count != 2 || s.MaxNs != 7 {
		t.Fatalf("window 0 %+v", s)
	}
	if w.Take(0) != nil {
		t.Fatal("window 0 taken twice")
	}
	w.Add(Sample{TsNs: 1050, LatencyNs: 4}) // too late for window 0
	if a := w.Account(); a.Late != 1 || a.Samples != 2 {
		t.Fatalf("late %d, samples %d", a.Late, a.Samples)
	}
	w.Take(1)
	w.Drop() // window 3's sample, after the last window taken
	if a := w.Account(); a.Samples != 3 || a.After != 1 || a.OutsideMinNs != 999 || a.OutsideMaxNs != 1350 {
		t.Fatalf("account %+v", a)
	}
}

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

func TestClockConvertsEpochTimes(t *testing.T) {
	c := Clock{WallNs: 1_700_000_000_000_000_000, MonoNs: 5_000_000_000}
	if got := c.Mono(1_700_000_000_500_000_000); got != 5_500_000_000 {
		t.Fatalf("epoch ts → %d", got)
	}
	if got := c.Mono(123); got != 123 {
		t.Fatalf("monotonic ts → %d", got)
	}
}

// Follow picks up lines appended after it started, like tail -f.
func TestFollowGrowingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lat.log")
	os.WriteFile(path, []byte("# from the load generator\n10 1\n{\"ts_ns\":20,\"latency_ns\":2}\nbad line\n"), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var got []Sample
	var bad int
	done := make(chan error, 1)
	go func() {
		done <- Follow(ctx, path, Clock{}, func(s Sample) { mu.Lock(); got = append(got, s); mu.Unlock() },
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
	if len(got) != 3 || got[2] != (Sample{TsNs: 30, LatencyNs: 3}) || bad != 1 {
		t.Fatalf("samples %v bad %d", got, bad)
	}
}

// A source that blocks (a FIFO no one writes to, like a quiet stdin) does
// not hold up the end of a trace.
func TestFollowReturnsWhileAReadBlocks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skip(err)
	}
	w, err := os.OpenFile(path, os.O_RDWR, 0) // a writer that never writes
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Follow(ctx, path, Clock{}, func(Sample) {}, nil, nil) }()
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

// A window's requests timed in the kernel: the slow ones are those over
// the SLO (or, without one, at or above the window's p99), and the stall
// time inside them is summed per cause.
func TestSummarizeSamplesBreaksSlowRequestsDown(t *testing.T) {
	var v []Sample
	for i := uint64(1); i <= 100; i++ {
		st := &stall.RequestStall{}
		if i > 95 { // the five slowest froze in memcg reclaim
			st.ByCause[stall.MemcgReclaim] = 8e6
			st.FreezeNs = 8e6
		}
		v = append(v, Sample{TsNs: i, LatencyNs: i * 1e5, TID: uint32(10 + i%2), Stall: st})
	}
	v = append(v, Sample{TsNs: 101, LatencyNs: 1}) // from a source that knows no stalls
	st := SummarizeSamples(4, v, 9.5e6)
	r := st.Requests
	if st.Count != 101 || r == nil || r.Slow != 5 || r.SlowNs != (96+97+98+99+100)*1e5 {
		t.Fatalf("%+v %+v", st, r)
	}
	if r.SlowStallNs[stall.MemcgReclaim] != 40e6 || r.FreezeNs != 40e6 || len(r.TIDs) != 2 || r.TIDs[0] != 10 {
		t.Errorf("%+v", r)
	}
	// Just over the 9.5 ms SLO (by 0.1 to 0.5 ms), an 8 ms stall accounts
	// for no more than each request's own excess.
	if got := r.SlowExcessStallNs[stall.MemcgReclaim]; got != 1.5e6 {
		t.Errorf("stall within the excess %d, want 1.5 ms", got)
	}
	if st := SummarizeSamples(4, v, 0); st.Requests.Slow != 2 || st.P999Ns != 100*1e5 {
		t.Errorf("without an SLO: %d slow (p99 %d), p999 %d", st.Requests.Slow, st.P99Ns, st.P999Ns)
	}
	if st := SummarizeSamples(4, []Sample{{TsNs: 1, LatencyNs: 5}}, 0); st.Requests != nil {
		t.Errorf("a source without stalls gave %+v", st.Requests)
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
	var got []Sample
	var bad []error
	done := make(chan error, 1)
	go func() {
		done <- Follow(ctx, path, Clock{}, func(s Sample) { mu.Lock(); got = append(got, s); mu.Unlock() },
			func(err error) { mu.Lock(); bad = append(bad, err); mu.Unlock() }, nil)
	}()
	time.Sleep(300 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[1] != (Sample{TsNs: 20, LatencyNs: 2}) || len(bad) != 1 || !strings.Contains(bad[0].Error(), "over 64 KiB") {
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
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan Reading, 10)
	var mu sync.Mutex
	var warned []error
	done := make(chan error, 1)
	go func() {
		done <- src.Run(ctx, out, func(err error) { mu.Lock(); warned = append(warned, err); mu.Unlock() })
	}()
	for i := 0; i < 2; i++ {
		select {
		case <-out:
		case <-time.After(3 * time.Second):
			t.Fatal("no sample")
		}
	}
	time.Sleep(200 * time.Millisecond)
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(warned) != 1 || !strings.Contains(warned[0].Error(), "latency file") || !reflect.DeepEqual(src.Skipped(), []Skip{{"malformed lines", 3}}) {
		t.Fatalf("warned %v, skipped %v: want one warning and 3 malformed lines counted", warned, src.Skipped())
	}
}
