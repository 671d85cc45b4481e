// Command numatrace shows which threads the kernel's memory management
// froze, for how long and why: reclaim, compaction, NUMA migration, task
// moves and mmap_lock waits.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/numatrace/numatrace/internal/sanitize"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// exitError carries an exit code with its one-line message.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErr is bad input: exit 2.
func usageErr(format string, a ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, a...)}
}

const usage = `numatrace: find the memory-management stalls behind latency spikes

usage:
  numatrace attach [--pid PID [--children] | --tid TID | --cgroup PATH] [--duration D] [--no-tui] [--json] [--record FILE]
  numatrace record [target flags] -o FILE [--duration D] [--flight-recorder SIZE_OR_DURATION [--dump-on-spike]]
  numatrace replay FILE [--speed X | --fast] [--json]
  numatrace report FILE [--json]
  numatrace export --format perfetto|pprof|folded FILE -o OUT
  numatrace doctor [--pid PID [--numastat]] [--interval D | --root DIR [--root-later DIR]] [--json]
  numatrace serve [--listen 127.0.0.1:9464] [--cgroup-limit N] [--comm NAME,...]
  numatrace probes [--mmap-lock-via MODE] [--json]
  numatrace version

Run "numatrace <command> -h" for a command's flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "attach":
		err = runAttach(args[1:], stdout, stderr)
	case "record":
		err = runRecord(args[1:], stdout, stderr)
	case "replay":
		err = runReplay(args[1:], stdout, stderr)
	case "report":
		err = runReport(args[1:], stdout, stderr)
	case "export":
		err = runExport(args[1:], stdout, stderr)
	case "serve":
		err = runServe(args[1:], stdout, stderr)
	case "doctor":
		err = runDoctor(args[1:], stdout, stderr)
	case "probes":
		err = runProbes(args[1:], stdout)
	case "version", "--version":
		fmt.Fprintln(stdout, "numatrace", version)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		err = usageErr("unknown command %q (try: attach, record, replay, report, export, doctor, serve, probes, version)", args[0])
	}
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(stderr, "numatrace: %s\n", errText(err))
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}

// errText is err for the terminal: escaped, since it may name a process,
// a cgroup or a file (sanitize.Text). Errors joined by errors.Join keep
// their one line each; a newline inside one is escaped like the rest.
func errText(err error) string {
	if inner := errors.Unwrap(err); inner != nil && inner.Error() == err.Error() { // exitError, BadInput
		return errText(inner)
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var parts, lines []string
		for _, e := range j.Unwrap() {
			if e != nil {
				parts, lines = append(parts, e.Error()), append(lines, errText(e))
			}
		}
		if strings.Join(parts, "\n") == err.Error() { // errors.Join's message, not fmt.Errorf's
			return strings.Join(lines, "\n")
		}
	}
	return sanitize.Text(err.Error())
}

// parseFlags parses quietly: the caller prints one line on error.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fmt.Fprintf(stdout, "usage of numatrace %s:\n", fs.Name())
			fs.PrintDefaults()
			return err
		}
		return usageErr("%s: %v%s", fs.Name(), err, unitHint(fs, err))
	}
	if fs.NArg() > 0 {
		return usageErr("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return checkGiven(fs)
}

// unitHint says how to write a duration flag's value given as a bare
// number ("--duration 3"), which the flag package calls a parse error.
func unitHint(fs *flag.FlagSet, err error) string {
	var val, name string
	if n, _ := fmt.Sscanf(err.Error(), "invalid value %q for flag -%s", &val, &name); n != 2 {
		return ""
	}
	f := fs.Lookup(strings.TrimSuffix(name, ":"))
	if f == nil {
		return ""
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return ""
	}
	if _, isDur := g.Get().(time.Duration); !isDur {
		return ""
	}
	if _, err := strconv.ParseFloat(val, 64); err != nil {
		return ""
	}
	return fmt.Sprintf(" (a duration needs a unit: %ss, %sms)", val, val)
}

// checkGiven refuses values the flag package takes but that mean nothing
// here, in the flags the user gave: a process or thread id of 0 or below
// (leaving the flag out is how to trace the whole machine, and 0 would do
// that silently), and a number that is not finite.
func checkGiven(fs *flag.FlagSet) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if !ok || err != nil {
			return
		}
		switch v := g.Get().(type) {
		case int:
			if (f.Name == "pid" || f.Name == "tid") && v <= 0 {
				err = usageErr("%s: invalid %s %d: --%s must be above 0 (leave it out to trace the whole machine)", fs.Name(), f.Name, v, f.Name)
			}
		case float64:
			if math.IsNaN(v) || math.IsInf(v, 0) {
				err = usageErr("%s: --%s must be a finite number", fs.Name(), f.Name)
			}
		}
	})
	return err
}
