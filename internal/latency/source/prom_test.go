package source

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/latency"
)

// promText renders a request histogram in seconds, split over two label
// sets so the scrape must sum them.
func promText(counts map[string]int) string {
	var b strings.Builder
	b.WriteString("# HELP http_request_duration_seconds Request latency.\n# TYPE http_request_duration_seconds histogram\n")
	for _, path := range []string{"/a", "/b"} {
		cum := 0
		for _, le := range []string{"0.001", "0.005", "0.01", "0.05", "0.1", "+Inf"} {
			cum += counts[le] / 2
			fmt.Fprintf(&b, "http_request_duration_seconds_bucket{path=%q,le=%q} %d\n", path, le, cum)
		}
		fmt.Fprintf(&b, "http_request_duration_seconds_count{path=%q} %d\n", path, cum)
		fmt.Fprintf(&b, "http_request_duration_seconds_sum{path=%q} 1\n", path)
	}
	b.WriteString("# TYPE up gauge\nup 1\n")
	return b.String()
}

func TestDeltaInterpolatesLikeHistogramQuantile(t *testing.T) {
	prev := &Histogram{Bounds: []float64{0.001, 0.01, 0.1, inf()}, Counts: []float64{100, 100, 100, 100}}
	// 1000 new requests: 980 under 1 ms, 10 in (1,10] ms, 10 in (10,100] ms.
	cur := &Histogram{Bounds: []float64{0.001, 0.01, 0.1, inf()}, Counts: []float64{1080, 1090, 1100, 1100}}
	st, err := Delta(4, prev, cur, "x_seconds")
	if err != nil || st.Index != 4 || st.Count != 1000 {
		t.Fatalf("%+v, %v", st, err)
	}
	// p50 = rank 500 in [0, 1ms] at 500/980; p99 = rank 990 = top of (1,10] ms.
	if p50 := uint64(0.001 * 500 / 980 * 1e9 * (1 + zero)); st.P50Ns != p50 || st.P99Ns != 10_000_000 || st.MaxNs != 100_000_000 {
		t.Fatalf("p50 %d p99 %d max %d", st.P50Ns, st.P99Ns, st.MaxNs)
	}
	if st, err := Delta(0, cur, prev, "x_seconds"); !errors.Is(err, ErrCounterReset) {
		t.Fatalf("a counter reset gave %+v, %v", st, err)
	}
	if st, err := Delta(0, prev, prev, "x_seconds"); err != nil || st.Count != 0 {
		t.Fatalf("no requests gave %+v, %v", st, err)
	}
}

func inf() float64 { return 1 / zero }

var zero = 0.0

func TestScrapeWindowsFromAServer(t *testing.T) {
	var mu sync.Mutex
	counts := map[string]int{"0.001": 0}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprint(w, promText(counts))
	}))
	defer srv.Close()
	out := make(chan latency.Stats, 8)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go ScrapeWindows(ctx, srv.URL, "http_request_duration_seconds", time.Now(), 100*time.Millisecond, out, func(_ latency.SkipKind, err error) { t.Error(err) })
	time.Sleep(30 * time.Millisecond)
	mu.Lock()
	counts["0.001"] += 200 // window 0: 200 fast requests
	mu.Unlock()
	first := <-out
	mu.Lock()
	counts["0.05"] += 100 // window 1: 100 slow requests too
	counts["0.001"] += 100
	mu.Unlock()
	second := <-out
	if first.Index != 0 || first.Count != 200 || first.P99Ns > 1_000_000 {
		t.Fatalf("window 0 %+v", first)
	}
	if second.Index != 1 || second.Count != 200 || second.P99Ns < 10_000_000 || second.MaxNs != 50_000_000 {
		t.Fatalf("window 1 %+v", second)
	}
}

func TestScrapeErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, promText(map[string]int{}))
	}))
	defer srv.Close()
	c := srv.Client()
	if _, err := Scrape(context.Background(), c, srv.URL, "nope_seconds"); err == nil || !strings.Contains(err.Error(), "no metric") {
		t.Fatalf("missing metric: %v", err)
	}
	if _, err := Scrape(context.Background(), c, srv.URL, "up"); err == nil || !strings.Contains(err.Error(), "not a histogram") {
		t.Fatalf("gauge: %v", err)
	}
}

// A response over maxScrapeBytes is refused, not held.
func TestScrapeRefusesAHugeBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		line := []byte("# " + strings.Repeat("x", 1000) + "\n")
		for n := 0; n <= maxScrapeBytes; n += len(line) {
			if _, err := w.Write(line); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	_, err := Scrape(context.Background(), srv.Client(), srv.URL, "req_seconds")
	if err == nil || !strings.Contains(err.Error(), "over 16 MiB") {
		t.Fatalf("err %v: want the response refused as over 16 MiB", err)
	}
}

// A dead endpoint is said once, then counted, not once per window.
func TestDeadEndpointIsSaidOnce(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there now
	src, err := Config{PromURL: url, PromMetric: "req_seconds"}.Open(Env{Start: time.Now(), Window: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	var mu sync.Mutex
	var warned []error
	src.Run(ctx, make(chan latency.Reading, 10), func(err error) { mu.Lock(); warned = append(warned, err); mu.Unlock() })
	mu.Lock()
	defer mu.Unlock()
	var n uint64
	if sk := src.Skipped(); len(sk) == 1 && sk[0].Kind == latency.SkipScrapes {
		n = sk[0].N
	}
	if len(warned) != 1 || n < 3 {
		t.Fatalf("warned %d times (%v), skipped %v: want one warning and every failed scrape counted", len(warned), warned, src.Skipped())
	}
}
