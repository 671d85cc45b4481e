package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/outfile"
	"github.com/numatrace/numatrace/internal/output"
	"github.com/numatrace/numatrace/internal/perfetto"
	"github.com/numatrace/numatrace/internal/prose"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/replay"
	"github.com/numatrace/numatrace/internal/stackexport"
)

// exportFormat is one format `numatrace export` writes a recording in.
type exportFormat struct {
	name  string
	about string // what it is and what reads it, for --format's help
	// write writes the recording r to w; stderr hears what it left out.
	write func(r *record.Reader, w, stderr io.Writer) error
}

// exportFormats are every format export writes: --format, its help, its
// check and the usage line all come from here, so a new format is one
// entry (docs/ARCHITECTURE.md, "Recipe: a new export format").
var exportFormats = []exportFormat{
	{"perfetto", "Chrome trace-event JSON", writePerfetto},
	{"pprof", "a stall profile for go tool pprof, Pyroscope, Parca", writePprof},
	{"folded", "folded stacks for flamegraph.pl, speedscope", writeFolded},
}

// exportFormatNamed is the format called name, nil if none is.
func exportFormatNamed(name string) *exportFormat {
	for i := range exportFormats {
		if exportFormats[i].name == name {
			return &exportFormats[i]
		}
	}
	return nil
}

// exportFormatNames are the formats' names, in the table's order.
func exportFormatNames() []string {
	var names []string
	for _, f := range exportFormats {
		names = append(names, f.name)
	}
	return names
}

// orList is a list in a sentence: "a, b or c".
func orList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

// exportFormatHelp is --format's help: each format and what it is.
func exportFormatHelp() string {
	var items []string
	for _, f := range exportFormats {
		items = append(items, f.name+" ("+f.about+")")
	}
	return "output format: " + orList(items)
}

func runExport(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	name := fs.String("format", exportFormats[0].name, exportFormatHelp())
	out := fs.String("output", "", "output file (default: stdout)")
	alias(fs, "o", "output")
	path, err := oneFile(fs, args, stdout)
	if err != nil {
		return err
	}
	format := exportFormatNamed(*name)
	if format == nil {
		return usageErr("export: unknown format %q (%s)", *name, orList(exportFormatNames()))
	}
	r, err := openRecording(path)
	if err != nil {
		return err
	}
	defer r.Close()
	w := stdout
	var f *os.File
	if *out != "" && *out != "-" {
		if f, err = outfile.Create(*out); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		w = f
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	err = format.write(r, bw, stderr)
	warnDamage(r, path, stderr)
	err = errors.Join(err, bw.Flush())
	if f != nil {
		err = errors.Join(err, f.Close())
	}
	return err
}

func writePerfetto(r *record.Reader, w, _ io.Writer) error {
	_, err := perfetto.Export(r, w, perfetto.Options{})
	return err
}

func writePprof(r *record.Reader, w, stderr io.Writer) error {
	p, err := stallProfile(r, stderr)
	if err != nil {
		return err
	}
	return stackexport.WritePprof(w, p.samples, r.Header().Started, time.Duration(p.durationNs), p.comments...)
}

func writeFolded(r *record.Reader, w, stderr io.Writer) error {
	p, err := stallProfile(r, stderr)
	if err != nil {
		return err
	}
	return stackexport.WriteFolded(w, p.samples)
}

// profile is a recording's stall profile, as the profilers' formats take it.
type profile struct {
	samples    []aggregate.StackSample
	durationNs uint64
	comments   []string // what was left out, said in the profile too
}

// stallProfile replays a recording into its stall profile: every stall
// that carried its stacks, and the rest of each thread's stall time
// without one, as the report counts them.
func stallProfile(r *record.Reader, stderr io.Writer) (*profile, error) {
	rep, err := replay.Run(context.Background(), r, replay.Options{})
	if err != nil {
		return nil, err
	}
	p := &profile{samples: stackexport.RunSamples(&rep.Summary), durationNs: rep.DurationNs}
	if l := r.StacksLeftOut(); l.Stacks > 0 {
		p.comments = append(p.comments, l.String()) // on stderr with the reader's warnings
	}
	if n := aggregate.StacksLeftOut(p.samples); n.Count > 0 {
		line := fmt.Sprintf("the stacks of %s (%s) left out: their time is counted under a stack that says why",
			prose.Count(n.Count, "stall"), output.Dur(n.TotalNs))
		fmt.Fprintf(stderr, "numatrace: warning: %s\n", line)
		p.comments = append(p.comments, line)
	}
	return p, nil
}
