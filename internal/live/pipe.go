//go:build linux

package live

import (
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/charmbracelet/x/term"
)

// endOnBrokenPipe makes a reader of stdout that goes away (`numatrace
// attach --json | head -1`) end the run as Ctrl-C does: tracing stops,
// the recording gets its end record, and the exit status is 0. Go kills
// a program whose write to a closed pipe on stdout raises SIGPIPE,
// unless SIGPIPE is caught; caught, the write fails with EPIPE, and the
// returned writer then calls end. SIGPIPE stays caught for the rest of
// the process: the report is written after the run's own signals are
// restored. A terminal is left as it is (it has no reader to lose): the
// interactive view and the report's width (output.WidthOf) need its file.
func endOnBrokenPipe(stdout io.Writer, end func()) io.Writer {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	if f, ok := stdout.(*os.File); ok && term.IsTerminal(f.Fd()) {
		return stdout
	}
	return &pipeWriter{w: stdout, end: end}
}

type pipeWriter struct {
	w   io.Writer
	end func()
}

func (p *pipeWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	if errors.Is(err, syscall.EPIPE) {
		p.end()
	}
	return n, err
}
