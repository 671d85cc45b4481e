//go:build linux

package tracer

import (
	"sync"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/testutil"
	"github.com/numatrace/numatrace/internal/topology"
)

// A real redis-server, timed on its sockets with no help from it: every
// request of every connection (opened after attach, so its first is timed
// too) is one exchange, no longer than the client saw it, served by the
// main thread, with its stall breakdown.
func TestSocketExchangesOfARealRedis(t *testing.T) {
	t.Run("sock tracepoints", func(t *testing.T) { testSocketExchanges(t, false) })
	t.Run("syscalls", func(t *testing.T) { testSocketExchanges(t, true) })
}

// testSocketExchanges times redis through the socket layer's tracepoints,
// or through the syscalls as before 6.3.
func testSocketExchanges(t *testing.T, syscalls bool) {
	testutil.RequireRoot(t)
	r := testutil.StartRedis(t)
	topo, err := topology.Read("/sys")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Open(Config{Filter: FilterPIDs, PIDs: []uint32{uint32(r.Cmd.Process.Pid)}, Topology: topo, RequestStalls: true,
		sockreqSyscalls: syscalls})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	lp, err := tr.AttachSockets([]uint16{uint16(r.Port)})
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		lat   uint64
		tid   uint32
		stall bool
	}
	var mu sync.Mutex
	var samples []got
	done := make(chan struct{})
	go func() {
		defer close(done)
		lp.Run(func(end, lat uint64, tid uint32, st *stall.RequestStall) {
			mu.Lock()
			samples = append(samples, got{lat, tid, st != nil})
			mu.Unlock()
		}, nil)
	}()
	const conns, perConn = 3, 50
	var slowest time.Duration
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
			time.Sleep(time.Millisecond) // no pipelining: one request at a time
		}
		c.Close() // the close emits its last exchange
	}
	time.Sleep(3 * PollInterval)
	lp.Close()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(samples) != conns*perConn {
		t.Fatalf("%d exchanges timed, want %d", len(samples), conns*perConn)
	}
	bare := 0
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
	}
	// Only a first request that arrived before the accept may lack it: its
	// serving thread was not known yet.
	if bare > conns {
		t.Errorf("%d exchanges without their serving thread's stall breakdown, want at most %d", bare, conns)
	}
	if p := lp.Pipelined(); p != 0 {
		t.Errorf("%d exchanges said pipelined, want none", p)
	}
}
