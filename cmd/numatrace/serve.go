package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/numatrace/numatrace/internal/doctor"
	"github.com/numatrace/numatrace/internal/exporter"
	"github.com/numatrace/numatrace/internal/session"
	"github.com/numatrace/numatrace/internal/topology"
	"github.com/numatrace/numatrace/internal/tracer"
)

type serveFlags struct {
	listen      string
	cgroupLimit int
	comms       string
	window      time.Duration
	minEvent    string
	minStall    string
	doctorEvery time.Duration
	ringBufMiB  int
	btf         string
	readyFile   string
}

func runServe(args []string, stdout, stderr io.Writer) error {
	var f serveFlags
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&f.listen, "listen", "127.0.0.1:9464", "address for /metrics and /healthz (loopback by default: put a proxy or the pod network in front on purpose)")
	fs.IntVar(&f.cgroupLimit, "cgroup-limit", 200, "distinct cgroup label values; later cgroups fold into \"other\" (counted)")
	fs.StringVar(&f.comms, "comm", "", "comma-separated process names that also get a comm label (bounded by you)")
	fs.DurationVar(&f.window, "window", time.Second, "how often lost events are read")
	fs.StringVar(&f.minEvent, "min-event", defaultMinEvent, "stalls shorter than this are counted by the kernel but not exported: DUR or cause=DUR,...")
	fs.StringVar(&f.minStall, "min-stall", defaultMinStall, "ignore shorter stalls entirely: DUR or cause=DUR,...")
	fs.DurationVar(&f.doctorEvery, "doctor-every", 5*time.Minute, "how often doctor's findings are refreshed (0: never run doctor)")
	fs.IntVar(&f.ringBufMiB, "ringbuf-mib", 8, "ring buffer size in MiB (a power of two)")
	fs.StringVar(&f.btf, "btf", "", "kernel BTF file (default /sys/kernel/btf/vmlinux)")
	fs.StringVar(&f.readyFile, "ready-file", "", "create this file once serving")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(f.listen); err != nil {
		return usageErr("serve: --listen %q: %v", f.listen, err)
	}
	if f.cgroupLimit < 1 {
		return usageErr("serve: --cgroup-limit must be at least 1")
	}
	if f.window < 10*time.Millisecond || f.doctorEvery < 0 {
		return usageErr("serve: --window must be at least 10ms and --doctor-every not negative")
	}
	minEvent, err := parseMinEvent(f.minEvent)
	if err != nil {
		return usageErr("serve: --min-event: %v", err)
	}
	minStall, err := parseMinEvent(f.minStall)
	if err != nil {
		return usageErr("serve: --min-stall: %v", err)
	}
	rb := f.ringBufMiB
	if rb <= 0 || rb&(rb-1) != 0 || rb > 1024 {
		return usageErr("serve: --ringbuf-mib must be a power of two up to 1024")
	}
	comms := map[string]bool{}
	for _, c := range strings.Split(f.comms, ",") {
		if c = strings.TrimSpace(c); c != "" {
			comms[c] = true
		}
	}
	// Listen before loading anything: a busy port is one clear error.
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer ln.Close()
	topo, err := topology.Read("/sys")
	if err != nil {
		return err
	}
	tr, err := tracer.Open(tracer.Config{MinEventNs: minEvent, MinStallNs: minStall, RingBufBytes: rb << 20, Topology: topo, KernelBTF: f.btf})
	if err != nil {
		return err
	}
	defer tr.Close()
	rd, err := tr.Reader()
	if err != nil {
		return err
	}
	exp := exporter.New(exporter.Config{ProcRoot: "/proc", CgroupLimit: f.cgroupLimit, Comms: comms, Version: version})
	for _, p := range tr.Probes() {
		exp.SetProbe(p.Name, p.Attached)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var healthy atomic.Bool
	healthy.Store(true)
	sessErr := make(chan error, 1)
	go func() {
		_, err := session.Run(ctx, rd, tr.Decoder(), tr, session.Options{Window: f.window, Grace: 250 * time.Millisecond,
			Now: monotonicNs, Sink: exp})
		healthy.Store(false)
		sessErr <- err
		stop() // the trace ended on its own: stop serving too
	}()
	go maintain(ctx, exp, f.doctorEvery, stderr)

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(exp.Registry, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !healthy.Load() {
			http.Error(w, "tracing stopped", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "numatrace serve: /metrics, /healthz")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	srvErr := make(chan error, 1)
	go func() { srvErr <- srv.Serve(ln) }()
	if f.readyFile != "" {
		if err := os.WriteFile(f.readyFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
			return fmt.Errorf("write ready file: %w", err)
		}
	}
	fmt.Fprintf(stderr, "numatrace: serving metrics on http://%s/metrics\n", ln.Addr())
	select {
	case <-ctx.Done():
	case err := <-srvErr:
		stop()
		<-sessErr
		return fmt.Errorf("serve: %w", err)
	}
	// SIGTERM: finish in-flight scrapes, then stop tracing.
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(shutCtx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = nil // a scrape that hangs does not hold up the exit
	}
	return errors.Join(err, <-sessErr)
}

// maintain refreshes doctor's findings and forgets the pid → cgroup cache
// now and then (pids are reused).
func maintain(ctx context.Context, exp *exporter.Exporter, doctorEvery time.Duration, stderr io.Writer) {
	refresh := func() {
		if doctorEvery == 0 {
			return
		}
		rep, err := doctor.Run(doctor.Options{})
		if err != nil {
			fmt.Fprintf(stderr, "numatrace: doctor: %v\n", err)
			return
		}
		exp.SetFindings(rep.Findings)
	}
	refresh()
	forget := time.NewTicker(time.Minute)
	defer forget.Stop()
	var doc <-chan time.Time
	if doctorEvery > 0 {
		t := time.NewTicker(doctorEvery)
		defer t.Stop()
		doc = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-forget.C:
			exp.ForgetPIDs()
		case <-doc:
			refresh()
		}
	}
}
