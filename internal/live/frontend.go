//go:build linux

package live

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/numatrace/numatrace/internal/doctor"
	"github.com/numatrace/numatrace/internal/engine"
	"github.com/numatrace/numatrace/internal/monoclock"
	"github.com/numatrace/numatrace/internal/output"
	"github.com/numatrace/numatrace/internal/procsnap"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/sanitize"
	"github.com/numatrace/numatrace/internal/session"
	"github.com/numatrace/numatrace/internal/topology"
	"github.com/numatrace/numatrace/internal/tui"
)

// liveWindowsKept bounds the live view's timeline: an hour of one-second
// windows. The spike analysis it shows is the engine's, over the run.
const liveWindowsKept = 3600

// frontEnd is how a run shows itself: the interactive view, NDJSON, a
// text report at the end, or one line (record).
type frontEnd struct {
	stdout io.Writer
	stderr io.Writer
	quiet  bool
	view   bool
	nd     *output.NDJSON
	store  *tui.Store
}

func (a *Attach) frontEnd(stdout, stderr io.Writer) *frontEnd {
	// record is quiet, unless asked for JSON: then it streams and sums up
	// as attach --json does.
	fe := &frontEnd{stdout: stdout, stderr: stderr, quiet: a.Quiet && !a.JSON}
	switch {
	case fe.quiet:
	case a.JSON:
		fe.nd = output.NewNDJSON(stdout)
	case !a.NoTUI && tui.OnTerminal(stdout):
		fe.view = true
	}
	return fe
}

// sinks are what the engine feeds as the run goes. The view is told the
// run as the engine is, with the machine and doctor's reading (nil if
// none) as they are.
func (fe *frontEnd) sinks(d run.Description, topo *topology.Topology, doc *doctor.Report) []engine.Sink {
	switch {
	case fe.nd != nil:
		return []engine.Sink{fe.nd}
	case fe.view:
		fe.store = tui.NewStore(tui.Info{Run: d, Machine: tui.NewMachine(topo.CPUNode, topo.NodeMem), Doctor: doc}, liveWindowsKept)
		return []engine.Sink{fe.store}
	}
	return nil
}

// warn shows a problem that did not stop tracing: in the view while it
// is up (printing would garble it), else as a line on stderr.
func (fe *frontEnd) warn(err error) {
	if fe.store != nil {
		fe.store.Warn(err)
		return
	}
	warnTo(fe.stderr)(err)
}

// run traces, behind the view when there is one.
func (fe *frontEnd) run(ctx context.Context, k session.Kernel, eng *engine.Engine, opt session.Options) (*session.Result, error) {
	if fe.view {
		return fe.runView(ctx, k, eng, opt)
	}
	return session.Run(ctx, k, eng, opt)
}

// report prints the end of the run.
func (fe *frontEnd) report(rep *output.Report, stderr io.Writer) error {
	if fe.quiet {
		if rep.Note != "" {
			fmt.Fprintf(stderr, "numatrace: %s\n", sanitize.Text(rep.Note))
		}
		return nil
	}
	if err := output.Print(rep, fe.nd, fe.stdout); err != nil {
		return err
	}
	if rep.Note != "" && fe.nd != nil {
		fmt.Fprintf(stderr, "numatrace: %s\n", sanitize.Text(rep.Note))
	}
	return nil
}

// runView runs the session behind the interactive view. At --duration
// the view ends, as q ends it, and the report follows: the run the user
// asked for is over. When tracing stops otherwise (the target exited, an
// error) the view stays up, saying why, until the user quits; quitting
// stops tracing. A signal quits both.
func (fe *frontEnd) runView(ctx context.Context, k session.Kernel, eng *engine.Engine, opt session.Options) (*session.Result, error) {
	opt.OnSnapshot, opt.SnapshotEvery = fe.store.Snapshot, time.Second
	model := tui.NewLive(fe.store, tui.Options{Now: monoclock.Ns, ReadProcfs: func() (record.Procfs, error) {
		return procsnap.Read("/proc", "/sys", nil, monoclock.Ns())
	}})
	prog := tui.Program(model, os.Stdin, fe.stdout)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var res *session.Result
	var runErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, runErr = session.Run(runCtx, k, eng, opt)
		why := "tracing stopped"
		switch {
		case runErr != nil:
			why = runErr.Error()
		case res.TargetGone:
			why = "the target exited"
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			prog.Quit()
			return
		}
		prog.Send(tui.EndedMsg{Why: why})
	}()
	// The terminal is raw, so Ctrl-C arrives as a key; a signal from
	// elsewhere (SIGTERM, SIGHUP) quits the view, also once tracing has
	// stopped and the view waits for q: a terminal closed then (a tmux
	// session ended) must not leave numatrace running for good.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP, os.Interrupt)
	defer signal.Stop(sigs)
	uiDone := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			prog.Quit()
		case <-uiDone:
		}
	}()
	_, uiErr := prog.Run()
	close(uiDone)
	cancel()
	<-done
	for _, w := range fe.store.Warnings() { // the view is gone: say them again
		fmt.Fprintf(fe.stderr, "numatrace: %s (at %s)\n", sanitize.Text(w.Msg), w.At.Format("15:04:05"))
	}
	if runErr != nil {
		return nil, runErr
	}
	return res, uiErr
}
