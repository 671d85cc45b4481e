//go:build linux

package tracer

import (
	"fmt"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/ringbuf"
)

// SockreqHook is one hook of the socket request timer (bpf/sockreq.bpf.c).
type SockreqHook struct{ Tracepoint, Program, Why string }

// The socket request timer's two sets of hooks. The socket layer's own
// tracepoints (6.3+) are preferred: a syscall tracepoint puts every
// syscall of every process on the kernel's slow path, measured at
// +45 to +110 ns a syscall of a process that is not the target.
var (
	SockreqViaSock = []SockreqHook{
		{"tcp_probe", sockreqProgSockreqArrivalBtf, "a request's first byte arrives at the socket"},
		{"sock_send_length", sockreqProgSockreqSend, "the server's write of the response returns"},
		{"inet_sock_set_state", sockreqProgSockreqStateBtf, "a connection closes (its last exchange)"},
	}
	SockreqViaSyscalls = []SockreqHook{
		{"tcp_probe", sockreqProgSockreqArrival, "a request's first byte arrives at the socket"},
		{"sys_exit", sockreqProgSockreqSyscall, "the server's read/write family returns (no sock_*_length before 6.3)"},
		{"inet_sock_set_state", sockreqProgSockreqState, "a connection closes (its last exchange)"},
	}
)

// SockreqHooks are the hooks this kernel's socket request timer uses.
func SockreqHooks(kspec *btf.Spec) []SockreqHook {
	var fn *btf.Typedef
	if kspec != nil && kspec.TypeByName("btf_trace_sock_send_length", &fn) == nil {
		return SockreqViaSock
	}
	return SockreqViaSyscalls
}

// SocketTimer times the request/response exchanges on the inbound TCP
// connections of the traced process, in the kernel: it streams a record
// of the exchange so far at each write of a response, which
// exchange.Assembler makes one per exchange (only user space can wait to
// see whether another write follows).
type SocketTimer struct{ timerRing }

// AttachSockets times the request/response exchanges on the inbound TCP
// connections of the traced process whose local port is one of ports:
// from the first byte of a request arriving to the return of the last
// write of its response. The tracer must filter on that one process (and,
// following forks, its descendants: a forking server's children serve).
func (t *Tracer) AttachSockets(ports []uint16) (_ *SocketTimer, err error) {
	if t.cfg.Filter != FilterPIDs || len(t.cfg.PIDs) != 1 || t.cfg.CgroupID != 0 {
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
	sk := &SocketTimer{}
	defer func() {
		if err != nil {
			sk.Close()
		}
	}()
	hooks := SockreqHooks(t.kspec)
	if t.cfg.sockreqSyscalls {
		hooks = SockreqViaSyscalls
	}
	if err := sockreqState(spec, viaSock(hooks)); err != nil {
		return nil, err
	}
	progs := make([]string, len(hooks))
	for i, h := range hooks {
		progs[i] = h.Program
	}
	if sk.coll, err = t.loadPrograms(spec, t.kspec, progs...); err != nil {
		return nil, wrapLoadErr(fmt.Errorf("load socket request timer: %w", err))
	}
	if err := setPorts(sk.coll.Maps[sockreqMapReqPorts], ports); err != nil {
		return nil, err
	}
	for _, h := range hooks {
		l, err := attach(sk.coll.Programs[h.Program], h.Tracepoint)
		if err != nil {
			return nil, fmt.Errorf("attach %s: %w", h.Tracepoint, err)
		}
		sk.links = append(sk.links, l)
	}
	if sk.rd, err = ringbuf.NewReader(sk.coll.Maps[sockreqMapLatEvents]); err != nil {
		return nil, fmt.Errorf("open latency ring buffer: %w", err)
	}
	t.closers = append(t.closers, sk.Close)
	return sk, nil
}

// setPorts sets the bits of ports in the req_ports bitmap.
func setPorts(m *ebpf.Map, ports []uint16) error {
	words := map[uint32]uint64{}
	for _, p := range ports {
		words[uint32(p)/64] |= 1 << (p % 64)
	}
	for w, bits := range words {
		if err := m.Put(w, bits); err != nil {
			return fmt.Errorf("time ports %v: %w", ports, err)
		}
	}
	return nil
}

// sockreqState says where connections keep their state: in the socket's
// own storage where every hook is tp_btf (viaSock), else in the conns
// hash, and shrinks the one not used.
func sockreqState(spec *ebpf.CollectionSpec, viaSock bool) error {
	if err := spec.Variables[sockreqVarCfgSkStorage].Set(boolU32(viaSock)); err != nil {
		return fmt.Errorf("set %s: %w", sockreqVarCfgSkStorage, err)
	}
	if viaSock {
		spec.Maps[sockreqMapConns].MaxEntries = 1 // never used
	}
	return nil
}

// viaSock says whether hooks are the socket layer's tracepoints (all tp_btf).
func viaSock(hooks []SockreqHook) bool { return slices.Equal(hooks, SockreqViaSock) }

// SocketTiming is what numatrace probes says of the socket request
// timer on this kernel: its hooks, why they are the fallback if they
// are, and whether they load.
type SocketTiming struct {
	Hooks    []SockreqHook
	Fallback string // why the syscalls are used; "" on the socket layer's tracepoints
	Err      error  // the programs do not load
}

// SocketTiming loads the socket request timer's programs for this kernel
// without attaching them.
func (t *Tracer) SocketTiming() SocketTiming {
	st := SocketTiming{Hooks: SockreqHooks(t.kspec)}
	if !viaSock(st.Hooks) {
		st.Fallback = "no sock_send_length tracepoint (6.3+): every syscall's return is hooked instead, which puts every process's syscalls on the slow path"
	}
	spec, err := loadSockreq()
	if err == nil {
		err = t.configure(spec)
	}
	if err == nil {
		err = sockreqState(spec, viaSock(st.Hooks))
	}
	var coll *ebpf.Collection
	if err == nil {
		progs := make([]string, len(st.Hooks))
		for i, h := range st.Hooks {
			progs[i] = h.Program
		}
		coll, err = t.loadPrograms(spec, t.kspec, progs...)
	}
	if coll != nil {
		coll.Close()
	}
	if err == nil {
		err = t.budgetLoads()
	}
	st.Err = err
	return st
}

// budgetLoads loads, without attaching it, the sched_switch program as a
// request timer's run sets it up: run-queue and I/O waits timed, and the
// waits' stacks taken. That code is left out of the program loaded
// without a request timer, so only this load verifies it on this kernel.
// Nothing to load where its jobs cannot run (no run-queue job, no task
// storage).
func (t *Tracer) budgetLoads() error {
	if !t.runqOn || !t.taskStorage {
		return nil
	}
	spec, err := loadSched()
	if err == nil {
		err = t.configure(spec)
	}
	for name, v := range map[string]any{typesVarCfgRequestStalls: uint32(1), typesVarCfgRequestTimes: uint32(1),
		typesVarCfgIoWait: uint32(1), typesVarCfgWaitStacks: uint32(1), typesVarCfgStacksMinNs: uint64(1e6)} {
		if err == nil {
			err = spec.Variables[name].Set(v)
		}
	}
	var coll *ebpf.Collection
	if err == nil {
		coll, err = t.loadPrograms(spec, t.kspec, t.switchProgram())
	}
	if coll != nil {
		coll.Close()
	}
	if err != nil {
		return fmt.Errorf("the sched_switch program that splits a request's time: %w", err)
	}
	return nil
}
