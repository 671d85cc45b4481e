package source

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// LineReader reads one line of a latency file: when the request ended
// (Unix ns, or CLOCK_MONOTONIC ns as latency.Clock takes them) and how
// long it took.
type LineReader func(line string) (tsNs, latencyNs uint64, err error)

// LogFormat is how a latency file is written: numatrace's own format or
// a log a server or load generator writes as it is (--latency-format),
// which field holds the latency (--latency-field) and in what unit
// (--latency-unit).
type LogFormat struct {
	Name  string // "" or "auto": told from the first line a format reads
	Field string
	Unit  string
}

// logFormat is one format a latency file may be in.
type logFormat struct {
	name  string
	about string // what a file told to be in it is read as
	// reader makes its line reader, or says why the flags do not fit it.
	reader func(o LogFormat) (LineReader, error)
}

// logFormats are tried in this order on a file's first lines: the
// stricter first, so that a line two could read goes to the one that
// says more about it.
var logFormats = []logFormat{
	{"numatrace", "", numatraceReader},
	{"pgbench", "pgbench's -l per-transaction log", pgbenchReader},
	{"haproxy", "HAProxy's HTTP log", haproxyReader},
	{"nginx", "an nginx access log", nginxReader},
	{"apache", "an Apache access log with %D", apacheReader},
	{"json", "JSON lines", jsonReader},
}

// FormatNames lists the formats --latency-format takes.
func FormatNames() []string {
	out := []string{"auto"}
	for _, f := range logFormats {
		out = append(out, f.name)
	}
	return out
}

// Check validates the flags before anything is opened.
func (o LogFormat) Check() error {
	if o.Unit != "" && unitNamed(o.Unit) == 0 {
		return fmt.Errorf("--latency-unit: %q is not one of ns, us, ms, s", o.Unit)
	}
	if o.Name == "" || o.Name == "auto" {
		return nil // apache and json take any field and unit
	}
	for _, f := range logFormats {
		if f.name == o.Name {
			if _, err := f.reader(o); err != nil {
				return fmt.Errorf("--latency-format %s: %w", o.Name, err)
			}
			return nil
		}
	}
	return fmt.Errorf("--latency-format: %q is not one of %s", o.Name, strings.Join(FormatNames(), ", "))
}

// Reader is the file's line reader: the format named, or, without one,
// the first format that reads one of the file's first lines (read lines
// before it count as malformed), kept for the rest of the file. told, if
// not nil, hears what a log told this way is read as (not numatrace's
// own format: that is the one expected).
func (o LogFormat) Reader(told func(about string)) LineReader {
	var chosen LineReader
	var readers []LineReader
	var why, about []string
	for _, f := range logFormats {
		if o.Name != "" && o.Name != "auto" && f.name != o.Name {
			continue
		}
		if r, err := f.reader(o); err == nil {
			readers = append(readers, r)
			why, about = append(why, f.name), append(about, f.about)
		}
	}
	return func(line string) (uint64, uint64, error) {
		if chosen != nil {
			return chosen(line)
		}
		if len(readers) == 1 {
			chosen = readers[0]
			return chosen(line)
		}
		for i, r := range readers {
			ts, lat, err := r(line)
			if err == nil || isNoLatency(err) {
				chosen = r
				if told != nil && about[i] != "" {
					told(about[i])
				}
				return ts, lat, err
			}
		}
		return 0, 0, fmt.Errorf("no latency format reads the line (tried %s; name one with --latency-format)", strings.Join(why, ", "))
	}
}

func numatraceReader(o LogFormat) (LineReader, error) {
	if o.Field != "" || o.Unit != "" {
		return nil, errors.New("numatrace's own format has its fields and units: no --latency-field or --latency-unit")
	}
	return ParseLine, nil
}

// unitOr is the latency's unit: --latency-unit, else the field's
// suffix, else the format's own.
func (o LogFormat) unitOr(def uint64) uint64 {
	if u := unitNamed(o.Unit); u != 0 {
		return u
	}
	if u := suffixUnitNs(o.Field); u != 0 {
		return u
	}
	return def
}

// fieldIndex reads --latency-field as a field's number: 1 is the first,
// -1 the last. ok is false when it is a name.
func (o LogFormat) fieldIndex(n int) (i int, ok bool, err error) {
	v, perr := strconv.Atoi(strings.TrimPrefix(o.Field, "$"))
	if perr != nil {
		return 0, false, nil
	}
	switch {
	case v > 0 && v <= n:
		return v - 1, true, nil
	case v < 0 && -v <= n:
		return n + v, true, nil
	}
	return 0, true, fmt.Errorf("the line has no field %d (%d fields)", v, n)
}
