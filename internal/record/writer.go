package record

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/zstd"

	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/outfile"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/wire"
)

// frame is one finished block as it goes to disk.
type frame struct {
	bytes  []byte
	events uint32
	lastNs uint64 // newest event time so far, this block's included
}

// sink takes finished blocks. It must not block: put reports false when
// it had to drop the block.
type sink interface {
	put(frame) bool
}

// Writer encodes records into blocks and hands finished blocks to its
// sink. It is used from one goroutine: the tracer's loop.
type Writer struct {
	enc     *blockEncoder
	zenc    *zstd.Encoder
	sink    sink
	header  []byte // the encoded file header
	events  uint32 // events in the open block
	lastNs  uint64
	dropped atomic.Uint64
}

func encodeHeader(h Header) ([]byte, error) {
	h.Format = "numatrace"
	h.Version.Major, h.Version.Minor = VersionMajor, VersionMinor
	js, err := headerJSON(h)
	if err != nil {
		return nil, err
	}
	b := append([]byte(nil), Magic[:]...)
	b = binary.LittleEndian.AppendUint16(b, VersionMajor)
	b = binary.LittleEndian.AppendUint16(b, VersionMinor)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(js)))
	b = append(b, js...)
	return binary.LittleEndian.AppendUint32(b, checksum(js)), nil
}

func newWriter(h Header, s sink) (*Writer, error) {
	hdr, err := encodeHeader(h)
	if err != nil {
		return nil, err
	}
	// No frame checksum: the block's CRC-32C covers the compressed bytes
	// and the reader checks the decompressed length, and hashing every
	// byte again cost an eighth of replay's decompression.
	z, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1),
		zstd.WithEncoderCRC(false))
	if err != nil {
		return nil, err
	}
	return &Writer{enc: newBlockEncoder(), zenc: z, sink: s, header: hdr}, nil
}

// Event records one stall or exit.
func (w *Writer) Event(ev *stall.Event) {
	w.enc.event(ev)
	w.events++
	if ev.TsNs > w.lastNs {
		w.lastNs = ev.TsNs
	}
	if w.enc.full() {
		w.Flush()
	}
}

// Snapshot records the kernel's aggregates.
func (w *Writer) Snapshot(s Snapshot) error { return w.jsonRecord(recSnapshot, s) }

// The bodies of the JSON records and the header: one function each, which
// the writer uses and TestEveryRecordEncodesBackToItsBytes checks against
// the shipped recordings.
func headerJSON(h Header) ([]byte, error) {
	js, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("encode header: %w", err)
	}
	return js, nil
}

func recordJSON(typ byte, v any) ([]byte, error) {
	switch d := v.(type) { // domain types go out in their format's shape
	case run.End:
		v = NewEndRecord(d)
	case latency.Stats:
		v = wire.NewStats(d)
	case Snapshot:
		v = newSnapshotRecord(d)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode record %d: %w", typ, err)
	}
	return b, nil
}

// jsonRecord adds a JSON record, refusing one a reader would reject.
func (w *Writer) jsonRecord(typ byte, v any) error {
	b, err := recordJSON(typ, v)
	if err != nil {
		return err
	}
	if len(b) > maxRecordBytes {
		return fmt.Errorf("record %d of %d bytes is over the format's limit of %d", typ, len(b), maxRecordBytes)
	}
	w.enc.record(typ, b)
	return nil
}

// Latency records one window's request latency.
func (w *Writer) Latency(st latency.Stats) error {
	return w.jsonRecord(recLatency, st)
}

// Procfs records a reading of /proc and /sys.
func (w *Writer) Procfs(p Procfs) error { return w.jsonRecord(recProcfs, p) }

// Lost records the drop counts so far; the recorder's own drops are filled in.
func (w *Writer) Lost(l Lost) {
	l.Dropped = w.dropped.Load()
	w.enc.lost(l)
}

// Dropped is how many events the sink could not take in time.
func (w *Writer) Dropped() uint64 { return w.dropped.Load() }

// Flush closes the open block and hands it to the sink.
func (w *Writer) Flush() {
	if w.enc.records == 0 {
		return
	}
	raw := w.enc.buf
	payload := w.zenc.EncodeAll(raw, nil)
	b := make([]byte, blockHeaderSize, blockHeaderSize+len(payload))
	blockHeader{Compressed: uint32(len(payload)), Raw: uint32(len(raw)), Records: w.enc.records,
		CRC: checksum(payload)}.put(b)
	f := frame{bytes: append(b, payload...), events: w.events, lastNs: w.lastNs}
	if !w.sink.put(f) {
		w.dropped.Add(uint64(f.events))
	}
	w.enc.reset()
	w.events = 0
}

// FileWriter writes a recording to a file. Blocks are written by a
// goroutine behind a bounded queue, so a slow disk drops blocks (counted)
// instead of stalling the tracer.
type FileWriter struct {
	*Writer
	f       *os.File
	queue   chan frame
	done    chan struct{}
	mu      sync.Mutex
	err     error
	onError func(error)
	closing atomic.Bool // the last block waits for the queue instead of dropping
}

// Create starts a recording at path. The header is written at once.
func Create(path string, h Header) (*FileWriter, error) {
	f, err := outfile.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create recording: %w", err)
	}
	fw := &FileWriter{f: f, queue: make(chan frame, 64), done: make(chan struct{})}
	w, err := newWriter(h, fw)
	if err != nil {
		f.Close()
		return nil, err
	}
	fw.Writer = w
	if _, err := f.Write(w.header); err != nil {
		f.Close()
		return nil, fmt.Errorf("write recording header: %w", err)
	}
	go fw.drain()
	return fw, nil
}

