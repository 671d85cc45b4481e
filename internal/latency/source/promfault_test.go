package source

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/latency"
)

// scripted serves one response per scrape, in order; past the end, the
// last one again. A response of "" is a 500.
func scripted(t *testing.T, pages ...string) *httptest.Server {
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		page := pages[min(n, len(pages)-1)]
		n++
		mu.Unlock()
		if page == "" {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, page)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// histText is a cumulative histogram with these bounds (seconds, +Inf
// added) and counts per bucket (not cumulative).
func histText(bounds []string, per []int) string {
	var b strings.Builder
	b.WriteString("# TYPE req_seconds histogram\n")
	cum := 0
	for i, le := range append(bounds, "+Inf") {
		cum += per[i]
		fmt.Fprintf(&b, "req_seconds_bucket{le=%q} %d\n", le, cum)
	}
	fmt.Fprintf(&b, "req_seconds_count %d\nreq_seconds_sum 1\n", cum)
	return b.String()
}

var bounds3 = []string{"0.001", "0.01", "0.1"}

// scrapeN runs ScrapeWindows for n windows of 200 ms and returns them with
// what it skipped, by kind.
func scrapeN(t *testing.T, url string, n int) ([]latency.Stats, map[latency.SkipKind][]string) {
	t.Helper()
	out := make(chan latency.Stats, n)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	skipped := map[latency.SkipKind][]string{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		ScrapeWindows(ctx, url, "req_seconds", time.Now(), 200*time.Millisecond, out,
			func(kind latency.SkipKind, err error) {
				mu.Lock()
				skipped[kind] = append(skipped[kind], err.Error())
				mu.Unlock()
			})
	}()
	var got []latency.Stats
	for len(got) < n {
		select {
		case st := <-out:
			got = append(got, st)
		case <-time.After(5 * time.Second):
			t.Fatalf("%d windows of %d", len(got), n)
		}
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	return got, skipped
}

// The service restarts after window 1: its counters start again from
// zero. The window of the restart is skipped, not read as one in which
// nothing completed (a false "No request completed" spike), and the next
// is read against the scrape after the restart.
func TestScrapeWindowsSkipsACounterReset(t *testing.T) {
	srv := scripted(t,
		histText(bounds3, []int{0, 0, 0, 0}),
		histText(bounds3, []int{100, 0, 0, 0}),
		histText(bounds3, []int{200, 0, 0, 0}),
		histText(bounds3, []int{30, 0, 0, 0}), // restarted
		histText(bounds3, []int{130, 0, 0, 0}))
	got, skipped := scrapeN(t, srv.URL, 4)
	for i, want := range []latency.Stats{{Index: 0, Count: 100}, {Index: 1, Count: 100}, {Index: 2, Skipped: "counter reset"}, {Index: 3, Count: 100}} {
		if got[i].Index != want.Index || got[i].Count != want.Count || got[i].Skipped != want.Skipped {
			t.Errorf("window %d: %+v, want %+v", i, got[i], want)
		}
	}
	if len(skipped) != 1 || len(skipped[latency.SkipResets]) != 1 || !strings.Contains(skipped[latency.SkipResets][0], "window 2: the histogram's counters went back") {
		t.Fatalf("skipped %v", skipped)
	}
}

// A new bucket appears mid-run: a difference against a bucket the last
// scrape did not have would exceed the window's total. That window is
// skipped; the next is read in the new layout.
func TestScrapeWindowsSkipsABucketLayoutChange(t *testing.T) {
	bounds4 := []string{"0.001", "0.005", "0.01", "0.1"}
	srv := scripted(t,
		histText(bounds3, []int{0, 0, 0, 0}),
		histText(bounds3, []int{100, 0, 0, 0}),
		histText(bounds4, []int{150, 40, 10, 0, 0}), // 0.005 is new
		histText(bounds4, []int{250, 40, 10, 0, 0}))
	got, skipped := scrapeN(t, srv.URL, 3)
	if got[0].Count != 100 || got[1].Skipped != "bucket layout change" || got[1].Count != 0 || got[2].Count != 100 || got[2].Skipped != "" {
		t.Fatalf("windows %+v", got)
	}
	if len(skipped) != 1 || len(skipped[latency.SkipLayouts]) != 1 {
		t.Fatalf("skipped %v", skipped)
	}
}

// A failed scrape leaves two windows unknown: its own, and the next,
// which has no scrape at its start to subtract. Both are skipped, rather
// than the second read as two windows' worth of requests.
func TestScrapeWindowsSkipsAFailedScrapeAndTheNext(t *testing.T) {
	srv := scripted(t,
		histText(bounds3, []int{0, 0, 0, 0}),
		histText(bounds3, []int{100, 0, 0, 0}),
		"", // a 500
		histText(bounds3, []int{300, 0, 0, 0}),
		histText(bounds3, []int{400, 0, 0, 0}))
	got, skipped := scrapeN(t, srv.URL, 4)
	for i, want := range []latency.Stats{{Index: 0, Count: 100}, {Index: 1, Skipped: "scrape failed"}, {Index: 2, Skipped: "no scrape at its start"}, {Index: 3, Count: 100}} {
		if got[i].Index != want.Index || got[i].Count != want.Count || got[i].Skipped != want.Skipped {
			t.Errorf("window %d: %+v, want %+v", i, got[i], want)
		}
	}
	if len(skipped) != 1 || len(skipped[latency.SkipScrapes]) != 1 || !strings.Contains(skipped[latency.SkipScrapes][0], "500 Internal Server Error") {
		t.Fatalf("skipped %v", skipped)
	}
}

// Each way an endpoint can fail is bounded (a scrape waits at most half
// a window, reads at most 16 MiB), said once, counted, and leaves its
// windows skipped, not empty; the source stops promptly when the run
// ends.
func TestPromFaultsAreBoundedWithOneWarning(t *testing.T) {
	for _, c := range []struct {
		name    string
		window  time.Duration
		handler http.HandlerFunc
		says    string
	}{
		{"hang", 100 * time.Millisecond, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }, "Client.Timeout exceeded"},
		{"1 byte/s", 100 * time.Millisecond, func(w http.ResponseWriter, r *http.Request) {
			for _, b := range []byte(histText(bounds3, []int{1, 0, 0, 0})) {
				if _, err := w.Write([]byte{b}); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-time.After(time.Second):
				case <-r.Context().Done():
					return
				}
			}
		}, "Client.Timeout"},
		{"500", 100 * time.Millisecond, func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "boom", http.StatusInternalServerError)
		}, "500 Internal Server Error"},
		// Which bound stops a 50 MB body first, the size or the time,
		// depends on the machine's speed: TestScrapeRefusesAHugeBody
		// checks the size bound alone.
		{"50 MB", time.Second, func(w http.ResponseWriter, r *http.Request) {
			line := []byte("# " + strings.Repeat("x", 1000) + "\n")
			for n := 0; n < 50<<20; n += len(line) {
				if _, err := w.Write(line); err != nil {
					return
				}
			}
		}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(c.handler)
			defer srv.Close()
			src, err := Config{PromURL: srv.URL, PromMetric: "req_seconds"}.Open(Env{Start: time.Now(), Window: c.window})
			if err != nil {
				t.Fatal(err)
			}
			run := runSource(src, 100)
			var windows []latency.Stats
			for len(windows) < 3 {
				select {
				case r := <-run.out:
					windows = append(windows, *r.Window)
				case <-time.After(4 * c.window):
					t.Fatalf("after %d windows: no window for %s", len(windows), 4*c.window)
				}
			}
			run.cancel()
			select {
			case <-run.done:
			case <-time.After(time.Second):
				t.Fatal("the source did not stop within a second of the end")
			}
			if warned := run.warnings(); len(warned) != 1 || !strings.Contains(warned[0], "latency endpoint: scrape "+srv.URL) || !strings.Contains(warned[0], c.says) {
				t.Fatalf("warnings %q: want one saying %q", warned, c.says)
			}
			sk := src.Skipped()
			if len(sk) != 1 || sk[0].Kind != latency.SkipScrapes || sk[0].N < 4 {
				t.Fatalf("skipped %v: want the base and every window's scrape counted as failed", sk)
			}
			for _, w := range windows {
				if w.Skipped == "" {
					t.Fatalf("window %+v was not skipped", w)
				}
			}
		})
	}
}
