// Package exporter turns numatrace's stall stream into Prometheus metrics
// for `numatrace serve`: stall-time histograms per cause and cgroup (and
// process name, for an allow-list), lost events, probe status and doctor's
// findings. It aggregates nothing across machines: Prometheus does.
//
// Every label value is text someone else chose (a cgroup's name, a
// thread's, a device's in a finding) and goes through sanitize.Text
// before the Prometheus client sees it: invalid UTF-8 makes the client
// panic.
package exporter

import (
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/doctor"
	"github.com/numatrace/numatrace/internal/sanitize"
	"github.com/numatrace/numatrace/internal/stall"
)

// Config configures the exporter.
type Config struct {
	ProcRoot    string          // "/proc"
	CgroupRoot  string          // "/sys/fs/cgroup": resolves the cgroup ids stalls carry; "" for none
	CgroupLimit int             // cgroup label values at once before folding into Overflow
	Comms       map[string]bool // process names that get their own comm label
	Version     string
	// Now reads CLOCK_MONOTONIC in ns, the clock of the stalls' times:
	// the stall profile's last N seconds end now.
	Now func() uint64
}

// Exporter is an engine.Sink that feeds a Prometheus registry.
type Exporter struct {
	Registry *prometheus.Registry
	cfg      Config
	labels   *Labeller

	// mu makes a stall's labelling and observing one step, so Scraped
	// never deletes a cgroup's series between the two.
	mu       sync.Mutex
	stalls   *prometheus.HistogramVec
	moves    *prometheus.CounterVec
	lost     prometheus.Counter
	probes   *prometheus.GaugeVec
	findings *prometheus.GaugeVec
	// recent is the last minutes' stall profile (/debug/pprof/stalls),
	// profiling a token for each being built.
	recent    *recentStacks
	profiling chan struct{}
}

// StallBuckets are the classic buckets: 1 µs to 16 s by fours. Native
// histograms (factor 1.1) are exposed alongside for servers that take them.
var StallBuckets = prometheus.ExponentialBuckets(1e-6, 4, 13)

// New makes the exporter and registers its metrics.
func New(cfg Config) *Exporter {
	if cfg.CgroupLimit <= 0 {
		cfg.CgroupLimit = 200
	}
	if cfg.Now == nil {
		cfg.Now = func() uint64 { return uint64(time.Now().UnixNano()) }
	}
	e := &Exporter{Registry: prometheus.NewRegistry(), cfg: cfg, labels: NewLabeller(cfg.ProcRoot, cfg.CgroupRoot, cfg.CgroupLimit),
		recent: newRecentStacks(cfg.Now), profiling: make(chan struct{}, maxProfiles)}
	e.stalls = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:                            "numatrace_stall_seconds",
		Help:                            "Time threads were frozen by memory management, by cause and the cgroup (and container) of the stalled thread; comm is set for allow-listed process names.",
		Buckets:                         StallBuckets,
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  160,
		NativeHistogramMinResetDuration: 0,
	}, []string{"cause", "cgroup", "container", "comm"})
	e.moves = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "numatrace_numa_task_moves_total",
		Help: "Threads moved (or swapped) to another node by NUMA balancing, by cgroup.",
	}, []string{"cgroup", "container", "comm"})
	e.lost = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "numatrace_lost_events_total",
		Help: "Stall events the kernel dropped because the ring buffer was full (the histograms then undercount).",
	})
	counts := func(f func(Counts) float64) func() float64 { return func() float64 { return f(e.labels.Counts()) } }
	folded := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "numatrace_cgroup_label_folded_total",
		Help: fmt.Sprintf("Observations labelled cgroup=%q because --cgroup-limit cgroups held a label value already.", Overflow),
	}, counts(func(c Counts) float64 { return float64(c.Folded) }))
	foldedCgroups := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "numatrace_cgroup_label_folded_cgroups_total",
		Help: fmt.Sprintf("Distinct cgroups whose observations were labelled cgroup=%q (each counted once).", Overflow),
	}, counts(func(c Counts) float64 { return float64(c.FoldedCgroups) }))
	released := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "numatrace_cgroup_label_released_total",
		Help: "Cgroup label values given back, their series deleted, because the cgroup was gone and a scrape had taken its last figures.",
	}, counts(func(c Counts) float64 { return float64(c.Released) }))
	values := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "numatrace_cgroup_label_values",
		Help: fmt.Sprintf("Cgroups holding a label value now (at most --cgroup-limit; %q and %q not counted).", Overflow, Unknown),
	}, counts(func(c Counts) float64 { return float64(c.Values) }))
	e.probes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "numatrace_probe_attached",
		Help: "1 if the probe is attached, 0 if this kernel could not attach it.",
	}, []string{"probe"})
	e.findings = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "numatrace_doctor_finding",
		Help: "1 for each misconfiguration `numatrace doctor` currently finds on this machine.",
	}, []string{"check", "severity", "title"})
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "numatrace_build_info", Help: "numatrace's version.", ConstLabels: prometheus.Labels{"version": sanitize.Text(cfg.Version)},
	})
	build.Set(1)
	e.Registry.MustRegister(e.stalls, e.moves, e.lost, folded, foldedCgroups, released, values, e.probes, e.findings, build)
	return e
}

