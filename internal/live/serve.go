//go:build linux

package live

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/numatrace/numatrace/internal/doctor"
	"github.com/numatrace/numatrace/internal/engine"
	"github.com/numatrace/numatrace/internal/exporter"
	"github.com/numatrace/numatrace/internal/monoclock"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/session"
	"github.com/numatrace/numatrace/internal/topology"
	"github.com/numatrace/numatrace/internal/tracer"
)

// Run traces the whole machine and serves its stalls as Prometheus
// metrics until SIGTERM (or Ctrl-C, or SIGHUP), or until tracing stops on
// its own.
func (s *Serve) Run(stderr io.Writer) error {
	if err := s.Check(); err != nil {
		return err
	}
	// Listen before loading anything: a busy port is one clear error.
	ln, err := net.Listen("tcp", s.Listen)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer ln.Close()
	topo, err := topology.Read("/sys")
	if err != nil {
		return err
	}
	tr, err := tracer.Open(tracer.Config{MinEventNs: s.Trace.minEventNs, MinStallNs: s.Trace.minStallNs,
		RingBufBytes: s.Trace.RingBufMiB << 20, Topology: topo, KernelBTF: s.Trace.BTF,
		MmapLockVia: s.Trace.mmapLockVia, Skip: s.Trace.skip, StacksMinNs: s.Trace.stacksMinNs()})
	if err != nil {
		return err
	}
	defer tr.Close()
	exp := exporter.New(exporter.Config{ProcRoot: "/proc", CgroupRoot: "/sys/fs/cgroup", CgroupLimit: s.CgroupLimit, Comms: s.comms(),
		Version: s.Version, Now: monoclock.Ns})
	defer exp.Close()
	for _, p := range tr.Probes() {
		if !p.Skipped { // left out on purpose: not a probe that is down
			exp.SetProbe(p.Name, p.Attached)
		}
	}
	return s.serve(ln, tr, exp, stderr)
}

// serve runs the session and the HTTP server side by side; either
// ending stops the other.
func (s *Serve) serve(ln net.Listener, tr *tracer.Tracer, exp *exporter.Exporter, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	var healthy atomic.Bool
	healthy.Store(true)
	sessErr := make(chan error, 1)
	go func() {
		d := run.Description{StartNs: monoclock.Ns(), WindowNs: uint64(s.Trace.Window)}
		eng := engine.New(d, engine.Options{Sinks: []engine.Sink{exp}})
		_, err := session.Run(ctx, tr, eng, session.Options{Now: monoclock.Ns, Warn: warnTo(stderr)})
		healthy.Store(false)
		sessErr <- err
		stop() // the trace ended on its own: stop serving too
	}()
	go maintain(ctx, exp, s.DoctorEvery, stderr)
	warn := func(msg string) { fmt.Fprintf(stderr, "numatrace: %s\n", msg) }
	srv, ln := exp.Server(ln, connLimit(), healthy.Load, warn)
	srvErr := make(chan error, 1)
	go func() { srvErr <- srv.Serve(ln) }()
	if err := writeReady(s.Trace.ReadyFile); err != nil {
		return err
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
	err := srv.Shutdown(shutCtx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = nil // a scrape that hangs does not hold up the exit
	}
	return errors.Join(err, <-sessErr)
}

// connLimit is how many HTTP connections serve keeps open, from the
// file descriptors the process may have and those open now (the
// tracer's, once loaded).
func connLimit() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		rl.Cur = 1024
	}
	open, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return exporter.ConnLimit(rl.Cur, rl.Cur/2)
	}
	return exporter.ConnLimit(rl.Cur, uint64(len(open)))
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
			warnTo(stderr)(fmt.Errorf("doctor: %w", err))
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
