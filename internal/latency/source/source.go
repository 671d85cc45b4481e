// Package source acquires a service's request latencies: a file or stream
// of samples followed as it grows (a load generator's log), a uprobe pair
// on the request handler, or a Prometheus histogram scraped once per
// window. It is apart from internal/latency, which keeps the per-window
// statistics, so that the core (engine, aggregate, correlate, the formats)
// never links net/http or the Prometheus parser.
package source

import (
	"context"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/numatrace/numatrace/internal/inbound"
	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/latency/exchange"
	rundesc "github.com/numatrace/numatrace/internal/run" // not run: a test helper of this package has the name
)

// Source is where a service's request latencies come from. It reads on
// its own goroutine and sends readings until ctx ends; warn hears about
// readings it had to skip. Run returns an error only when the source
// cannot go on.
type Source interface {
	Run(ctx context.Context, out chan<- latency.Reading, warn func(error)) error
	// Close releases what opening the source took.
	Close() error
	// Skipped says what the source had to skip, by kind, with counts
	// (412 malformed lines); nil when nothing.
	Skipped() []latency.Skip
}

// Env is what opening a source needs from the run.
type Env struct {
	Start   time.Time // wall clock at StartNs
	StartNs uint64    // CLOCK_MONOTONIC at the start: the windows' origin
	Window  time.Duration
	PID     int // the traced process, 0 for any
	// Timers attaches request timers: the live tracer. Nil where uprobes
	// cannot attach.
	Timers RequestTimers
	// Sockets times the target's own sockets: the live tracer, when the
	// target is one process.
	Sockets SocketTimers
	// Notice hears what a source says once as it opens (what it times).
	Notice func(string)
}

// RequestTimers puts a uprobe and a uretprobe on a function of a service
// and times every call in the kernel (the live tracer does).
type RequestTimers interface {
	TimeRequests(binary, symbol string, pid int) (RequestTimer, error)
}

// RequestTimer streams a request timer's records as the kernel wrote
// them (the live tracer's uprobe and socket timers do).
type RequestTimer interface {
	// Run hands every record to record until Close: a timed call as it
	// returned (when, how long it took, the thread it returned on, the
	// stall time inside it unless it moved between threads), or a
	// socket's exchange as it stood after a write of its response;
	// drained each time what was read so far may go on as one batch.
	Run(record func(exchange.Record), drained func())
	Close() error
}

// Config names the latency source. Every source is registered here: its
// flags, its checks and how it opens. At most one may be set.
type Config struct {
	File       string    // a load generator's or a server's log, followed as it grows...
	FileFormat LogFormat // ...in this format
	PromURL    string    // a Prometheus endpoint scraped once per window...
	PromMetric string    // ...for this histogram
	Uprobe     string    // BINARY:SYMBOL timed in the kernel
	Mode       string    // --latency: ModeAuto, ModeKernel or ModeOff
	Port       uint      // --latency-port: only this port's connections (ModeKernel)

	inbound *inbound.Endpoints // what ModeKernel times: FindInbound
}

// kinds are the sources a Config names, one for each run.LatencyKind:
// the flag that names it, as typed, and whether c names it. Set and
// Check count sources by it; the tests walk it for the other places a
// source is wired (Describe, Open, help, docs/FORMAT.md).
var kinds = []struct {
	kind  rundesc.LatencyKind
	flag  string
	named func(Config) bool
}{
	{rundesc.LatencyFile, "--latency-file", func(c Config) bool { return c.File != "" }},
	{rundesc.LatencyProm, "--latency-prom", func(c Config) bool { return c.PromURL != "" }},
	{rundesc.LatencyUprobe, "--latency-uprobe", func(c Config) bool { return c.Uprobe != "" }},
	{rundesc.LatencyKernel, "--latency kernel", func(c Config) bool { return c.Mode == ModeKernel }},
}

