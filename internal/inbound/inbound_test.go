package inbound

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"testing"
	"testing/fstest"

	"github.com/numatrace/numatrace/internal/testutil"
)

// This process's own listeners, on IPv4 and IPv6, and the connection
// accepted on one: the dialling side's ephemeral port is not inbound.
func TestFindsThisProcesssListenersAndConnections(t *testing.T) {
	l4, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l4.Close()
	l6, err := net.Listen("tcp6", "[::1]:0")
	testutil.RequireFeature(t, err == nil, fmt.Sprintf("no IPv6 loopback: %v", err))
	defer l6.Close()
	c, err := net.Dial("tcp4", l4.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := l4.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e, err := Find(os.DirFS("/proc"), os.Getpid(), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.AddrPort{l4.Addr().(*net.TCPAddr).AddrPort(), l6.Addr().(*net.TCPAddr).AddrPort()}
	if !slices.Equal(e.Listeners, want) || e.Conns != 1 {
		t.Fatalf("found %v, %d connections; want %v, 1", e.Listeners, e.Conns, want)
	}
	only, err := Find(os.DirFS("/proc"), os.Getpid(), l6.Addr().(*net.TCPAddr).AddrPort().Port())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(only.Listeners, want[1:]) || only.Conns != 0 {
		t.Fatalf("with the IPv6 port only: %v, %d connections", only.Listeners, only.Conns)
	}
}

// A listener of another process in the same table is not this one's,
// and the line says what is timed.
func TestOnlyTheProcesssOwnSockets(t *testing.T) {
	proc := fstest.MapFS{
		"7/fd/3": {Data: []byte("socket:[100]"), Mode: 0o777 | os.ModeSymlink},
		"7/fd/4": {Data: []byte("socket:[102]"), Mode: 0o777 | os.ModeSymlink},
		"7/fd/5": {Data: []byte("/dev/null"), Mode: 0o777 | os.ModeSymlink},
		"7/net/tcp": {Data: []byte(`  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:18EB 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 100 1 0 100 0 0 10 0
   1: 00000000:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 101 1 0 100 0 0 10 0
   2: 0100007F:18EB 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 102 1 0 100 0 0 10 0
`)},
	}
	e, err := Find(proc, 7, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.String(); got != "127.0.0.1:6379, 1 connection" {
		t.Fatalf("got %q", got)
	}
	if !slices.Equal(e.Ports(), []uint16{6379}) {
		t.Fatalf("ports %v", e.Ports())
	}
}
