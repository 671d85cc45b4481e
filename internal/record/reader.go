package record

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/wire"
)

// Kind is what an Item holds.
type Kind int

const (
	ItemEvent Kind = iota + 1
	ItemSnapshot
	ItemProcfs
	ItemLost
	ItemEnd
	ItemLatency
)

// Item is one record read back.
type Item struct {
	Kind     Kind
	Event    stall.Event
	Snapshot *Snapshot
	Procfs   *Procfs
	Lost     Lost
	End      *run.End
	Latency  *latency.Stats
}

// ErrNewerFormat means the file was written by a newer numatrace.
var ErrNewerFormat = errors.New("recording format is newer than this numatrace reads")

// Reader reads a recording. Complete blocks are always read; a damaged
// block is skipped with a warning, and a file cut short ends early with a
// warning saying where.
type Reader struct {
	r        *bufio.Reader
	closer   io.Closer
	header   Header
	off      int64 // bytes consumed
	zdec     *zstd.Decoder
	scratch  blockScratch // the sequential reader's buffers
	blocks   int
	warnings []string
	cutAt    int64  // the file's length, when it ended inside a block
	newer    int    // events of a newer kind or cause, skipped
	late     int    // records timed past any recording's span, skipped
	reread   int64  // bytes read again to look past failed blocks
	pending  []byte // bytes read ahead by a resync, served before r.r
	stacks   stackKeeper
	// stacksFrom is the block stacks were first left out in (0: none
	// were): Warnings says how many, once all are counted.
	stacksFrom int

	// The items of the block being served, decoded whole (Parallel)...
	items []Item
	pos   int
	// ... or one at a time, in line.
	iter blockIter
	cur  Item
	par  *pipeline // blocks decoded ahead on other cores (Parallel)
	done bool      // the last block was served
}

func (r *Reader) Read(p []byte) (int, error) {
	if len(r.pending) > 0 {
		n := copy(p, r.pending)
		r.pending = r.pending[n:]
		return n, nil
	}
	return r.r.Read(p)
}

func (r *Reader) readFull(p []byte) (int, error) { return io.ReadFull(readerFunc(r.Read), p) }

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// Open opens a recording file.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open recording: %w", err)
	}
	if st, err := f.Stat(); err == nil && st.IsDir() {
		f.Close()
		return nil, fmt.Errorf("%s is a directory, not a recording", path)
	}
	r, err := NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r.closer = f
	return r, nil
}

// NewReader reads and checks the header.
func NewReader(in io.Reader) (*Reader, error) {
	r := &Reader{r: bufio.NewReaderSize(in, 1<<16)}
	var fixed [16]byte
	if _, err := io.ReadFull(r.r, fixed[:]); err != nil {
		return nil, fmt.Errorf("not a numatrace recording (too short)")
	}
	if [8]byte(fixed[:8]) != Magic {
		return nil, fmt.Errorf("not a numatrace recording (bad magic)")
	}
	major, minor := binary.LittleEndian.Uint16(fixed[8:]), binary.LittleEndian.Uint16(fixed[10:])
	if major > VersionMajor {
		return nil, fmt.Errorf("%w: the file is format v%d.%d, this numatrace reads v%d.x; use a newer numatrace",
			ErrNewerFormat, major, minor, VersionMajor)
	}
	n := binary.LittleEndian.Uint32(fixed[12:])
	if n > maxHeaderBytes {
		return nil, fmt.Errorf("corrupt recording header (length %d)", n)
	}
	js := make([]byte, n+4)
	if _, err := io.ReadFull(r.r, js); err != nil {
		return nil, fmt.Errorf("recording cut inside its header")
	}
	if checksum(js[:n]) != binary.LittleEndian.Uint32(js[n:]) {
		return nil, fmt.Errorf("corrupt recording header (checksum mismatch)")
	}
	if err := json.Unmarshal(js[:n], &r.header); err != nil {
		return nil, fmt.Errorf("corrupt recording header: %v", err)
	}
	if w := r.header.WindowNs; w != 0 && w < MinWindowNs {
		return nil, fmt.Errorf("corrupt recording header: window_ns %d is under 1 ms, the shortest window", w)
	}
	r.scratch.maxTs = spanEnd(r.header)
	r.off = int64(16 + n + 4)
	z, err := decoder()
	if err != nil {
		return nil, err
	}
	r.zdec = z
	return r, nil
}

