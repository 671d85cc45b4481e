package exporter

import (
	"fmt"
	"log"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/numatrace/numatrace/internal/sanitize"
)

// Handler serves /metrics from the exporter's registry, /healthz (503 once
// healthy says tracing stopped) and a short index at /.
func (e *Exporter) Handler(healthy func() bool) http.Handler {
	mux := http.NewServeMux()
	metrics := promhttp.HandlerFor(e.Registry, promhttp.HandlerOpts{EnableOpenMetrics: true})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		scrape := e.BeginScrape()
		metrics.ServeHTTP(w, r)
		e.Scraped(scrape) // after the answer: its stats cost the scrape nothing
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !healthy() {
			http.Error(w, "tracing stopped", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /debug/pprof/stalls", e.serveStallProfile)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "numatrace serve: /metrics, /healthz, /debug/pprof/stalls?seconds=N")
		fmt.Fprintln(w, ProfileHelp)
	})
	return mux
}

// The HTTP side's limits. A scrape is one small GET answered in
// milliseconds: a client slower than these is broken or hostile, and
// each connection it holds costs a file descriptor and memory.
const (
	ReadHeaderTimeout = 5 * time.Second  // the request line and headers
	ReadTimeout       = 10 * time.Second // the whole request
	WriteTimeout      = 30 * time.Second // from the end of the headers to the end of the answer
	IdleTimeout       = 90 * time.Second // between two requests (keep-alive): longer than a 1-minute scrape interval
	MaxHeaderBytes    = 16 << 10
	maxConnLimit      = 256
)

// ConnLimit is the number of HTTP connections serve keeps open, for a
// process that may open nofile descriptors and has open of them open
// already (the tracer's maps, programs, links and ring buffers): half of
// the rest, at most 256. The other half is left for what serve opens as
// it runs (/proc and cgroup reads, doctor's checks), so connections can
// never starve the tracer of descriptors.
func ConnLimit(nofile, open uint64) int {
	if nofile <= open {
		return 1
	}
	return int(max(1, min(maxConnLimit, (nofile-open)/2)))
}

// Server is serve's HTTP server: Handler's pages, with the limits above
// and at most maxConns connections open on ln (see connLimiter). warn
// gets the server's own errors and, once, word that the limit was
// reached. Serve it with srv.Serve(ln) on the listener returned.
func (e *Exporter) Server(ln net.Listener, maxConns int, healthy func() bool, warn func(string)) (*http.Server, net.Listener) {
	lim := newConnLimiter(ln, maxConns, func() {
		warn(fmt.Sprintf("serve: %d HTTP connections open, the limit: each new one closes the one longest without a request being answered (numatrace_http_connections_closed_total counts them)", maxConns))
	})
	lim.onDrain = giveMemoryBack
	e.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "numatrace_http_connections",
			Help: "HTTP connections open to this exporter.",
		}, func() float64 { return float64(lim.Open()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "numatrace_http_connection_limit",
			Help: "HTTP connections this exporter keeps open at most (half the file descriptors the tracer leaves, at most 256).",
		}, func() float64 { return float64(maxConns) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "numatrace_http_connections_closed_total",
			Help: "HTTP connections closed to make room for a new one at the limit: the one longest without a request being answered.",
		}, func() float64 { return float64(lim.evicted.Load()) }),
	)
	srv := &http.Server{
		Handler:           e.Handler(healthy),
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ConnState:         lim.connState,
		ErrorLog:          log.New(warnWriter(warn), "", 0),
	}
	return srv, lim
}

// giveMemoryBack returns to the system the memory a flood of connections
// left: the Go runtime would keep it for minutes (the next forced
// collection is up to 2 minutes away, the buffers' pools need two, and
// the scavenger is slow). Two collections, the second returning what is
// free: some tens of milliseconds, once per flood.
func giveMemoryBack() {
	runtime.GC()
	debug.FreeOSMemory()
}

// warnWriter turns the server's log lines into warnings (escaped: some
// quote what a client sent).
type warnWriter func(string)

func (w warnWriter) Write(p []byte) (int, error) {
	w(sanitize.Text(strings.TrimRight(string(p), "\n")))
	return len(p), nil
}
