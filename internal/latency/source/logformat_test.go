package source

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/latency"
)

// unixNs is a wall-clock time as the readers return it.
func unixNs(t time.Time) uint64 { return uint64(t.UnixNano()) }

var (
	utc      = time.UTC
	dec1     = time.Date(2026, 12, 1, 21, 8, 56, 0, utc)
	haproxyT = time.Date(2009, 2, 6, 12, 14, 14, 655e6, time.Local)
)

// A line's expected reading: ok false for a line the format cannot read,
// none for one it reads that carries no latency.
type lineCase struct {
	line    string
	ts, lat uint64
	ok      bool
	none    bool
}

func checkLines(t *testing.T, o LogFormat, cases []lineCase) {
	t.Helper()
	for _, c := range cases {
		// Each line alone, as a file's first line: the format named and
		// the format told from it must read it alike.
		for _, name := range []string{o.Name, "auto"} {
			oo := o
			oo.Name = name
			ts, lat, err := oo.Reader(nil)(c.line)
			switch {
			case c.none && !isNoLatency(err):
				t.Errorf("%s: %q: want a line without latency, got %d, %d, %v", name, c.line, ts, lat, err)
			case c.none:
			case c.ok && (err != nil || ts != c.ts || lat != c.lat):
				t.Errorf("%s: %q = %d, %d, %v; want %d, %d", name, c.line, ts, lat, err, c.ts, c.lat)
			case !c.ok && err == nil:
				t.Errorf("%s: %q = %d, %d: want an error", name, c.line, ts, lat)
			}
		}
	}
}

func TestPgbenchLog(t *testing.T) {
	checkLines(t, LogFormat{Name: "pgbench"}, []lineCase{
		// From the pgbench manual: plain, with --rate, with --max-tries.
		{line: "0 199 2241 0 1175850568 995598", ts: 1175850568995598000, lat: 2241000, ok: true},
		{line: "0 201 2513 0 1175850569 608", ts: 1175850569000608000, lat: 2513000, ok: true},
		{line: "0 81 4621 0 1412881037 912698 3005", ts: 1412881037912698000, lat: 4621000, ok: true},
		{line: "3 1 8333 0 1499414498 42848 0 0", ts: 1499414498042848000, lat: 8333000, ok: true},
		{line: "0 83 skipped 0 1412881037 914578 5217", none: true},
		{line: "0 0 failed 0 1499414498 84905 9", none: true},
		{line: "0 0 serialization 0 1499414498 84905 9", none: true},
		{line: "0 199 2241 0"},                                  // cut short
		{line: "0 199 22x1 0 1175850568 995598"},                // a bad time
		{line: "0 199 2241 0 1175850568 1995598"},               // µs over a second
		{line: "1345828501 5601 1542744 483552416 61 2573"},     // --aggregate-interval's log
		{line: "0 199 2241 0 1175850568 995598 1 2 3"},          // too many fields
		{line: "0 199 2241 0 1175850568 99559x"},                // a bad fraction
		{line: "0 199 99999999999999999999 0 1175850568 99559"}, // out of range
	})
}

