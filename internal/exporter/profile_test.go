package exporter

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/numatrace/numatrace/internal/stall"
)

// serve's stall profile covers the last N seconds, each stall once, and
// names a process after its main thread.
func TestStallProfileOfTheLastSeconds(t *testing.T) {
	now := uint64(1000e9)
	e := New(Config{ProcRoot: t.TempDir(), Now: func() uint64 { return now }})
	defer e.Close()
	s := stall.NewStack([]stall.Frame{{Func: "try_to_free_mem_cgroup_pages", Module: stall.KernelModule, Addr: 0xffffffff81000000}},
		[]stall.Frame{{Func: "read_the_file", Module: "/bin/x", Offset: 0x1000}}, "")
	addStall := func(ago uint64, tid uint32, comm string, dur uint64, st *stall.Stack) {
		ev := stall.Event{Kind: stall.KindStall, Cause: stall.MemcgReclaim, TsNs: now - ago*1e9, PID: 7, TID: tid, Comm: comm, DurNs: dur, Stack: st}
		if err := e.Stall(&ev); err != nil {
			t.Fatal(err)
		}
	}
	addStall(1, 8, "worker", 1000, s)
	addStall(2, 8, "worker", 2000, s)
	addStall(3, 7, "main", 3000, nil)
	addStall(90, 8, "worker", 4000, s) // older than the 60 s asked for
	ts := httptest.NewServer(e.Handler(func() bool { return true }))
	defer ts.Close()

	resp, err := http.Get(ts.URL + "/debug/pprof/stalls?seconds=60")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p, err := profile.Parse(resp.Body)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	var stacked, unstacked int64
	for _, smp := range p.Sample {
		if smp.Label["process"][0] != "main" {
			t.Errorf("sample of process %q, want the main thread's name", smp.Label["process"][0])
		}
		switch fn := smp.Location[len(smp.Location)-1].Line[0].Function.Name; fn {
		case "read_the_file":
			stacked += smp.Value[1]
		case "[no stack]":
			unstacked += smp.Value[1]
		default:
			t.Errorf("sample ending in %s", fn)
		}
	}
	if stacked != 3000 || unstacked != 3000 || p.DurationNanos != 60e9 {
		t.Errorf("stacked %d ns, unstacked %d ns over %d ns; want 3000, 3000 over 60 s", stacked, unstacked, p.DurationNanos)
	}
	for _, bad := range []string{"0", "601", "x", "1.5"} {
		r, err := http.Get(ts.URL + "/debug/pprof/stalls?seconds=" + bad)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusBadRequest {
			t.Errorf("seconds=%s: status %d, want 400", bad, r.StatusCode)
		}
	}
}