var (
	decoderOnce sync.Once
	sharedDec   *zstd.Decoder
	decoderErr  error
)

// decoder is one zstd decoder shared by every Reader: DecodeAll is safe
// for concurrent use, and a decoder is costly to make.
func decoder() (*zstd.Decoder, error) {
	decoderOnce.Do(func() {
		// Frame checksums, which older writers add, are not verified:
		// the block's CRC-32C has already passed over the same bytes.
		sharedDec, decoderErr = zstd.NewReader(nil, zstd.WithDecoderMaxMemory(maxBlockRaw),
			zstd.WithDecoderMaxWindow(maxBlockRaw), zstd.IgnoreChecksum(true))
	})
	return sharedDec, decoderErr
}

// Header is the recording's header.
func (r *Reader) Header() Header { return r.header }

// Warnings lists the damage found so far, one line each.
func (r *Reader) Warnings() []string {
	if r.stacksFrom == 0 {
		return r.warnings
	}
	// Before the cut, which is said last; not among the others, which a
	// reader decoding ahead says at another time than one that does not.
	at := len(r.warnings)
	if r.Truncated() {
		at--
	}
	line := fmt.Sprintf("stacks left out from block %d on%s", r.stacksFrom, r.stacks.left.detail())
	return slices.Insert(slices.Clone(r.warnings), max(at, 0), line)
}

// StacksLeftOut is what the bounds on the stacks a reader keeps left out
// so far (FORMAT.md §11.6).
func (r *Reader) StacksLeftOut() StacksLeftOut { return r.stacks.left }

// NewerSkipped is the number of events skipped because a newer version
// wrote a kind or cause this one does not know.
func (r *Reader) NewerSkipped() int { return r.newer }

// Truncated reports whether the file ended inside a block.
func (r *Reader) Truncated() bool { return r.cutAt > 0 }

// CutAt is the byte the file ends at when it ended inside a block, else
// 0. The reader's last warning says so too.
func (r *Reader) CutAt() int64 { return r.cutAt }

// Blocks is the number of complete blocks read.
func (r *Reader) Blocks() int { return r.blocks }

// Close stops any decoding ahead and releases the file.
func (r *Reader) Close() error {
	var closeFile func() error
	if r.closer != nil {
		closeFile, r.closer = r.closer.Close, nil
	}
	if r.par != nil {
		p := r.par
		r.par = nil
		return p.stop(closeFile)
	}
	if closeFile != nil {
		return closeFile()
	}
	return nil
}

func (r *Reader) warn(format string, a ...any) {
	if len(r.warnings) < 100 {
		r.warnings = append(r.warnings, fmt.Sprintf(format, a...))
	}
}

// Next returns the next item, or io.EOF at the end of the file.
func (r *Reader) Next() (Item, error) {
	it, err := r.NextRef()
	if err != nil {
		return Item{}, err
	}
	return *it, nil
}

// NextRef returns the next item, or io.EOF at the end of the file. The
// item is the reader's and valid until the next call: replaying millions
// of events then copies none of them.
func (r *Reader) NextRef() (*Item, error) {
	for {
		switch {
		case r.pos < len(r.items):
			r.pos++
			return r.keepStack(&r.items[r.pos-1]), nil
		case r.iter.live:
			if r.iter.next(&r.cur) {
				return r.keepStack(&r.cur), nil
			}
			r.noteDamage(r.iter.notes)
		case r.done:
			return nil, io.EOF
		case r.par != nil:
			db := r.par.next()
			r.serve(db)
			r.noteDamage(db.notes)
		default:
			var db decodedBlock
			j := r.readBlock(r.scratch.payload)
			r.scratch.payload = j.payload
			r.scratch.open(r.zdec, j, &db, &r.iter)
			r.serve(&db)
		}
	}
}

