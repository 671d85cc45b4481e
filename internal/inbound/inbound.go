// Package inbound finds a process's inbound TCP endpoints in /proc: the
// ports it listens on and how many connections it holds on them, for
// the kernel-side request timer to time and for the line that says so.
package inbound

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// TCP states as /proc/net/tcp writes them.
const (
	stateEstablished = 0x01
	stateListen      = 0x0a
)

// Endpoints are a process's inbound TCP endpoints.
type Endpoints struct {
	Listeners []netip.AddrPort // the sockets it listens on, sorted
	Conns     int              // its established connections on a listener's port
}

// Ports are the listeners' ports, sorted, once each.
func (e Endpoints) Ports() []uint16 {
	var ps []uint16
	for _, l := range e.Listeners {
		ps = append(ps, l.Port())
	}
	slices.Sort(ps)
	return slices.Compact(ps)
}

// String is "127.0.0.1:6379, 12 connections".
func (e Endpoints) String() string {
	n := fmt.Sprintf("%d connections", e.Conns)
	if e.Conns == 1 {
		n = "1 connection"
	}
	return e.Addrs() + ", " + n
}

// Addrs lists the listeners: "0.0.0.0:6379, [::]:6379".
func (e Endpoints) Addrs() string {
	addrs := make([]string, len(e.Listeners))
	for i, l := range e.Listeners {
		addrs[i] = l.String()
	}
	return strings.Join(addrs, ", ")
}

// Find reads process pid's endpoints from proc (a /proc): its sockets
// are its fds' socket inodes, looked up in its own network namespace's
// tcp and tcp6 tables. port, if not 0, keeps only that port.
func Find(proc fs.FS, pid int, port uint16) (Endpoints, error) {
	inodes, err := socketInodes(proc, pid)
	if err != nil {
		return Endpoints{}, err
	}
	var rows []row
	for _, table := range []string{"tcp", "tcp6"} {
		b, err := fs.ReadFile(proc, fmt.Sprintf("%d/net/%s", pid, table))
		if err != nil {
			if table == "tcp6" && errors.Is(err, fs.ErrNotExist) {
				continue // no IPv6 in this kernel
			}
			return Endpoints{}, err
		}
		rs, err := parseTable(b)
		if err != nil {
			return Endpoints{}, fmt.Errorf("%d/net/%s: %w", pid, table, err)
		}
		rows = append(rows, rs...)
	}
	var e Endpoints
	listening := map[uint16]bool{}
	for _, r := range rows {
		if r.state == stateListen && inodes[r.inode] && (port == 0 || r.local.Port() == port) {
			e.Listeners = append(e.Listeners, r.local)
			listening[r.local.Port()] = true
		}
	}
	for _, r := range rows {
		if r.state == stateEstablished && inodes[r.inode] && listening[r.local.Port()] {
			e.Conns++
		}
	}
	slices.SortFunc(e.Listeners, func(a, b netip.AddrPort) int { return a.Compare(b) })
	return e, nil
}

// socketInodes are the inodes of the sockets among pid's fds.
func socketInodes(proc fs.FS, pid int) (map[uint64]bool, error) {
	dir := fmt.Sprintf("%d/fd", pid)
	ents, err := fs.ReadDir(proc, dir)
	if err != nil {
		return nil, err
	}
	inodes := map[uint64]bool{}
	for _, ent := range ents {
		target, err := fs.ReadLink(proc, dir+"/"+ent.Name())
		if err != nil {
			continue // closed since the listing
		}
		if s, ok := strings.CutPrefix(target, "socket:["); ok {
			if n, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64); err == nil {
				inodes[n] = true
			}
		}
	}
	return inodes, nil
}

type row struct {
	local netip.AddrPort
	state uint8
	inode uint64
}

// parseTable reads /proc/net/tcp or tcp6: after a header line, "sl
// local rem st tx:rx tr:when retrnsmt uid timeout inode ...".
func parseTable(b []byte) ([]row, error) {
	var rows []row
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Scan() // the header
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 10 {
			return nil, fmt.Errorf("short line %q", sc.Text())
		}
		local, err := parseAddr(f[1])
		if err != nil {
			return nil, err
		}
		st, err := strconv.ParseUint(f[3], 16, 8)
		if err != nil {
			return nil, fmt.Errorf("state %q: %w", f[3], err)
		}
		inode, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("inode %q: %w", f[9], err)
		}
		rows = append(rows, row{local, uint8(st), inode})
	}
	return rows, sc.Err()
}

// parseAddr reads "0100007F:18EB": the address as the kernel's 32-bit
// words in this machine's byte order, the port in hex.
func parseAddr(s string) (netip.AddrPort, error) {
	a, p, ok := strings.Cut(s, ":")
	port, err := strconv.ParseUint(p, 16, 16)
	raw, herr := hex.DecodeString(a)
	if !ok || err != nil || herr != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("address %q", s)
	}
	for i := 0; i < len(raw); i += 4 { // each word back to network order
		binary.BigEndian.PutUint32(raw[i:], binary.NativeEndian.Uint32(raw[i:]))
	}
	addr, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), nil
}
