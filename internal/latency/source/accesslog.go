package source

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// field is one field of an access log line: a bare word, a "quoted"
// string or a [bracketed] time, with its key when it is written
// key=value (rt=0.002, urt="0.001").
type field struct {
	key, val  string
	quoted    bool
	bracketed bool
}

// splitFields splits an access log line into its fields as the log
// formats write them: a quoted string (with \" inside) or a [time] is one
// field however many spaces it holds.
func splitFields(line string) []field {
	var out []field
	for i := 0; i < len(line); {
		if line[i] == ' ' || line[i] == '\t' {
			i++
			continue
		}
		var f field
		if k := strings.IndexAny(line[i:], " \t=\"[{"); k > 0 && line[i+k] == '=' {
			f.key, i = line[i:i+k], i+k+1
		}
		end := valueEnd(line, i)
		v := line[i:end]
		switch {
		case len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"':
			f.val, f.quoted = v[1:len(v)-1], true
		case len(v) >= 2 && v[0] == '[' && v[len(v)-1] == ']':
			f.val, f.bracketed = v[1:len(v)-1], true
		default:
			f.val = v
		}
		out = append(out, f)
		i = end
	}
	return out
}

// valueEnd is where the value starting at i ends.
func valueEnd(line string, i int) int {
	if i >= len(line) {
		return i
	}
	switch line[i] {
	case '"':
		for j := i + 1; j < len(line); j++ {
			switch line[j] {
			case '\\':
				j++
			case '"':
				return j + 1
			}
		}
		return len(line)
	case '[', '{':
		end := byte(']')
		if line[i] == '{' {
			end = '}'
		}
		if k := strings.IndexByte(line[i:], end); k >= 0 {
			return i + k + 1
		}
		return len(line)
	}
	if k := strings.IndexAny(line[i:], " \t"); k >= 0 {
		return i + k
	}
	return len(line)
}

// msecRe is nginx's $msec: Unix seconds with milliseconds.
var msecRe = regexp.MustCompile(`^[0-9]{10}\.[0-9]{3}$`)

// secondsRe is nginx's $request_time: seconds with milliseconds.
var secondsRe = regexp.MustCompile(`^[0-9]+\.[0-9]{3}$`)

// lineTime finds an access log line's time: nginx's $msec if the line
// has it (milliseconds), else its first [time] (seconds). at is its
// field.
func lineTime(fs []field) (ns uint64, at int, err error) {
	for i, f := range fs {
		if !f.quoted && !f.bracketed && (f.key == "" || f.key == "msec") && msecRe.MatchString(f.val) {
			ns, err := scaled(f.val, 1e9)
			return ns, i, err
		}
	}
	for i, f := range fs {
		if f.bracketed {
			if ns, err := textTimeNs(f.val); err == nil {
				return ns, i, nil
			}
		}
	}
	return 0, -1, errors.New("no time in the line ($msec, or [$time_local] / %t)")
}

// pick is the field --latency-field names, by its key or its number;
// without it, auto's choice (-1: none).
func (o LogFormat) pick(fs []field, auto func([]field) int) (int, error) {
	if o.Field == "" {
		if i := auto(fs); i >= 0 {
			return i, nil
		}
		return 0, errors.New("no latency field in the line (name it with --latency-field)")
	}
	if i, ok, err := o.fieldIndex(len(fs)); ok {
		return i, err
	}
	for i, f := range fs {
		if f.key == o.Field {
			return i, nil
		}
	}
	return 0, fmt.Errorf("no field %s= in the line", o.Field)
}

// keyed is the first field with one of the keys, -1 if none.
func keyed(fs []field, keys ...string) int {
	for _, k := range keys {
		for i, f := range fs {
			if f.key == k {
				return i
			}
		}
	}
	return -1
}

// nginxReader reads an nginx access log whose log_format has
// $request_time or $upstream_response_time (seconds with ms), and $msec
// or [$time_local] (when the request ended). Without --latency-field the
// latency is the field keyed rt= or request_time= (then urt= or
// upstream_response_time=), else the last bare seconds-with-ms field: the
// combined format with $request_time after it.
func nginxReader(o LogFormat) (LineReader, error) {
	if o.Unit != "" {
		return nil, errors.New("nginx writes its times in seconds: no --latency-unit")
	}
	return func(line string) (uint64, uint64, error) {
		fs := splitFields(line)
		ts, at, err := lineTime(fs)
		if err != nil {
			return 0, 0, err
		}
		i, err := o.pick(fs, func(fs []field) int {
			if i := keyed(fs, "rt", "request_time", "urt", "upstream_response_time"); i >= 0 {
				return i
			}
			for i := len(fs) - 1; i >= 0; i-- {
				if i != at && fs[i].key == "" && !fs[i].quoted && !fs[i].bracketed && secondsRe.MatchString(fs[i].val) {
					return i
				}
			}
			return -1
		})
		if err != nil {
			return 0, 0, err
		}
		lat, err := upstreamTimes(fs[i].val)
		return ts, lat, err
	}, nil
}

// upstreamTimes reads a latency nginx wrote, seconds with ms, summing
// the times of an $upstream_response_time that tried several servers
// ("0.004, 0.012" or "0.003 : 0.010"); "-" is a request that reached no
// upstream.
func upstreamTimes(s string) (uint64, error) {
	return times(s, 1e9, true)
}

// times reads one or more times in unit, as upstreamTimes; ms says each
// must be written with milliseconds, as nginx does.
func times(s string, unit uint64, ms bool) (uint64, error) {
	var sum uint64
	var n int
	for _, t := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ':' || r == ' ' }) {
		if t == "-" {
			continue
		}
		if ms && !secondsRe.MatchString(t) {
			return 0, fmt.Errorf("latency %q is not seconds with milliseconds", t)
		}
		v, err := scaled(t, unit)
		if err != nil {
			return 0, fmt.Errorf("latency %w", err)
		}
		sum, n = sum+v, n+1
	}
	if n == 0 {
		return 0, &noLatency{"a request that reached no upstream (" + strings.TrimSpace(s) + ")"}
	}
	return sum, nil
}

// apacheReader reads an Apache access log with %D (µs) after the common
// or combined format: the line's [%t] is when the request came, so it
// ended %D later. Without --latency-field %D is the last field, when
// what follows the last quoted field is %D alone (combined) or status,
// bytes and %D (common).
func apacheReader(o LogFormat) (LineReader, error) {
	unit := o.unitOr(1e3)
	return func(line string) (uint64, uint64, error) {
		fs := splitFields(line)
		start, at, err := lineTime(fs)
		if err != nil || !fs[at].bracketed {
			return 0, 0, errors.New("no [%t] time in the line")
		}
		i, err := o.pick(fs, apacheD)
		if err != nil {
			return 0, 0, err
		}
		if fs[i].val == "-" {
			return 0, 0, &noLatency{"a request logged with no time taken"}
		}
		lat, err := scaled(fs[i].val, unit)
		if err != nil {
			return 0, 0, fmt.Errorf("latency %w", err)
		}
		return start + lat, lat, nil
	}, nil
}

// apacheD is where %D is without --latency-field, -1 if the line does
// not end in it.
func apacheD(fs []field) int {
	q := -1
	for i, f := range fs {
		if f.quoted {
			q = i
		}
	}
	after := len(fs) - 1 - q
	if q < 0 || (after != 1 && after != 3) {
		return -1
	}
	for i, f := range fs[q+1:] {
		last := q+1+i == len(fs)-1
		if f.key != "" || f.val == "" || !digits(f.val) && (last || f.val != "-") {
			return -1
		}
	}
	return len(fs) - 1
}
