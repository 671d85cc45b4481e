//go:build linux

package tracer

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
)

// LatencyProbe times every call of one function of the service, in the
// kernel: a uprobe notes when a thread enters it, a uretprobe streams the
// time when it returns.
type LatencyProbe struct {
	mu    sync.Mutex // the source and the tracer may both close it
	coll  *ebpf.Collection
	links []link.Link
	rd    *ringbuf.Reader
}

// AttachLatency puts a uprobe and uretprobe on symbol in binary (only in
// process pid, if not zero). The caller has checked that the binary is
// not a Go program, whose stacks uretprobes corrupt.
func (t *Tracer) AttachLatency(binary, symbol string, pid int) (lp *LatencyProbe, err error) {
	spec, err := loadLatency()
	if err != nil {
		return nil, fmt.Errorf("parse BPF object: %w", err)
	}
	lp = &LatencyProbe{}
	defer func() {
		if err != nil {
			lp.Close()
			lp = nil
		}
	}()
	lp.coll, err = ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{MapReplacements: t.maps})
	if err != nil {
		return nil, wrapLoadErr(fmt.Errorf("load latency probe: %w", err))
	}
	ex, err := link.OpenExecutable(binary)
	if err != nil {
		return nil, fmt.Errorf("--latency-uprobe: %w", err)
	}
	opts := &link.UprobeOptions{PID: pid}
	enter, err := ex.Uprobe(symbol, lp.coll.Programs["request_enter"], opts)
	if err != nil {
		return nil, fmt.Errorf("uprobe %s:%s: %w", binary, symbol, err)
	}
	lp.links = append(lp.links, enter)
	exit, err := ex.Uretprobe(symbol, lp.coll.Programs["request_exit"], opts)
	if err != nil {
		return nil, fmt.Errorf("uretprobe %s:%s: %w", binary, symbol, err)
	}
	lp.links = append(lp.links, exit)
	if lp.rd, err = ringbuf.NewReader(lp.coll.Maps["lat_events"]); err != nil {
		return nil, fmt.Errorf("open latency ring buffer: %w", err)
	}
	t.closers = append(t.closers, lp.Close)
	return lp, nil
}

// Run hands every timed call to emit, as its return time and latency in
// ns, until the probe is closed. A short record is skipped.
func (lp *LatencyProbe) Run(emit func(endNs, latencyNs uint64)) {
	size := int(unsafe.Sizeof(typesLatSample{}))
	lp.mu.Lock()
	rd := lp.rd
	lp.mu.Unlock()
	if rd == nil {
		return // closed already
	}
	readLoop(rd, func(raw []byte) {
		if len(raw) < size {
			return
		}
		s := (*typesLatSample)(unsafe.Pointer(&raw[0]))
		emit(s.TsNs, s.LatNs)
	}, nil)
}

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