// keepStack gives an event the stack the reader keeps for it.
func (r *Reader) keepStack(it *Item) *Item {
	if it.Kind != ItemEvent || it.Event.Stack == nil {
		return it
	}
	s := r.stacks.keep(it.Event.Stack)
	if s == leftOutStack {
		r.stacksLeftOut()
	}
	if it.Event.Stack != s {
		it.Event.Stack = s
	}
	return it
}

// stacksLeftOut notes the block stacks were first left out in.
func (r *Reader) stacksLeftOut() {
	if r.stacksFrom == 0 {
		r.stacksFrom = max(r.blocks, 1) // 0 is none
	}
}

// serve takes a decoded block's warnings, in file order, and its items.
func (r *Reader) serve(db *decodedBlock) {
	r.stacks.newBlock()
	for _, w := range db.job.warns {
		r.warn("%s", w)
	}
	if r.par != nil && r.items != nil {
		r.par.recycle(r.items)
	}
	r.items, r.pos = db.items, 0
	switch {
	case db.job.end:
		if db.job.cutAt > 0 {
			r.cutAt = db.job.cutAt
			r.warn("recording cut short at byte %d (inside a block); %d complete blocks read", db.job.cutAt, r.blocks)
		}
		r.done = true
		return
	case db.skip != "":
		r.warn("%s", db.skip)
		return
	}
	r.blocks++
}

// noteDamage says what was found inside the block just read.
func (r *Reader) noteDamage(notes []blockNote) {
	for _, n := range notes {
		switch n.kind {
		case noteNewer:
			if r.newer == 0 {
				r.warn("block %d%s", r.blocks, n.msg)
			}
			r.newer += n.count
		case noteLate:
			if r.late == 0 {
				r.warn("block %d%s", r.blocks, n.msg)
			}
			r.late += n.count
		case noteStacks:
			r.stacksLeftOut()
			r.stacks.left.Stacks += n.count
			r.stacks.left.Frames += n.frames
		default:
			r.warn("block %d%s", r.blocks, n.msg)
		}
	}
}

// decode decodes one record into it; ok says whether it is an item.
func (d *blockDecoder) decode(typ byte, body []byte, it *Item) (ok bool, err error) {
	set := func(v Item, err error) (bool, error) {
		if err == nil {
			*it = v
		}
		return err == nil, err
	}
	switch typ {
	case recThread:
		return false, d.thread(body)
	case recString:
		return false, d.str(body)
	case recStack:
		return false, d.stack(body)
	case recEventStack:
		return false, d.eventStack(body)
	case recEvent, recLaterEvent:
		chain := 0
		if typ == recLaterEvent {
			chain = 1
		}
		if err := d.eventInto(body, chain, &it.Event); err != nil {
			return false, err
		}
		it.Kind, it.Lost = ItemEvent, Lost{}
		if it.Snapshot != nil || it.Procfs != nil || it.End != nil || it.Latency != nil {
			// Only after another kind of item: a pointer stored costs a
			// write barrier, and most items are events.
			it.Snapshot, it.Procfs, it.End, it.Latency = nil, nil, nil, nil
		}
		return true, nil
	case recSnapshot:
		s, err := decodeSnapshot(body)
		if err == nil && s.Data == nil {
			err = fmt.Errorf("%w: snapshot without data", errCorrupt)
		}
		return set(Item{Kind: ItemSnapshot, Snapshot: s}, err)
	case recProcfs:
		p, err := decodeJSON[Procfs](body, "procfs")
		return set(Item{Kind: ItemProcfs, Procfs: p}, err)
	case recLost:
		l, err := d.lost(body)
		return set(Item{Kind: ItemLost, Lost: l}, err)
	case recLatency:
		st, err := decodeJSON[wire.Stats](body, "latency")
		if err != nil {
			return false, err
		}
		return set(Item{Kind: ItemLatency, Latency: st.Latency()}, nil)
	case recEnd:
		e, err := decodeJSON[EndRecord](body, "end")
		if err != nil {
			return false, err
		}
		return set(Item{Kind: ItemEnd, End: e.end()}, nil)
	}
	return false, nil // a record type from a newer minor version
}