func (fw *FileWriter) put(fr frame) bool {
	if fw.closing.Load() {
		fw.queue <- fr
		return true
	}
	select {
	case fw.queue <- fr:
		return true
	default:
		return false
	}
}

// OnError, if set before the first event, hears at once about the first
// write that fails (a full disk): the recording stops there, and the
// caller can say so while tracing goes on.
func (fw *FileWriter) OnError(f func(error)) {
	fw.mu.Lock()
	fw.onError = f
	fw.mu.Unlock()
}

func (fw *FileWriter) drain() {
	defer close(fw.done)
	for fr := range fw.queue {
		if fw.Err() != nil {
			continue // stopped: later blocks would only half fit
		}
		if _, err := fw.f.Write(fr.bytes); err != nil {
			fw.mu.Lock()
			fw.err = fmt.Errorf("write recording: %w", err)
			onError := fw.onError
			fw.mu.Unlock()
			if onError != nil {
				onError(fw.err)
			}
		}
	}
}

// Close writes the end record, flushes, and closes the file.
func (fw *FileWriter) Close(end run.End) error {
	fw.Flush() // the data blocks, which may still drop
	end.Dropped = fw.Dropped()
	err := fw.jsonRecord(recEnd, end)
	fw.closing.Store(true)
	fw.Flush()
	close(fw.queue)
	<-fw.done
	fw.mu.Lock()
	err = errors.Join(err, fw.err)
	fw.mu.Unlock()
	err = errors.Join(err, fw.f.Sync(), fw.f.Close())
	return err
}

// Err reports a write error so far, if any.
func (fw *FileWriter) Err() error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.err
}

// FlightRecorder keeps only the most recent blocks in memory, bounded by
// bytes and, if set, by age, and writes them out on demand.
type FlightRecorder struct {
	*Writer
	mu       sync.Mutex
	frames   []frame
	bytes    int
	maxBytes int
	maxAgeNs uint64
	h        Header
}

// NewFlightRecorder keeps at most maxBytes of blocks, and (if maxAgeNs is
// not zero) none older than maxAgeNs behind the newest.
func NewFlightRecorder(h Header, maxBytes int, maxAgeNs uint64) (*FlightRecorder, error) {
	h.FlightRecorder = true
	fr := &FlightRecorder{maxBytes: maxBytes, maxAgeNs: maxAgeNs, h: h}
	w, err := newWriter(h, fr)
	if err != nil {
		return nil, err
	}
	fr.Writer = w
	return fr, nil
}

func (fr *FlightRecorder) put(f frame) bool {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	fr.frames = append(fr.frames, f)
	fr.bytes += len(f.bytes)
	for len(fr.frames) > 1 && (fr.bytes > fr.maxBytes ||
		(fr.maxAgeNs > 0 && f.lastNs > fr.maxAgeNs && fr.frames[0].lastNs < f.lastNs-fr.maxAgeNs)) {
		fr.bytes -= len(fr.frames[0].bytes)
		fr.frames = fr.frames[1:]
	}
	return true
}

// Held is the number of bytes of blocks kept.
func (fr *FlightRecorder) Held() int {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	return fr.bytes
}

// Dump is what a flight recorder held when a dump was asked for, with
// the records that close it, as the bytes of a recording: writing it
// touches no recorder, so it may go on while tracing does.
type Dump struct {
	header []byte
	frames []frame
	tail   []byte // the closing block: a snapshot and the end
}

// Take closes the open block and makes a dump of the blocks kept, closed
// by final records (a snapshot, the end). It uses the Writer: call it
// where the Writer's other methods are called.
func (fr *FlightRecorder) Take(final Snapshot, end run.End) (*Dump, error) {
	fr.Flush()
	fr.mu.Lock()
	frames := slices.Clone(fr.frames) // blocks' bytes are never changed: sharing them is safe
	fr.mu.Unlock()
	end.Dropped = fr.Dropped()
	for _, fm := range frames {
		end.Events += uint64(fm.events)
	}
	tail, err := fr.closing(final, end)
	if err != nil {
		return nil, err
	}
	return &Dump{header: fr.header, frames: frames, tail: tail}, nil
}

// closing encodes a dump's closing block. It goes to the dump alone, not
// into the ring.
func (fr *FlightRecorder) closing(final Snapshot, end run.End) ([]byte, error) {
	var s bytesSink
	w, err := newWriter(fr.h, &s)
	if err != nil {
		return nil, err
	}
	if err := w.Snapshot(final); err != nil {
		return nil, err
	}
	if err := w.jsonRecord(recEnd, end); err != nil {
		return nil, err
	}
	w.Flush()
	return s.b, nil
}

// WriteFile writes the dump to path, created as outfile.Create does.
func (d *Dump) WriteFile(path string) error {
	f, err := outfile.Create(path)
	if err != nil {
		return fmt.Errorf("create recording: %w", err)
	}
	err = d.write(f)
	return errors.Join(err, f.Sync(), f.Close())
}

func (d *Dump) write(w io.Writer) error {
	blocks := make([][]byte, 0, len(d.frames)+2)
	blocks = append(blocks, d.header)
	for _, fm := range d.frames {
		blocks = append(blocks, fm.bytes)
	}
	for _, b := range append(blocks, d.tail) {
		if _, err := w.Write(b); err != nil {
			return fmt.Errorf("write recording: %w", err)
		}
	}
	return nil
}

// bytesSink keeps the blocks it is given (a dump's closing block).
type bytesSink struct{ b []byte }

func (s *bytesSink) put(fr frame) bool {
	s.b = append(s.b, fr.bytes...)
	return true
}
