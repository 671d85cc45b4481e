//go:build linux

package tracer

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
)

// SockreqHooks are the raw tracepoints the socket request timer attaches
// to (bpf/sockreq.bpf.c), in the order attached: numatrace probes lists them.
var SockreqHooks = []struct{ Tracepoint, Program, Why string }{
	{"tcp_probe", sockreqProgSockreqArrival, "a request's first byte arrives at the socket"},
	{"sys_exit", sockreqProgSockreqSyscall, "the server's read/write family returns on the socket"},
	{"inet_sock_set_state", sockreqProgSockreqState, "a connection closes: its last exchange"},
}

// AttachSockets times the request/response exchanges on the inbound TCP
// connections of the traced process whose local port is one of ports:
// from the first byte of a request arriving to the return of the last
// write of its response. The tracer must filter on that one process.
func (t *Tracer) AttachSockets(ports []uint16) (_ *LatencyProbe, err error) {
	if singleTgid(t.cfg) == 0 {
		return nil, fmt.Errorf("socket request timing needs one traced process (--pid)")
	}
	if len(ports) == 0 {
		return nil, fmt.Errorf("socket request timing: no port to time")
	}
	spec, err := loadSockreq()
	if err != nil {
		return nil, fmt.Errorf("parse BPF object: %w", err)
	}
	if err := t.configure(spec); err != nil {
		return nil, fmt.Errorf("configure the socket request timer: %w", err)
	}
	lp := &LatencyProbe{}
	defer func() {
		if err != nil {
			lp.Close()
		}
	}()
	progs := make([]string, len(SockreqHooks))
	for i, h := range SockreqHooks {
		progs[i] = h.Program
	}
	if lp.coll, err = t.loadPrograms(spec, t.kspec, progs...); err != nil {
		return nil, wrapLoadErr(fmt.Errorf("load socket request timer: %w", err))
	}
	if err := setPorts(lp.coll.Maps[sockreqMapReqPorts], ports); err != nil {
		return nil, err
	}
	for _, h := range SockreqHooks {
		l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: h.Tracepoint, Program: lp.coll.Programs[h.Program]})
		if err != nil {
			return nil, fmt.Errorf("attach %s: %w", h.Tracepoint, err)
		}
		lp.links = append(lp.links, l)
	}
	if lp.rd, err = ringbuf.NewReader(lp.coll.Maps[sockreqMapLatEvents]); err != nil {
		return nil, fmt.Errorf("open latency ring buffer: %w", err)
	}
	t.closers = append(t.closers, lp.Close)
	return lp, nil
}

func setPorts(m *ebpf.Map, ports []uint16) error {
	one := uint8(1)
	for _, p := range ports {
		if err := m.Put(p, one); err != nil {
			return fmt.Errorf("time port %d: %w", p, err)
		}
	}
	return nil
}
