//go:build linux

package tracer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/numatrace/numatrace/internal/stall"
)

func comm(s string) (c [16]int8) {
	for i := 0; i < len(s) && i < len(c); i++ {
		c[i] = int8(s[i])
	}
	return c
}

// raw turns a record into the bytes the ring buffer would hand over.
func raw(e typesEvent) []byte {
	b := unsafe.Slice((*byte)(unsafe.Pointer(&e)), unsafe.Sizeof(e))
	return append([]byte(nil), b...)
}

// rawBinary encodes the same record with encoding/binary, independently of
// the in-memory layout.
func rawBinary(t *testing.T, e typesEvent) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := binary.Write(&buf, binary.NativeEndian, &e); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func stallRecord(cause typesCause) typesEvent {
	return typesEvent{
		TsNs: 1_000_000_123, DurNs: 4567, Pages: 32, CgroupId: 99,
		Kind: uint32(typesEventKindKIND_STALL), Cause: uint32(cause),
		Pid: 100, Tid: 101, Gfp: 0xcc0, Order: 2,
		Node: -1, DstNode: -1, SrcCpu: -1, DstCpu: -1,
		Reason: 4, Mode: 1, Status: 3, OtherTid: 0, Cpu: 7,
		Comm: comm("worker"),
	}
}

func TestEventSize(t *testing.T) {
	if EventSize != 136 {
		t.Errorf("EventSize = %d, want 136 (the C struct event)", EventSize)
	}
	if n := binary.Size(typesEvent{}); n != EventSize {
		t.Errorf("binary.Size = %d, EventSize = %d: padding in typesEvent", n, EventSize)
	}
}

func TestDecodeAllFields(t *testing.T) {
	rec := stallRecord(typesCauseCAUSE_MEMCG_RECLAIM)
	rec.Flags = uint32(typesEventFlagFLAG_SOFTLIMIT)
	rec.Node, rec.DstNode, rec.SrcCpu, rec.DstCpu, rec.OtherTid = 1, 2, 3, 4, 555
	b := rawBinary(t, rec)
	if !bytes.Equal(b, raw(rec)) {
		t.Fatalf("binary.Write and the in-memory layout disagree")
	}
	ev, err := NewDecoder(nil).Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	want := stall.Event{
		Kind: stall.KindStall, Cause: stall.MemcgReclaim, TsNs: 1_000_000_123, DurNs: 4567,
		PID: 100, TID: 101, Comm: "worker", CPU: 7, Order: 2, GFP: 0xcc0, Pages: 32, CgroupID: 99,
		Node: 1, DstNode: 2, SrcCPU: 3, DstCPU: 4, OtherTID: 555, SoftLimit: true,
	}
	if ev != want {
		t.Errorf("decoded\n%+v\nwant\n%+v", ev, want)
	}
}

