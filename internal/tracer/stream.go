//go:build linux

package tracer

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cilium/ebpf/ringbuf"

	"github.com/numatrace/numatrace/internal/stall"
)

const readRetryDelay = 10 * time.Millisecond

// PollInterval is how often the reader looks for records the kernel
// submitted without waking it (see cfg_wakeup_bytes in bpf/common.h).
const PollInterval = 100 * time.Millisecond

// RecordReader is the part of *ringbuf.Reader the stream needs; tests put a
// fake in front of the decoder without loading anything.
type RecordReader interface {
	ReadInto(*ringbuf.Record) error
	SetDeadline(time.Time)
}

// readLoop hands every record to handle until the reader is closed, or
// has returned every record after a Flush. Read errors other than those
// go to bad and reading goes on, after a pause so a persistent one
// cannot spin a core. Both ring buffers (stalls, request timings) are
// read with it.
func readLoop(rd RecordReader, handle func([]byte), idle func(), bad func(error)) {
	var rec ringbuf.Record
	for n := 0; ; n++ {
		// The deadline is renewed every deadlineEvery records, not every
		// record: at 80,000 requests a second reading the clock for each
		// was 6% of the reader's time. A deadline that went stale in a
		// burst ends one wait early, and is renewed for the next.
		if n%deadlineEvery == 0 {
			rd.SetDeadline(time.Now().Add(PollInterval))
		}
		if err := rd.ReadInto(&rec); err != nil {
			n = -1 // renew the deadline before the next read
			if errors.Is(err, ringbuf.ErrClosed) || errors.Is(err, ringbuf.ErrFlushed) {
				return // closed, or drained after Flush
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				if idle != nil {
					idle()
				}
				continue // nothing arrived this interval: poll again
			}
			if bad != nil {
				bad(fmt.Errorf("read ring buffer: %w", err))
			}
			time.Sleep(readRetryDelay)
			continue
		}
		handle(rec.RawSample)
	}
}

// deadlineEvery is how many records are read on one deadline.
const deadlineEvery = 64

// Stream reads records until the reader is closed, decodes each and hands
// it to sink; undecodable records and read errors go to bad. It returns
// nil when the reader is closed, or once it has returned every record
// after Flush: that is how a caller drains what is left before stopping.
func Stream(rd RecordReader, dec *Decoder, sink func(stall.Event), bad func(error)) error {
	readLoop(rd, func(raw []byte) {
		ev, err := dec.Decode(raw)
		if err != nil {
			if bad != nil {
				bad(err)
			}
			return
		}
		sink(ev)
	}, nil, bad)
	return nil
}

// Stream hands every event of this tracer's ring buffer to sink until
// Stop has drained it, or Close.
func (t *Tracer) Stream(sink func(stall.Event)) error {
	rd, err := t.Reader()
	if err != nil {
		return err
	}
	bad := func(error) { t.bad.Add(1) }
	if t.stacks == nil {
		return Stream(rd, t.decoder, sink, bad)
	}
	readLoop(rd, func(raw []byte) {
		ev, err := t.decode(raw)
		if err != nil {
			bad(err)
			return
		}
		sink(ev)
	}, nil, bad)
	return nil
}

// decode is one record as Stream hands it on: decoded, with the stacks it
// carries symbolized while the process is there to read.
func (t *Tracer) decode(raw []byte) (stall.Event, error) {
	ev, err := t.decoder.Decode(raw)
	if err != nil || t.stacks == nil {
		return ev, err
	}
	switch {
	case ev.Kind == stall.KindStall || ev.Kind == stall.KindWait:
		if st, ok := stacksOf(raw); ok {
			ev.Stack = t.stacks.stack(&ev, st)
		}
	case ev.GroupDead:
		t.stacks.forget(ev.PID)
	}
	return ev, nil
}

// Stop detaches every probe, then makes Stream return once it has handed
// over what the kernel had already submitted. The maps stay readable for
// a final snapshot.
func (t *Tracer) Stop() error {
	err := t.Detach()
	if t.reader != nil {
		err = errors.Join(err, t.reader.Flush())
	}
	return err
}

// BadRecords counts the records Stream could not read or decode.
func (t *Tracer) BadRecords() uint64 { return t.bad.Load() }
