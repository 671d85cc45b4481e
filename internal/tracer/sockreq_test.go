//go:build linux

package tracer

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/latency/exchange"
	"github.com/numatrace/numatrace/internal/monoclock"
	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/testutil"
	"github.com/numatrace/numatrace/internal/topology"
	"github.com/prometheus/procfs"
)

// A real redis-server, timed on its sockets with no help from it: every
// request of every connection (opened after attach, so its first is timed
// too) is one exchange, no longer than the client saw it, served by the
// main thread, with its stall breakdown and its budget's counters, read
// from the serving thread's task as the request arrives in the softirq:
// redis is on a CPU for each. With --request-times=false, none has them.
func TestSocketExchangesOfARealRedis(t *testing.T) {
	t.Run("sock tracepoints", func(t *testing.T) { testSocketExchanges(t, false, true) })
	t.Run("syscalls", func(t *testing.T) { testSocketExchanges(t, true, true) })
	t.Run("without the budget", func(t *testing.T) { testSocketExchanges(t, false, false) })
}

// testSocketExchanges times redis through the socket layer's tracepoints,
// or through the syscalls as before 6.3; with or without the budget's
// counters.
func testSocketExchanges(t *testing.T, syscalls, times bool) {
	t.Helper()
	testutil.RequireRoot(t)
	r := testutil.StartRedis(t)
	lp := timeSocketsWith(t, r.Cmd.Process.Pid, r.Port, syscalls, times)
	type got struct {
		lat   uint64
		tid   uint32
		stall bool
		times bool
		cpuNs uint64
	}
	var mu sync.Mutex
	var samples []got
	pipelined := 0
	// The timer's own records, not the exchanges the engine files: redis
	// answers each request in one write, whose record is its exchange.
	// The engine counts a request on a connection that looks paced from
	// when it was due (exchange/pacing.go): this client, one request at
	// a time with a millisecond between, looked paced to it under load
	// (its sleeps ending on the scheduler's ticks): two runs in 400 had
	// an exchange longer than the client saw, or with no time on a CPU
	// of its own (that of the one before it, which had none known).
	done := make(chan struct{})
	go func() {
		defer close(done)
		lp.Run(func(r exchange.Record) {
			mu.Lock()
			defer mu.Unlock()
			g := got{lat: r.LatNs, tid: r.TID, stall: r.Stall != nil}
			if r.Stall != nil && r.Stall.HasTimes {
				g.times, g.cpuNs = true, r.Stall.Times.Ns[stall.TimeCPU]
			}
			if r.Pipelined {
				pipelined++
			}
			samples = append(samples, g)
		}, nil)
	}()
	const conns, perConn = 3, 50
	var slowest time.Duration
	cpu0, steal0 := threadCPU(t, r.Cmd.Process.Pid), stolen(t)
	for i := 0; i < conns; i++ {
		c, err := r.Dial()
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < perConn; j++ {
			t0 := time.Now()
			if _, err := c.Do("SET", "k", "v"); err != nil {
				t.Fatal(err)
			}
			slowest = max(slowest, time.Since(t0))
			time.Sleep(time.Millisecond) // redis sleeps between requests
		}
		c.Close()
	}
	time.Sleep(3 * PollInterval)
	cpu, steal := threadCPU(t, r.Cmd.Process.Pid)-cpu0, stolen(t)-steal0
	lp.Close()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(samples) != conns*perConn {
		t.Fatalf("%d exchanges timed, want %d", len(samples), conns*perConn)
	}
	bare, untimed, timedWithout := 0, 0, 0
	for _, s := range samples {
		if s.lat == 0 || time.Duration(s.lat) > slowest {
			t.Fatalf("an exchange of %v: outside (0, %v], the client's slowest", time.Duration(s.lat), slowest)
		}
		if s.tid != uint32(r.Cmd.Process.Pid) {
			t.Fatalf("an exchange served by thread %d, not redis's main thread %d", s.tid, r.Cmd.Process.Pid)
		}
		if !s.stall {
			bare++
		}
		switch {
		case times && (!s.times || s.cpuNs == 0):
			untimed++
		case !times && s.times:
			timedWithout++
		}
	}
	// Only a first request that arrived before the accept may lack it: its
	// serving thread was not known yet.
	if bare > conns {
		t.Errorf("%d exchanges without their serving thread's stall breakdown, want at most %d", bare, conns)
	}
	// The same for its counters, and its time on a CPU in each: redis's
	// main thread is marked as serving as its first exchange ends.
	if untimed > conns {
		t.Errorf("%d exchanges without their serving thread's time on a CPU, want at most %d", untimed, conns)
	}
	// Read while redis runs, its time on a CPU is its last switch-in's
	// plus the clock since, if that switch-in was this run's (the run's
	// count, sched_info.pcount, says): never more than the kernel
	// counted for it, but for what the host stole in that run, which the
	// clock counts and the kernel does not (/proc/stat's, in whole
	// ticks). Before the run's count was checked, one run in about twenty
	// read 1 to 5 ms more, the time redis slept between two requests.
	var inExchanges uint64
	for _, s := range samples {
		inExchanges += s.cpuNs
	}
	if time.Duration(inExchanges) > cpu+steal {
		t.Errorf("the exchanges were %v on a CPU, more than redis's main thread was in all (%v, schedstat, and %v the host stole)",
			time.Duration(inExchanges), cpu, steal)
	}
	if timedWithout > 0 {
		t.Errorf("%d exchanges read the serving thread's counters with --request-times=false", timedWithout)
	}
	if pipelined != 0 {
		t.Errorf("%d exchanges said pipelined, want none", pipelined)
	}
}