func TestDecodeAcceptsLongerRecords(t *testing.T) {
	// The ring buffer rounds records up to 8 bytes; extra bytes are ignored.
	b := append(raw(stallRecord(typesCauseCAUSE_DIRECT_RECLAIM)), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	ev, err := NewDecoder(nil).Decode(b)
	if err != nil || ev.Cause != stall.DirectReclaim || ev.TID != 101 {
		t.Errorf("Decode = %+v, %v", ev, err)
	}
}

func TestDecodeShortRecord(t *testing.T) {
	full := raw(stallRecord(typesCauseCAUSE_DIRECT_RECLAIM))
	d := NewDecoder(nil)
	for _, n := range []int{0, 1, 8, EventSize - 1} {
		_, err := d.Decode(full[:n])
		if err == nil {
			t.Errorf("Decode of %d bytes succeeded", n)
			continue
		}
		if !strings.Contains(err.Error(), "short record") {
			t.Errorf("Decode of %d bytes: %v", n, err)
		}
	}
	if _, err := d.Decode(nil); err == nil {
		t.Errorf("Decode(nil) succeeded")
	}
}

func TestDecodeUnknownCauseAndKind(t *testing.T) {
	d := NewDecoder(nil)
	rec := stallRecord(typesCauseCAUSE_MAX)
	want := fmt.Sprintf("unknown cause %d", stall.NumCauses)
	if _, err := d.Decode(raw(rec)); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("CAUSE_MAX: %v, want %q", err, want)
	}
	rec.Cause = 0xffffffff
	if _, err := d.Decode(raw(rec)); err == nil || !strings.Contains(err.Error(), "unknown cause") {
		t.Errorf("cause 0xffffffff: %v", err)
	}
	rec = stallRecord(typesCauseCAUSE_DIRECT_RECLAIM)
	rec.Kind = 3
	if _, err := d.Decode(raw(rec)); err == nil || !strings.Contains(err.Error(), "unknown kind 3") {
		t.Errorf("kind 3: %v", err)
	}
	// A wait names its part of the budget; a part this reader does not
	// know is the last it knows, other_wait.
	for reason, want := range map[int32]stall.Part{0: stall.PartDiskIO, 1: stall.PartOtherWait, 7: stall.PartOtherWait} {
		rec = stallRecord(typesCauseCAUSE_DIRECT_RECLAIM)
		rec.Kind, rec.Reason = uint32(typesEventKindKIND_WAIT), reason
		if ev, err := d.Decode(raw(rec)); err != nil || ev.Kind != stall.KindWait || ev.Reason != want.String() {
			t.Errorf("wait of part %d: %+v, %v; want %s", reason, ev, err, want)
		}
	}
	// The last valid cause and kind still decode.
	rec = stallRecord(typesCauseCAUSE_MMAP_LOCK)
	if ev, err := d.Decode(raw(rec)); err != nil || ev.Cause != stall.MmapLock {
		t.Errorf("mmap_lock: %+v, %v", ev, err)
	}
}

func TestDecodeExit(t *testing.T) {
	rec := typesEvent{Kind: uint32(typesEventKindKIND_EXIT), TsNs: 5, Pid: 10, Tid: 11,
		Flags: uint32(typesEventFlagFLAG_GROUP_DEAD), Comm: comm("bye"), Reason: 4, Mode: 2}
	ev, err := NewDecoder(nil).Decode(raw(rec))
	if err != nil {
		t.Fatal(err)
	}
	if ev.Kind != stall.KindExit || !ev.GroupDead || ev.PID != 10 || ev.TID != 11 || ev.Comm != "bye" {
		t.Errorf("exit = %+v", ev)
	}
	if ev.Reason != "" || ev.Mode != "" || ev.Status != "" {
		t.Errorf("exit got stall details: %+v", ev)
	}
}

func TestDecodeFlags(t *testing.T) {
	type flags struct{ soft, write, acq, swap, stick, dead bool }
	cases := []struct {
		f    typesEventFlag
		want flags
	}{
		{0, flags{}},
		{typesEventFlagFLAG_SOFTLIMIT, flags{soft: true}},
		{typesEventFlagFLAG_WRITE, flags{write: true}},
		{typesEventFlagFLAG_SUCCESS, flags{acq: true}},
		{typesEventFlagFLAG_SWAP, flags{swap: true}},
		{typesEventFlagFLAG_STICK, flags{stick: true}},
		{typesEventFlagFLAG_GROUP_DEAD, flags{dead: true}},
		{typesEventFlagFLAG_WRITE | typesEventFlagFLAG_SUCCESS, flags{write: true, acq: true}},
		{0xffffffff, flags{true, true, true, true, true, true}},
		{0xffffffc0, flags{}}, // unknown bits only
	}
	d := NewDecoder(nil)
	for _, c := range cases {
		rec := stallRecord(typesCauseCAUSE_MMAP_LOCK)
		rec.Flags = uint32(c.f)
		ev, err := d.Decode(raw(rec))
		if err != nil {
			t.Fatal(err)
		}
		got := flags{ev.SoftLimit, ev.Write, ev.Acquired, ev.Swap, ev.Stick, ev.GroupDead}
		if got != c.want {
			t.Errorf("flags %#x: got %+v, want %+v", uint32(c.f), got, c.want)
		}
	}
}

