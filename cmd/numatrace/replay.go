package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/numatrace/numatrace/internal/engine"
	"github.com/numatrace/numatrace/internal/output"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/replay"
	"github.com/numatrace/numatrace/internal/sanitize"
	"github.com/numatrace/numatrace/internal/tui"
)

// oneFile takes the single FILE argument of replay, report and export.
func oneFile(fs *flag.FlagSet, args []string, stdout io.Writer) (string, error) {
	fs.SetOutput(io.Discard)
	// Allow flags after the file name too: numatrace report FILE --json.
	var file string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printHelp(stdout, fs)
				return "", err
			}
			return "", usageErr("%s: %v", fs.Name(), dashed(err))
		}
		args = fs.Args()
		if len(args) > 0 {
			if file != "" {
				return "", usageErr("%s: one recording at a time (got %q and %q)", fs.Name(), file, args[0])
			}
			file, args = args[0], args[1:]
		}
	}
	if file == "" {
		return "", usageErr("%s: name a recording file", fs.Name())
	}
	return file, checkGiven(fs)
}

func openRecording(path string) (*record.Reader, error) {
	r, err := record.Open(path)
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	return r, nil
}

// warnDamage prints what the reader skipped, one line each, and last,
// plainly, that the file is cut short, when it is.
func warnDamage(r *record.Reader, path string, stderr io.Writer) {
	warnSkipped(r, stderr)
	if r.Truncated() {
		fmt.Fprintf(stderr, "numatrace: WARNING: %s is truncated: cut short at byte %d, inside a block; %d complete block(s) read before it\n",
			sanitize.Text(path), r.CutAt(), r.Blocks())
	}
}

// warnSkipped prints what the reader skipped, but for the cut.
func warnSkipped(r *record.Reader, stderr io.Writer) {
	ws := r.Warnings()
	if r.Truncated() && len(ws) > 0 {
		ws = ws[:len(ws)-1] // the reader's last warning is the cut: the caller says it, with what it means
	}
	for _, w := range ws {
		fmt.Fprintf(stderr, "numatrace: warning: %s\n", sanitize.Text(w))
	}
}

// nothingBeforeCut is the error for a recording cut before it held an
// event or a window's worth of tracing (its first block is the start's
// readings): a report of it would read "for 0s" as if nothing stalled.
func nothingBeforeCut(path string, r *record.Reader, rep *output.Report) error {
	if !r.Truncated() || rep.Events > 0 || rep.DurationNs >= r.Header().WindowNs {
		return nil
	}
	return &exitError{code: 2, err: fmt.Errorf("%s is truncated at byte %d, before any tracing was recorded: nothing to report",
		path, r.CutAt())}
}

func runReplay(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	speed := fs.Float64("speed", 1, "replay this many times faster than recorded")
	fast := fs.Bool("fast", false, "replay as fast as possible")
	asJSON := fs.Bool("json", false, "write NDJSON: stall and window lines, then a summary line")
	noTUI := fs.Bool("no-tui", false, "print text or JSON instead of the interactive view")
	top := fs.Int("top", 20, topHelp)
	path, err := oneFile(fs, args, stdout)
	if err != nil {
		return err
	}
	if *speed <= 0 {
		return usageErr("replay: --speed must be positive")
	}
	if !*noTUI && !*asJSON && tui.OnTerminal(stdout) {
		return replayTUI(path, *speed, *top, stdout, stderr)
	}
	if *fast {
		*speed = 0
	}
	return replayTo(path, *speed, *asJSON, *top, false, stdout, stderr)
}

// replayTUI loads the recording and opens the interactive view at its
// end; quitting it prints the recording's report, verdict first, as
// attach's view does.
func replayTUI(path string, speed float64, top int, stdout, stderr io.Writer) error {
	r, err := openRecording(path)
	if err != nil {
		return err
	}
	defer r.Close()
	p, err := tui.LoadRecording(context.Background(), r, top)
	warnDamage(r, path, stderr)
	if err != nil {
		return err
	}
	prog := tui.Program(tui.NewReplay(p, tui.Options{Speed: speed}), os.Stdin, stdout)
	// Bubble Tea quits on Ctrl-C and SIGTERM; a hang-up (the terminal
	// closed) quits the view too, rather than killing it, and leaves out
	// the report: there is no one to read it.
	hup, done := make(chan os.Signal, 1), make(chan struct{})
	hungUp := make(chan bool, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		select {
		case <-hup:
			hungUp <- true
			prog.Quit()
		case <-done:
			hungUp <- false
		}
	}()
	_, err = prog.Run()
	close(done)
	if err != nil || <-hungUp {
		return err
	}
	if err := nothingBeforeCut(path, r, p.Report()); err != nil {
		return err
	}
	return output.Print(p.Report(), nil, stdout)
}

func runReport(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the summary as one JSON line")
	top := fs.Int("top", 20, topHelp)
	path, err := oneFile(fs, args, stdout)
	if err != nil {
		return err
	}
	return replayTo(path, 0, *asJSON, *top, true, stdout, stderr)
}

// replayTo plays a recording through the same outputs as attach.
// With summaryOnly, JSON output is the summary line alone (report).
func replayTo(path string, speed float64, asJSON bool, top int, summaryOnly bool, stdout, stderr io.Writer) error {
	r, err := openRecording(path)
	if err != nil {
		return err
	}
	defer r.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	opt := replay.Options{Speed: speed, TopThreads: top}
	var nd *output.NDJSON
	if asJSON {
		nd = output.NewNDJSON(stdout)
		if !summaryOnly {
			opt.Sinks = []engine.Sink{nd}
		}
	}
	rep, err := replay.Run(ctx, r, opt)
	if err != nil {
		warnDamage(r, path, stderr)
		return err
	}
	if err := nothingBeforeCut(path, r, rep); err != nil {
		warnSkipped(r, stderr)
		return err
	}
	warnDamage(r, path, stderr)
	return output.Print(rep, nd, stdout)
}

// topHelp is --top's help: it bounds each of the text report's lists.
const topHelp = "rows of each list in the text report: threads, and latency spikes (the worst first)"