// Flag is the flag that names a source of kind k, as typed
// ("--latency-file", "--latency kernel"); "" for none.
func Flag(k rundesc.LatencyKind) string {
	for _, d := range kinds {
		if d.kind == k {
			return d.flag
		}
	}
	return ""
}

// named is how many sources c names.
func (c Config) named() int {
	n := 0
	for _, d := range kinds {
		if d.named(c) {
			n++
		}
	}
	return n
}

// AddFlags registers the sources' flags.
func (c *Config) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.File, "latency-file", "",
		"read request latencies from this file (followed as it grows) or - for stdin: NDJSON {\"ts_ns\":..,\"latency_ns\":..}, two columns, or a log as it is (--latency-format)")
	fs.StringVar(&c.FileFormat.Name, "latency-format", "auto",
		"the --latency-file's format: "+strings.Join(FormatNames(), ", ")+" (auto: told from its first lines)")
	fs.StringVar(&c.FileFormat.Field, "latency-field", "",
		"the --latency-file's latency field: a JSON key (duration_ms), an access log's key (rt, urt) or field number (-1: the last), HAProxy's timer (Tr, Tt)")
	fs.StringVar(&c.FileFormat.Unit, "latency-unit", "",
		"the --latency-field's unit (ns, us, ms, s) when its name does not end in one")
	fs.StringVar(&c.Uprobe, "latency-uprobe", "",
		"time every call of the service's request handler in the kernel, BINARY:SYMBOL (C, C++, Rust, Go on amd64)")
	fs.StringVar(&c.Mode, "latency", "",
		"kernel: time requests on the target's own inbound TCP connections (the default for --pid with no other source); off: no latency source")
	fs.UintVar(&c.Port, "latency-port", 0, "with --latency kernel: time only this local port's connections")
	fs.StringVar(&c.PromURL, "latency-prom", "", "scrape the service's Prometheus endpoint once per window...")
	fs.StringVar(&c.PromMetric, "latency-metric", "", "...for this latency histogram (seconds unless named _milliseconds or _microseconds)")
}

// Set reports whether a source is named.
func (c Config) Set() bool { return c.named() > 0 }

// DefaultKernel makes the kernel's socket timing the source when no
// other is named and --latency does not turn it off: for a target that
// is one process, which the caller says.
func (c *Config) DefaultKernel() {
	if c.Mode == ModeAuto && !c.Set() {
		c.Mode = ModeKernel
	}
}

// Check validates the flags before anything is loaded; every error it
// returns is the user's input, not the machine's.
func (c Config) Check() error {
	switch c.Mode {
	case ModeAuto, ModeOff, ModeKernel:
	default:
		return fmt.Errorf("--latency wants kernel or off, got %q", c.Mode)
	}
	if n := c.named(); n > 1 || (c.Mode == ModeOff && n > 0) {
		return errors.New("pick one latency source")
	}
	if c.Port > 65535 || (c.Port != 0 && c.Mode != ModeKernel) {
		return errors.New("--latency-port is a TCP port (1-65535) timed with --latency kernel")
	}
	if (c.PromURL != "") != (c.PromMetric != "") {
		return errors.New("--latency-prom and --latency-metric go together")
	}
	if c.File == "" && (c.FileFormat != LogFormat{} && c.FileFormat != LogFormat{Name: "auto"}) {
		return errors.New("--latency-format, --latency-field and --latency-unit go with --latency-file")
	}
	if err := c.FileFormat.Check(); err != nil {
		return err
	}
	if c.File != "" && c.File != "-" {
		st, err := os.Stat(c.File)
		if err != nil {
			return fmt.Errorf("--latency-file: %w", err)
		}
		if st.IsDir() {
			return fmt.Errorf("--latency-file: %s is a directory", c.File)
		}
		if m := st.Mode(); !m.IsRegular() && m&os.ModeNamedPipe == 0 { // /dev/zero would be read for ever
			return fmt.Errorf("--latency-file: %s is %s: not read; give a regular file, a FIFO or - (standard input)", c.File, fileKind(m))
		}
	}
	if c.PromURL != "" {
		u, err := url.Parse(c.PromURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--latency-prom: %q is not an http:// or https:// URL", c.PromURL)
		}
	}
	if c.Uprobe != "" {
		if _, _, err := ParseUprobeTarget(c.Uprobe); err != nil {
			return err
		}
	}
	return nil
}

