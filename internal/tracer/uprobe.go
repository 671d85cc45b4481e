//go:build linux

package tracer

import (
	"debug/elf"
	"errors"
	"fmt"

	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
)

// UprobeTargetError is a --latency-uprobe target that is not there: a
// file that cannot be opened or is not ELF, or a function it does not
// have. It is the user's input, not a failure of the tracer.
type UprobeTargetError struct{ msg string }

func (e *UprobeTargetError) Error() string { return e.msg }

func badTarget(format string, a ...any) error {
	return &UprobeTargetError{fmt.Sprintf("--latency-uprobe: "+format, a...)}
}

// UprobeTimer times every call of one function of the service, in the
// kernel: a uprobe notes when a thread enters it, a uretprobe streams a
// record when it returns, each whole (of no connection).
type UprobeTimer struct{ timerRing }

// AttachLatency times every call of symbol in binary (only in process
// pid, if not zero): a uprobe at its entry, and a uretprobe, or for a Go
// program a uprobe on each of its return instructions (see
// bpf/latency.bpf.c).
func (t *Tracer) AttachLatency(binary, symbol string, pid int) (_ *UprobeTimer, err error) {
	spec, err := loadLatency()
	if err != nil {
		return nil, fmt.Errorf("parse BPF object: %w", err)
	}
	if err := t.configure(spec); err != nil { // cfg_request_stalls, above all
		return nil, fmt.Errorf("configure the request timer: %w", err)
	}
	// Not the named result: every error return sets that to nil before
	// the deferred close runs.
	ut := &UprobeTimer{}
	defer func() {
		if err != nil {
			ut.Close()
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
	if ut.coll, err = t.loadPrograms(spec, t.kspec, progs...); err != nil {
		return nil, wrapLoadErr(fmt.Errorf("load latency probe: %w", err))
	}
	ex, err := link.OpenExecutable(binary)
	if err != nil {
		return nil, fmt.Errorf("--latency-uprobe: %w", err)
	}
	if err := ut.attach(ex, f, binary, symbol, pid, progs); err != nil {
		return nil, err
	}
	if ut.rd, err = ringbuf.NewReader(ut.coll.Maps[latencyMapLatEvents]); err != nil {
		return nil, fmt.Errorf("open latency ring buffer: %w", err)
	}
	t.closers = append(t.closers, ut.Close)
	return ut, nil
}

// attach puts the entry and exit probes (progs) on symbol.
func (ut *UprobeTimer) attach(ex *link.Executable, f *elf.File, binary, symbol string, pid int, progs []string) error {
	enter, exit := ut.coll.Programs[progs[0]], ut.coll.Programs[progs[1]]
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
	ut.links = append(ut.links, l)
	if rets == nil {
		if l, err = ex.Uretprobe(symbol, exit, &link.UprobeOptions{PID: pid}); err != nil {
			return fmt.Errorf("uretprobe %s:%s: %w", binary, symbol, err)
		}
		ut.links = append(ut.links, l)
		return nil
	}
	for _, off := range rets {
		if l, err = ex.Uprobe(symbol, exit, &link.UprobeOptions{PID: pid, Offset: off}); err != nil {
			return fmt.Errorf("uprobe %s:%s+%#x (a return): %w", binary, symbol, off, err)
		}
		ut.links = append(ut.links, l)
	}
	return nil
}
