package record

import (
	"encoding/json"
	"time"

	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/wire"
)

// Header describes a recording: where and how it was made.
type Header struct {
	Format  string `json:"format"` // "numatrace"
	Version struct {
		Major int `json:"major"`
		Minor int `json:"minor"`
	} `json:"version"`
	Numatrace string             `json:"numatrace"` // numatrace's version
	Started   time.Time          `json:"started"`   // wall clock at the start
	StartNs   uint64             `json:"start_ns"`  // CLOCK_MONOTONIC at the start: event times are on this clock
	WindowNs  uint64             `json:"window_ns"`
	Target    string             `json:"target"`
	Probes    []wire.ProbeStatus `json:"probes"`
	// MinEventNs are the per-cause stream thresholds (cause → ns).
	MinEventNs map[string]uint64 `json:"min_event_ns"`
	// MinStallNs are the per-cause thresholds below which the kernel did
	// not count a stall at all (cause → ns).
	MinStallNs map[string]uint64 `json:"min_stall_ns,omitempty"`
	// StacksMinNs is the shortest streamed stall that carries its stacks
	// (since 1.4: --stacks-min); absent when no stacks were taken.
	StacksMinNs uint64 `json:"stacks_min_ns,omitempty"`
	Host        Host   `json:"host"`
	// Spike detection settings, so replay repeats the live analysis.
	SpikeK       float64 `json:"spike_k,omitempty"`
	SpikeFloorNs uint64  `json:"spike_floor_ns,omitempty"`
	SLONs        uint64  `json:"slo_ns,omitempty"`   // since 1.3: --slo
	SpikeOn      string  `json:"spike_on,omitempty"` // since 1.3: --spike-on; "" is p99
	// LatencyFunction is the function a request timer in the kernel timed
	// (since 1.3), for the verdict on stalls outside it.
	LatencyFunction string `json:"latency_function,omitempty"`
	// LatencySource is where the request latencies came from (added in
	// 1.3's later writers); absent without a source and in older files.
	LatencySource *LatencySource `json:"latency_source,omitempty"`
	// FlightRecorder is set when the file holds only the most recent data.
	FlightRecorder bool `json:"flight_recorder,omitempty"`
	// PSIScope is whose memory PSI the lost records carry (since 1.6):
	// "system", or the target's cgroup v2 group; absent in older files,
	// whose figure is read as the system's.
	PSIScope string `json:"psi_scope,omitempty"`
	// Doctor is `numatrace doctor --json` of the machine (and target
	// process) when tracing started (since 1.2).
	Doctor json.RawMessage `json:"doctor,omitempty"`
	// MemoryCgroup is the target's memory cgroup as tracing started
	// (later 1.5 writers); absent where none was read.
	MemoryCgroup *wire.Memcg `json:"memory_cgroup,omitempty"`
}

// LatencySource is a run.LatencySource as the header writes it.
type LatencySource struct {
	Kind   string `json:"kind"`   // file, prometheus, uprobe, kernel
	Detail string `json:"detail"` // what of it: a path, a URL, the sockets
}

func newLatencySource(l run.LatencySource) *LatencySource {
	if l.Kind == run.LatencyNone {
		return nil
	}
	return &LatencySource{Kind: string(l.Kind), Detail: l.Detail}
}

// run is the source for the run's description; none when absent.
func (l *LatencySource) run() run.LatencySource {
	if l == nil {
		return run.LatencySource{}
	}
	return run.LatencySource{Kind: run.LatencyKind(l.Kind), Detail: l.Detail}
}

// Host is the machine the recording was made on.
type Host struct {
	Hostname string         `json:"hostname"`
	Kernel   string         `json:"kernel"`
	CPUs     int            `json:"cpus"`
	CPUNode  map[int]int    `json:"cpu_node"`
	NodeMem  map[int]uint64 `json:"node_mem_bytes"`
}

