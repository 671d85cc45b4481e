package source

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/latency/exchange"
	"github.com/numatrace/numatrace/internal/monoclock"
)

func TestLatencyModeFlags(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string // in the error; "" for none
	}{
		{Config{Mode: ModeKernel}, ""},
		{Config{Mode: ModeKernel, Port: 6379}, ""},
		{Config{Mode: ModeOff}, ""},
		{Config{Mode: "sockets"}, `--latency wants kernel or off, got "sockets"`},
		{Config{Mode: ModeKernel, Uprobe: "/bin/true:main"}, "pick one latency source"},
		{Config{Mode: ModeOff, File: "-"}, "pick one latency source"},
		{Config{Port: 6379}, "--latency-port is a TCP port (1-65535) timed with --latency kernel"},
		{Config{Mode: ModeKernel, Port: 70000}, "--latency-port is a TCP port"},
	} {
		err := tc.cfg.Check()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// The kernel source is the default only when nothing else is named and
// --latency does not turn it off.
func TestDefaultKernel(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, ModeKernel},
		{Config{Mode: ModeOff}, ModeOff},
		{Config{File: "-"}, ModeAuto},
		{Config{PromURL: "http://x", PromMetric: "m"}, ModeAuto},
	} {
		c := tc.cfg
		c.DefaultKernel()
		if c.Mode != tc.want {
			t.Errorf("%+v: mode %q, want %q", tc.cfg, c.Mode, tc.want)
		}
	}
}

// Without the target's sockets found, the source does not open.
func TestKernelSourceNeedsItsEndpoints(t *testing.T) {
	if _, err := (Config{Mode: ModeKernel}).Open(Env{}); err == nil {
		t.Fatal("opened with no endpoints and no tracer")
	}
}

// FindInbound times this process's listener, and turns the source off
// with one notice for a port it does not listen on.
func TestFindInbound(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c := Config{Mode: ModeKernel}
	var said []string
	if err := c.FindInbound(os.Getpid(), func(s string) { said = append(said, s) }); err != nil {
		t.Fatal(err)
	}
	if c.Mode != ModeKernel || c.inbound == nil || c.inbound.Listeners[0].String() != l.Addr().String() || said != nil {
		t.Fatalf("mode %q, endpoints %v, said %q", c.Mode, c.inbound, said)
	}
	c = Config{Mode: ModeKernel, Port: 1}
	if err := c.FindInbound(os.Getpid(), func(s string) { said = append(said, s) }); err != nil {
		t.Fatal(err)
	}
	if c.Mode != ModeOff || len(said) != 1 || !strings.Contains(said[0], "no listener on port 1") {
		t.Fatalf("mode %q, said %q", c.Mode, said)
	}
}

// A target that exits as numatrace starts, before its sockets are read,
// is said to have done so (it read "find the target's TCP listeners: open
// 9698/fd: no such file or directory").
func TestFindInboundOfAnExitedTarget(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	c := Config{Mode: ModeKernel}
	err := c.FindInbound(cmd.Process.Pid, func(string) {})
	if want := fmt.Sprintf("pid %d exited before tracing began", cmd.Process.Pid); err == nil || err.Error() != want || !errors.Is(err, ErrTargetGone) {
		t.Fatalf("error %v, want %q", err, want)
	}
}

// burstTimer emits bursts of timed calls, each followed by drained, as the
// ring buffer's reader does, then waits to be closed.
type burstTimer struct {
	bursts []int
	closed chan struct{}
	once   sync.Once
}

func (b *burstTimer) Run(emit func(exchange.Record), drained func()) {
	n := uint64(0)
	for _, size := range b.bursts {
		for i := 0; i < size; i++ {
			n++
			emit(exchange.Record{EndNs: n, LatNs: 1000 + n, TID: 7})
		}
		drained()
	}
	<-b.closed
}

func (b *burstTimer) Close() error { b.once.Do(func() { close(b.closed) }); return nil }