func TestNginxLog(t *testing.T) {
	at := unixNs(dec1)
	checkLines(t, LogFormat{Name: "nginx"}, []lineCase{
		// combined, then $request_time: the common addition.
		{line: `127.0.0.1 - - [01/Dec/2026:21:08:56 +0000] "GET /index.html HTTP/1.1" 200 615 "-" "Go-http-client/1.1" 0.002`, ts: at, lat: 2e6, ok: true},
		// The same in another zone is the same instant.
		{line: `127.0.0.1 - - [01/Dec/2026:22:08:56 +0100] "GET / HTTP/1.1" 200 615 "-" "curl/7.88.1" 1.250`, ts: at, lat: 1250e6, ok: true},
		// $msec wins over [$time_local]: it has the milliseconds.
		{line: `1764623336.123 127.0.0.1 [01/Dec/2026:21:08:56 +0000] "GET / HTTP/1.1" 200 0.010`, ts: 1764623336123e6, lat: 10e6, ok: true},
		// A keyed format (rt= uct= uht= urt=), as the nginx docs' example.
		{line: `10.0.0.1 - - [01/Dec/2026:21:08:56 +0000] "GET /api HTTP/1.1" 200 12 "-" "curl/7.88.1" rt=0.120 uct="0.000" uht="0.119" urt="0.119"`, ts: at, lat: 120e6, ok: true},
		// A quoted request with quotes inside.
		{line: `10.0.0.1 - - [01/Dec/2026:21:08:56 +0000] "GET /?q=\"a b\" HTTP/1.1" 404 0 "-" "x" 0.000`, ts: at, lat: 0, ok: true},
		{line: `127.0.0.1 - - [01/Dec/2026:21:08:56 +0000] "GET / HTTP/1.1" 200 615 "-" "curl/7.88.1"`},      // combined alone: no latency field
		{line: `127.0.0.1 - - [01/Dec/2026:21:08:5 +0000] "GET / HTTP/1.1" 200 615 "-" "curl/7.88.1" 0.002`}, // a bad time
		{line: `127.0.0.1 - - "GET / HTTP/1.1" 200 615 0.002`},                                               // no time
		{line: `127.0.0.1 - - [01/Dec/2026:21:08:56 +0000] "GET / HTTP/1.1" 200 615 "-" "curl/7.88.1" rt=0.0x2`},
	})
	checkLines(t, LogFormat{Name: "nginx", Field: "urt"}, []lineCase{
		{line: `10.0.0.1 - - [01/Dec/2026:21:08:56 +0000] "GET /api HTTP/1.1" 200 12 "-" "curl" rt=0.120 urt="0.119"`, ts: at, lat: 119e6, ok: true},
		// Two upstreams tried, and an internal redirect: the times add.
		{line: `10.0.0.1 - - [01/Dec/2026:21:08:56 +0000] "GET /api HTTP/1.1" 502 12 "-" "curl" rt=0.020 urt="0.004, 0.012"`, ts: at, lat: 16e6, ok: true},
		{line: `10.0.0.1 - - [01/Dec/2026:21:08:56 +0000] "GET /api HTTP/1.1" 200 12 "-" "curl" rt=0.020 urt="0.003 : 0.010"`, ts: at, lat: 13e6, ok: true},
		// A static file: no upstream.
		{line: `10.0.0.1 - - [01/Dec/2026:21:08:56 +0000] "GET /a.png HTTP/1.1" 200 12 "-" "curl" rt=0.000 urt="-"`, none: true},
		{line: `10.0.0.1 - - [01/Dec/2026:21:08:56 +0000] "GET /api HTTP/1.1" 200 12 "-" "curl" rt=0.120`},
	})
	// By field number, quoted strings counting as one field.
	checkLines(t, LogFormat{Name: "nginx", Field: "-2"}, []lineCase{
		{line: `127.0.0.1 [01/Dec/2026:21:08:56 +0000] "GET / HTTP/1.1" 0.300 0.100`, ts: at, lat: 300e6, ok: true},
	})
}

func TestApacheLog(t *testing.T) {
	start := unixNs(time.Date(2000, 10, 10, 20, 55, 36, 0, utc))
	checkLines(t, LogFormat{Name: "apache"}, []lineCase{
		// combined %D, and common %D; %t is when the request came.
		{line: `192.168.1.20 - - [10/Oct/2000:13:55:36 -0700] "GET /index.html HTTP/1.1" 200 2326 "http://example.com/" "Mozilla/5.0 (X11; Linux x86_64)" 1532`, ts: start + 1532e3, lat: 1532e3, ok: true},
		{line: `127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326 250000`, ts: start + 250e6, lat: 250e6, ok: true},
		{line: `127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 304 - 93`, ts: start + 93e3, lat: 93e3, ok: true},
		{line: `127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326`}, // common, no %D: 2326 is bytes
		{line: `127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326 "-" "curl"`},
		{line: `127.0.0.1 - frank "GET /apache_pb.gif HTTP/1.0" 200 2326 1532`}, // no %t
	})
	// %T in seconds, named by number.
	checkLines(t, LogFormat{Name: "apache", Field: "-1", Unit: "s"}, []lineCase{
		{line: `127.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.0" 200 2326 "-" "curl" 2`, ts: start + 2e9, lat: 2e9, ok: true},
	})
}

