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

// Stream reads records until the reader is closed, decodes each and hands
// it to sink. Undecodable records and read errors other than closing are
// counted in bad and reading goes on; it pauses briefly after a read error
// so a persistent one cannot spin. It returns nil when the reader
// is closed, or once it has returned every record after Flush: that is how
// a caller drains what is left before stopping.
func Stream(rd RecordReader, dec *Decoder, sink func(stall.Event), bad func(error)) error {
	var rec ringbuf.Record
	for {
		rd.SetDeadline(time.Now().Add(PollInterval))
		if err := rd.ReadInto(&rec); err != nil {
			if errors.Is(err, ringbuf.ErrClosed) || errors.Is(err, ringbuf.ErrFlushed) {
				return nil // closed, or drained after Flush
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				continue // nothing arrived this interval: poll again
			}
			if bad != nil {
				bad(fmt.Errorf("read ring buffer: %w", err))
			}
			time.Sleep(readRetryDelay) // a persistent error must not spin a core
			continue
		}
		ev, err := dec.Decode(rec.RawSample)
		if err != nil {
			if bad != nil {
				bad(err)
			}
			continue
		}
		sink(ev)
	}
}