// Open makes the named source; nil when none is named.
func (c Config) Open(env Env) (Source, error) {
	switch {
	case c.File != "":
		return &fileSource{path: c.File, format: c.FileFormat,
			clk: latency.Clock{WallNs: env.Start.UnixNano(), MonoNs: int64(env.StartNs)}}, nil
	case c.PromURL != "":
		return &promSource{url: c.PromURL, metric: c.PromMetric, start: env.Start, window: env.Window}, nil
	case c.Uprobe != "":
		if env.Timers == nil {
			return nil, errors.New("--latency-uprobe needs the live tracer")
		}
		bin, sym, err := ParseUprobeTarget(c.Uprobe)
		if err != nil {
			return nil, err
		}
		t, err := env.Timers.TimeRequests(bin, sym, env.PID)
		if err != nil {
			return nil, err
		}
		return &uprobeSource{timer: t}, nil
	case c.Mode == ModeKernel:
		return openKernel(env, c.inbound)
	}
	return nil, nil
}

// skips counts the readings a source skips, by kind: the first of each
// kind is said at once, the rest only counted, so a dead endpoint or a
// log full of bad lines says so once and not once per window or line.
type skips struct {
	mu    sync.Mutex
	n     map[latency.SkipKind]uint64
	kinds []latency.SkipKind // in the order first seen
}

func (k *skips) add(kind latency.SkipKind, source string, err error, warn func(error)) {
	k.mu.Lock()
	if k.n == nil {
		k.n = map[latency.SkipKind]uint64{}
	}
	first := k.n[kind] == 0
	k.n[kind]++
	if first {
		k.kinds = append(k.kinds, kind)
	}
	k.mu.Unlock()
	if first && warn != nil {
		warn(fmt.Errorf("%s: %v (skipped; more %s are counted in the report, not shown)", source, err, kind))
	}
}

// Skipped is what was skipped, by kind in the order first seen.
func (k *skips) Skipped() []latency.Skip {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []latency.Skip
	for _, kind := range k.kinds {
		out = append(out, latency.Skip{Kind: kind, N: k.n[kind]})
	}
	return out
}

// send hands r on, waiting for room while ctx lasts. A channel with room
// takes it even once ctx has ended: what a timer hands on as it closes
// (the exchanges it held) comes after the run ended, and the session
// drains the channel then; a select between the two lost half of it.
func send(ctx context.Context, out chan<- latency.Reading, r latency.Reading) {
	select {
	case out <- r:
		return
	default:
	}
	select {
	case out <- r:
	case <-ctx.Done():
	}
}

type fileSource struct {
	skips
	path   string
	format LogFormat
	clk    latency.Clock
}

func (s *fileSource) Run(ctx context.Context, out chan<- latency.Reading, warn func(error)) error {
	// A rotation or truncation loses nothing: it is said the first time,
	// not every time (logrotate every hour).
	said := map[string]bool{}
	notice := func(err error) {
		var m *Moved
		if errors.As(err, &m) && said[m.How] {
			return
		} else if m != nil {
			said[m.How] = true
		}
		if warn != nil {
			warn(fmt.Errorf("latency file %w", err))
		}
	}
	bad := func(err error) {
		kind := latency.SkipMalformed
		if isNoLatency(err) {
			kind = latency.SkipNoLatency
		}
		s.skips.add(kind, "latency file", err, warn)
	}
	read := s.format.Reader(func(about string) {
		if warn != nil {
			warn(&Told{Path: s.path, About: about})
		}
	})
	return Follow(ctx, s.path, read, s.clk, func(smp latency.Sample) { send(ctx, out, latency.Reading{Sample: smp}) }, bad, notice)
}

