package record

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"unsafe"

	"github.com/klauspost/compress/zstd"
)

// blockJob is one block as read from the file, still compressed, with
// the damage found before it.
type blockJob struct {
	start   int64 // byte offset of its header
	h       blockHeader
	payload []byte
	warns   []string // damage skipped before it, in file order
	end     bool     // no block: the file ended after warns
	cutAt   int64    // with end: the file ends inside a block at this byte
}

// decodedBlock is a job decompressed and decoded whole.
type decodedBlock struct {
	job   *blockJob
	skip  string // why the block was skipped, when it was
	items []Item
	notes []blockNote
}

// blockNote is damage inside a block, said once the block's number is
// known: "block N" + msg.
type blockNote struct {
	msg    string
	kind   noteKind
	count  int // of the records skipped, for a counted kind
	frames int // noteStacks: the stacks' frames
}

// noteKind says whether a note is said every time, or said the first
// time in the file and then only counted.
type noteKind int

const (
	noteDamage noteKind = iota
	noteNewer           // events of a newer version
	noteLate            // records timed past any recording's span
	noteStacks          // stacks past what a reader makes of a block
)

// blockScratch is what decoding one block after another reuses.
type blockScratch struct {
	payload []byte // compressed, read from the file: only the sequential reader's
	raw     []byte
	dec     *blockDecoder
	maxTs   uint64 // the latest time a record may carry (spanEnd)
}

// blockIter decodes a decompressed block's records one at a time, so the
// sequential reader hands each event on while it is still in cache.
type blockIter struct {
	d     *blockDecoder
	want  uint32 // records, as the block header says
	got   uint32
	newer int // index of the newer-events note in notes, or -1
	late  int // index of the past-the-span note in notes, or -1
	maxTs uint64
	notes []blockNote
	live  bool // records remain
}

// open decompresses j and readies sc's decoder for its records; when the
// block has none to read (the end, or it does not decompress), db says
// why and the iterator is done.
func (sc *blockScratch) open(zdec *zstd.Decoder, j *blockJob, db *decodedBlock, it *blockIter) {
	db.job = j
	*it = blockIter{want: j.h.Records, newer: -1, late: -1, maxTs: sc.maxTs, notes: it.notes[:0]}
	if j.end {
		return
	}
	raw, err := zdec.DecodeAll(j.payload, sc.raw[:0])
	sc.raw = raw
	if err != nil || len(raw) != int(j.h.Raw) {
		db.skip = fmt.Sprintf("block at byte %d does not decompress; skipped", j.start)
		return
	}
	if sc.dec == nil {
		sc.dec = newBlockDecoder(nil)
	}
	sc.dec.reset(raw)
	it.d, it.live = sc.dec, true
}

// next decodes the block's next item into item; false at the block's end,
// when notes holds the damage found in it.
func (it *blockIter) next(item *Item) bool {
	for it.live {
		typ, body, done, err := it.d.next()
		if done {
			if it.got != it.want {
				it.note(fmt.Sprintf(" holds %d records, its header says %d", it.got, it.want))
			}
			it.stop()
			return false
		}
		it.got++
		if err == nil && it.got > maxBlockRecords {
			err = fmt.Errorf("%w: over %d records in a block", errCorrupt, maxBlockRecords)
		}
		if err != nil {
			it.note(fmt.Sprintf(": %v; rest of the block skipped", err))
			it.stop()
			return false
		}
		ok, err := it.d.decode(typ, body, item)
		if errors.Is(err, errNewerEvent) {
			if it.newer < 0 {
				it.newer = len(it.notes)
				it.notes = append(it.notes, blockNote{kind: noteNewer,
					msg: fmt.Sprintf(": %v; such events are skipped (a newer numatrace reads them)", err)})
			}
			it.notes[it.newer].count++
			continue
		}
		if err != nil {
			it.note(fmt.Sprintf(": %v; rest of the block skipped", err))
			it.stop()
			return false
		}
		if ok && item.timeNs() > it.maxTs {
			// A time no recording reaches: replay would close every window
			// up to it.
			if it.late < 0 {
				it.late = len(it.notes)
				it.notes = append(it.notes, blockNote{kind: noteLate, msg: ": a record timed past any recording's span " +
					"(more windows after the start than replay closes); such records are skipped"})
			}
			it.notes[it.late].count++
			continue
		}
		if ok {
			return true
		}
	}
	return false
}

// timeNs is the newest time an item carries, or 0.
func (it *Item) timeNs() uint64 {
	switch it.Kind {
	case ItemEvent:
		return it.Event.TsNs
	case ItemLost:
		return it.Lost.MonoNs
	case ItemSnapshot:
		return it.Snapshot.MonoNs
	case ItemProcfs:
		return it.Procfs.MonoNs
	case ItemEnd:
		return max(it.End.EndNs, it.End.DurationNs)
	}
	return 0
}

func (it *blockIter) note(msg string) { it.notes = append(it.notes, blockNote{msg: msg}) }

// stop ends the block, noting the stacks it did not make.
func (it *blockIter) stop() {
	it.live = false
	if l := it.d.leftOut; l.Stacks > 0 {
		it.notes = append(it.notes, blockNote{kind: noteStacks, count: l.Stacks, frames: l.Frames})
	}
}

// decodeBlock decompresses j and decodes its records into items,
// appending to the slice given: a block decoded ahead on another core.
func (sc *blockScratch) decodeBlock(zdec *zstd.Decoder, j *blockJob, items []Item, db *decodedBlock) {
	var it blockIter
	sc.open(zdec, j, db, &it)
	db.items = items
	for {
		// Decoded in place, in the slot past the end: kept only if ok.
		db.items = slices.Grow(db.items, 1)
		if !it.next(&db.items[:len(db.items)+1][len(db.items)]) {
			break
		}
		db.items = db.items[:len(db.items)+1]
	}
	db.notes = it.notes
}

