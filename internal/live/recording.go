//go:build linux

package live

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/numatrace/numatrace/internal/procsnap"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/sanitize"
	"github.com/numatrace/numatrace/internal/session"
)

// recordEvery is how often a recording gets the kernel's aggregates and a
// procfs reading; flushEvery how often its open block is closed, which
// bounds what a crash or a kill -9 loses (the session ticks every quarter
// window, so up to a quarter second more).
const (
	recordEvery = 10 * time.Second
	flushEvery  = 500 * time.Millisecond
)

// recording is the optional recorder of one trace: a file, or a flight
// recorder that writes on SIGUSR1. A nil *recording records nothing.
type recording struct {
	path   string
	file   *record.FileWriter
	flight *record.FlightRecorder
	sigs   chan os.Signal
}

// parseFlightSpec reads "64MiB", "512MB", "1GiB" or a duration like "5m".
func parseFlightSpec(s string) (maxBytes int, maxAge time.Duration, err error) {
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return 256 << 20, d, nil // a duration still needs a memory bound
	}
	units := []struct {
		suffix string
		mult   int
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1}}
	for _, u := range units {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n <= 0 {
				break
			}
			if n*u.mult < 1<<20 {
				return 0, 0, fmt.Errorf("%q is under 1 MiB", s)
			}
			return n * u.mult, 0, nil
		}
	}
	return 0, 0, fmt.Errorf("%q is neither a size (64MiB) nor a duration (5m)", s)
}

// newRecording opens the recording a run asked for, and tells the session
// what to record and when.
// pids lists the target's processes at each procfs reading.
func (a *Attach) newRecording(h record.Header, opt *session.Options, pids func() []uint32, stderr io.Writer) (*recording, error) {
	if a.RecordTo == "" {
		return nil, nil
	}
	rec := &recording{path: a.RecordTo}
	if a.Flight != "" {
		fr, err := record.NewFlightRecorder(h, a.flightBytes, uint64(a.flightAge))
		if err != nil {
			return nil, err
		}
		rec.flight = fr
		opt.Recorder = fr
		rec.dumpOnSignal(opt, fr, h.StartNs, stderr)
	} else {
		fw, err := record.Create(a.RecordTo, h)
		if err != nil {
			return nil, err
		}
		warn := opt.Warn
		fw.OnError(func(err error) {
			if warn != nil {
				warn(fmt.Errorf("recording to %s stopped: %v; tracing goes on", a.RecordTo, err))
			}
		})
		rec.file = fw
		opt.Recorder = fw
	}
	opt.RecordEvery = recordEvery
	if rec.file != nil { // a flight recorder's blocks are in memory: a crash loses them anyway
		opt.FlushEvery = flushEvery
	}
	opt.ReadProcfs = func(now uint64) (record.Procfs, error) {
		return procsnap.Read("/proc", "/sys", pids(), now)
	}
	return rec, nil
}

// dumpOnSignal makes SIGUSR1 (and spikes, with --dump-on-spike) write
// what the flight recorder holds.
func (r *recording) dumpOnSignal(opt *session.Options, fr *record.FlightRecorder, startNs uint64, stderr io.Writer) {
	r.sigs = make(chan os.Signal, 1)
	signal.Notify(r.sigs, syscall.SIGUSR1)
	dumps := make(chan struct{}, 1)
	go func() {
		for range r.sigs {
			select {
			case dumps <- struct{}{}:
			default:
			}
		}
	}()
	opt.DumpRequests = dumps
	opt.Dump = func(final record.Snapshot) (func() error, error) {
		d, err := fr.Take(final, run.End{EndNs: final.MonoNs, DurationNs: final.MonoNs - startNs,
			Note: "flight recorder dump on SIGUSR1"})
		if err != nil {
			return nil, err
		}
		return func() error { return d.WriteFile(r.path) }, nil
	}
	opt.OnDump = func(err error) {
		fmt.Fprintf(stderr, "numatrace: %s\n", sanitize.Text(r.dumpOutcome(err, fr.Held())))
	}
}

// dumpOutcome says how a dump went, in one line that names the file.
func (r *recording) dumpOutcome(err error, held int) string {
	if err == nil {
		return fmt.Sprintf("flight recorder wrote %s (%d bytes held)", r.path, held)
	}
	if msg := err.Error(); strings.Contains(msg, r.path) { // a refused path, a failed write
		return "flight recorder: " + msg
	}
	return fmt.Sprintf("flight recorder: %s: %v", r.path, err)
}

// finish closes the recording with how the run ended.
func (r *recording) finish(end run.End, stderr io.Writer) error {
	if r == nil {
		return nil
	}
	if r.sigs != nil {
		signal.Stop(r.sigs)
		close(r.sigs)
	}
	if r.file == nil {
		fmt.Fprintf(stderr, "numatrace: flight recorder stopped; send SIGUSR1 while it runs to write %s\n", sanitize.Text(r.path))
		return nil
	}
	if err := r.file.Close(end); err != nil {
		return fmt.Errorf("recording %s: %w", r.path, err)
	}
	size := int64(0)
	if st, err := os.Stat(r.path); err == nil {
		size = st.Size()
	}
	fmt.Fprintf(stderr, "numatrace: recorded %d events over %s to %s (%d bytes, %d dropped)\n",
		end.Events, time.Duration(end.DurationNs).Round(time.Millisecond), sanitize.Text(r.path), size, r.file.Dropped())
	return nil
}

// abort closes a recording after a failed run.
func (r *recording) abort() {
	if r == nil || r.file == nil {
		return
	}
	r.file.Close(run.End{Note: "numatrace stopped on an error"})
}
