package tracer

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/numatrace/numatrace/internal/latency"
)

// ErrGoBinary means a uretprobe was asked for on a Go program: uretprobes
// rewrite return addresses on the stack, which Go's growable stacks and
// unwinder do not survive.
var ErrGoBinary = errors.New("is a Go program: uretprobes corrupt Go stacks, so --latency-uprobe refuses it; export a latency histogram and use --latency-prom URL --latency-metric NAME, or log requests and use --latency-file")

// CheckNotGo fails for Go binaries, which carry a .go.buildinfo section.
func CheckNotGo(binary string) error {
	f, err := elf.Open(binary)
	if err != nil {
		return fmt.Errorf("--latency-uprobe: %w", err)
	}
	defer f.Close()
	for _, s := range []string{".go.buildinfo", ".gopclntab"} {
		if f.Section(s) != nil {
			return fmt.Errorf("%s %w", binary, ErrGoBinary)
		}
	}
	return nil
}

// LatencyProbe times every call of one function of the service.
type LatencyProbe struct {
	coll  *ebpf.Collection
	links []link.Link
	rd    *ringbuf.Reader
}

// AttachLatency puts a uprobe and uretprobe on symbol in binary (only in
// process pid, if not zero).
func (t *Tracer) AttachLatency(binary, symbol string, pid int) (lp *LatencyProbe, err error) {
	if err := CheckNotGo(binary); err != nil {
		return nil, err
	}
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

// ParseUprobeTarget splits BINARY:SYMBOL.
func ParseUprobeTarget(s string) (binary, symbol string, err error) {
	i := strings.LastIndex(s, ":")
	if i <= 0 || i == len(s)-1 {
		return "", "", fmt.Errorf("--latency-uprobe wants BINARY:SYMBOL, got %q", s)
	}
	binary, symbol = s[:i], s[i+1:]
	if _, err := os.Stat(binary); err != nil {
		return "", "", fmt.Errorf("--latency-uprobe: %w", err)
	}
	return binary, symbol, nil
}

// Run hands every timed request to emit until the probe is closed.
func (lp *LatencyProbe) Run(emit func(latency.Sample)) {
	var rec ringbuf.Record
	for {
		lp.rd.SetDeadline(time.Now().Add(PollInterval))
		if err := lp.rd.ReadInto(&rec); err != nil {
			if errors.Is(err, ringbuf.ErrClosed) {
				return
			}
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				time.Sleep(readRetryDelay)
			}
			continue
		}
		if len(rec.RawSample) < int(unsafe.Sizeof(typesLatSample{})) {
			continue
		}
		s := (*typesLatSample)(unsafe.Pointer(&rec.RawSample[0]))
		emit(latency.Sample{TsNs: s.TsNs, LatencyNs: s.LatNs})
	}
}

// Close detaches the probes and frees their objects.
func (lp *LatencyProbe) Close() error {
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
