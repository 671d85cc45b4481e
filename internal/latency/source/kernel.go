package source

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/numatrace/numatrace/internal/inbound"
	"github.com/numatrace/numatrace/internal/latency"
)

// Latency modes (--latency).
const (
	ModeAuto   = ""       // the kernel's socket timing for a --pid target with no other source
	ModeKernel = "kernel" // requests timed on the target's own sockets
	ModeOff    = "off"    // no latency source at all
)

// SocketTimers times the request/response exchanges on the traced
// process's inbound TCP connections of ports, in the kernel (the live
// tracer does).
type SocketTimers interface {
	TimeSockets(ports []uint16) (SocketTimer, error)
}

// SocketTimer is a RequestTimer that also counts the exchanges that
// carried pipelined requests, each timed as one, and the writes of a
// response that came after its exchange had been handed on.
type SocketTimer interface {
	RequestTimer
	Pipelined() uint64
	LateWrites() uint64
	DueWaits() uint64
}

// kernelSource streams the exchanges a SocketTimer times.
type kernelSource struct {
	uprobeSource
	timer SocketTimer
}

// ErrTargetGone is the target exiting between being found and its
// sockets being read, as numatrace starts.
var ErrTargetGone = errors.New("exited before tracing began")

// FindInbound settles the kernel source before the run is described:
// it finds the endpoints of process pid to time, and when there are none
// it says so through notice and turns the source off, so the run goes on
// without latency. A no-op unless the kernel source is chosen.
func (c *Config) FindInbound(pid int, notice func(string)) error {
	if c.Mode != ModeKernel {
		return nil
	}
	if pid == 0 {
		return errors.New("--latency kernel times the sockets of one process: give --pid")
	}
	ep, err := inbound.Find(os.DirFS("/proc"), pid, uint16(c.Port))
	if errors.Is(err, fs.ErrNotExist) { // its /proc entry is gone
		return fmt.Errorf("pid %d %w", pid, ErrTargetGone)
	}
	if err != nil {
		return fmt.Errorf("find the target's TCP listeners: %w", err)
	}
	if len(ep.Listeners) == 0 {
		what := "no inbound TCP (it listens on no port)"
		if c.Port != 0 {
			what = fmt.Sprintf("no listener on port %d", c.Port)
		}
		notice(fmt.Sprintf("process %d has %s: no request latency, only the stalls", pid, what))
		c.Mode = ModeOff
		return nil
	}
	c.inbound = &ep
	return nil
}

// openKernel times the endpoints FindInbound found.
func openKernel(env Env, ep *inbound.Endpoints) (Source, error) {
	if env.Sockets == nil || ep == nil {
		return nil, errors.New("--latency kernel: the target's sockets were not found (FindInbound) or cannot be timed here")
	}
	t, err := env.Sockets.TimeSockets(ep.Ports())
	if err != nil {
		return nil, err
	}
	env.notice(fmt.Sprintf("timing requests on %s; %s", ep, serverSide))
	return &kernelSource{uprobeSource: uprobeSource{timer: t}, timer: t}, nil
}

// Skipped says how many exchanges were pipelined: timed as one, which is
// what the client's batch waited, not each request's own latency; and
// how many responses were timed short, to a write before a pause.
func (s *kernelSource) Skipped() []latency.Skip {
	var out []latency.Skip
	if n := s.timer.Pipelined(); n > 0 {
		out = append(out, latency.Skip{Kind: latency.SkipPipelined, N: n})
	}
	if n := s.timer.LateWrites(); n > 0 {
		out = append(out, latency.Skip{Kind: latency.SkipLateWrites, N: n})
	}
	if n := s.timer.DueWaits(); n > 0 {
		out = append(out, latency.Skip{Kind: latency.SkipDueWaits, N: n})
	}
	return out
}

func (e Env) notice(msg string) {
	if e.Notice != nil {
		e.Notice(msg)
	}
}