// maxWorkers bounds the decoding ahead: the shared zstd decoder runs at
// most min(4, GOMAXPROCS) decompressions at once, and every block decoded
// ahead holds its items (a few MB) until the caller reaches it.
const maxWorkers = 4

// Parallel decodes blocks ahead on up to workers goroutines (0: one per
// CPU, at most maxWorkers), while the caller takes items in order. Blocks
// stand alone, so each is decompressed and decoded on its own; what the
// reader returns, and its warnings, are the same as reading in sequence.
// Call it before the first Next; Close stops the workers.
func (r *Reader) Parallel(workers int) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, maxWorkers)
	if workers < 2 || r.par != nil || r.done || len(r.items) > 0 || r.iter.live {
		return
	}
	r.par = startPipeline(r, workers)
}

// pipeline reads blocks in one goroutine, decodes them in workers, and
// hands them back in file order.
type pipeline struct {
	order chan chan *decodedBlock // one result channel per block, in file order
	quit  chan struct{}
	wg    sync.WaitGroup
	free  sync.Pool // item slices the reader is done with
	ahead *aheadBudget
}

// aheadBytes bounds what the blocks read and decoded ahead of the caller
// hold together, by their raw bytes and their items: four 64 MiB blocks
// of the smallest records took 15 GB. A block larger than it is still
// read, alone.
const aheadBytes = 64 << 20

// itemBytes is what one decoded item takes.
const itemBytes = int64(unsafe.Sizeof(Item{}))

// aheadCost is what a block decoded ahead holds until the caller takes it.
func aheadCost(j *blockJob) int64 {
	return int64(j.h.Raw) + int64(len(j.payload)) + int64(min(j.h.Records, maxBlockRecords))*itemBytes
}

// aheadBudget is the bytes of blocks in flight, waited on by the reading
// goroutine.
type aheadBudget struct {
	mu      sync.Mutex
	cond    *sync.Cond
	used    int64
	stopped bool
}

func newAheadBudget() *aheadBudget {
	b := &aheadBudget{}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// take waits until n fits (or nothing else is in flight); false if the
// pipeline stopped meanwhile.
func (b *aheadBudget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for !b.stopped && b.used > 0 && b.used+n > aheadBytes {
		b.cond.Wait()
	}
	b.used += n
	return !b.stopped
}

func (b *aheadBudget) give(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
	b.cond.Broadcast()
}

func (b *aheadBudget) stop() {
	b.mu.Lock()
	b.stopped = true
	b.mu.Unlock()
	b.cond.Broadcast()
}

// bigScratch is the largest block a worker decompresses into a buffer of
// its own.
const bigScratch = 4 << 20

func startPipeline(r *Reader, workers int) *pipeline {
	p := &pipeline{order: make(chan chan *decodedBlock, workers), quit: make(chan struct{}), ahead: newAheadBudget()}
	type task struct {
		job *blockJob
		out chan *decodedBlock
	}
	tasks := make(chan task, workers)
	p.wg.Add(1 + workers)
	go func() { // the reader: file order
		defer p.wg.Done()
		defer close(tasks)
		defer close(p.order)
		for {
			select { // a stop wins over reading on
			case <-p.quit:
				return
			default:
			}
			j := r.readBlockNew() // the end too: decoding it is a no-op
			if !p.ahead.take(aheadCost(j)) {
				return
			}
			out := make(chan *decodedBlock, 1)
			select {
			case tasks <- task{j, out}:
			case <-p.quit:
				return
			}
			select {
			case p.order <- out:
			case <-p.quit:
				return
			}
			if j.end {
				return
			}
		}
	}()
	// Blocks larger than bigScratch (a snapshot's 12 MB, or what no
	// writer makes) are decompressed one at a time into one buffer, kept:
	// a buffer each, let go after each block, had the heap hold several.
	var big struct {
		sync.Mutex
		raw []byte
	}
	for i := 0; i < workers; i++ {
		go func() {
			defer p.wg.Done()
			sc := blockScratch{maxTs: r.scratch.maxTs}
			for t := range tasks {
				db := &decodedBlock{}
				if t.job.h.Raw <= bigScratch {
					sc.decodeBlock(r.zdec, t.job, p.items(), db)
				} else {
					big.Lock()
					own := sc.raw
					sc.raw = big.raw
					sc.decodeBlock(r.zdec, t.job, p.items(), db)
					big.raw, sc.raw = sc.raw, own
					big.Unlock()
				}
				t.out <- db
			}
		}()
	}
	return p
}

func (p *pipeline) items() []Item {
	if s, ok := p.free.Get().(*[]Item); ok {
		return (*s)[:0]
	}
	return nil
}

func (p *pipeline) recycle(items []Item) {
	clear(items) // drop what the items point to
	p.free.Put(&items)
}

// next returns the next block in file order; what it held of the budget
// is the caller's now.
func (p *pipeline) next() *decodedBlock {
	out, ok := <-p.order
	if !ok { // stopped
		return &decodedBlock{job: &blockJob{end: true}}
	}
	db := <-out
	p.ahead.give(aheadCost(db.job))
	return db
}

// stop ends the goroutines and waits for them. closeInput, if set, runs
// first: the reading goroutine may be blocked reading (a pipe), and only
// closing its input ends that read.
func (p *pipeline) stop(closeInput func() error) error {
	close(p.quit)
	p.ahead.stop()
	var err error
	if closeInput != nil {
		err = closeInput()
	}
	// Workers hand back into channels that hold one block each, so they
	// never block; the reading goroutine ends at quit or at the end.
	for range p.order {
	}
	p.wg.Wait()
	return err
}