// A request timer's samples go on in batches, one per burst the ring held
// (and no larger than maxBatch), in order and all of them: one channel
// hand-over per sample cost ~1 µs a request at 80,000 a second.
func TestTimedRequestsGoOnInBatches(t *testing.T) {
	bt := &burstTimer{bursts: []int{3, 1, maxBatch + 5}, closed: make(chan struct{})}
	r := runSource(&uprobeSource{timer: bt}, 16)
	var sizes []int
	var next uint64 = 1
	for len(sizes) < 4 {
		select {
		case rd := <-r.out:
			sizes = append(sizes, len(rd.Samples))
			for _, s := range rd.Samples {
				if s.TsNs != next || s.LatencyNs != 1000+next || s.TID != 7 {
					t.Fatalf("sample %+v, want the %dth", s, next)
				}
				next++
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("batches so far %v: the rest never came", sizes)
		}
	}
	r.cancel()
	<-r.done
	if want := []int{3, 1, maxBatch, 5}; !slices.Equal(sizes, want) {
		t.Errorf("batch sizes %v, want %v", sizes, want)
	}
}

// recordTimer emits bursts of records, each followed by drained, as the
// socket timer's reader does, then waits to be closed.
type recordTimer struct {
	bursts [][]exchange.Record
	closed chan struct{}
	once   sync.Once
}

func (r *recordTimer) Run(emit func(exchange.Record), drained func()) {
	for _, burst := range r.bursts {
		for _, rec := range burst {
			emit(rec)
		}
		drained()
	}
	<-r.closed
}

func (r *recordTimer) Close() error { r.once.Do(func() { close(r.closed) }); return nil }

// The kernel source makes the socket timer's records, one per write of a
// response, one sample per exchange: an exchange goes on once the next
// on its connection begins, as the ring's reader drains, and what was
// pipelined is counted.
func TestKernelSourceSendsOneSamplePerExchange(t *testing.T) {
	const ms = 1_000_000
	at := monoclock.Ns() + 10_000*ms // no exchange ripens as the test runs
	write := func(conn, start, end uint64) exchange.Record {
		return exchange.Record{EndNs: at + end*ms, LatNs: (end - start) * ms, TID: 7, Conn: conn}
	}
	second := write(1, 0, 3)
	second.Pipelined = true
	timer := &recordTimer{closed: make(chan struct{}), bursts: [][]exchange.Record{
		{write(1, 0, 1), second, write(2, 0, 2)}, // two writes of conn 1's first response
		{write(1, 10, 11), write(2, 20, 21)},     // each connection's next request
	}}
	src := &kernelSource{timer: timer, asm: exchange.NewAssembler()}
	r := runSource(src, 16)
	defer func() { r.cancel(); <-r.done }()
	select {
	case rd := <-r.out:
		want := []latency.Sample{{TsNs: at + 3*ms, LatencyNs: 3 * ms, TID: 7}, {TsNs: at + 2*ms, LatencyNs: 2 * ms, TID: 7}}
		if !slices.Equal(rd.Samples, want) {
			t.Errorf("samples %+v, want %+v: each connection's first exchange, to its last write", rd.Samples, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no samples")
	}
	if got, want := src.Skipped(), []latency.Skip{{Kind: latency.SkipPipelined, N: 1}}; !slices.Equal(got, want) {
		t.Errorf("skipped %v, want %v", got, want)
	}
}

// The socket source counts what it timed other than as the server saw
// it, each kind once, and says none it did not do.
func TestKernelSourceSaysWhatItEstimated(t *testing.T) {
	for _, tc := range []struct {
		counts exchange.Counts
		want   []latency.Skip
	}{
		{exchange.Counts{}, nil},
		{exchange.Counts{Pipelined: 2, DueWaits: 31}, []latency.Skip{{Kind: latency.SkipPipelined, N: 2}, {Kind: latency.SkipDueWaits, N: 31}}},
	} {
		if got := estimated(tc.counts); !slices.Equal(got, tc.want) {
			t.Errorf("skipped %v, want %v", got, tc.want)
		}
	}
	a := latency.Account{Samples: 1000}
	a.Skipped = []latency.Skip{{Kind: latency.SkipDueWaits, N: 31}}
	if p := a.Problems(); len(p) != 1 || !strings.Contains(p[0].Text, "31 requests on paced connections reached the socket late") {
		t.Errorf("problems %+v", p)
	}
}

// closingTimer hands its records as it closes: a socket timer's held
// exchanges, whole once the timer closes, come then, after the run ended.
type closingTimer struct {
	n      int
	closed chan struct{}
	once   sync.Once
}

func (c *closingTimer) Run(emit func(exchange.Record), drained func()) {
	<-c.closed
	for i := 1; i <= c.n; i++ {
		emit(exchange.Record{EndNs: uint64(i), LatNs: 1000, TID: 7})
		drained()
	}
}

func (c *closingTimer) Close() error { c.once.Do(func() { close(c.closed) }); return nil }

// What a timer hands on as it closes reaches the session, which drains
// the channel once the source has returned: every time, not when a
// select between the channel and the ended run happened to pick the
// channel (half the time, for each batch).
func TestTheLastRecordsOfATimerAreKept(t *testing.T) {
	for run := range 50 {
		ct := &closingTimer{n: 8, closed: make(chan struct{})}
		r := runSource(&uprobeSource{timer: ct}, 64)
		r.cancel()
		if err := <-r.done; err != nil {
			t.Fatal(err)
		}
		got := 0
		for len(r.out) > 0 {
			got += len((<-r.out).Samples)
		}
		if got != ct.n {
			t.Fatalf("run %d: %d of the %d records handed on as the timer closed reached the channel", run, got, ct.n)
		}
	}
}
