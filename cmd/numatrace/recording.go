package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/numatrace/numatrace/internal/doctor"
	"github.com/numatrace/numatrace/internal/output"
	"github.com/numatrace/numatrace/internal/procsnap"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/session"
	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/target"
	"github.com/numatrace/numatrace/internal/topology"
	"github.com/numatrace/numatrace/internal/tracer"
)

// recordEvery is how often a recording gets the kernel's aggregates and a
// procfs reading, and how much a crash can lose at most.
const recordEvery = 10 * time.Second

// recording is the optional recorder of one trace: a file, or a flight
// recorder that writes on SIGUSR1. A nil *recording records nothing.
type recording struct {
	path   string
	file   *record.FileWriter
	flight *record.FlightRecorder
	sigs   chan os.Signal
}

func recordingHeader(tr *tracer.Tracer, tgt *target.Target, topo *topology.Topology, f *attachFlags,
	started time.Time, startNs uint64, doc *doctor.Report) record.Header {
	host, _ := os.Hostname()
	h := record.Header{Numatrace: version, Started: started, StartNs: startNs, WindowNs: uint64(f.window),
		Target: tgt.String(), MinEventNs: map[string]uint64{}, MinStallNs: map[string]uint64{},
		Host: record.Host{Hostname: host, Kernel: kernelRelease(), CPUs: topo.NumCPUs(), CPUNode: topo.CPUNode,
			NodeMem: map[int]uint64{}}}
	for n, b := range topo.NodeMem {
		h.Host.NodeMem[n] = b
	}
	for c, ns := range f.minEventNs {
		if ns > 0 {
			h.MinEventNs[stall.Cause(c).String()] = ns
		}
	}
	for c, ns := range f.minStallNs {
		if ns > 0 {
			h.MinStallNs[stall.Cause(c).String()] = ns
		}
	}
	for _, p := range tr.Probes() {
		h.Probes = append(h.Probes, record.Probe{Name: p.Name, Attached: p.Attached, Error: p.Error})
	}
	if f.latencyFile != "" || f.latencyProm != "" || f.latencyUprobe != "" {
		h.SpikeK, h.SpikeFloorNs = f.spikeK, uint64(f.spikeFloor)
	}
	if doc != nil {
		h.Doctor, _ = json.Marshal(doc)
	}
	return h
}

// startDoctor is doctor's one-reading view of the machine (and the target
// process) as tracing starts, for the recording and the interactive view;
// nil if it cannot read /proc.
func startDoctor(tgt *target.Target) *doctor.Report {
	opt := doctor.Options{}
	if tgt.Kind == target.Process {
		opt.PID = int(tgt.ID)
	}
	rep, err := doctor.Run(opt)
	if err != nil {
		return nil
	}
	return rep
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

func newRecording(tr *tracer.Tracer, tgt *target.Target, topo *topology.Topology, f *attachFlags,
	started time.Time, startNs uint64, opt *session.Options, doc *doctor.Report, stderr io.Writer) (*recording, error) {
	if f.recordTo == "" {
		return nil, nil
	}
	h := recordingHeader(tr, tgt, topo, f, started, startNs, doc)
	rec := &recording{path: f.recordTo}
	if f.flight != "" {
		maxBytes, maxAge, err := parseFlightSpec(f.flight)
		if err != nil {
			return nil, usageErr("record: --flight-recorder: %v", err)
		}
		fr, err := record.NewFlightRecorder(h, maxBytes, uint64(maxAge))
		if err != nil {
			return nil, err
		}
		rec.flight = fr
		opt.Recorder = fr
		rec.sigs = make(chan os.Signal, 1)
		signal.Notify(rec.sigs, syscall.SIGUSR1)
		dumps := make(chan struct{}, 1)
		go func() {
			for range rec.sigs {
				select {
				case dumps <- struct{}{}:
				default:
				}
			}
		}()
		opt.DumpRequests = dumps
		opt.Dump = func(final record.Snapshot) error {
			return fr.Dump(f.recordTo, final, record.End{EndNs: final.MonoNs, DurationNs: final.MonoNs - startNs,
				Note: "flight recorder dump on SIGUSR1"})
		}
		opt.OnDump = func(err error) {
			if err != nil {
				fmt.Fprintf(stderr, "numatrace: flight recorder: %v\n", err)
				return
			}
			fmt.Fprintf(stderr, "numatrace: flight recorder wrote %s (%d bytes held)\n", f.recordTo, fr.Held())
		}
	} else {
		fw, err := record.Create(f.recordTo, h)
		if err != nil {
			return nil, err
		}
		rec.file = fw
		opt.Recorder = fw
	}
	pids := func() []uint32 { return nil }
	switch tgt.Kind {
	case target.Process:
		pids = func() []uint32 { return []uint32{tgt.ID} }
	case target.Cgroup:
		pids = func() []uint32 { p, _ := tgt.CgroupPIDs(); return p }
	}
	opt.RecordEvery = recordEvery
	opt.ReadProcfs = func(now uint64) (record.Procfs, error) {
		return procsnap.Read("/proc", "/sys", pids(), now)
	}
	return rec, nil
}

// finish closes the recording with how the run ended.
func (r *recording) finish(res *session.Result, rep *output.Report, stderr io.Writer) error {
	if r == nil {
		return nil
	}
	if r.sigs != nil {
		signal.Stop(r.sigs)
		close(r.sigs)
	}
	if r.file == nil {
		fmt.Fprintf(stderr, "numatrace: flight recorder stopped; send SIGUSR1 while it runs to write %s\n", r.path)
		return nil
	}
	err := r.file.Close(record.End{EndNs: res.EndNs, DurationNs: res.DurationNs, Events: res.Events,
		LateEvents: res.LateEvents, Windows: res.Windows, Note: rep.Note})
	if err != nil {
		return fmt.Errorf("recording %s: %w", r.path, err)
	}
	size := int64(0)
	if st, err := os.Stat(r.path); err == nil {
		size = st.Size()
	}
	fmt.Fprintf(stderr, "numatrace: recorded %d events over %s to %s (%d bytes, %d dropped)\n",
		res.Events, time.Duration(res.DurationNs).Round(time.Millisecond), r.path, size, r.file.Dropped())
	return nil
}

// abort closes a recording after a failed run.
func (r *recording) abort() {
	if r == nil || r.file == nil {
		return
	}
	r.file.Close(record.End{Note: "numatrace stopped on an error"})
}
