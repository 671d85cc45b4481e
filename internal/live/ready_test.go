//go:build linux

package live

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The ready file is never written through a link planted at its path
// (numatrace runs as root, ready files often go to /tmp): the run fails in
// one line, and what the link points at is left as it was. A free path
// gets numatrace's pid.
func TestWriteReadyRefusesLinks(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	sym, hard := filepath.Join(dir, "sym"), filepath.Join(dir, "hard")
	if err := os.Symlink(victim, sym); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(victim, hard); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{sym: "write ready file: " + sym + " is a symbolic link",
		hard: "write ready file: " + hard + " has 2 hard links"} {
		if err := writeReady(path); err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("writeReady(%s) = %v, want one line %q...", path, err, want)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Fatalf("the link's target now holds %q", b)
	}
	free := filepath.Join(dir, "ready")
	if err := writeReady(free); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(free); strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("ready file holds %q, want the pid", b)
	}
}

// serve refuses a link at --ready-file before it listens or loads
// anything, as attach and record do.
func TestServeCheckRefusesALinkedReadyFile(t *testing.T) {
	dir := t.TempDir()
	victim, sym := filepath.Join(dir, "victim"), filepath.Join(dir, "sym")
	if err := os.WriteFile(victim, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, sym); err != nil {
		t.Fatal(err)
	}
	s := &Serve{Trace: Trace{Window: time.Second, MinEvent: DefaultMinEvent, MinStall: DefaultMinStall, RingBufMiB: 16,
		MmapLockVia: "auto", ReadyFile: sym}, Listen: "127.0.0.1:0", CgroupLimit: 1}
	err := s.Check()
	if want := "serve: --ready-file: " + sym + " is a symbolic link"; err == nil || !IsBadInput(err) || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Check = %v, want bad input %q...", err, want)
	}
	s.Trace.ReadyFile = filepath.Join(dir, "ready")
	if err := s.Check(); err != nil {
		t.Errorf("Check with a free ready-file path = %v", err)
	}
}
