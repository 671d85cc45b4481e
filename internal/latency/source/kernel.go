package source

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/numatrace/numatrace/internal/inbound"
	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/latency/exchange"
	"github.com/numatrace/numatrace/internal/monoclock"
)

// Latency modes (--latency).
const (
	ModeAuto   = ""       // the kernel's socket timing for a --pid target with no other source
	ModeKernel = "kernel" // requests timed on the target's own sockets
	ModeOff    = "off"    // no latency source at all
)

// SocketTimers times the request/response exchanges on the traced
// process's inbound TCP connections of ports, in the kernel (the live
// tracer does): its timer's records are per write of a response.
type SocketTimers interface {
	TimeSockets(ports []uint16) (RequestTimer, error)
}

// kernelSource streams the exchanges a socket timer times: the records
// of each response's writes made one sample per exchange, and counted
// from when it was due on a paced connection (exchange.Assembler).
type kernelSource struct {
	timer RequestTimer
	asm   *exchange.Assembler
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
	return &kernelSource{timer: t, asm: exchange.NewAssembler()}, nil
}

// Run hands on the timer's exchanges until ctx ends. They are assembled
// on the goroutine that reads the timer, as it reads: no hand-over per
// record, and a held exchange goes on at the ring's next drain.
func (s *kernelSource) Run(ctx context.Context, out chan<- latency.Reading, warn func(error)) error {
	return runTimer(ctx, out, s.timer, func(b *batcher) {
		s.asm.Assemble(s.timer.Run, monoclock.Ns, func(r exchange.Record) { b.add(r.Sample()) }, b.flush)
	})
}

func (s *kernelSource) Close() error { return s.timer.Close() }

// Skipped says what the assembler estimated (estimated).
func (s *kernelSource) Skipped() []latency.Skip { return estimated(s.asm.Counts()) }

// estimated says how many exchanges were pipelined: timed as one, which
// is what the client's batch waited, not each request's own latency; how
// many responses were timed short, to a write before a pause; and how
// many requests were counted from when they were due.
func estimated(c exchange.Counts) []latency.Skip {
	var out []latency.Skip
	if c.Pipelined > 0 {
		out = append(out, latency.Skip{Kind: latency.SkipPipelined, N: c.Pipelined})
	}
	if c.LateWrites > 0 {
		out = append(out, latency.Skip{Kind: latency.SkipLateWrites, N: c.LateWrites})
	}
	if c.DueWaits > 0 {
		out = append(out, latency.Skip{Kind: latency.SkipDueWaits, N: c.DueWaits})
	}
	return out
}

func (e Env) notice(msg string) {
	if e.Notice != nil {
		e.Notice(msg)
	}
}