// decodeJSON decodes one JSON record, or says it is corrupt.
func decodeJSON[T any](body []byte, what string) (*T, error) {
	v := new(T)
	if err := json.Unmarshal(body, v); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", errCorrupt, what, err)
	}
	return v, nil
}

// readBlockNew reads the next block into new memory: for a block handed
// to another goroutine.
func (r *Reader) readBlockNew() *blockJob { return r.readBlock(nil) }

// readBlock reads the next block into buf's room and checks it, without
// decompressing it; damage skipped on the way is in its warns. At the end
// of the file it returns a job with end set.
func (r *Reader) readBlock(buf []byte) *blockJob {
	j := &blockJob{}
	for {
		var hb [blockHeaderSize]byte
		n, err := r.readFull(hb[:])
		if err == io.EOF {
			j.end = true
			return j
		}
		if err != nil {
			j.end, j.cutAt = true, r.off+int64(n)
			return j
		}
		start := r.off
		h, ok := parseBlockHeader(hb[:])
		if !ok || h.Compressed > maxBlockCompressed || h.Raw > maxBlockRaw {
			j.warns = append(j.warns, fmt.Sprintf("damaged block header at byte %d; looking for the next block", start))
			if err := r.resync(hb[1:]); err != nil {
				j.end = true
				return j
			}
			continue
		}
		payload := slices.Grow(buf[:0], int(h.Compressed))[:h.Compressed]
		m, err := r.readFull(payload)
		// A block that fails is looked past from its second byte, not from
		// where its length says it ends: a damaged length would otherwise
		// hide every block it claims, or end the file. That reads its bytes
		// again; past a budget (a file of nothing but bad headers would
		// make it quadratic), a failed block is skipped by its length.
		rescan := r.reread < maxReread+2*r.off
		if err != nil {
			rest := append(hb[1:], payload[:m]...)
			if !rescan || !bytes.Contains(rest, blockMagic[:]) { // the file was cut here
				j.end, j.cutAt = true, r.off+int64(blockHeaderSize+m)
				return j
			}
			j.warns = append(j.warns, fmt.Sprintf("block at byte %d claims %d bytes, past the end of the file; looking for the next block", start, h.Compressed))
			r.reread += int64(len(rest))
			if r.resync(rest) != nil {
				j.end = true
				return j
			}
			continue
		}
		if checksum(payload) != h.CRC {
			if !rescan {
				r.off += int64(blockHeaderSize) + int64(h.Compressed)
				j.warns = append(j.warns, fmt.Sprintf("block at byte %d fails its checksum; skipped", start))
				continue
			}
			j.warns = append(j.warns, fmt.Sprintf("block at byte %d fails its checksum; looking for the next block", start))
			r.reread += int64(len(payload))
			if r.resync(append(hb[1:], payload...)) != nil {
				j.end = true
				return j
			}
			continue
		}
		r.off += int64(blockHeaderSize) + int64(h.Compressed)
		j.start, j.h, j.payload = start, h, payload
		return j
	}
}

// resync scans forward for the next block magic. pending holds bytes
// already read past the damaged header's first byte.
func (r *Reader) resync(pending []byte) error {
	r.off++
	window := append([]byte(nil), pending...)
	for {
		if i := bytes.Index(window, blockMagic[:]); i >= 0 {
			r.off += int64(i)
			// Put the candidate header back in front of the stream.
			r.pending = append(window[i:len(window):len(window)], r.pending...)
			return nil
		}
		keep := len(blockMagic) - 1
		if len(window) > keep {
			r.off += int64(len(window) - keep)
			window = window[len(window)-keep:]
		}
		var buf [4096]byte
		n, err := r.Read(buf[:])
		if n == 0 && err != nil {
			r.off += int64(len(window))
			return io.EOF
		}
		window = append(window, buf[:n]...)
	}
}
