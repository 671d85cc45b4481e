//go:build linux

package tracer

import (
	"debug/elf"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/numatrace/numatrace/internal/monoclock"
	"github.com/numatrace/numatrace/internal/stall"
)

// UprobeTargetError is a --latency-uprobe target that is not there: a
// file that cannot be opened or is not ELF, or a function it does not
// have. It is the user's input, not a failure of the tracer.
type UprobeTargetError struct{ msg string }

func (e *UprobeTargetError) Error() string { return e.msg }

func badTarget(format string, a ...any) error {
	return &UprobeTargetError{fmt.Sprintf("--latency-uprobe: "+format, a...)}
}

// LatencyProbe times every call of one function of the service, in the
// kernel: a uprobe notes when a thread enters it, a uretprobe streams the
// time when it returns.
type LatencyProbe struct {
	mu    sync.Mutex // the source and the tracer may both close it
	coll  *ebpf.Collection
	links []link.Link
	rd    *ringbuf.Reader
	// pipelined counts the socket exchanges that carried more than one
	// request (sockreq): timed as one.
	pipelined atomic.Uint64
	// exch makes one sample of each socket exchange's per-write ones
	// (sockreq); nil for the uprobes, whose calls are whole as they return.
	exch *exchanges
	slab []stall.RequestStall // newStall's; the reader's goroutine only
}

// AttachLatency times every call of symbol in binary (only in process
// pid, if not zero): a uprobe at its entry, and a uretprobe, or for a Go
// program a uprobe on each of its return instructions (see
// bpf/latency.bpf.c).
func (t *Tracer) AttachLatency(binary, symbol string, pid int) (_ *LatencyProbe, err error) {
	spec, err := loadLatency()
	if err != nil {
		return nil, fmt.Errorf("parse BPF object: %w", err)
	}
	if err := t.configure(spec); err != nil { // cfg_request_stalls, above all
		return nil, fmt.Errorf("configure the request timer: %w", err)
	}
	// Not the named result: every error return sets that to nil before
	// the deferred close runs.
	lp := &LatencyProbe{}
	defer func() {
		if err != nil {
			lp.Close()
		}
	}()
	f, err := elf.Open(binary)
	if err != nil { // source.ParseUprobeTarget says why, as flags are checked
		return nil, badTarget("%s: %v", binary, err)
	}
	defer f.Close()
	// Only the pair this binary needs: the Go pair reads a register only
	// amd64 has.
	progs := []string{latencyProgRequestEnter, latencyProgRequestExit}
	if isGo(f) {
		progs = []string{latencyProgRequestEnterGo, latencyProgRequestExitGo}
	}
	if lp.coll, err = t.loadPrograms(spec, t.kspec, progs...); err != nil {
		return nil, wrapLoadErr(fmt.Errorf("load latency probe: %w", err))
	}
	ex, err := link.OpenExecutable(binary)
	if err != nil {
		return nil, fmt.Errorf("--latency-uprobe: %w", err)
	}
	if err := lp.attach(ex, f, binary, symbol, pid, progs); err != nil {
		return nil, err
	}
	if lp.rd, err = ringbuf.NewReader(lp.coll.Maps[latencyMapLatEvents]); err != nil {
		return nil, fmt.Errorf("open latency ring buffer: %w", err)
	}
	t.closers = append(t.closers, lp.Close)
	return lp, nil
}

// attach puts the entry and exit probes (progs) on symbol.
func (lp *LatencyProbe) attach(ex *link.Executable, f *elf.File, binary, symbol string, pid int, progs []string) error {
	enter, exit := lp.coll.Programs[progs[0]], lp.coll.Programs[progs[1]]
	var rets []uint64
	if isGo(f) {
		var err error
		if rets, err = goReturns(f, symbol); err != nil {
			return fmt.Errorf("--latency-uprobe: %w", err)
		}
	}
	l, err := ex.Uprobe(symbol, enter, &link.UprobeOptions{PID: pid})
	if errors.Is(err, link.ErrNoSymbol) {
		return badTarget("%s has no function %s", binary, symbol)
	}
	if err != nil {
		return fmt.Errorf("uprobe %s:%s: %w", binary, symbol, err)
	}
	lp.links = append(lp.links, l)
	if rets == nil {
		if l, err = ex.Uretprobe(symbol, exit, &link.UprobeOptions{PID: pid}); err != nil {
			return fmt.Errorf("uretprobe %s:%s: %w", binary, symbol, err)
		}
		lp.links = append(lp.links, l)
		return nil
	}
	for _, off := range rets {
		if l, err = ex.Uprobe(symbol, exit, &link.UprobeOptions{PID: pid, Offset: off}); err != nil {
			return fmt.Errorf("uprobe %s:%s+%#x (a return): %w", binary, symbol, off, err)
		}
		lp.links = append(lp.links, l)
	}
	return nil
}

