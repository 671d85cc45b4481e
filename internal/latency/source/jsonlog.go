package source

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// jsonDurations are the duration fields a JSON line is read by without
// --latency-field, with their units: the names loggers and nginx's
// escape=json log_formats most often give them.
var jsonDurations = []struct {
	name string
	ns   uint64
}{
	{"duration_ms", 1e6}, {"latency_ms", 1e6}, {"elapsed_ms", 1e6}, {"response_time_ms", 1e6},
	{"duration_us", 1e3}, {"latency_us", 1e3}, {"duration_ns", 1}, {"duration_s", 1e9},
	{"request_time", 1e9}, {"upstream_response_time", 1e9},
}

// jsonTimes are the fields a JSON line's time is read from, in this
// order: when the request ended (a logger's time is when it wrote the
// line).
var jsonTimes = []string{"msec", "ts", "timestamp", "@timestamp", "time", "time_iso8601", "time_local", "end"}

// jsonReader reads JSON lines with a duration field (--latency-field, in
// the unit its suffix or --latency-unit says; a number, a number in a
// string, or a Go duration such as "1.5ms") and a time field (epoch
// seconds with a fraction, ms, µs or ns; RFC 3339; nginx's $msec or
// $time_local). A line without the duration field (another message of
// the same log) has no latency.
func jsonReader(o LogFormat) (LineReader, error) {
	unit := o.unitOr(0) // 0: the field's values say theirs ("1.5ms")
	return func(line string) (uint64, uint64, error) {
		if !strings.HasPrefix(line, "{") {
			return 0, 0, errors.New("not a JSON object")
		}
		d := json.NewDecoder(strings.NewReader(line))
		d.UseNumber()
		var v map[string]any
		if err := d.Decode(&v); err != nil {
			return 0, 0, fmt.Errorf("bad JSON: %v", err)
		}
		name, u := o.Field, unit
		if name == "" {
			for _, c := range jsonDurations {
				if _, ok := v[c.name]; ok {
					name, u = c.name, c.ns
					break
				}
			}
		}
		raw, ok := v[name]
		if !ok || name == "" {
			return 0, 0, &noLatency{noDurationField(o.Field)}
		}
		lat, err := jsonDuration(raw, u)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", name, err)
		}
		ts, err := jsonTime(v)
		return ts, lat, err
	}, nil
}

func noDurationField(f string) string {
	if f != "" {
		return "a JSON line with no field " + f
	}
	names := make([]string, len(jsonDurations))
	for i, c := range jsonDurations {
		names[i] = c.name
	}
	return "a JSON line with none of the duration fields " + strings.Join(names, ", ") + " (name yours with --latency-field)"
}

// jsonDuration reads a duration: a number or a number in a string in
// unit, "-" (nginx: none), or a Go duration ("1.5ms").
func jsonDuration(raw any, unit uint64) (uint64, error) {
	s := fmt.Sprint(raw)
	switch {
	case s == "-" || s == "":
		return 0, &noLatency{"a request logged with no time taken"}
	case s[len(s)-1] >= 'a' && s[len(s)-1] <= 'z': // 1.5ms, 2m
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return 0, fmt.Errorf("%q is not a duration", s)
		}
		return uint64(d), nil
	case unit == 0:
		return 0, fmt.Errorf("%s has no unit: say it with --latency-unit (or a field named with _ns, _us, _ms, _s)", s)
	case strings.ContainsAny(s, "eE"): // 1.5e-3
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f < 0 || f*float64(unit) > 1<<63 {
			return 0, fmt.Errorf("%q is not a duration", s)
		}
		return uint64(f * float64(unit)), nil
	}
	return times(s, unit, false)
}

// jsonTime reads the line's time from the first of jsonTimes it has.
func jsonTime(v map[string]any) (uint64, error) {
	for _, name := range jsonTimes {
		raw, ok := v[name]
		if !ok {
			continue
		}
		var s string
		switch r := raw.(type) {
		case json.Number:
			s = r.String()
		case string:
			s = r
		default:
			return 0, fmt.Errorf("%s is %s, not a time", name, compact(raw))
		}
		ts, err := timeNs(s)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		return ts, nil
	}
	return 0, fmt.Errorf("no time field (%s)", strings.Join(jsonTimes, ", "))
}

func compact(v any) string {
	var b bytes.Buffer
	json.NewEncoder(&b).Encode(v)
	return strings.TrimSpace(b.String())
}