func (s *fileSource) Close() error { return nil }

// Told is what a latency file's first lines told its format to be: said
// once, so that a log read as what it is not is seen at once.
type Told struct {
	Path  string
	About string // "pgbench's -l per-transaction log"
}

func (t *Told) Error() string { return "latency file " + t.Path + ": read as " + t.About }

type promSource struct {
	skips
	url, metric string
	start       time.Time
	window      time.Duration
}

func (s *promSource) Run(ctx context.Context, out chan<- latency.Reading, warn func(error)) error {
	stats := make(chan latency.Stats)
	go func() {
		ScrapeWindows(ctx, s.url, s.metric, s.start, s.window, stats,
			func(kind latency.SkipKind, err error) { s.skips.add(kind, "latency endpoint", err, warn) })
		close(stats)
	}()
	for st := range stats {
		send(ctx, out, latency.Reading{Window: &st})
	}
	return nil
}

func (s *promSource) Close() error { return nil }

// uprobeSource streams the calls a uprobe timer times, each whole.
type uprobeSource struct{ timer RequestTimer }

func (s *uprobeSource) Skipped() []latency.Skip { return nil }

func (s *uprobeSource) Run(ctx context.Context, out chan<- latency.Reading, warn func(error)) error {
	return runTimer(ctx, out, s.timer, func(b *batcher) {
		s.timer.Run(func(r exchange.Record) { b.add(r.Sample()) }, b.flush)
	})
}

func (s *uprobeSource) Close() error { return s.timer.Close() }

// runTimer reads a request timer (read, on its own goroutine) until ctx
// ends, then closes it, which ends read; the samples go on in batches.
func runTimer(ctx context.Context, out chan<- latency.Reading, timer RequestTimer, read func(*batcher)) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		b := &batcher{ctx: ctx, out: out}
		read(b)
		b.last()
	}()
	<-ctx.Done()
	timer.Close() // ends read; the tracer closes it again as it closes
	<-done
	return nil
}

// batcher hands a timer's samples on in batches, one per burst the ring
// holds: one channel hand-over per sample woke the session's loop for
// each and cost ~1 µs a request at 80,000 a second.
type batcher struct {
	ctx   context.Context
	out   chan<- latency.Reading
	batch []latency.Sample
}

func (b *batcher) add(s latency.Sample) {
	b.batch = append(b.batch, s)
	if len(b.batch) >= maxBatch {
		b.flush()
	}
}

// flush sends the batch unless ctx ends first.
func (b *batcher) flush() {
	if len(b.batch) > 0 {
		send(b.ctx, b.out, latency.Reading{Samples: b.batch})
		b.batch = nil
	}
}

// last sends what was read as the source closed, if there is room.
func (b *batcher) last() {
	if len(b.batch) > 0 {
		select {
		case b.out <- latency.Reading{Samples: b.batch}:
		default:
		}
	}
}

// maxBatch bounds a batch of timed requests handed on at once.
const maxBatch = 4096

// ParseUprobeTarget splits BINARY:SYMBOL.
func ParseUprobeTarget(s string) (binary, symbol string, err error) {
	i := strings.LastIndex(s, ":")
	if i <= 0 || i == len(s)-1 {
		return "", "", fmt.Errorf("--latency-uprobe wants BINARY:SYMBOL, got %q", s)
	}
	binary, symbol = s[:i], s[i+1:]
	f, err := elf.Open(binary)
	var fe *elf.FormatError
	if errors.As(err, &fe) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "", "", fmt.Errorf("--latency-uprobe: %s is not an ELF executable (%v)", binary, err)
	}
	if err != nil {
		return "", "", fmt.Errorf("--latency-uprobe: %w", err)
	}
	f.Close()
	return binary, symbol, nil
}
