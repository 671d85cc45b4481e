package psi

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/testutil"
)

func TestSamplerSpans(t *testing.T) {
	cg := Scope{Name: "/app", File: "sys/fs/cgroup/app/memory.pressure"}
	gone := Scope{Name: "/gone", File: "sys/fs/cgroup/gone/memory.pressure"}
	remade := Scope{Name: "/remade", File: "sys/fs/cgroup/remade/memory.pressure"}
	root, dir := fakeRoot(t, map[string]string{
		System().File: pressure("1000000", "200000"),
		cg.File:       pressure("50", "0"),
		gone.File:     pressure("1", "1"),
		remade.File:   pressure("900", "90"),
	})
	s := NewSampler(root, System(), cg, gone, remade)
	clock := uint64(5_000_000_000)
	s.now = func() uint64 { return clock }

	start := s.Take()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(System().File, pressure("2900000", "700000"))
	write(cg.File, pressure("1200050", "300000"))
	if err := os.RemoveAll(filepath.Join(dir, "sys/fs/cgroup/gone")); err != nil {
		t.Fatal(err)
	}
	write(remade.File, pressure("10", "1"))
	clock += 3_500_000_000
	spans := Between(start, s.Take())

	if len(spans) != 4 {
		t.Fatalf("%d spans, want one per scope: %+v", len(spans), spans)
	}
	for _, sp := range spans {
		if sp.From != 5_000_000_000 || sp.To != 8_500_000_000 || sp.Wall() != 3500*time.Millisecond {
			t.Errorf("%s: span [%d, %d] (%v), want [5e9, 8.5e9] (3.5s)", sp.Scope.Name, sp.From, sp.To, sp.Wall())
		}
	}
	sys, app := spans[0], spans[1]
	if sys.Scope != System() || sys.Err != nil || sys.Growth != (Totals{Some: 1900 * time.Millisecond, Full: 500 * time.Millisecond}) {
		t.Errorf("system: %+v; want some 1.9s, full 0.5s", sys)
	}
	if app.Scope != cg || app.Err != nil || app.Growth != (Totals{Some: 1200 * time.Millisecond, Full: 300 * time.Millisecond}) {
		t.Errorf("cgroup: %+v; want some 1.2s, full 0.3s", app)
	}
	if sp := spans[2]; !errors.Is(sp.Err, ErrNotAvailable) || !strings.Contains(sp.Err.Error(), "the cgroup no longer exists") || sp.Growth != (Totals{}) {
		t.Errorf("a cgroup removed during the span: %+v; want not available, no growth", sp)
	}
	if sp := spans[3]; sp.Err == nil || !strings.Contains(sp.Err.Error(), "memory PSI of /remade went back") || sp.Growth != (Totals{}) {
		t.Errorf("totals going back: %+v; want an error, no growth", sp)
	}
}

// A scope unreadable at the start keeps its error though readable at the
// end: half a span is no measurement.
func TestSpanUnreadableAtStart(t *testing.T) {
	root, dir := fakeRoot(t, map[string]string{"proc/": ""})
	s := NewSampler(root, System())
	start := s.Take()
	if err := os.MkdirAll(filepath.Join(dir, "proc/pressure"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, System().File), []byte(pressure("5", "5")), 0o644); err != nil {
		t.Fatal(err)
	}
	end := s.Take()
	if end.Readings[0].Err != nil {
		t.Fatalf("end reading: %v", end.Readings[0].Err)
	}
	sp := Between(start, end)[0]
	if !errors.Is(sp.Err, ErrNotAvailable) || sp.Growth != (Totals{}) {
		t.Errorf("span %+v; want the start's not-available error", sp)
	}
	if swapped := Between(end, start)[0]; swapped.Err == nil || !strings.Contains(swapped.Err.Error(), "older than the start") {
		t.Errorf("end before start: %+v; want an error", swapped)
	}
}

// Two snapshots of this machine's system PSI.
func TestSamplerLive(t *testing.T) {
	root := liveRoot(t)
	_, err := Read(root, System())
	testutil.RequireFeature(t, !errors.Is(err, ErrNotAvailable), fmt.Sprint(err))
	s := NewSampler(root, System())
	start := s.Take()
	time.Sleep(20 * time.Millisecond)
	sp := Between(start, s.Take())[0]
	if sp.Err != nil || sp.Scope.Name != "system" || sp.Wall() < 20*time.Millisecond || sp.Wall() > 10*time.Second ||
		sp.Growth.Full > sp.Growth.Some || sp.Growth.Some > sp.Wall()+50*time.Millisecond {
		// (some can pass wall by what the kernel had not yet aggregated at the start)
		t.Errorf("span %+v (wall %v): want no error, 20ms <= wall, full <= some <= about wall", sp, sp.Wall())
	}
}