func TestDecodeComm(t *testing.T) {
	d := NewDecoder(nil)
	for _, c := range []struct {
		in   [16]int8
		want string
	}{
		{comm(""), ""},
		{comm("a"), "a"},
		{comm("exactly15chars!"), "exactly15chars!"},
		{comm("sixteen_chars_xx"), "sixteen_chars_xx"}, // no NUL at all: all 16 bytes
		{[16]int8{'a', 0, 'b'}, "a"},                   // stops at the first NUL
		{[16]int8{-61, -87}, "\xc3\xa9"},               // bytes >= 0x80 survive the int8 round trip
	} {
		rec := stallRecord(typesCauseCAUSE_DIRECT_RECLAIM)
		rec.Comm = c.in
		ev, err := d.Decode(raw(rec))
		if err != nil {
			t.Fatal(err)
		}
		if ev.Comm != c.want {
			t.Errorf("comm %v = %q, want %q", c.in, ev.Comm, c.want)
		}
	}
}

func TestDecodeCopiesOutOfBuffer(t *testing.T) {
	b := raw(stallRecord(typesCauseCAUSE_DIRECT_RECLAIM))
	ev, err := NewDecoder(nil).Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 0
	}
	if ev.Comm != "worker" || ev.TID != 101 {
		t.Errorf("event changed when the buffer was reused: %+v", ev)
	}
}

func TestDecodeEnumsWithoutBTFAreNumbers(t *testing.T) {
	d := NewDecoder(nil)
	rec := stallRecord(typesCauseCAUSE_NUMA_MIGRATION)
	rec.Reason, rec.Mode = 4, 1
	ev, err := d.Decode(raw(rec))
	if err != nil {
		t.Fatal(err)
	}
	if ev.Reason != "4" || ev.Mode != "1" || ev.Status != "" {
		t.Errorf("numa_migration reason/mode/status = %q/%q/%q, want 4/1/empty", ev.Reason, ev.Mode, ev.Status)
	}

	rec = stallRecord(typesCauseCAUSE_COMPACTION)
	rec.Status, rec.Mode = 3, -1
	ev, err = d.Decode(raw(rec))
	if err != nil {
		t.Fatal(err)
	}
	if ev.Status != "3" || ev.Mode != "-1" || ev.Reason != "" {
		t.Errorf("compaction status/mode/reason = %q/%q/%q, want 3/-1/empty", ev.Status, ev.Mode, ev.Reason)
	}

	// Other causes carry no enum names even if the fields are set.
	rec = stallRecord(typesCauseCAUSE_DIRECT_RECLAIM)
	ev, _ = d.Decode(raw(rec))
	if ev.Reason != "" || ev.Mode != "" || ev.Status != "" {
		t.Errorf("direct_reclaim got enum names: %+v", ev)
	}
}

func enumType(name string, vals ...btf.EnumValue) *btf.Enum {
	return &btf.Enum{Name: name, Size: 4, Values: vals}
}