// SetProbe records whether a probe attached.
func (e *Exporter) SetProbe(name string, attached bool) {
	v := 0.0
	if attached {
		v = 1
	}
	e.probes.WithLabelValues(sanitize.Text(name)).Set(v)
}

// SetFindings replaces the doctor findings.
func (e *Exporter) SetFindings(fs []doctor.Finding) {
	e.findings.Reset()
	for _, f := range fs {
		e.findings.WithLabelValues(sanitize.Text(f.Check), f.Severity.String(), sanitize.Text(f.Title)).Set(1)
	}
}

// comm is the comm label of a thread named c: its name, escaped, if it
// is allow-listed, else "".
func (e *Exporter) comm(c string) string {
	if e.cfg.Comms[c] {
		return sanitize.Text(c)
	}
	return ""
}

// Stall observes one streamed stall. A compaction attempt streams one
// event per zone pass, so its passes are observed one by one. A nested
// stall (migration inside compaction) is observed under its own cause as
// well as inside the outer one's time: sum causes with that in mind. A
// cause is exported as its descriptor counts it: a timed one's stalls in
// the histogram, a move to another node in the moves counter; migrations
// are the kernel's exact count, not the stream's, and are left out.
func (e *Exporter) Stall(ev *stall.Event) error {
	if ev.Kind != stall.KindStall {
		return nil
	}
	if ev.Cause.Timed() {
		e.recent.add(ev)
	}
	comm := e.comm(ev.Comm)
	e.mu.Lock()
	defer e.mu.Unlock()
	cg, ctr, _ := e.labels.For(ev.PID, ev.CgroupID)
	switch ev.Cause.Desc().Counted {
	case stall.CountMoves:
		e.moves.WithLabelValues(cg, ctr, comm).Inc()
	case stall.CountDurations:
		e.stalls.WithLabelValues(ev.Cause.String(), cg, ctr, comm).Observe(float64(ev.DurNs) / 1e9)
	}
	return nil
}

// Window takes the lost-event count the session attaches to windows.
func (e *Exporter) Window(w *aggregate.Window) error {
	if w.LostEvents > 0 {
		e.lost.Add(float64(w.LostEvents))
	}
	return nil
}

// Flush is part of engine.Sink.
func (e *Exporter) Flush() error { return nil }

// BeginScrape numbers a scrape of /metrics as it begins.
func (e *Exporter) BeginScrape() uint64 { return e.labels.BeginScrape() }

// Scraped deletes, once scrape has gathered, the series of cgroups that
// are gone and whose last figures it took, and gives their label values
// back.
func (e *Exporter) Scraped(scrape uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.labels.Scraped(scrape, func(cg string) {
		e.stalls.DeletePartialMatch(prometheus.Labels{"cgroup": cg})
		e.moves.DeletePartialMatch(prometheus.Labels{"cgroup": cg})
	})
}

// Close stops the exporter's watch on the cgroup mounts.
func (e *Exporter) Close() { e.labels.Close() }

// ForgetPIDs drops the pid → cgroup cache, so reused pids are read again.
func (e *Exporter) ForgetPIDs() { e.labels.Forget() }
