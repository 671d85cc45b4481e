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
	"regexp"
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
  numatrace attach [target] [-d DURATION] [latency] [--no-tui | --json] [-o FILE]
  numatrace record [target] [-d DURATION] [latency] -o FILE [--force]
                   [--flight-recorder SIZE|DURATION [--dump-on-spike]]
  numatrace replay FILE [--speed X | --fast] [--no-tui] [--json]
  numatrace report FILE [--json] [--top N]
  numatrace export --format perfetto|pprof|folded FILE [-o OUT]
  numatrace doctor [-p PID [--numastat]] [--interval D | --root DIR [--root-later DIR]] [--json]
  numatrace serve [--listen 127.0.0.1:9464] [--cgroup-limit N] [--comm NAME,...]
  numatrace probes [--mmap-lock-via MODE] [--json]
  numatrace help COMMAND
  numatrace version

target (attach, record; the whole machine when none is given):
  -p, --pid PID [-f]          a process, with -f (--children) its descendants too
  -t, --tid TID               one thread
  --cgroup PATH               the processes of a cgroup
  --pod NAMESPACE/NAME        a Kubernetes pod on this node
  --container ID              a container on this node

latency (attach, record): the service's request latency, to tell its spikes
  --latency kernel|off        time the --pid process's inbound TCP requests (the default with --pid)
  --latency-file FILE         read latencies from a log or NDJSON, followed as it grows
  --latency-prom URL --latency-metric NAME
                              scrape a Prometheus latency histogram once per window
  --latency-uprobe BINARY:SYMBOL
                              time every call of the request handler in the kernel
  --slo DURATION              a window whose p99 is above this is a spike

Run "numatrace help COMMAND" (or "numatrace COMMAND --help") for all of a command's flags.
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
		err = runHelp(args[1:], stdout, stderr)
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

// runHelp prints the usage, or with a command named, that command's help.
func runHelp(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stdout, usage)
		return nil
	}
	if _, ok := commandHelps[args[0]]; !ok {
		return usageErr("help: unknown command %q (try: attach, record, replay, report, export, doctor, serve, probes)", args[0])
	}
	if len(args) > 1 {
		return usageErr("help: one command at a time (got %q and %q)", args[0], args[1])
	}
	// The command prints its own help, from the flags it defines.
	if code := run([]string{args[0], "--help"}, stdout, stderr); code != 0 {
		return &exitError{code: code, err: errors.New("help failed")}
	}
	return nil
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
			printHelp(stdout, fs)
			return err
		}
		return usageErr("%s: %v%s", fs.Name(), dashed(err), unitHint(fs, err))
	}
	if fs.NArg() > 0 {
		return usageErr("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return checkGiven(fs)
}

// flagNameInErr finds a flag's name in the flag package's errors, which
// spell it with one dash: "flag provided but not defined: -pidd".
var flagNameInErr = regexp.MustCompile(`(defined: |for flag |for |argument: )-([[:alnum:]][[:alnum:]-]+)`)

// dashed is a flag package error with long flags spelled as this tool's
// help and README spell them: --pid, not -pid.
func dashed(err error) string {
	return flagNameInErr.ReplaceAllString(err.Error(), "$1--$2")
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
		name := longName(fs, f)
		switch v := g.Get().(type) {
		case int:
			if (name == "pid" || name == "tid") && v <= 0 {
				err = usageErr("%s: invalid %s %d: --%s must be above 0 (leave it out to trace the whole machine)", fs.Name(), name, v, name)
			}
		case float64:
			if math.IsNaN(v) || math.IsInf(v, 0) {
				err = usageErr("%s: --%s must be a finite number", fs.Name(), name)
			}
		}
	})
	return err
}
