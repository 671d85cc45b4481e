package main

import (
	be "encoding/binary"
	"net"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// wireCapture records when each TCP segment with data to or from a
// server's port left on the loopback device, for the other end's socket,
// as the kernel timestamped it (a packet socket, SO_TIMESTAMPNS): for
// a client that cannot timestamp its own writes and reads (pgbench), when
// its request reached the server and its reply was there to read, without
// the client's own delays before its write and after the reply came.
type wireCapture struct {
	fd   int
	done chan wireTimes
	stop chan struct{}
}

// wireTimes are a capture's data segments by the client's port.
type wireTimes map[uint16][]segment

// segment is one TCP segment with data: when it arrived, whether it is
// the server's, and its sequence number, length and acknowledgement.
type segment struct {
	at       time.Time
	reply    bool
	seq, ack uint32
	len      uint32
}

func captureWire(t *testing.T, port int) *wireCapture {
	t.Helper()
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	proto := htons(unix.ETH_P_ALL) // a protocol's own sees no outgoing copies
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM, int(proto))
	if err != nil {
		t.Fatalf("packet socket: %v", err)
	}
	for _, o := range [][2]int{{unix.SO_TIMESTAMPNS, 1}, {unix.SO_RCVBUF, 8 << 20}} {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[0], o[1]); err != nil {
			unix.Close(fd)
			t.Fatal(err)
		}
	}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100_000})
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: lo.Index}); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	c := &wireCapture{fd: fd, done: make(chan wireTimes, 1), stop: make(chan struct{})}
	go c.run(uint16(port))
	return c
}

func (c *wireCapture) run(port uint16) {
	runtime.LockOSThread()
	out := wireTimes{}
	defer func() { c.done <- out }()
	buf, oob := make([]byte, 128), make([]byte, unix.CmsgSpace(int(unsafe.Sizeof(unix.Timespec{}))))
	for {
		select {
		case <-c.stop:
			return
		default:
		}
		_, oobn, _, from, err := unix.Recvmsg(c.fd, buf, oob, 0)
		if err != nil {
			continue // the receive timeout: look at stop
		}
		// Each loopback segment is seen leaving and arriving: as it
		// leaves, stamped there and then (dev_queue_xmit_nit), on its
		// way to the other socket in the same call. The arriving copy
		// may carry TCP's own departure time instead, and was seen
		// stamped after the reply to it.
		ll, ok := from.(*unix.SockaddrLinklayer)
		if !ok || ll.Pkttype != unix.PACKET_OUTGOING || ll.Protocol != htons(unix.ETH_P_IP) {
			continue
		}
		client, seg, ok := dataSegment(buf, port)
		if !ok {
			continue
		}
		if at, err := receiveTime(oob[:oobn]); err == nil {
			seg.at = at
			out[client] = append(out[client], seg)
		}
	}
}

// dataSegment says whether an IPv4 packet is a TCP segment with data to
// or from port, and the client's port.
func dataSegment(p []byte, port uint16) (client uint16, seg segment, ok bool) {
	if len(p) < 20 || p[0]>>4 != 4 || p[9] != unix.IPPROTO_TCP {
		return 0, seg, false
	}
	ihl := int(p[0]&0x0f) * 4
	if len(p) < ihl+13 {
		return 0, seg, false
	}
	tcp := p[ihl:]
	src, dst := be.BigEndian.Uint16(tcp), be.BigEndian.Uint16(tcp[2:])
	total, doff := int(be.BigEndian.Uint16(p[2:])), int(tcp[12]>>4)*4
	seg = segment{seq: be.BigEndian.Uint32(tcp[4:]), ack: be.BigEndian.Uint32(tcp[8:]), len: uint32(total - ihl - doff)}
	switch {
	case total <= ihl+doff:
		return 0, seg, false
	case src == port:
		seg.reply = true
		return dst, seg, true
	case dst == port:
		return src, seg, true
	}
	return 0, seg, false
}

// exchanges are a connection's request/response exchanges on the wire,
// in order: from a request's first segment to the last reply segment that
// acknowledges all of it, and no more (so it was sent before the next
// request came). Paired by sequence numbers, not by time, so that neither
// a request of several segments nor two timestamps out of order can split
// or merge one. A request with no reply (the client's goodbye) is none.
func exchanges(segs []segment) (starts, ends []time.Time) {
	var requests []segment
	answered := map[uint32]time.Time{} // by the request bytes acknowledged
	for _, s := range segs {
		if !s.reply {
			requests = append(requests, s)
		} else if at, ok := answered[s.ack]; !ok || s.at.After(at) {
			answered[s.ack] = s.at
		}
	}
	if len(requests) == 0 {
		return nil, nil
	}
	base := requests[0].seq
	slices.SortFunc(requests, func(a, b segment) int { return int(int32(a.seq-base)) - int(int32(b.seq-base)) })
	var start time.Time
	begun := false
	for _, r := range requests {
		if !begun || r.at.Before(start) {
			start, begun = r.at, true
		}
		if end, ok := answered[r.seq+r.len]; ok {
			starts, ends = append(starts, start), append(ends, end)
			begun = false
		}
	}
	return starts, ends
}

// finish stops the capture and returns its segments; a capture that
// dropped packets fails the test, since a segment it missed would be
// matched to another.
func (c *wireCapture) finish(t *testing.T) wireTimes {
	t.Helper()
	close(c.stop)
	at := <-c.done
	stats, err := unix.GetsockoptTpacketStats(c.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	unix.Close(c.fd)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Drops > 0 {
		t.Fatalf("the loopback capture dropped %d packets", stats.Drops)
	}
	return at
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
