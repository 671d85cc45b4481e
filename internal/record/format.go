// Package record writes and reads numatrace recordings: a versioned header
// followed by independent, length-prefixed, checksummed zstd blocks of
// records. docs/FORMAT.md is the specification; this package is the
// reference implementation.
package record

import "math"

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/numatrace/numatrace/internal/stall"
)

// Magic opens every recording. As in PNG, the 0x1a byte stops `type` on
// some systems and the trailing \n catches LF→CRLF conversion.
var Magic = [8]byte{'N', 'U', 'M', 'A', 'T', 'R', 0x1a, '\n'}

// blockMagic opens every block, so a reader can find the next block after
// a corrupt length.
var blockMagic = [4]byte{'N', 'T', 'B', 'K'}

// Format version. A reader refuses a newer major version; minor versions
// only add record types, which older readers skip.
const (
	VersionMajor = 1
	// 1.1 added latency records, 1.2 the doctor header field, 1.3 made
	// lost records mark where the live run closed windows, 1.4 added
	// the stalls' stacks, 1.5 the throttle and memstall causes (later
	// events), the limit field and the header's PSI figures, 1.6 the
	// requests' budgets (latency records' slow_budget_ns) and the
	// header's psi_scope, 1.7 the serving threads' waits (kind 2, later
	// events).
	VersionMinor = 7
)

// Limits that keep a reader's memory bounded on any input.
const (
	maxHeaderBytes     = 1 << 20
	maxBlockCompressed = 16 << 20
	maxBlockRaw        = 64 << 20 // a snapshot of full kernel maps is about 12 MB of JSON
	maxRecordBytes     = 48 << 20
	// targetBlockRaw is when a writer closes a block.
	targetBlockRaw = 256 << 10

	// What a reader derives from the file is bounded too, so that a
	// crafted file cannot make it allocate or loop without end (§11.6).
	// A block's threads and strings, and a name's length: a 256 KiB block
	// declares some tens of thousands of threads at most, and kernel task
	// names are 16 bytes.
	maxBlockThreads = 1 << 17
	maxBlockStrings = 1 << 16
	// A block's records, each decoded into an Item of some 260 bytes and
	// held until the caller reaches it (blocks are decoded ahead): a
	// writer's 256 KiB block holds 16,000 at most (17 bytes a record in
	// the shipped recordings), where 64 MiB of the smallest took 4 GB.
	maxBlockRecords = 1 << 16
	maxNameBytes    = 256
	// A block's stacks and their frames, a stack's frames, and a frame's
	// names (demangled C++ templates run long).
	maxBlockStacks = 1 << 14
	maxBlockFrames = 1 << 18
	maxStackFrames = 256
	maxFrameBytes  = stall.MaxNameBytes
	// The stacks a reader makes of a block (decoded ahead on other cores,
	// a few blocks at once) and keeps of a file (each once, however many
	// blocks declare it), by their Size: a stack of 4096-byte names
	// compresses a thousandfold. A writer's block (256 KiB and one stack)
	// makes 11 MiB at most of names that need no escaping.
	maxBlockStackBytes = 16 << 20
	maxFileStackBytes  = 32 << 20
	// MinWindowNs is the shortest window a recording may have (--window
	// takes 10 ms at least; tests write 1 ms ones).
	MinWindowNs = 1_000_000
	// A record's time may be at most maxSpanWindows windows, and at most
	// maxSpanNs, after the recording's start: replay closes every window
	// up to the newest time it meets, one by one.
	maxSpanWindows = 1 << 22
	maxSpanNs      = 366 * 24 * 3600 * 1_000_000_000
	// Looking past failed blocks from their second byte reads bytes again:
	// at most this much more than twice what was read.
	maxReread = 64 << 20
)

// spanEnd is the latest time a record of a recording with header h may
// carry.
func spanEnd(h Header) uint64 {
	w := h.WindowNs
	if w == 0 {
		w = 1e9 // replay's default
	}
	span := uint64(maxSpanNs)
	if w <= maxSpanNs/maxSpanWindows { // no overflow
		span = min(w*maxSpanWindows, maxSpanNs)
	}
	if h.StartNs > math.MaxUint64-span {
		return math.MaxUint64
	}
	return h.StartNs + span
}

// Record types inside a block.
const (
	recThread   = 1 // a thread's pid and name: uvarint tid, uvarint pid, string comm
	recString   = 2 // uvarint id, string: names reasons, modes and results
	recEvent    = 3 // one stall or exit, see encodeEvent
	recSnapshot = 4 // JSON: the kernel's exact aggregates at a moment
	recProcfs   = 5 // JSON: /proc and /sys readings at a moment
	recLost     = 6 // uvarint mono ns, uvarint lost events total, uvarint recorder drops total[, uvarint PSI some total + 1 (1.5)]
	recEnd      = 7 // JSON: how the run ended; only in a complete recording
	recLatency  = 8 // JSON: one window's request latency (since 1.1)
	// recLaterEvent is an event of a cause added after 1.2 (runq_wait and
	// on), or of a kind added after 1.6 (wait). Same body as recEvent, but its own timestamp chain: a 1.2
	// reader skips the type without upsetting the deltas of the events it
	// does read, where a new cause in a type-3 record would make it drop
	// the rest of the block as corrupt.
	recLaterEvent = 9
	// recStack is a stack of this block (since 1.4): uvarint id, string
	// note, then the kernel frames and the user frames, each a uvarint
	// count and per frame string func, string module, uvarint offset,
	// string build id, uvarint address.
	recStack = 10
	// recEventStack names the stack of the event record right after it
	// (since 1.4): uvarint stack id. An older reader skips it and reads
	// the event as before.
	recEventStack = 11
)

// firstLaterCause is the first cause written as recLaterEvent.
const firstLaterCause = stall.RunqWait

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// blockHeader is the fixed part before each block's payload.
type blockHeader struct {
	Compressed uint32 // payload bytes on disk
	Raw        uint32 // payload bytes after decompression
	Records    uint32
	CRC        uint32 // CRC-32C of the compressed payload
}

const blockHeaderSize = 4 + 16

func (h blockHeader) put(b []byte) {
	copy(b, blockMagic[:])
	binary.LittleEndian.PutUint32(b[4:], h.Compressed)
	binary.LittleEndian.PutUint32(b[8:], h.Raw)
	binary.LittleEndian.PutUint32(b[12:], h.Records)
	binary.LittleEndian.PutUint32(b[16:], h.CRC)
}

func parseBlockHeader(b []byte) (blockHeader, bool) {
	if [4]byte(b[:4]) != blockMagic {
		return blockHeader{}, false
	}
	return blockHeader{
		Compressed: binary.LittleEndian.Uint32(b[4:]),
		Raw:        binary.LittleEndian.Uint32(b[8:]),
		Records:    binary.LittleEndian.Uint32(b[12:]),
		CRC:        binary.LittleEndian.Uint32(b[16:]),
	}, true
}