// testSpec builds a small BTF spec with the enums the decoder names.
func testSpec(t *testing.T) *btf.Spec {
	t.Helper()
	b, err := btf.NewBuilder([]btf.Type{
		enumType("migrate_reason",
			btf.EnumValue{Name: "MR_COMPACTION", Value: 0},
			btf.EnumValue{Name: "MR_NUMA_MISPLACED", Value: 5},
			btf.EnumValue{Name: "MR_TYPES", Value: 9}),
		enumType("migrate_mode",
			btf.EnumValue{Name: "MIGRATE_ASYNC", Value: 0},
			btf.EnumValue{Name: "MIGRATE_SYNC_LIGHT", Value: 1}),
		enumType("compact_result",
			btf.EnumValue{Name: "COMPACT_NOT_SUITABLE_ZONE", Value: 0},
			btf.EnumValue{Name: "COMPACT_SKIPPED", Value: 1},
			btf.EnumValue{Name: "COMPACT_SUCCESS", Value: 6},
			btf.EnumValue{Name: "OTHER_NAME", Value: 7}),
		enumType("compact_priority",
			btf.EnumValue{Name: "COMPACT_PRIO_SYNC_FULL", Value: 0},
			btf.EnumValue{Name: "MIN_COMPACT_PRIORITY", Value: 0}, // alias, no prefix
			btf.EnumValue{Name: "COMPACT_PRIO_SYNC_LIGHT", Value: 1},
			btf.EnumValue{Name: "MIN_COMPACT_COSTLY_PRIORITY", Value: 1},
			btf.EnumValue{Name: "DEF_COMPACT_PRIORITY", Value: 1},
			btf.EnumValue{Name: "COMPACT_PRIO_ASYNC", Value: 2},
			btf.EnumValue{Name: "INIT_COMPACT_PRIORITY", Value: 2}),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := b.Spec()
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

func TestDecodeEnumsFromBTF(t *testing.T) {
	d := NewDecoder(testSpec(t))
	rec := stallRecord(typesCauseCAUSE_NUMA_MIGRATION)
	rec.Reason, rec.Mode = 5, 1
	ev, err := d.Decode(raw(rec))
	if err != nil {
		t.Fatal(err)
	}
	if ev.Reason != "numa_misplaced" || ev.Mode != "sync_light" {
		t.Errorf("reason/mode = %q/%q, want numa_misplaced/sync_light", ev.Reason, ev.Mode)
	}
	rec.Reason, rec.Mode = 42, 7 // not in this kernel's enums: numbers
	ev, _ = d.Decode(raw(rec))
	if ev.Reason != "42" || ev.Mode != "7" {
		t.Errorf("unknown reason/mode = %q/%q, want 42/7", ev.Reason, ev.Mode)
	}

	rec = stallRecord(typesCauseCAUSE_COMPACTION)
	for _, c := range []struct {
		status, prio int32
		status2      string
		prio2        string
	}{
		{1, 2, "skipped", "async"},
		{6, 0, "success", "sync_full"},
		{0, 1, "not_suitable_zone", "sync_light"},
		{7, 5, "7", "5"}, // OTHER_NAME lacks the prefix; 5 is not a priority
	} {
		rec.Status, rec.Mode = c.status, c.prio
		ev, err := d.Decode(raw(rec))
		if err != nil {
			t.Fatal(err)
		}
		if ev.Status != c.status2 || ev.Mode != c.prio2 {
			t.Errorf("status %d prio %d = %q/%q, want %q/%q", c.status, c.prio, ev.Status, ev.Mode, c.status2, c.prio2)
		}
	}
}

func TestEnumNames(t *testing.T) {
	spec := testSpec(t)
	got := enumNames(spec, "compact_priority", "COMPACT_PRIO_")
	want := map[int64]string{0: "sync_full", 1: "sync_light", 2: "async"}
	if len(got) != len(want) {
		t.Fatalf("enumNames = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("value %d = %q, want %q", k, got[k], v)
		}
	}
	if m := enumNames(spec, "no_such_enum", "X_"); len(m) != 0 {
		t.Errorf("missing enum gave %v", m)
	}
}

// fakeReader hands out scripted results, one per ReadInto call.
type fakeReader struct {
	mu        sync.Mutex
	steps     []any // []byte (a record) or error
	calls     int
	deadlines int
	pending   bool   // a deadline was set since the last read
	fresh     []bool // by read: whether a deadline was set just before it
}

func (f *fakeReader) ReadInto(rec *ringbuf.Record) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.fresh = append(f.fresh, f.pending)
	f.pending = false
	if len(f.steps) == 0 {
		return ringbuf.ErrClosed
	}
	s := f.steps[0]
	f.steps = f.steps[1:]
	switch s := s.(type) {
	case error:
		return s
	case []byte:
		// Reuse the record's buffer like the real reader does.
		rec.RawSample = append(rec.RawSample[:0], s...)
		return nil
	}
	panic("bad step")
}

// SetDeadline records that the stream polls with a deadline.
func (f *fakeReader) SetDeadline(time.Time) {
	f.mu.Lock()
	f.deadlines++
	f.pending = true
	f.mu.Unlock()
}

// runStream runs Stream with a timeout so a Stream that never returns
// fails the test instead of hanging it.
func runStream(t *testing.T, rd RecordReader) (events []stall.Event, bad []error) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		done <- Stream(rd, NewDecoder(nil),
			func(ev stall.Event) { events = append(events, ev) },
			func(err error) { bad = append(bad, err) })
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Stream returned %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Stream did not return")
	}
	return events, bad
}