// A request sent before the reply to the one before it (pipelining) makes
// the two one exchange; the timer says so, once per such exchange: a
// BLPOP that blocks 50 ms in redis, and a PING sent 10 ms into it, after
// redis read the BLPOP and before it replied. A request in two segments,
// the server reading the first before the second arrives, cannot be told
// from it.
func TestPipelinedRequestsAreReported(t *testing.T) {
	t.Run("sock tracepoints", func(t *testing.T) { testPipelined(t, false) })
	t.Run("syscalls", func(t *testing.T) { testPipelined(t, true) })
}

func testPipelined(t *testing.T, syscalls bool) {
	r, lp := timeRedisSockets(t, syscalls)
	var mu sync.Mutex
	timed := 0
	asm, done := assemble(lp, func(end, lat uint64, tid uint32, st *stall.RequestStall) {
		mu.Lock()
		timed++
		mu.Unlock()
	})
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", r.Port))
	if err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(c)
	reply := func(want string) {
		t.Helper()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, err := rd.ReadString('\n')
		if err != nil || line != want {
			t.Fatalf("reply %q (%v), want %q", line, err, want)
		}
	}
	const pipelined = 3
	for i := 0; i < pipelined; i++ {
		io.WriteString(c, "BLPOP numatrace-none 0.05\r\n")
		time.Sleep(10 * time.Millisecond)
		io.WriteString(c, "PING\r\n")
		reply("*-1\r\n")
		reply("+PONG\r\n")
		time.Sleep(5 * time.Millisecond)
	}
	// A command in two segments: the first is read, and is no whole
	// command yet; the rest completes it.
	io.WriteString(c, "PI")
	time.Sleep(10 * time.Millisecond)
	io.WriteString(c, "NG\r\n")
	reply("+PONG\r\n")
	c.Close()
	time.Sleep(3 * PollInterval)
	lp.Close()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if timed != pipelined+1 {
		t.Errorf("%d exchanges timed, want %d (each BLPOP with its PING, and the split PING)", timed, pipelined+1)
	}
	// The split PING is said pipelined too: redis read its first half
	// before the rest arrived, which the socket cannot tell from a second
	// request (the README says so).
	if p := asm.Counts().Pipelined; p != pipelined+1 {
		t.Errorf("%d exchanges said pipelined, want %d (the BLPOPs and the split PING)", p, pipelined+1)
	}
}

// A connection that stays open and is idle between requests (a keep-alive
// client, a health check) has each exchange handed on soon after its
// reply, the last one too, not only when the next request arrives or the
// connection closes: that would file each exchange late, after its window
// closed, and lose the last. A response of several writes is one exchange.
func TestIdleConnectionsExchangesGoOnTime(t *testing.T) {
	t.Run("sock tracepoints", func(t *testing.T) { testIdleExchanges(t, false) })
	t.Run("syscalls", func(t *testing.T) { testIdleExchanges(t, true) })
}

