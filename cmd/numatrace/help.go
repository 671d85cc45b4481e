package main

import (
	"flag"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/numatrace/numatrace/internal/textwrap"
)

// helpWidth is the width help text is wrapped to.
const helpWidth = 100

// flagGroup is one heading of a command's help and its flags, in the
// order a reader needs them: a continued sentence ("...and above this
// floor") stays after the flag it continues.
type flagGroup struct {
	title string
	names []string
}

// The groups attach and record share; serve shares the tuning.
var (
	targetGroup = flagGroup{"target (leave it out to trace the whole machine)",
		[]string{"pid", "children", "tid", "cgroup", "pod", "container", "include-self", "duration"}}
	latencyGroup = flagGroup{"latency (the service's request latency, to find its spikes)",
		[]string{"latency", "latency-port", "latency-file", "latency-format", "latency-field", "latency-unit",
			"latency-prom", "latency-metric", "latency-uprobe", "request-stalls", "request-times", "runq-wait",
			"slo", "spike-on", "spike-k", "spike-floor"}}
	tuningGroup = flagGroup{"tuning",
		[]string{"window", "min-event", "min-stall", "stacks", "stacks-min", "causes", "no-causes",
			"mmap-lock-via", "ringbuf-mib", "btf"}}
)

// commandHelp is what `numatrace help COMMAND` shows besides the flags.
type commandHelp struct {
	synopsis string // after "usage: numatrace"
	groups   []flagGroup
}

var commandHelps = map[string]commandHelp{
	"attach": {"attach [target] [-d DURATION] [latency] [--no-tui | --json] [-o FILE]", []flagGroup{
		targetGroup, latencyGroup,
		{"output", []string{"no-tui", "json", "top", "record", "force", "ready-file"}},
		tuningGroup}},
	"record": {"record [target] [-d DURATION] [latency] -o FILE [--force]", []flagGroup{
		targetGroup, latencyGroup,
		{"output", []string{"output", "force", "flight-recorder", "dump-on-spike", "json", "top", "no-tui", "ready-file"}},
		tuningGroup}},
	"serve": {"serve [--listen ADDR] [--cgroup-limit N] [--comm NAME,...]", []flagGroup{
		{"serving", []string{"listen", "cgroup-limit", "comm", "doctor-every", "ready-file"}},
		tuningGroup}},
	"replay": {"replay FILE [--speed X | --fast] [--no-tui] [--json]", []flagGroup{
		{"playback", []string{"speed", "fast"}},
		{"output", []string{"no-tui", "json", "top"}}}},
	"report": {"report FILE [--json] [--top N]", []flagGroup{
		{"output", []string{"json", "top"}}}},
	"export": {"export --format " + strings.Join(exportFormatNames(), "|") + " FILE [-o OUT]", []flagGroup{
		{"output", []string{"format", "output"}}}},
	"doctor": {"doctor [-p PID] [--interval D | --root DIR [--root-later DIR]] [--json]", []flagGroup{
		{"target", []string{"pid"}},
		{"reading", []string{"interval", "root", "root-later"}},
		{"output", []string{"json", "numastat"}}}},
	"probes": {"probes [--mmap-lock-via MODE] [--json]", []flagGroup{
		{"probes", []string{"mmap-lock-via", "btf"}},
		{"output", []string{"json"}}}},
}

// valueNames name a flag's value in help where its type says too little.
var valueNames = map[string]string{
	"pid": "PID", "tid": "TID", "cgroup": "PATH", "pod": "POD", "container": "ID",
	"record": "FILE", "output": "FILE", "ready-file": "FILE", "latency-file": "FILE", "btf": "FILE",
	"root": "DIR", "root-later": "DIR", "listen": "ADDR", "comm": "NAME,...",
	"causes": "NAME,...", "no-causes": "NAME,...", "min-event": "DUR|CAUSE=DUR,...", "min-stall": "DUR|CAUSE=DUR,...",
	"latency": "kernel|off", "latency-format": "FORMAT", "latency-field": "FIELD", "latency-unit": "UNIT",
	"latency-uprobe": "BINARY:SYMBOL", "latency-prom": "URL", "latency-metric": "NAME", "latency-port": "PORT",
	"spike-on": "p99|p999|max", "mmap-lock-via": "MODE", "format": "FORMAT", "flight-recorder": "SIZE|DURATION",
}

