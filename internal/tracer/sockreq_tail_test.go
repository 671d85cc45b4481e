//go:build linux

package tracer

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/testutil"
)

// A request that arrives while the server's write of the reply before it
// has not yet returned is the next exchange, not a pipelined part of the
// last one. On loopback a client on another CPU can have its whole reply,
// and send again, in the microseconds before the server's write call
// returns; a closed-loop client does it whenever the server's thread is
// held up there, and each such pair was timed as one long exchange.
//
// Made here deterministic: the server writes a reply bigger than the
// socket buffers in one blocking write; the client reads its first byte,
// sends its next request 50 ms later while that write is still blocked,
// and drains the rest 100 ms after that. The first exchange ends by the
// second's arrival (at the last send of its reply before it), and the
// second runs to its own reply, which waited for the first write (about
// 100 ms).
func TestNextRequestDuringTheLastReplysWrite(t *testing.T) {
	t.Run("sock tracepoints", func(t *testing.T) { testNextRequestDuringWrite(t, false) })
	t.Run("syscalls", func(t *testing.T) { testNextRequestDuringWrite(t, true) })
}

func testNextRequestDuringWrite(t *testing.T, syscalls bool) {
	testutil.RequireRoot(t)
	const big = 4 << 20
	lfd, port := blockingListener(t)
	served := make(chan error, 1)
	go serveBigThenSmall(lfd, big, served)

	lp := timeSockets(t, unix.Getpid(), port, syscalls)
	var mu sync.Mutex
	var lats []time.Duration
	asm, done := assemble(lp, func(end, lat uint64, tid uint32, st *stall.RequestStall) {
		mu.Lock()
		lats = append(lats, time.Duration(lat))
		mu.Unlock()
	})

	fd := dialSmallBuffer(t, port)
	mustWrite(t, fd, "a")
	one := make([]byte, 1)
	if _, err := unix.Read(fd, one); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	mustWrite(t, fd, "b") // the server's write of reply a is still blocked
	time.Sleep(100 * time.Millisecond)
	buf := make([]byte, 64<<10)
	for left := big - 1 + 2; left > 0; { // the rest of reply a, then "ok"
		n, err := unix.Read(fd, buf)
		if err != nil || n == 0 {
			t.Fatalf("read: %d, %v with %d bytes to come", n, err, left)
		}
		left -= n
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	unix.Close(fd) // the close hands on the last exchange
	time.Sleep(3 * PollInterval)
	lp.Close()
	<-done

	mu.Lock()
	defer mu.Unlock()
	if len(lats) != 2 {
		t.Fatalf("%d exchanges timed (%v), want 2: a, ended by b's arrival, and b", len(lats), lats)
	}
	t.Logf("exchanges %v", lats)
	if lats[0] == 0 || lats[0] >= 100*time.Millisecond {
		t.Errorf("exchange a took %v, want to end by b's arrival, 50 ms after its reply began", lats[0])
	}
	if lats[1] < 100*time.Millisecond || lats[1] >= 500*time.Millisecond {
		t.Errorf("exchange b took %v, want 100 ms to 500 ms (its reply waited for a's write)", lats[1])
	}
	if p := asm.Counts().Pipelined; p != 0 {
		t.Errorf("%d exchanges said pipelined, want none", p)
	}
}

// blockingListener listens on a blocking TCP socket on 127.0.0.1.
func blockingListener(t *testing.T) (fd, port int) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 1); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fd, sa.(*unix.SockaddrInet4).Port
}

// serveBigThenSmall accepts one connection on a thread of its own and
// answers its first 1-byte request with big bytes in one blocking write
// (a small send buffer: it returns only as the client drains it), its
// second with "ok".
func serveBigThenSmall(lfd, big int, served chan<- error) {
	runtime.LockOSThread()
	cfd, _, err := unix.Accept(lfd)
	if err != nil {
		served <- err
		return
	}
	defer unix.Close(cfd)
	unix.SetsockoptInt(cfd, unix.SOL_SOCKET, unix.SO_SNDBUF, 16<<10)
	req := make([]byte, 1)
	for _, reply := range [][]byte{make([]byte, big), []byte("ok")} {
		if _, err := unix.Read(cfd, req); err != nil {
			served <- err
			return
		}
		for rest := reply; len(rest) > 0; {
			n, err := unix.Write(cfd, rest)
			if err != nil {
				served <- err
				return
			}
			rest = rest[n:]
		}
	}
	served <- nil
}

// dialSmallBuffer connects a blocking socket with a small receive buffer
// to 127.0.0.1:port.
func dialSmallBuffer(t *testing.T, port int) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 16<<10)
	unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	return fd
}

func mustWrite(t *testing.T, fd int, s string) {
	t.Helper()
	if _, err := unix.Write(fd, []byte(s)); err != nil {
		t.Fatal(err)
	}
}

// A connection accepted before attach whose server has not touched it
// since (frozen, in the incident the user attached for) has its next
// request timed from its arrival: the server sleeps 100 ms before it
// reads, and the exchange is timed at 100 ms or more, not dropped as
// begun before the timer knew the connection.
func TestRequestOnAConnectionAcceptedBeforeAttach(t *testing.T) {
	testutil.RequireRoot(t)
	lfd, port := blockingListener(t)
	attached, served := make(chan struct{}), make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		cfd, _, err := unix.Accept(lfd)
		if err != nil {
			served <- err
			return
		}
		defer unix.Close(cfd)
		req := make([]byte, 1)
		for i := 0; i < 2; i++ {
			if i == 1 {
				<-attached
				time.Sleep(100 * time.Millisecond) // frozen as the request arrives
			}
			if _, err := unix.Read(cfd, req); err != nil {
				served <- err
				return
			}
			if _, err := unix.Write(cfd, []byte("k")); err != nil {
				served <- err
				return
			}
		}
		served <- nil
	}()
	fd := dialSmallBuffer(t, port)
	one := make([]byte, 1)
	mustWrite(t, fd, "a") // served before attach
	if _, err := unix.Read(fd, one); err != nil {
		t.Fatal(err)
	}
	lp := timeSockets(t, unix.Getpid(), port, false)
	var mu sync.Mutex
	var lats []time.Duration
	_, done := assemble(lp, func(end, lat uint64, tid uint32, st *stall.RequestStall) {
		mu.Lock()
		lats = append(lats, time.Duration(lat))
		mu.Unlock()
	})
	close(attached)
	mustWrite(t, fd, "b")
	if _, err := unix.Read(fd, one); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * PollInterval)
	lp.Close()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(lats) != 1 || lats[0] < 100*time.Millisecond {
		t.Fatalf("exchanges timed %v, want one of 100 ms or more (from b's arrival)", lats)
	}
}
