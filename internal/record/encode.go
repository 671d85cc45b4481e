package record

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/tidmap"
)

// blockEncoder builds one block's records. Every block stands alone: its
// thread and string tables start empty and times restart, so a reader can
// skip a damaged block and a flight recorder can drop old ones.
type blockEncoder struct {
	buf     []byte
	records uint32
	threads map[uint32]threadInfo
	strings map[string]uint64
	stacks  map[*stall.Stack]uint64
	frames  int       // stack frames declared in this block
	lastTs  [2]uint64 // per timestamp chain: recEvent, recLaterEvent
}

type threadInfo struct {
	pid  uint32
	comm string
}

func newBlockEncoder() *blockEncoder {
	e := &blockEncoder{}
	e.reset()
	return e
}

func (e *blockEncoder) reset() {
	e.buf = e.buf[:0]
	e.records = 0
	e.threads = map[uint32]threadInfo{}
	e.strings = map[string]uint64{}
	e.stacks = map[*stall.Stack]uint64{}
	e.frames = 0
	e.lastTs = [2]uint64{}
}

func (e *blockEncoder) size() int { return len(e.buf) }

// full says whether the block must close before another event: a
// reader refuses a block with more stacks or frames than its limits.
func (e *blockEncoder) full() bool {
	return e.size() >= targetBlockRaw || len(e.stacks) >= maxBlockStacks-1 ||
		e.frames > maxBlockFrames-2*maxStackFrames
}

