package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/numatrace/numatrace/internal/latency"
)

// ParseLine reads one sample: NDJSON {"ts_ns":..,"latency_ns":..}, or two
// numbers (ts_ns latency_ns) separated by spaces, a tab or a comma.
func ParseLine(line string) (ts, lat uint64, err error) {
	line = strings.TrimSpace(line)
	if strings.HasPrefix(line, "{") {
		var v struct {
			TsNs      *uint64 `json:"ts_ns"`
			LatencyNs *uint64 `json:"latency_ns"`
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			return 0, 0, fmt.Errorf("bad JSON sample: %v", err)
		}
		if v.TsNs == nil || v.LatencyNs == nil {
			return 0, 0, errors.New("JSON sample without ts_ns and latency_ns")
		}
		return *v.TsNs, *v.LatencyNs, nil
	}
	f := strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == '\t' || r == ',' })
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("want two columns (ts_ns latency_ns), got %d", len(f))
	}
	if ts, err = strconv.ParseUint(f[0], 10, 64); err != nil {
		return 0, 0, fmt.Errorf("bad ts_ns %q", f[0])
	}
	if lat, err = strconv.ParseUint(f[1], 10, 64); err != nil {
		return 0, 0, fmt.Errorf("bad latency_ns %q", f[1])
	}
	return ts, lat, nil
}

// Follow reads samples from path, each line read by read, ("-" for standard input) until ctx ends,
// following a file as tail -F does: as it grows, and by name when it is
// rotated (a new file in its place: the old one is read to its end
// first, then the new one from its start) or truncated (read again from
// the start); notice hears of each. Blank lines and lines starting with
// # are skipped; bad lines go to bad and reading goes on. Opening a FIFO
// does not wait for a writer, and a read that blocks (standard input, a
// FIFO) never holds up the return when ctx ends.
func Follow(ctx context.Context, path string, read LineReader, clk latency.Clock, emit func(latency.Sample), bad, notice func(error)) error {
	fl := &follower{path: path, notice: notice}
	if path == "-" {
		fl.in, fl.stream = os.Stdin, true
	} else if err := fl.start(); err != nil {
		return err
	}
	if fl.f != nil && !fl.regular {
		defer fl.f.Close() // ends a read blocked on a FIFO; regular files are closed by readLines
	}
	lines := make(chan fileLine, 256)
	errc := make(chan error, 1)
	go func() {
		defer close(lines)
		errc <- fl.readLines(ctx, lines)
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case line, ok := <-lines:
			if !ok {
				return <-errc
			}
			if line.long {
				if bad != nil {
					bad(fmt.Errorf("a line over %d KiB", maxLine>>10))
				}
				continue
			}
			t := strings.TrimSpace(line.text)
			if t == "" || strings.HasPrefix(t, "#") {
				continue
			}
			ts, lat, err := read(t)
			if err != nil {
				if bad != nil {
					bad(err)
				}
				continue
			}
			emit(latency.Sample{TsNs: clk.Mono(ts), LatencyNs: lat})
		}
	}
}

// maxLine bounds one line: a sample is a few dozen bytes, and a file
// with no newline would otherwise be held whole.
const maxLine = 64 << 10

// fileLine is one line read, or (long) one that was over maxLine and
// skipped.
type fileLine struct {
	text string
	long bool
}
