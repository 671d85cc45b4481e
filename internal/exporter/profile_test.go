package exporter

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

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

// heldWriter is a ResponseWriter whose first Write says so on writing and
// waits for release: a profile held as it is encoded.
type heldWriter struct {
	*httptest.ResponseRecorder
	writing chan<- struct{}
	release <-chan struct{}
	once    sync.Once
}

func (w *heldWriter) Write(p []byte) (int, error) {
	w.once.Do(func() {
		w.writing <- struct{}{}
		<-w.release
	})
	return w.ResponseRecorder.Write(p)
}

// within fails the test if f does not return in 10 s: what must not wait
// for a profile, checked without timing it.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s waited for the profiles being built", what)
	}
}

// receive fails the test unless n values come on c within 10 s.
func receive(t *testing.T, c <-chan struct{}, n int, what string) {
	t.Helper()
	for i := range n {
		select {
		case <-c:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d profiles %s", i, n, what)
		}
	}
}

// Every streamed stall takes the profile's lock. A profile holds it only
// to copy a second's rows, and merges, sorts and encodes them without:
// profiles of the whole span held as they copy, and as they are encoded,
// do not hold the stream up. Past maxProfiles being built, a request is
// turned away at once, in one line.
func TestProfilesDoNotHoldUpTheStream(t *testing.T) {
	now := uint64(1000e9)
	e := New(Config{ProcRoot: t.TempDir(), Now: func() uint64 { return now }})
	defer e.Close()
	stacks := make([]*stall.Stack, 50)
	for i := range stacks {
		stacks[i] = stall.NewStack(nil, []stall.Frame{{Func: fmt.Sprintf("f%d", i), Module: "/bin/x"}}, "")
	}
	stallAt := func(ago uint64, i int) {
		ev := stall.Event{Kind: stall.KindStall, Cause: stall.MemcgReclaim, TsNs: now - ago*1e9, PID: 7, TID: uint32(7 + i),
			Comm: "w", DurNs: 1000, Stack: stacks[i]}
		if err := e.Stall(&ev); err != nil {
			t.Fatal(err)
		}
	}
	for ago := range uint64(ProfileSeconds) {
		for i := range stacks {
			stallAt(ago, i)
		}
	}

	// Each profile is held after its first second's copy: a stall must
	// be streamed meanwhile.
	copying, releaseCopy := make(chan struct{}, maxProfiles), make(chan struct{})
	e.recent.copied = func() {
		select {
		case <-releaseCopy:
		default:
			copying <- struct{}{}
			<-releaseCopy
		}
	}
	writing, releaseWrite := make(chan struct{}, maxProfiles), make(chan struct{})
	held := make([]*heldWriter, maxProfiles)
	var served sync.WaitGroup
	for i := range held {
		held[i] = &heldWriter{ResponseRecorder: httptest.NewRecorder(), writing: writing, release: releaseWrite}
		served.Add(1)
		go func() {
			defer served.Done()
			e.serveStallProfile(held[i], httptest.NewRequest("GET", "/debug/pprof/stalls?seconds=600", nil))
		}()
	}
	turnedAway := func() {
		t.Helper()
		rec := httptest.NewRecorder()
		within(t, "a request over the bound", func() {
			e.serveStallProfile(rec, httptest.NewRequest("GET", "/debug/pprof/stalls?seconds=600", nil))
		})
		if body := rec.Body.String(); rec.Code != http.StatusTooManyRequests || strings.Count(body, "\n") != 1 {
			t.Errorf("a request past %d profiles: %d %q, want 429 in one line", maxProfiles, rec.Code, body)
		}
	}

	receive(t, copying, maxProfiles, "began copying")
	within(t, "a stall streamed while profiles copy", func() { stallAt(0, 0) })
	turnedAway()
	close(releaseCopy)
	receive(t, writing, maxProfiles, "were encoded")
	within(t, "a stall streamed while profiles are encoded", func() { stallAt(0, 1) })
	turnedAway()
	close(releaseWrite)
	served.Wait()

	for i, w := range held {
		p, err := profile.Parse(w.Body)
		if err != nil {
			t.Fatalf("profile %d: %d, %v", i, w.Code, err)
		}
		var ns int64
		for _, s := range p.Sample {
			ns += s.Value[1]
		}
		if min, max := int64(ProfileSeconds*len(stacks)*1000), int64(ProfileSeconds*len(stacks)*1000+2000); ns < min || ns > max {
			t.Errorf("profile %d: %d ns of stalls, want %d (and the 2 µs streamed as it was built, or not)", i, ns, min)
		}
	}
	rec := httptest.NewRecorder()
	e.serveStallProfile(rec, httptest.NewRequest("GET", "/debug/pprof/stalls?seconds=1", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("a profile once the others were built: %d %q", rec.Code, rec.Body.String())
	}
}

// serve's index page says the stall profile is the past N seconds, where
// Go's profile endpoint records the next N.
func TestIndexSaysTheStallProfileIsThePast(t *testing.T) {
	e := New(Config{ProcRoot: t.TempDir(), Now: func() uint64 { return 1e9 }})
	defer e.Close()
	rec := httptest.NewRecorder()
	e.Handler(func() bool { return true }).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if body := rec.Body.String(); !strings.Contains(body, "the stall profile of the past N seconds, sent at once") ||
		!strings.Contains(body, "records the next N seconds instead") {
		t.Errorf("the index page:\n%s", body)
	}
}
