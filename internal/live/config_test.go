//go:build linux

package live

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/target"
)

// The defaults in the flag sets must parse and keep only mmap_lock.
func TestDefaultThresholds(t *testing.T) {
	got, err := stall.ParseDurations(DefaultMinEvent)
	if err != nil || got[stall.MmapLock] != uint64(10*time.Microsecond) || got[stall.DirectReclaim] != 0 {
		t.Errorf("default %q = %v, %v", DefaultMinEvent, got, err)
	}
	got, err = stall.ParseDurations(DefaultMinStall)
	if err != nil || got[stall.MmapLock] != uint64(time.Microsecond) || got[stall.DirectReclaim] != 0 {
		t.Errorf("default %q = %v, %v", DefaultMinStall, got, err)
	}
}

func validTrace() Trace {
	return Trace{Window: time.Second, MinEvent: DefaultMinEvent, MinStall: DefaultMinStall, RingBufMiB: 8}
}

// Every check names the command and the flag, in one line, and is the
// user's input (exit 2); attach and serve share the trace checks.
func TestChecks(t *testing.T) {
	cases := []struct {
		edit func(*Attach)
		want string
	}{
		{func(a *Attach) { a.Trace.Window = 3 * time.Millisecond }, "attach: --window must be at least 10ms"},
		{func(a *Attach) { a.Trace.RingBufMiB = 3 }, "attach: --ringbuf-mib must be a power of two"},
		{func(a *Attach) { a.Trace.MinStall = "bogus=1s" }, `attach: --min-stall: unknown cause "bogus"`},
		{func(a *Attach) { a.Duration = -time.Second }, "attach: --duration must not be negative"},
		{func(a *Attach) { a.SpikeK = 1 }, "attach: --spike-k must be above 1"},
		{func(a *Attach) { a.Latency.File, a.Latency.PromURL, a.Latency.PromMetric = "-", "http://x", "m" }, "attach: pick one latency source"},
		{func(a *Attach) { a.Latency.PromURL = "http://x" }, "--latency-prom and --latency-metric go together"},
		{func(a *Attach) { a.Latency.File = "/no/such/file" }, "attach: --latency-file"},
		{func(a *Attach) { a.Latency.File = "/" }, "attach: --latency-file: / is a directory"},
		{func(a *Attach) { a.Latency.PromURL, a.Latency.PromMetric = "not-a-url", "m" }, `--latency-prom: "not-a-url" is not an http:// or https:// URL`},
		{func(a *Attach) { a.Latency.PromURL, a.Latency.PromMetric = "ftp://h/metrics", "m" }, "--latency-prom"},
		{func(a *Attach) { a.SpikeK = math.NaN() }, "attach: --spike-k must be above 1"},
		{func(a *Attach) { a.Latency.Uprobe = "nocolon" }, "--latency-uprobe wants BINARY:SYMBOL"},
		{func(a *Attach) { a.DumpOnSpike = true }, "--dump-on-spike needs --flight-recorder and a latency source"},
		{func(a *Attach) { a.Command, a.RecordTo, a.Flight = "record", "x.ntr", "12KiB" }, "record: --flight-recorder: \"12KiB\" is under 1 MiB"},
		{func(a *Attach) { a.Command = "record" }, "record: -o FILE is required"},
		{func(a *Attach) { a.SpikeOn = "p95" }, `attach: --spike-on takes p99, p999 or max, not "p95"`},
		{func(a *Attach) { a.SpikeOn = "max" }, "attach: --slo and --spike-on need a latency source"},
	}
	for _, c := range cases {
		a := Attach{Command: "attach", Trace: validTrace(), SpikeK: 2}
		if err := a.Check(); err != nil {
			t.Fatalf("a valid config: %v", err)
		}
		c.edit(&a)
		err := a.Check()
		if err == nil || !IsBadInput(err) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: got %v (bad input %v)", c.want, err, IsBadInput(err))
		}
	}
	s := Serve{Trace: validTrace(), Listen: "127.0.0.1:0", CgroupLimit: 1}
	if err := s.Check(); err != nil {
		t.Fatalf("a valid serve config: %v", err)
	}
	for want, edit := range map[string]func(*Serve){
		"serve: --window must be at least 10ms":      func(s *Serve) { s.Trace.Window = 0 },
		"serve: --listen":                            func(s *Serve) { s.Listen = "nope" },
		"serve: --cgroup-limit must be at least 1":   func(s *Serve) { s.CgroupLimit = 0 },
		"serve: --doctor-every must not be negative": func(s *Serve) { s.DoctorEvery = -1 },
	} {
		s := Serve{Trace: validTrace(), Listen: "127.0.0.1:0", CgroupLimit: 1}
		edit(&s)
		if err := s.Check(); err == nil || !IsBadInput(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v", want, err)
		}
	}
}

func TestParseFlightSpec(t *testing.T) {
	for in, want := range map[string]int{"64MiB": 64 << 20, "1GiB": 1 << 30, "2MB": 2e6} {
		if n, age, err := parseFlightSpec(in); err != nil || n != want || age != 0 {
			t.Errorf("%s: %d %v %v", in, n, age, err)
		}
	}
	if n, age, err := parseFlightSpec("5m"); err != nil || age != 5*time.Minute || n != 256<<20 {
		t.Errorf("5m: %d %v %v", n, age, err)
	}
	for _, bad := range []string{"", "12KiB", "x", "-5m", "0MiB"} {
		if _, _, err := parseFlightSpec(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Run-queue wait needs a latency source and a target: system-wide it
// would time every context switch on the machine.
func TestRunqWaitNeedsATarget(t *testing.T) {
	for _, c := range []struct {
		latency string
		kind    target.Kind
		want    bool
	}{
		{"", target.Process, false},
		{"requests.log", target.System, false},
		{"requests.log", target.Process, true},
		{"requests.log", target.Cgroup, true},
		{"requests.log", target.Thread, true},
	} {
		a := &Attach{RunqWait: true}
		a.Latency.File = c.latency
		if got := a.runqWait(&target.Target{Kind: c.kind}); got != c.want {
			t.Errorf("latency %q, target kind %d: runq_wait %v, want %v", c.latency, c.kind, got, c.want)
		}
	}
	off := &Attach{}
	off.Latency.File = "requests.log"
	if off.runqWait(&target.Target{Kind: target.Process}) {
		t.Error("--runq-wait=false still traces it")
	}
}