// record appends one record: type byte, uvarint length, body.
func (e *blockEncoder) record(typ byte, body []byte) {
	e.buf = append(e.buf, typ)
	e.buf = binary.AppendUvarint(e.buf, uint64(len(body)))
	e.buf = append(e.buf, body...)
	e.records++
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func (e *blockEncoder) stringID(s string) uint64 {
	if s == "" {
		return 0
	}
	if id, ok := e.strings[s]; ok {
		return id
	}
	id := uint64(len(e.strings) + 1)
	e.strings[s] = id
	body := binary.AppendUvarint(nil, id)
	e.record(recString, appendString(body, s))
	return id
}

// stackID declares s in this block the first time it comes, and returns its id.
func (e *blockEncoder) stackID(s *stall.Stack) uint64 {
	if id, ok := e.stacks[s]; ok {
		return id
	}
	id := uint64(len(e.stacks) + 1)
	e.stacks[s] = id
	body := binary.AppendUvarint(nil, id)
	body = appendString(body, cut(s.Note, maxFrameBytes))
	for _, frames := range [][]stall.Frame{s.Kernel, s.User} {
		frames = frames[:min(len(frames), maxStackFrames)]
		e.frames += len(frames)
		body = binary.AppendUvarint(body, uint64(len(frames)))
		for _, f := range frames {
			body = appendString(body, cut(f.Func, maxFrameBytes))
			body = appendString(body, cut(f.Module, maxFrameBytes))
			body = binary.AppendUvarint(body, f.Offset)
			body = appendString(body, cut(f.BuildID, maxFrameBytes))
			body = binary.AppendUvarint(body, f.Addr)
		}
	}
	e.record(recStack, body)
	return id
}

// cut keeps at most n bytes of s, so that every name written reads back.
func cut(s string, n int) string { return s[:min(len(s), n)] }

// Optional event fields, present when set in the field mask.
const (
	fOrder = 1 << iota
	fGFP
	fPages
	fCgroup
	fNode
	fDstNode
	fSrcCPU
	fDstCPU
	fReason
	fMode
	fStatus
	fOtherTID
	fPass
	fAttempt
	fLimit // 1.5: dirty_throttle's dirty limit
)

// Event flags, one bit each.
const (
	flSoftLimit = 1 << iota
	flWrite
	flAcquired
	flSwap
	flStick
	flGroupDead
	flNested
)

func zigzag(v int64) uint64 { return uint64((v << 1) ^ (v >> 63)) }

func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// causeBits is the room an event's first byte has for the cause, below
// the kind's four bits.
const causeBits = 4

// causesFitInCauseBits stops the build once stall.NumCauses exceeds
// 1<<causeBits (an array of negative length): a 17th cause needs a wider
// encoding (a new record type or format version, docs/FORMAT.md §7.2),
// not a silently truncated one.
type causesFitInCauseBits [1<<causeBits - int(stall.NumCauses)]struct{}

var _ causesFitInCauseBits

// event appends one stall or exit. Body: kind<<4|cause byte, uvarint
// flags, zigzag ts delta, uvarint dur, uvarint tid, uvarint cpu, uvarint
// field mask, then each present field in mask order.
func (e *blockEncoder) event(ev *stall.Event) {
	if t, ok := e.threads[ev.TID]; !ok || t.pid != ev.PID || t.comm != ev.Comm {
		e.threads[ev.TID] = threadInfo{ev.PID, ev.Comm}
		body := binary.AppendUvarint(nil, uint64(ev.TID))
		body = binary.AppendUvarint(body, uint64(ev.PID))
		e.record(recThread, appendString(body, ev.Comm))
	}
	var ids [3]uint64
	for i, s := range []string{ev.Reason, ev.Mode, ev.Status} {
		ids[i] = e.stringID(s)
	}
	var flags uint64
	for bit, on := range []bool{ev.SoftLimit, ev.Write, ev.Acquired, ev.Swap, ev.Stick, ev.GroupDead, ev.Nested} {
		if on {
			flags |= 1 << bit
		}
	}
	var mask uint64
	var fields []uint64
	opt := func(bit uint64, present bool, v uint64) {
		if present {
			mask |= bit
			fields = append(fields, v)
		}
	}
	opt(fOrder, ev.Order != 0, zigzag(int64(ev.Order)))
	opt(fGFP, ev.GFP != 0, uint64(ev.GFP))
	opt(fPages, ev.Pages != 0, ev.Pages)
	opt(fCgroup, ev.CgroupID != 0, ev.CgroupID)
	opt(fNode, ev.Node != -1, zigzag(int64(ev.Node)))
	opt(fDstNode, ev.DstNode != -1, zigzag(int64(ev.DstNode)))
	opt(fSrcCPU, ev.SrcCPU != -1, zigzag(int64(ev.SrcCPU)))
	opt(fDstCPU, ev.DstCPU != -1, zigzag(int64(ev.DstCPU)))
	opt(fReason, ids[0] != 0, ids[0])
	opt(fMode, ids[1] != 0, ids[1])
	opt(fStatus, ids[2] != 0, ids[2])
	opt(fOtherTID, ev.OtherTID != 0, uint64(ev.OtherTID))
	opt(fPass, ev.Pass != 0, uint64(ev.Pass))
	opt(fAttempt, ev.AttemptNs != 0, ev.AttemptNs)
	opt(fLimit, ev.Limit != 0, ev.Limit)

	if ev.Stack != nil {
		e.record(recEventStack, binary.AppendUvarint(nil, e.stackID(ev.Stack)))
	}
	typ, chain := byte(recEvent), 0
	if ev.Kind == stall.KindStall && ev.Cause >= firstLaterCause || ev.Kind == stall.KindWait {
		typ, chain = recLaterEvent, 1
	}
	body := make([]byte, 0, 32)
	body = append(body, byte(ev.Kind)<<4|byte(ev.Cause)&0x0f)
	body = binary.AppendUvarint(body, flags)
	body = binary.AppendUvarint(body, zigzag(int64(ev.TsNs-e.lastTs[chain])))
	e.lastTs[chain] = ev.TsNs
	body = binary.AppendUvarint(body, ev.DurNs)
	body = binary.AppendUvarint(body, uint64(ev.TID))
	body = binary.AppendUvarint(body, uint64(ev.CPU))
	body = binary.AppendUvarint(body, mask)
	for _, v := range fields {
		body = binary.AppendUvarint(body, v)
	}
	e.record(typ, body)
}

func (e *blockEncoder) lost(l Lost) {
	body := binary.AppendUvarint(nil, l.MonoNs)
	body = binary.AppendUvarint(body, l.LostEvents)
	body = binary.AppendUvarint(body, l.Dropped)
	if l.PSI {
		body = binary.AppendUvarint(body, l.PSISomeNs+1)
	}
	e.record(recLost, body)
}

// blockDecoder reads one block's records back.
type blockDecoder struct {
	buf []byte
	off int // the next record's start in buf
	// threads holds every thread declared in this decoder's blocks; only
	// those of block gen are declared in the current one. Entries outlive
	// their block so a name declared again is not allocated again.
	threads    tidmap.Map[declared]
	gen        uint32
	declared   int // thread records in this block
	strings    map[uint64]string
	stacks     map[uint64]*stall.Stack
	frames     int           // stack frames read in this block
	stackBytes int           // the Size of the stacks made of this block
	leftOut    StacksLeftOut // the stacks past maxBlockStackBytes, not made
	rawFrames  [2][]rawFrame // a stack's kernel and user frames, before they are made
	nextStack  *stall.Stack  // the stack of the next event (recEventStack)
	lastTs     [2]uint64     // per timestamp chain: recEvent, recLaterEvent
}

// rawFrame is a frame as its record holds it.
type rawFrame struct {
	fn, mod, bid []byte
	off, addr    uint64
}

type declared struct {
	threadInfo
	gen uint32 // the block that declared it last
}

var errCorrupt = errors.New("corrupt record")

// errNewerEvent marks a well-formed event of a kind or cause this reader
// does not know: a newer minor version wrote it. The reader skips it and
// keeps the rest of the block.
var errNewerEvent = errors.New("event of a newer version")

func newBlockDecoder(raw []byte) *blockDecoder {
	return &blockDecoder{buf: raw, gen: 1, strings: map[uint64]string{}, stacks: map[uint64]*stall.Stack{}}
}

// reset readies d for another block, keeping its tables' room: the next
// block declares much the same threads again.
func (d *blockDecoder) reset(raw []byte) {
	d.buf, d.off, d.lastTs = raw, 0, [2]uint64{}
	d.gen++
	d.declared = 0
	if d.threads.Len() > maxBlockThreads {
		// The names kept from earlier blocks only save allocations: a file
		// declaring new threads in every block must not grow this for good.
		d.threads.Reset()
	}
	clear(d.strings)
	clear(d.stacks)
	d.frames, d.stackBytes, d.leftOut = 0, 0, StacksLeftOut{}
	d.nextStack = nil
}

// next returns the next record's type and body, or io.EOF-like done=true.
// It moves an index, not the buffer: a new slice stored in the decoder
// would cost a GC write barrier per record.
func (d *blockDecoder) next() (typ byte, body []byte, done bool, err error) {
	b, off := d.buf, d.off
	if off >= len(b) {
		return 0, nil, true, nil
	}
	typ = b[off]
	n, i := uvarintAt(b, off+1)
	if i < 0 || n > maxRecordBytes || uint64(len(b)-i) < n {
		return 0, nil, false, fmt.Errorf("%w: bad length", errCorrupt)
	}
	d.off = i + int(n)
	return typ, b[i:d.off:d.off], false, nil
}

type uvarints struct {
	b   []byte
	err error
}

func (u *uvarints) next() uint64 {
	if len(u.b) > 0 && u.b[0] < 0x80 { // most fields fit in one byte
		v := u.b[0]
		u.b = u.b[1:]
		return uint64(v)
	}
	if u.err != nil {
		return 0
	}
	v, k := binary.Uvarint(u.b)
	if k <= 0 {
		u.err = fmt.Errorf("%w: bad varint", errCorrupt)
		return 0
	}
	u.b = u.b[k:]
	return v
}

// bytes returns a length-prefixed string's bytes, in the record.
func (u *uvarints) bytes() []byte {
	n := u.next()
	if u.err != nil {
		return nil
	}
	if n > uint64(len(u.b)) {
		u.err = fmt.Errorf("%w: string past the record", errCorrupt)
		return nil
	}
	b := u.b[:n]
	u.b = u.b[n:]
	return b
}

func (d *blockDecoder) thread(body []byte) error {
	u := uvarints{b: body}
	tid, pid, comm := u.next(), u.next(), u.bytes()
	if u.err != nil {
		return u.err
	}
	if len(comm) > maxNameBytes {
		return fmt.Errorf("%w: a thread name of %d bytes", errCorrupt, len(comm))
	}
	if d.declared++; d.declared > maxBlockThreads {
		return fmt.Errorf("%w: over %d threads in a block", errCorrupt, maxBlockThreads)
	}
	t, _ := d.threads.Put(uint32(tid))
	if t.comm != string(comm) { // compared without a copy
		t.comm = string(comm)
	}
	t.pid, t.gen = uint32(pid), d.gen
	return nil
}

// stack reads a recStack body. A stack past what a reader makes of a
// block is read but not made: its events get leftOutStack.
func (d *blockDecoder) stack(body []byte) error {
	u := uvarints{b: body}
	id, note := u.next(), u.bytes()
	text := stall.NameSize(note)
	for i := range d.rawFrames {
		d.rawFrames[i] = d.rawFrames[i][:0]
		n := u.next()
		if n > maxStackFrames {
			return fmt.Errorf("%w: a stack of %d frames", errCorrupt, n)
		}
		if d.frames += int(n); d.frames > maxBlockFrames {
			return fmt.Errorf("%w: over %d stack frames in a block", errCorrupt, maxBlockFrames)
		}
		for range n {
			fn, mod := u.bytes(), u.bytes()
			off := u.next()
			bid := u.bytes()
			addr := u.next()
			if u.err != nil {
				return u.err
			}
			if len(fn) > maxFrameBytes || len(mod) > maxFrameBytes || len(bid) > maxFrameBytes {
				return fmt.Errorf("%w: a frame name over %d bytes", errCorrupt, maxFrameBytes)
			}
			text += stall.NameSize(fn) + stall.NameSize(mod) + stall.NameSize(bid)
			d.rawFrames[i] = append(d.rawFrames[i], rawFrame{fn: fn, mod: mod, off: off, bid: bid, addr: addr})
		}
	}
	if u.err != nil {
		return u.err
	}
	if len(note) > maxFrameBytes {
		return fmt.Errorf("%w: a stack note over %d bytes", errCorrupt, maxFrameBytes)
	}
	if len(d.stacks) >= maxBlockStacks {
		return fmt.Errorf("%w: over %d stacks in a block", errCorrupt, maxBlockStacks)
	}
	frames := len(d.rawFrames[0]) + len(d.rawFrames[1])
	size := stall.StackSize(frames, text)
	if d.stackBytes+size > maxBlockStackBytes {
		d.stacks[id] = leftOutStack
		d.leftOut.add(frames)
		return nil
	}
	d.stackBytes += size
	d.stacks[id] = stall.NewStack(makeFrames(d.rawFrames[0]), makeFrames(d.rawFrames[1]), string(note))
	return nil
}

// makeFrames makes frames of raw; none is nil, as a stack without them has.
func makeFrames(raw []rawFrame) []stall.Frame {
	if len(raw) == 0 {
		return nil
	}
	frames := make([]stall.Frame, len(raw))
	for i, f := range raw {
		frames[i] = stall.Frame{Func: string(f.fn), Module: string(f.mod), Offset: f.off, BuildID: string(f.bid), Addr: f.addr}
	}
	return frames
}

// eventStack reads a recEventStack body: the next event's stack.
func (d *blockDecoder) eventStack(body []byte) error {
	u := uvarints{b: body}
	id := u.next()
	if u.err != nil {
		return u.err
	}
	s, ok := d.stacks[id]
	if !ok {
		return fmt.Errorf("%w: unknown stack %d", errCorrupt, id)
	}
	d.nextStack = s
	return nil
}

func (d *blockDecoder) str(body []byte) error {
	u := uvarints{b: body}
	id, s := u.next(), u.bytes()
	if u.err != nil {
		return u.err
	}
	if len(s) > maxNameBytes || len(d.strings) >= maxBlockStrings {
		return fmt.Errorf("%w: a string of %d bytes, or over %d strings in a block", errCorrupt, len(s), maxBlockStrings)
	}
	d.strings[id] = string(s)
	return nil
}

// event decodes a recEvent (chain 0) or recLaterEvent (chain 1) body.
func (d *blockDecoder) event(body []byte, chain int) (stall.Event, error) {
	var ev stall.Event
	if err := d.eventInto(body, chain, &ev); err != nil {
		return stall.Event{}, err
	}
	return ev, nil
}

// uvarintAt reads the uvarint at b[i:] and returns it with the index past
// it; an index below 0 is a failed read, and stays failed. Replay reads
// millions of events, and this keeps the common one-byte case inline.
func uvarintAt(b []byte, i int) (uint64, int) {
	if uint(i) < uint(len(b)) && b[i] < 0x80 {
		return uint64(b[i]), i + 1
	}
	return uvarintSlow(b, i)
}

func uvarintSlow(b []byte, i int) (uint64, int) {
	if i < 0 || i >= len(b) {
		return 0, -1
	}
	// Times and tids take two or three bytes: spelt out.
	if i+3 <= len(b) {
		b0, b1, b2 := uint64(b[i]), uint64(b[i+1]), uint64(b[i+2])
		if b1 < 0x80 {
			return b0&0x7f | b1<<7, i + 2
		}
		if b2 < 0x80 {
			return b0&0x7f | (b1&0x7f)<<7 | b2<<14, i + 3
		}
	}
	v, k := binary.Uvarint(b[i:])
	if k <= 0 {
		return 0, -1
	}
	return v, i + k
}

// eventInto decodes into ev, which it overwrites whole: replay decodes
// millions of events into one.
func (d *blockDecoder) eventInto(body []byte, chain int, ev *stall.Event) error {
	if len(body) < 1 {
		return fmt.Errorf("%w: empty event", errCorrupt)
	}
	stack := d.nextStack // a stack named for this event is its, even if it is skipped
	d.nextStack = nil
	b := body
	flags, i := uvarintAt(b, 1)
	dts, i := uvarintAt(b, i)
	dur, i := uvarintAt(b, i)
	tid, i := uvarintAt(b, i)
	cpu, i := uvarintAt(b, i)
	mask, i := uvarintAt(b, i)
	d.lastTs[chain] += uint64(unzigzag(dts))
	// Field by field, not a whole new Event: replay decodes into one
	// Event, and rewriting its strings when they have not changed costs a
	// GC write barrier each.
	ev.Kind, ev.Cause = stall.Kind(b[0]>>4), stall.Cause(b[0]&0x0f)
	ev.TsNs, ev.DurNs, ev.TID, ev.CPU = d.lastTs[chain], dur, uint32(tid), uint32(cpu)
	ev.Order, ev.GFP, ev.Pages, ev.CgroupID, ev.OtherTID, ev.Pass, ev.AttemptNs, ev.Limit = 0, 0, 0, 0, 0, 0, 0, 0
	ev.Node, ev.DstNode, ev.SrcCPU, ev.DstCPU = -1, -1, -1, -1
	setString(&ev.Reason, "")
	setString(&ev.Mode, "")
	setString(&ev.Status, "")
	if mask != 0 {
		i = d.optional(b, i, mask, ev)
	}
	if i < 0 {
		if i == errUnknownString {
			return fmt.Errorf("%w: unknown string", errCorrupt)
		}
		return fmt.Errorf("%w: bad varint", errCorrupt)
	}
	if ev.Kind > stall.KindWait || ev.Cause >= stall.NumCauses {
		// Checked after the fields are read, so a corrupt body is still
		// called corrupt.
		return fmt.Errorf("%w: kind %d cause %d", errNewerEvent, ev.Kind, ev.Cause)
	}
	t := d.threads.Get(ev.TID)
	if t == nil || t.gen != d.gen {
		return fmt.Errorf("%w: event for unknown thread %d", errCorrupt, ev.TID)
	}
	// Stored, not compared: the name is the thread's own string, the same
	// for each of its events, so later comparisons of it stop at the
	// pointer.
	ev.PID, ev.Comm = t.pid, t.comm
	if ev.Stack != stack {
		ev.Stack = stack
	}
	ev.SoftLimit, ev.Write, ev.Acquired = flags&flSoftLimit != 0, flags&flWrite != 0, flags&flAcquired != 0
	ev.Swap, ev.Stick, ev.GroupDead, ev.Nested = flags&flSwap != 0, flags&flStick != 0, flags&flGroupDead != 0, flags&flNested != 0
	return nil
}

// setString stores s in *dst unless it is already there.
func setString(dst *string, s string) {
	if *dst != s {
		*dst = s
	}
}

// errUnknownString is optional's index for a string id the block never
// declared.
const errUnknownString = -2

// optional reads the fields mask says are present, in mask order, from
// b[i:], and returns the index past them (below 0 on damage).
func (d *blockDecoder) optional(b []byte, i int, mask uint64, ev *stall.Event) int {
	var v uint64
	if mask&fOrder != 0 {
		v, i = uvarintAt(b, i)
		ev.Order = int32(unzigzag(v))
	}
	if mask&fGFP != 0 {
		v, i = uvarintAt(b, i)
		ev.GFP = uint32(v)
	}
	if mask&fPages != 0 {
		ev.Pages, i = uvarintAt(b, i)
	}
	if mask&fCgroup != 0 {
		ev.CgroupID, i = uvarintAt(b, i)
	}
	if mask&fNode != 0 {
		v, i = uvarintAt(b, i)
		ev.Node = int32(unzigzag(v))
	}
	if mask&fDstNode != 0 {
		v, i = uvarintAt(b, i)
		ev.DstNode = int32(unzigzag(v))
	}
	if mask&fSrcCPU != 0 {
		v, i = uvarintAt(b, i)
		ev.SrcCPU = int32(unzigzag(v))
	}
	if mask&fDstCPU != 0 {
		v, i = uvarintAt(b, i)
		ev.DstCPU = int32(unzigzag(v))
	}
	if mask&(fReason|fMode|fStatus) != 0 {
		for _, f := range [...]struct {
			bit uint64
			dst *string
		}{{fReason, &ev.Reason}, {fMode, &ev.Mode}, {fStatus, &ev.Status}} {
			if mask&f.bit == 0 {
				continue
			}
			v, i = uvarintAt(b, i)
			s, known := d.strings[v]
			if !known && i >= 0 {
				return errUnknownString
			}
			*f.dst = s
		}
	}
	if mask&fOtherTID != 0 {
		v, i = uvarintAt(b, i)
		ev.OtherTID = uint32(v)
	}
	if mask&fPass != 0 {
		v, i = uvarintAt(b, i)
		ev.Pass = uint32(v)
	}
	if mask&fAttempt != 0 {
		ev.AttemptNs, i = uvarintAt(b, i)
	}
	if mask&fLimit != 0 {
		ev.Limit, i = uvarintAt(b, i)
	}
	return i
}

func (d *blockDecoder) lost(body []byte) (Lost, error) {
	u := uvarints{b: body}
	l := Lost{MonoNs: u.next(), LostEvents: u.next(), Dropped: u.next()}
	if len(u.b) > 0 { // since 1.5: PSI's total + 1, 0 when it was not read
		if v := u.next(); v > 0 {
			l.PSISomeNs, l.PSI = v-1, true
		}
	}
	return l, u.err
}