func TestHAProxyLog(t *testing.T) {
	start := unixNs(haproxyT)
	const pre = `Feb  6 12:14:14 localhost haproxy[14389]: 10.0.1.2:33317 [06/Feb/2009:12:14:14.655] http-in static/srv1 `
	checkLines(t, LogFormat{Name: "haproxy"}, []lineCase{
		// The HAProxy manual's HTTP log example, through syslog.
		{line: pre + `10/0/30/69/109 200 2750 - - ---- 1/1/1/1/0 0/0 {1wt.eu} {} "GET /index.html HTTP/1.1"`, ts: start + 109e6, lat: 109e6, ok: true},
		// option logasap: the total is a lower bound, marked +.
		{line: pre + `10/0/30/69/+109 200 2750 - - ---- 1/1/1/1/0 0/0 "GET /index.html HTTP/1.1"`, ts: start + 109e6, lat: 109e6, ok: true},
		// Without the syslog prefix (log stdout).
		{line: `10.0.1.2:33317 [06/Feb/2009:12:14:14.655] http-in static/srv1 0/0/1/2/3 200 2750 - - ---- 1/1/1/1/0 0/0 "GET / HTTP/1.1"`, ts: start + 3e6, lat: 3e6, ok: true},
		{line: pre + `-1/-1/-1/-1/-8490 -1 0 - - CR-- 1/1/1/1/0 0/0 "<BADREQ>"`, none: true},
		{line: pre + `200 2750 - - ---- "GET /index.html HTTP/1.1"`},                    // no timers
		{line: `haproxy[14389]: 10.0.1.2:33317 http-in static/srv1 10/0/30/69/109 200`}, // no date
	})
	checkLines(t, LogFormat{Name: "haproxy", Field: "Tr"}, []lineCase{
		{line: pre + `10/0/30/69/109 200 2750 - - ---- 1/1/1/1/0 0/0 "GET /index.html HTTP/1.1"`, ts: start + 109e6, lat: 69e6, ok: true},
		// The server never answered: Tr -1.
		{line: pre + `10/0/30/-1/5001 504 194 - - sH-- 1/1/1/1/0 0/0 "GET / HTTP/1.1"`, none: true},
	})
}

func TestJSONLog(t *testing.T) {
	checkLines(t, LogFormat{Name: "json"}, []lineCase{
		// A logger's line with a known field; nginx's escape=json format.
		{line: `{"time":"2026-12-01T21:08:56.123456Z","level":"INFO","msg":"request","path":"/api","duration_ms":12.5}`, ts: unixNs(dec1) + 123456e3, lat: 12500e3, ok: true},
		{line: `{"msec":"1764623336.123","request_time":"0.002","status":"200"}`, ts: 1764623336123e6, lat: 2e6, ok: true},
		{line: `{"time_local":"01/Dec/2026:21:08:56 +0000","request_time":"0.002"}`, ts: unixNs(dec1), lat: 2e6, ok: true},
		// Another message of the same log.
		{line: `{"time":"2026-12-01T21:08:56Z","level":"INFO","msg":"listening on :8080"}`, none: true},
		{line: `{"time":"2026-12-01T21:08:56Z","duration_ms":`},        // cut short
		{line: `{"level":"INFO","duration_ms":3}`},                     // no time
		{line: `{"time":"yesterday","duration_ms":3}`},                 // a bad time
		{line: `{"time":"2026-12-01T21:08:56Z","duration_ms":"slow"}`}, // a bad duration
		{line: `{"time":"2026-12-01T21:08:56Z","duration_ms":-3}`},
	})
	// zap: epoch seconds, a field named by the user with a Go duration.
	checkLines(t, LogFormat{Name: "json", Field: "latency"}, []lineCase{
		{line: `{"level":"info","ts":1764623336.123456,"msg":"served","latency":"1.5ms"}`, ts: 1764623336123456e3, lat: 1500e3, ok: true},
		{line: `{"level":"info","ts":1764623336123,"msg":"served","latency":"2s"}`, ts: 1764623336123e6, lat: 2e9, ok: true},
		{line: `{"level":"info","ts":1764623336.5,"latency":3}`}, // a number, and no unit said
	})
	// slog: time.Duration as ns.
	checkLines(t, LogFormat{Name: "json", Field: "duration", Unit: "ns"}, []lineCase{
		{line: `{"time":"2026-12-01T21:08:56.000000001Z","level":"INFO","msg":"req","duration":1500000}`, ts: unixNs(dec1) + 1, lat: 1.5e6, ok: true},
		{line: `{"time":"2026-12-01T21:08:56Z","duration":1.5e6}`, ts: unixNs(dec1), lat: 1.5e6, ok: true},
	})
}