func testIdleExchanges(t *testing.T, syscalls bool) {
	r, lp := timeRedisSockets(t, syscalls)
	var mu sync.Mutex
	var arrived []time.Time
	asm, done := assemble(lp, func(end, lat uint64, tid uint32, st *stall.RequestStall) {
		mu.Lock()
		arrived = append(arrived, time.Now())
		mu.Unlock()
	})
	c, err := r.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A reply of 300 KB: redis writes it in more than one write.
	big := strings.Repeat("x", 300<<10)
	if _, err := c.Do("SET", "big", big); err != nil {
		t.Fatal(err)
	}
	const requests = 3
	var replied []time.Time
	for i := 0; i < requests; i++ {
		time.Sleep(600 * time.Millisecond) // idle, longer than the engine's Grace
		if _, err := c.Do("GET", "big"); err != nil {
			t.Fatal(err)
		}
		replied = append(replied, time.Now())
	}
	time.Sleep(600 * time.Millisecond) // the connection stays open
	mu.Lock()
	got := append([]time.Time(nil), arrived...)
	mu.Unlock()
	lp.Close()
	<-done
	if len(got) != requests+1 {
		t.Fatalf("%d exchanges handed on while the connection was open, want %d (the SET and each GET)", len(got), requests+1)
	}
	for i, at := range got[1:] {
		if d := at.Sub(replied[i]); d > 200*time.Millisecond {
			t.Errorf("GET %d handed on %v after its reply, want within 200 ms (the engine files a sample only within its Grace of 250 ms)", i+1, d)
		}
	}
	if n := asm.Counts().LateWrites; n != 0 {
		t.Errorf("%d late writes, want none (each reply is written back to back)", n)
	}
}

// timeRedisSockets starts redis-server and times its sockets, through the
// socket layer's tracepoints or (syscalls) as before 6.3; the tracer
// closes as the test ends.
func timeRedisSockets(t *testing.T, syscalls bool) (*testutil.Redis, *SocketTimer) {
	t.Helper()
	testutil.RequireRoot(t)
	r := testutil.StartRedis(t)
	return r, timeSockets(t, r.Cmd.Process.Pid, r.Port, syscalls)
}

// threadCPU is thread tid's time on a CPU so far (/proc schedstat).
func threadCPU(t *testing.T, tid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/schedstat", tid, tid))
	if err != nil {
		t.Fatal(err)
	}
	var ns int64
	if _, err := fmt.Sscan(string(b), &ns); err != nil {
		t.Fatalf("schedstat %q: %v", b, err)
	}
	return time.Duration(ns)
}

// stolen is the time the host has taken the machine's CPUs from it so
// far, all CPUs' (/proc/stat's steal, in whole ticks).
func stolen(t *testing.T) time.Duration {
	t.Helper()
	st, err := procfs.NewDefaultFS()
	if err != nil {
		t.Fatal(err)
	}
	s, err := st.Stat()
	if err != nil {
		t.Fatalf("/proc/stat: %v", err)
	}
	return time.Duration(s.CPUTotal.Steal * float64(time.Second))
}

// timeSockets times the sockets of pid's port, through the socket
// layer's tracepoints or (syscalls) as before 6.3; the tracer closes as
// the test ends.
func timeSockets(t *testing.T, pid, port int, syscalls bool) *SocketTimer {
	t.Helper()
	return timeSocketsWith(t, pid, port, syscalls, true)
}

// timeSocketsWith is timeSockets, with (times) or without the budget's
// counters.
func timeSocketsWith(t *testing.T, pid, port int, syscalls, times bool) *SocketTimer {
	t.Helper()
	topo, err := topology.Read("/sys")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Open(Config{Filter: FilterPIDs, PIDs: []uint32{uint32(pid)}, Topology: topo, RequestStalls: true, RequestTimes: times, RunqWait: true,
		sockreqSyscalls: syscalls})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	lp, err := tr.AttachSockets([]uint16{uint16(port)})
	if err != nil {
		t.Fatal(err)
	}
	return lp
}

// assemble reads lp as the kernel source does: its per-write records
// made one per exchange, each handed to emit, until lp is closed; done
// closes then, and asm has counted what it did not time as the server
// saw it.
func assemble(lp *SocketTimer, emit func(end, lat uint64, tid uint32, st *stall.RequestStall)) (asm *exchange.Assembler, done <-chan struct{}) {
	asm = exchange.NewAssembler()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		asm.Assemble(lp.Run, monoclock.Ns, func(r exchange.Record) { emit(r.EndNs, r.LatNs, r.TID, r.Stall) }, nil)
	}()
	return asm, closed
}