// NewHeader is the header of a recording of the run d, made by numatrace
// version on host, with doctor's reading of the machine (nil if none).
func NewHeader(d run.Description, host Host, version string, doctor json.RawMessage) Header {
	h := Header{Numatrace: version, Started: d.Started, StartNs: d.StartNs, WindowNs: d.WindowNs, Target: d.Target,
		Probes: wire.NewProbes(d.Probes), MinEventNs: wire.ByName(d.MinEventNs, d.MinEventNs), MinStallNs: wire.ByName(d.MinStallNs, d.MinStallNs),
		StacksMinNs: d.StacksMinNs, Host: host, SpikeK: d.Spikes.K, SpikeFloorNs: d.Spikes.FloorNs, SLONs: d.Spikes.SLONs, SpikeOn: spikeOnName(d.Spikes.On),
		LatencyFunction: d.LatencyFunction, LatencySource: newLatencySource(d.Latency), FlightRecorder: d.FlightRecorder, PSIScope: d.PressureScope, Doctor: doctor,
		MemoryCgroup: wire.NewMemcg(d.MemoryCgroup)}
	h.Host.Kernel = d.Kernel
	return h
}

// Run is the run the recording describes, for the engine.
func (h Header) Run() run.Description {
	return run.Description{Target: h.Target, Kernel: h.Host.Kernel, Started: h.Started, StartNs: h.StartNs,
		WindowNs: h.WindowNs, Probes: wire.ProbeStatuses(h.Probes), MinEventNs: wire.ByCause(h.MinEventNs), MinStallNs: wire.ByCause(h.MinStallNs),
		StacksMinNs: h.StacksMinNs, Spikes: run.Spikes{K: h.SpikeK, FloorNs: h.SpikeFloorNs, SLONs: h.SLONs, On: spikeOn(h.SpikeOn)},
		LatencyFunction: h.LatencyFunction, Latency: h.LatencySource.run(), FlightRecorder: h.FlightRecorder,
		PressureScope: h.PSIScope, MemoryCgroup: h.MemoryCgroup.Reading()}
}

// spikeOnName is p as the header writes it: "" for p99, the default,
// as files have had it since 1.3.
func spikeOnName(p run.Percentile) string {
	if p == run.P99 {
		return ""
	}
	return p.String()
}

// spikeOn is the percentile the header names. A name this version does
// not know is judged on p99, as it always was.
func spikeOn(name string) run.Percentile {
	p, _ := run.ParsePercentile(name)
	return p
}

// ClosesAtLost reports whether the recording's lost records mark where the
// live run closed its windows (since 1.3), so a replay closes them at the
// same points; older recordings close windows by event time.
func (h Header) ClosesAtLost() bool {
	return h.Version.Major > 1 || (h.Version.Major == 1 && h.Version.Minor >= 3)
}

// Snapshot is the kernel's exact aggregates at MonoNs; Final marks the one
// taken when tracing stopped. The format writes it as snapshotRecord.
type Snapshot struct {
	MonoNs uint64
	Final  bool
	Data   *stall.Snapshot
}

// Procfs is a reading of the kernel's own counters at MonoNs.
type Procfs struct {
	MonoNs uint64                      `json:"mono_ns"`
	Vmstat map[string]int64            `json:"vmstat"`
	Nodes  map[string]map[string]int64 `json:"nodes"`                       // node → numastat and meminfo fields
	Target map[string]map[string]int64 `json:"target_numa_pages,omitempty"` // pid → N0.. pages
}

// Lost is the kernel's and the recorder's drop counts at MonoNs.
type Lost struct {
	MonoNs     uint64
	LostEvents uint64 // ring-buffer reserve failures so far
	Dropped    uint64 // events the recorder dropped so far
	// PSISomeNs is memory PSI's "some" total at MonoNs (the target's
	// cgroup's, else the system's), when PSI was read (since 1.5):
	// a replay weighs each window's PSI as the live run did.
	PSISomeNs uint64
	PSI       bool
}