// Told from the first line it reads, a format is kept for the rest of the
// file: a line of another format after it is malformed, not read by that
// other one; and numatrace's own formats are told as before.
func TestFormatToldFromTheFirstLine(t *testing.T) {
	r := LogFormat{}.Reader(nil)
	if _, _, err := r("not a latency line"); err == nil || !strings.Contains(err.Error(), "no latency format reads") {
		t.Fatalf("a line no format reads: %v", err)
	}
	if ts, lat, err := r("0 199 2241 0 1175850568 995598"); err != nil || ts != 1175850568995598000 || lat != 2241000 {
		t.Fatalf("pgbench line: %d %d %v", ts, lat, err)
	}
	if _, _, err := r("10 20"); err == nil {
		t.Fatal("a two-column line in a pgbench log was read")
	}
	for _, line := range []string{"10 20", `{"ts_ns":10,"latency_ns":20}`} {
		if ts, lat, err := (LogFormat{Name: "auto"}).Reader(nil)(line); err != nil || ts != 10 || lat != 20 {
			t.Errorf("%q = %d %d %v", line, ts, lat, err)
		}
	}
}

func TestLogFormatCheck(t *testing.T) {
	for _, c := range []struct {
		o    LogFormat
		want string
	}{
		{LogFormat{Name: "auto"}, ""},
		{LogFormat{Name: "nginx", Field: "urt"}, ""},
		{LogFormat{Name: "json", Field: "took", Unit: "ms"}, ""},
		{LogFormat{Name: "syslog"}, `--latency-format: "syslog" is not one of auto, numatrace, pgbench, haproxy, nginx, apache, json`},
		{LogFormat{Unit: "fortnights"}, `--latency-unit: "fortnights" is not one of ns, us, ms, s`},
		{LogFormat{Name: "pgbench", Field: "time"}, "--latency-format pgbench: pgbench's log has its own fields"},
		{LogFormat{Name: "haproxy", Field: "Tx"}, `--latency-format haproxy: --latency-field "Tx" is not one of HAProxy's timers`},
		{LogFormat{Name: "haproxy", Unit: "s"}, "--latency-format haproxy: HAProxy's timers are in ms"},
		{LogFormat{Field: "Tr", Unit: "s"}, ""}, // Apache's key Tr=, in seconds
		{LogFormat{Name: "nginx", Unit: "s"}, "--latency-format nginx: nginx writes its times in seconds"},
	} {
		err := c.o.Check()
		if (c.want == "") != (err == nil) || err != nil && !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
	if err := (Config{FileFormat: LogFormat{Name: "nginx"}}).Check(); err == nil || !strings.Contains(err.Error(), "go with --latency-file") {
		t.Errorf("--latency-format without --latency-file: %v", err)
	}
}

// A log's lines without a latency (pgbench's skipped transactions) are
// counted apart from the lines it cannot read, each said once: nothing is
// dropped in silence.
func TestFileSourceCountsLinesWithoutLatency(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pgbench_log.1234")
	os.WriteFile(path, []byte("0 81 4621 0 1412881037 912698 3005\n0 83 skipped 0 1412881037 914578 5217\n0 83 skipped 0 1412881037 914578 5099\n"+
		"garbage\n0 84 4142 0 1412881037 918023 2333\n"), 0o644)
	src, err := Config{File: path}.Open(Env{})
	if err != nil {
		t.Fatal(err)
	}
	run := runSource(src, 10)
	var got []uint64
	for len(got) < 2 {
		select {
		case r := <-run.out:
			got = append(got, r.Sample.LatencyNs)
		case <-time.After(3 * time.Second):
			t.Fatal("no sample")
		}
	}
	time.Sleep(200 * time.Millisecond)
	run.cancel()
	<-run.done
	warned := run.warnings()
	want := []latency.Skip{{Kind: latency.SkipNoLatency, N: 2}, {Kind: latency.SkipMalformed, N: 1}}
	if !reflect.DeepEqual(got, []uint64{4621e3, 4142e3}) || !reflect.DeepEqual(src.Skipped(), want) || len(warned) != 3 ||
		warned[0] != "latency file "+path+": read as pgbench's -l per-transaction log" {
		t.Fatalf("samples %v, skipped %v, warned %q", got, src.Skipped(), warned)
	}
	a := latency.Account{Samples: 2, Skipped: src.Skipped()}
	if p := a.Problems(); len(p) != 2 || !strings.HasPrefix(p[0].Text, "2 lines of the latency file carried no latency") {
		t.Fatalf("problems %+v", p)
	}
}
