package source

import (
	"errors"
	"fmt"
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
// carried pipelined requests, each timed as one.
type SocketTimer interface {
	RequestTimer
	Pipelined() uint64
}

// kernelSource streams the exchanges a SocketTimer times.
type kernelSource struct {
	uprobeSource
	timer SocketTimer
}

// openKernel finds the target's inbound TCP endpoints and times them.
// Without any, it says so through env.Notice and opens nothing.
func openKernel(env Env, port uint16) (Source, error) {
	if env.Sockets == nil || env.PID == 0 {
		return nil, errors.New("--latency kernel times the sockets of one process: give --pid")
	}
	ep, err := inbound.Find(os.DirFS("/proc"), env.PID, port)
	if err != nil {
		return nil, fmt.Errorf("find the target's TCP listeners: %w", err)
	}
	if len(ep.Listeners) == 0 {
		what := "no inbound TCP (it listens on no port)"
		if port != 0 {
			what = fmt.Sprintf("no listener on port %d", port)
		}
		env.notice(fmt.Sprintf("process %d has %s: no request latency, only the stalls", env.PID, what))
		return nil, nil
	}
	t, err := env.Sockets.TimeSockets(ep.Ports())
	if err != nil {
		return nil, err
	}
	env.notice(fmt.Sprintf("timing requests on %s; server-side: excludes the network and the client's own queues", ep))
	return &kernelSource{uprobeSource: uprobeSource{timer: t}, timer: t}, nil
}

// Skipped says how many exchanges were pipelined: timed as one, which is
// what the client's batch waited, not each request's own latency.
func (s *kernelSource) Skipped() []latency.Skip {
	if n := s.timer.Pipelined(); n > 0 {
		return []latency.Skip{{Kind: latency.SkipPipelined, N: n}}
	}
	return nil
}

func (e Env) notice(msg string) {
	if e.Notice != nil {
		e.Notice(msg)
	}
}