func TestStream(t *testing.T) {
	r1 := stallRecord(typesCauseCAUSE_DIRECT_RECLAIM)
	r1.Tid = 1
	r2 := stallRecord(typesCauseCAUSE_MMAP_LOCK)
	r2.Tid, r2.Comm = 2, comm("second")
	r3 := typesEvent{Kind: uint32(typesEventKindKIND_EXIT), Tid: 3, Comm: comm("third")}
	transient := errors.New("epoll hiccup")
	short := raw(r1)[:10]
	unknown := stallRecord(typesCauseCAUSE_MAX)
	rd := &fakeReader{steps: []any{
		raw(r1), transient, raw(r2), os.ErrDeadlineExceeded, short, raw(unknown), raw(r3),
		ringbuf.ErrClosed,
		raw(r1), // never read: Stream stopped
	}}
	events, bad := runStream(t, rd)
	if len(events) != 3 {
		t.Fatalf("sink got %d events, want 3: %+v", len(events), events)
	}
	if events[0].TID != 1 || events[1].TID != 2 || events[1].Comm != "second" || events[2].Kind != stall.KindExit || events[2].Comm != "third" {
		t.Errorf("events = %+v", events)
	}
	if len(bad) != 3 {
		t.Fatalf("bad called %d times, want 3: %v", len(bad), bad)
	}
	if !errors.Is(bad[0], transient) || !strings.Contains(bad[0].Error(), "read ring buffer") {
		t.Errorf("bad[0] = %v, want the wrapped read error", bad[0])
	}
	if !strings.Contains(bad[1].Error(), "short record") || !strings.Contains(bad[2].Error(), "unknown cause") {
		t.Errorf("bad = %v", bad)
	}
	if rd.calls != 8 {
		t.Errorf("ReadInto called %d times, want 8 (stop at ErrClosed)", rd.calls)
	}
	// An empty poll interval is not an error. The first read, and every
	// read after an error or an empty interval, waits on a fresh deadline
	// so records submitted without a wakeup are still picked up; reads in
	// a run of records keep the one they have.
	wantFresh := []bool{true, false, true, false, true, false, false, false}
	if !slices.Equal(rd.fresh, wantFresh) {
		t.Errorf("fresh deadline by read = %v, want %v", rd.fresh, wantFresh)
	}
}

func TestStreamEndsOnWrappedClose(t *testing.T) {
	// The real reader wraps: "ringbuffer: file already closed".
	rd := &fakeReader{steps: []any{raw(stallRecord(typesCauseCAUSE_COMPACTION)),
		errors.Join(errors.New("ringbuffer"), ringbuf.ErrClosed)}}
	events, bad := runStream(t, rd)
	if len(events) != 1 || len(bad) != 0 {
		t.Errorf("events %d bad %v", len(events), bad)
	}
}

func TestStreamEndsOnFlushed(t *testing.T) {
	r := stallRecord(typesCauseCAUSE_NODE_RECLAIM)
	rd := &fakeReader{steps: []any{raw(r), raw(r), ringbuf.ErrFlushed, raw(r)}}
	events, bad := runStream(t, rd)
	if len(events) != 2 {
		t.Errorf("sink got %d events, want the 2 before ErrFlushed", len(events))
	}
	if len(bad) != 0 {
		t.Errorf("bad = %v", bad)
	}
	if rd.calls != 3 {
		t.Errorf("ReadInto called %d times, want 3", rd.calls)
	}
}

func TestStreamNilBad(t *testing.T) {
	rd := &fakeReader{steps: []any{errors.New("x"), []byte{1, 2, 3}, raw(stallRecord(typesCauseCAUSE_DIRECT_RECLAIM))}}
	var n int
	done := make(chan error, 1)
	go func() { done <- Stream(rd, NewDecoder(nil), func(stall.Event) { n++ }, nil) }()
	select {
	case err := <-done:
		if err != nil || n != 1 {
			t.Errorf("Stream = %v, %d events", err, n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Stream did not return")
	}
}

// A persistent read error is reported each time but must not spin.
func TestStreamPausesOnReadErrors(t *testing.T) {
	var steps []any
	for i := 0; i < 5; i++ {
		steps = append(steps, errors.New("persistent"))
	}
	rd := &fakeReader{steps: steps}
	start := time.Now()
	_, bad := runStream(t, rd)
	if len(bad) != 5 {
		t.Errorf("bad called %d times, want 5", len(bad))
	}
	if el := time.Since(start); el < 5*readRetryDelay {
		t.Errorf("5 read errors took %v, want at least %v of pauses", el, 5*readRetryDelay)
	}
}
