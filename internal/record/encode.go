package record

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/numatrace/numatrace/internal/stall"
)

// blockEncoder builds one block's records. Every block stands alone: its
// thread and string tables start empty and times restart, so a reader can
// skip a damaged block and a flight recorder can drop old ones.
type blockEncoder struct {
	buf     []byte
	records uint32
	threads map[uint32]threadInfo
	strings map[string]uint64
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
	e.lastTs = [2]uint64{}
}

func (e *blockEncoder) size() int { return len(e.buf) }

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

	typ, chain := byte(recEvent), 0
	if ev.Kind == stall.KindStall && ev.Cause >= firstLaterCause {
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
	e.record(recLost, binary.AppendUvarint(body, l.Dropped))
}

// blockDecoder reads one block's records back.
type blockDecoder struct {
	buf     []byte
	threads map[uint32]threadInfo
	strings map[uint64]string
	lastTs  [2]uint64 // per timestamp chain: recEvent, recLaterEvent
}

var errCorrupt = errors.New("corrupt record")

// errNewerEvent marks a well-formed event of a kind or cause this reader
// does not know: a newer minor version wrote it. The reader skips it and
// keeps the rest of the block.
var errNewerEvent = errors.New("event of a newer version")

func newBlockDecoder(raw []byte) *blockDecoder {
	return &blockDecoder{buf: raw, threads: map[uint32]threadInfo{}, strings: map[uint64]string{}}
}

// reset readies d for another block, keeping its tables' room: the next
// block declares much the same threads again.
func (d *blockDecoder) reset(raw []byte) {
	d.buf, d.lastTs = raw, [2]uint64{}
	clear(d.threads)
	clear(d.strings)
}

// next returns the next record's type and body, or io.EOF-like done=true.
func (d *blockDecoder) next() (typ byte, body []byte, done bool, err error) {
	if len(d.buf) == 0 {
		return 0, nil, true, nil
	}
	typ = d.buf[0]
	n, k := binary.Uvarint(d.buf[1:])
	if k <= 0 || n > maxRecordBytes || uint64(len(d.buf)-1-k) < n {
		return 0, nil, false, fmt.Errorf("%w: bad length", errCorrupt)
	}
	body = d.buf[1+k : 1+k+int(n)]
	d.buf = d.buf[1+k+int(n):]
	return typ, body, false, nil
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

func (u *uvarints) str() string {
	n := u.next()
	if u.err != nil {
		return ""
	}
	if n > uint64(len(u.b)) {
		u.err = fmt.Errorf("%w: string past the record", errCorrupt)
		return ""
	}
	s := string(u.b[:n])
	u.b = u.b[n:]
	return s
}

func (d *blockDecoder) thread(body []byte) error {
	u := uvarints{b: body}
	tid, pid, comm := u.next(), u.next(), u.str()
	if u.err != nil {
		return u.err
	}
	d.threads[uint32(tid)] = threadInfo{uint32(pid), comm}
	return nil
}

func (d *blockDecoder) str(body []byte) error {
	u := uvarints{b: body}
	id, s := u.next(), u.str()
	if u.err != nil {
		return u.err
	}
	d.strings[id] = s
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

// eventInto decodes into ev, which it overwrites whole: replay decodes
// millions of events into one.
func (d *blockDecoder) eventInto(body []byte, chain int, ev *stall.Event) error {
	if len(body) < 1 {
		return fmt.Errorf("%w: empty event", errCorrupt)
	}
	*ev = stall.Event{Kind: stall.Kind(body[0] >> 4), Cause: stall.Cause(body[0] & 0x0f),
		Node: -1, DstNode: -1, SrcCPU: -1, DstCPU: -1}
	u := uvarints{b: body[1:]}
	flags := u.next()
	d.lastTs[chain] += uint64(unzigzag(u.next()))
	ev.TsNs = d.lastTs[chain]
	ev.DurNs = u.next()
	ev.TID = uint32(u.next())
	ev.CPU = uint32(u.next())
	mask := u.next()
	// Each optional field, in mask order; spelt out, not looped: replay
	// decodes millions of events.
	if mask&fOrder != 0 {
		ev.Order = int32(unzigzag(u.next()))
	}
	if mask&fGFP != 0 {
		ev.GFP = uint32(u.next())
	}
	if mask&fPages != 0 {
		ev.Pages = u.next()
	}
	if mask&fCgroup != 0 {
		ev.CgroupID = u.next()
	}
	if mask&fNode != 0 {
		ev.Node = int32(unzigzag(u.next()))
	}
	if mask&fDstNode != 0 {
		ev.DstNode = int32(unzigzag(u.next()))
	}
	if mask&fSrcCPU != 0 {
		ev.SrcCPU = int32(unzigzag(u.next()))
	}
	if mask&fDstCPU != 0 {
		ev.DstCPU = int32(unzigzag(u.next()))
	}
	if mask&(fReason|fMode|fStatus) != 0 {
		for _, f := range []struct {
			bit uint64
			dst *string
		}{{fReason, &ev.Reason}, {fMode, &ev.Mode}, {fStatus, &ev.Status}} {
			if mask&f.bit == 0 {
				continue
			}
			v := u.next()
			s, known := d.strings[v]
			if !known && u.err == nil {
				return fmt.Errorf("%w: unknown string %d", errCorrupt, v)
			}
			*f.dst = s
		}
	}
	if mask&fOtherTID != 0 {
		ev.OtherTID = uint32(u.next())
	}
	if mask&fPass != 0 {
		ev.Pass = uint32(u.next())
	}
	if mask&fAttempt != 0 {
		ev.AttemptNs = u.next()
	}
	if u.err != nil {
		return u.err
	}
	if ev.Kind > stall.KindExit || ev.Cause >= stall.NumCauses {
		// Checked after the fields are read, so a corrupt body is still
		// called corrupt.
		return fmt.Errorf("%w: kind %d cause %d", errNewerEvent, ev.Kind, ev.Cause)
	}
	t, ok := d.threads[ev.TID]
	if !ok {
		return fmt.Errorf("%w: event for unknown thread %d", errCorrupt, ev.TID)
	}
	ev.PID, ev.Comm = t.pid, t.comm
	if flags != 0 {
		ev.SoftLimit, ev.Write, ev.Acquired = flags&flSoftLimit != 0, flags&flWrite != 0, flags&flAcquired != 0
		ev.Swap, ev.Stick, ev.GroupDead, ev.Nested = flags&flSwap != 0, flags&flStick != 0, flags&flGroupDead != 0, flags&flNested != 0
	}
	return nil
}

func (d *blockDecoder) lost(body []byte) (Lost, error) {
	u := uvarints{b: body}
	l := Lost{MonoNs: u.next(), LostEvents: u.next(), Dropped: u.next()}
	return l, u.err
}