// alias makes short another name of the flag long, sharing its value:
// help shows them together, and checks see the long name (longName).
func alias(fs *flag.FlagSet, short, long string) {
	fs.Var(fs.Lookup(long).Value, short, "the same as --"+long)
}

// names are a flag's names, the short one first: ["p", "pid"].
func names(fs *flag.FlagSet, f *flag.Flag) []string {
	var out []string
	fs.VisitAll(func(g *flag.Flag) {
		if sameValue(f.Value, g.Value) {
			out = append(out, g.Name)
		}
	})
	if len(out) == 2 && len(out[1]) < len(out[0]) {
		out[0], out[1] = out[1], out[0]
	}
	return out
}

// longName is the name a flag is known by in messages: --pid for -p.
func longName(fs *flag.FlagSet, f *flag.Flag) string {
	n := names(fs, f)
	return n[len(n)-1]
}

func sameValue(a, b flag.Value) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	return va.Kind() == reflect.Pointer && vb.Kind() == reflect.Pointer && va.Pointer() == vb.Pointer() && va.Type() == vb.Type()
}

// printHelp writes a command's help: its synopsis, then its flags under
// their headings; a flag no heading names comes last, under "other".
func printHelp(w io.Writer, fs *flag.FlagSet) {
	h := commandHelps[fs.Name()]
	fmt.Fprintf(w, "usage: numatrace %s\n", h.synopsis)
	if about := commandAbout(fs.Name()); about != "" {
		fmt.Fprintf(w, "\n%s\n", strings.Join(textwrap.Lines(about, helpWidth), "\n"))
	}
	shown := map[string]bool{}
	for _, g := range h.groups {
		printGroup(w, fs, g, shown)
	}
	var rest []string
	fs.VisitAll(func(f *flag.Flag) {
		if !shown[longName(fs, f)] {
			rest = append(rest, longName(fs, f))
		}
	})
	printGroup(w, fs, flagGroup{"other", rest}, shown)
}

func printGroup(w io.Writer, fs *flag.FlagSet, g flagGroup, shown map[string]bool) {
	header := false
	for _, name := range g.names {
		f := fs.Lookup(name)
		if f == nil || shown[name] {
			continue // attach and record share groups, not every flag
		}
		if !header {
			fmt.Fprintf(w, "\n%s:\n", g.title)
			header = true
		}
		shown[name] = true
		fmt.Fprintln(w, "  "+flagSpelling(fs, f))
		fmt.Fprintln(w, textwrap.Hanging("        ", usageText(f), helpWidth))
	}
}

// flagSpelling is how a flag is typed: "-p, --pid PID".
func flagSpelling(fs *flag.FlagSet, f *flag.Flag) string {
	var spelled []string
	for _, n := range names(fs, f) {
		if len(n) == 1 {
			spelled = append(spelled, "-"+n)
		} else {
			spelled = append(spelled, "--"+n)
		}
	}
	s := strings.Join(spelled, ", ")
	if v := valueName(f); v != "" {
		s += " " + v
	}
	return s
}

func valueName(f *flag.Flag) string {
	if v, ok := valueNames[f.Name]; ok {
		return v
	}
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return ""
	}
	switch name, _ := flag.UnquoteUsage(f); name {
	case "duration":
		return "DURATION"
	case "int", "uint":
		return "N"
	case "float":
		return "X"
	default:
		return "VALUE"
	}
}

// usageText is a flag's usage with its default, when it has one worth
// saying: "(default 1s)", "(default true; --stacks=false turns it off)".
func usageText(f *flag.Flag) string {
	switch f.DefValue {
	case "", "0", "0s", "false":
		return f.Usage
	case "true":
		return fmt.Sprintf("%s (default true; --%s=false turns it off)", f.Usage, f.Name)
	}
	return fmt.Sprintf("%s (default %s)", f.Usage, f.DefValue)
}