// Run hands every timed call to emit until the probe is closed: when it
// returned, its latency, the thread it returned on, and the thread's
// stall time inside it when it began and ended on that thread. A short
// record is skipped. drained (if not nil) is called each time the ring
// has been read empty: what emit was handed since may go on as one batch.
func (lp *LatencyProbe) Run(emit func(endNs, latencyNs uint64, tid uint32, st *stall.RequestStall), drained func()) {
	size := int(unsafe.Sizeof(typesLatSample{}))
	lp.mu.Lock()
	rd := lp.rd
	lp.mu.Unlock()
	if rd == nil {
		return // closed already
	}
	pass := func(s exchangeSample) { emit(s.endNs, s.latNs, s.tid, s.st) }
	flush := func() {
		if lp.exch != nil {
			lp.exch.ripe(monoclock.Ns(), pass)
		}
		if drained != nil {
			drained()
		}
	}
	var plain typesLatSample // a LAT_PLAIN record, its missing arrays zero
	readLoop(rd, func(raw []byte) {
		switch {
		case len(raw) >= size:
			lp.decode((*typesLatSample)(unsafe.Pointer(&raw[0])), pass)
		case len(raw) >= latHeadSize:
			copy(unsafe.Slice((*byte)(unsafe.Pointer(&plain)), latHeadSize), raw)
			lp.decode(&plain, pass)
		}
		if lp.empty() {
			flush()
		}
	}, flush, nil)
	if lp.exch != nil {
		lp.exch.all(pass) // closed: what is held is as whole as it will be
		flush()
	}
}

func (lp *LatencyProbe) decode(s *typesLatSample, pass func(exchangeSample)) {
	var st *stall.RequestStall
	if typesLatFlag(s.Flags)&typesLatFlagLAT_PIPELINED != 0 {
		lp.pipelined.Add(1)
	}
	if typesLatFlag(s.Flags)&typesLatFlagLAT_STALLS != 0 {
		st = lp.newStall()
		st.FreezeNs = s.StallNs[stall.NumCauses]
		copy(st.ByCause[:], s.StallNs[:stall.NumCauses])
	}
	x := exchangeSample{endNs: s.TsNs, latNs: s.LatNs, tid: s.Tid, st: st}
	if lp.exch != nil && s.Conn != 0 {
		x.totals = s.TotalsNs // zeros without st: unknown (pacing.go)
		x.totalsSame = typesLatFlag(s.Flags)&typesLatFlagLAT_PLAIN != 0
		lp.exch.add(s.Conn, x, pass)
		return
	}
	pass(x)
}

// latHeadSize is a LAT_PLAIN record's length: lat_sample up to its
// stall_ns, all zero in such an exchange.
const latHeadSize = int(unsafe.Offsetof(typesLatSample{}.StallNs))

// newStall hands out a breakdown from a slab of them: one allocation
// per sample was most of the reader's garbage at 80,000 requests a second.
func (lp *LatencyProbe) newStall() *stall.RequestStall {
	if len(lp.slab) == 0 {
		lp.slab = make([]stall.RequestStall, 1024)
	}
	st := &lp.slab[0]
	lp.slab = lp.slab[1:]
	return st
}

// LateWrites is how many writes of a response came after its exchange
// had been handed on (socket timing only): it was timed to an earlier one.
func (lp *LatencyProbe) LateWrites() uint64 {
	if lp.exch == nil {
		return 0
	}
	return lp.exch.lateWrites.Load()
}

// DueWaits is how many exchanges on paced connections were counted from
// when they were due rather than from their arrival: sent late because
// the exchange before them was frozen (socket timing only; pacing.go).
func (lp *LatencyProbe) DueWaits() uint64 {
	if lp.exch == nil {
		return 0
	}
	return lp.exch.dueWaits.Load()
}

// empty says whether the ring holds no more records (or is closed: the
// reader's mapping is gone then, so it is asked under the lock Close takes).
func (lp *LatencyProbe) empty() bool {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	return lp.rd == nil || lp.rd.AvailableBytes() == 0
}

// Pipelined is how many of the exchanges Run emitted carried pipelined
// requests (socket timing only), each timed as one.
func (lp *LatencyProbe) Pipelined() uint64 { return lp.pipelined.Load() }

// Close detaches the probes and frees their objects; closing twice is a
// no-op.
func (lp *LatencyProbe) Close() error {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	var errs []error
	if lp.rd != nil {
		errs = append(errs, lp.rd.Close())
		lp.rd = nil
	}
	for _, l := range lp.links {
		errs = append(errs, l.Close())
	}
	lp.links = nil
	if lp.coll != nil {
		lp.coll.Close()
		lp.coll = nil
	}
	return errors.Join(errs...)
}
