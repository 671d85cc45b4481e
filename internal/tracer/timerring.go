//go:build linux

package tracer

import (
	"errors"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/numatrace/numatrace/internal/latency/exchange"
	"github.com/numatrace/numatrace/internal/stall"
)

// timerRing is what each request timer (UprobeTimer, SocketTimer) holds:
// its BPF objects, their links, and the ring buffer of its lat_sample
// records, which Run decodes. What the records mean together (a socket's
// writes paired into exchanges, their pacing) is internal/latency/exchange's.
type timerRing struct {
	mu    sync.Mutex // the source and the tracer may both close it
	coll  *ebpf.Collection
	links []link.Link
	rd    *ringbuf.Reader
	slab  []stall.RequestStall // newStall's; the reader's goroutine only
}

// Run hands every record to emit, decoded, until the timer is closed: a
// timed call as it returned, or a socket's exchange as it stood after a
// write; a short record is skipped. drained (if not nil) is called each
// time the ring has been read empty, and at least every PollInterval: what
// emit was handed since may go on as one batch.
func (r *timerRing) Run(emit func(exchange.Record), drained func()) {
	size := int(unsafe.Sizeof(typesLatSample{}))
	r.mu.Lock()
	rd := r.rd
	r.mu.Unlock()
	if rd == nil {
		return // closed already
	}
	idle := func() {
		if drained != nil {
			drained()
		}
	}
	var plain typesLatSample // a LAT_PLAIN record, its missing arrays zero
	readLoop(rd, func(raw []byte) {
		switch {
		case len(raw) >= size:
			emit(r.decode((*typesLatSample)(unsafe.Pointer(&raw[0]))))
		case len(raw) >= latHeadSize:
			copy(unsafe.Slice((*byte)(unsafe.Pointer(&plain)), latHeadSize), raw)
			emit(r.decode(&plain))
		}
		if r.empty() {
			idle()
		}
	}, idle, nil)
}

// decode is the record s as the exchange package takes it.
func (r *timerRing) decode(s *typesLatSample) exchange.Record {
	flags := typesLatFlag(s.Flags)
	rec := exchange.Record{EndNs: s.TsNs, LatNs: s.LatNs, TID: s.Tid, Conn: s.Conn,
		Pipelined: flags&typesLatFlagLAT_PIPELINED != 0}
	if flags&typesLatFlagLAT_STALLS != 0 {
		st := r.newStall()
		st.FreezeNs = s.StallNs[stall.NumCauses]
		copy(st.ByCause[:], s.StallNs[:stall.NumCauses])
		if flags&typesLatFlagLAT_TIMES != 0 {
			st.Times = stall.TaskTimes{Ns: s.TimesNs, InStallNs: s.InStallNs}
			st.HasTimes = true
		}
		rec.Stall = st
	}
	if s.Conn != 0 {
		rec.Totals = s.TotalsNs // zeros without LAT_STALLS: unknown (exchange's pacing.go)
		rec.TotalsSame = flags&typesLatFlagLAT_PLAIN != 0
	}
	return rec
}

// latHeadSize is a LAT_PLAIN record's length: lat_sample up to its
// stall_ns, all zero in such an exchange.
const latHeadSize = int(unsafe.Offsetof(typesLatSample{}.StallNs))

// newStall hands out a breakdown from a slab of them: one allocation
// per sample was most of the reader's garbage at 80,000 requests a second.
func (r *timerRing) newStall() *stall.RequestStall {
	if len(r.slab) == 0 {
		r.slab = make([]stall.RequestStall, 1024)
	}
	st := &r.slab[0]
	r.slab = r.slab[1:]
	return st
}

// empty says whether the ring holds no more records (or is closed: the
// reader's mapping is gone then, so it is asked under the lock Close takes).
func (r *timerRing) empty() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rd == nil || r.rd.AvailableBytes() == 0
}

// Close detaches the probes and frees their objects; closing twice is a
// no-op.
func (r *timerRing) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	if r.rd != nil {
		errs = append(errs, r.rd.Close())
		r.rd = nil
	}
	for _, l := range r.links {
		errs = append(errs, l.Close())
	}
	r.links = nil
	if r.coll != nil {
		r.coll.Close()
		r.coll = nil
	}
	return errors.Join(errs...)
}
