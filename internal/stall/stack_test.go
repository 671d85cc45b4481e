package stall

import (
	"strings"
	"testing"
)

func TestStackKeyIsTheFramesNotTheirSize(t *testing.T) {
	user := func(fns ...string) []Frame {
		var fs []Frame
		for _, f := range fns {
			fs = append(fs, Frame{Func: f, Module: "/bin/db", Offset: 0x10})
		}
		return fs
	}
	long := strings.Repeat("n", MaxNameBytes)
	base := NewStack([]Frame{{Func: "schedule", Module: KernelModule}}, user("read", "main"), "")
	same := NewStack([]Frame{{Func: "schedule", Module: KernelModule, Addr: 0xffff}}, user("read", "main"), "")
	if base.Key() != same.Key() {
		t.Error("the same names in another place: another key")
	}
	for name, other := range map[string]*Stack{
		"a name":                         NewStack([]Frame{{Func: "schedule", Module: KernelModule}}, user("write", "main"), ""),
		"a user frame's file":            NewStack([]Frame{{Func: "schedule", Module: KernelModule}}, []Frame{{Func: "read", Module: "/lib/libc.so.6"}, {Func: "main", Module: "/bin/db"}}, ""),
		"the note":                       NewStack([]Frame{{Func: "schedule", Module: KernelModule}}, user("read", "main"), "cut"),
		"a kernel frame made a user one": NewStack(nil, append([]Frame{{Func: "schedule", Module: KernelModule}}, user("read", "main")...), ""),
		"two names run together":         NewStack([]Frame{{Func: "schedule", Module: KernelModule}}, user("read\x00/bin/db\x00main"), ""),
		"a frame without a symbol":       NewStack([]Frame{{Module: KernelModule, Addr: 0x10}}, user("read", "main"), ""),
	} {
		if other.Key() == base.Key() {
			t.Errorf("%s differs, the key does not", name)
		}
	}
	big := NewStack([]Frame{{Func: long, Module: KernelModule}}, user(long, long), long)
	if len(big.Key()) != len(base.Key()) {
		t.Errorf("a key of %d bytes for %d bytes of names; want %d", len(big.Key()), 4*MaxNameBytes, len(base.Key()))
	}
	unmade := &Stack{Kernel: base.Kernel, User: base.User}
	if unmade.Key() != base.Key() {
		t.Error("a stack not made by NewStack has another key")
	}
}

func TestStackSizeCountsNames(t *testing.T) {
	small := NewStack([]Frame{{Func: "schedule", Module: KernelModule}}, nil, "")
	big := NewStack([]Frame{{Func: strings.Repeat("n", 1000), Module: KernelModule, BuildID: "ab"}}, nil, "note")
	if d := big.Size() - small.Size(); d != 1000-len("schedule")+2+4 {
		t.Errorf("1000 bytes of name, 2 of build id and 4 of note weigh %d more than 8 of name", d)
	}
	if got, want := big.Size(), StackSize(1, 1000+len(KernelModule)+2+4); got != want {
		t.Errorf("Size %d, StackSize %d", got, want)
	}
	if (*Stack)(nil).Size() != 0 || (&Stack{Kernel: big.Kernel, Note: "note"}).Size() != big.Size() {
		t.Error("a nil stack or one not made by NewStack is weighed otherwise")
	}
	// JSON writes each of these bytes as six: "\u003c", "\u0001", "\ufffd".
	for _, name := range []string{"<", "\x01", "\xff", "é"[:1]} {
		escaped := NewStack([]Frame{{Func: strings.Repeat(name, 1000), Module: KernelModule}}, nil, "note")
		if d := escaped.Size() - big.Size(); d != 5*1000-2 {
			t.Errorf("1000 bytes of %q weigh %d more than 1000 plain ones and a build id, want %d", name, d, 5*1000-2)
		}
	}
	if NameSize([]byte("a<b")) != NameSize("a<b") || NameSize("a<b") != 8 {
		t.Errorf("a<b weighs %d as bytes, %d as a string; want 8", NameSize([]byte("a<b")), NameSize("a<b"))
	}
}

func TestLeftOutStack(t *testing.T) {
	s := LeftOutStack("left out: past 1 MiB")
	if !s.LeftOut() || !s.Empty() || s.Note != "left out: past 1 MiB" {
		t.Errorf("%+v: want a stack without frames, left out, with its note", s)
	}
	if NewStack(nil, nil, "left out: past 1 MiB").LeftOut() || (*Stack)(nil).LeftOut() {
		t.Error("a stack that was not left out says it was")
	}
}
