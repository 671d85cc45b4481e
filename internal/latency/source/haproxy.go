package source

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// haproxyTimers is the HTTP log's timers field, in ms: TR/Tw/Tc/Tr/Ta
// (HAProxy 1.7 on) or Tq/Tw/Tc/Tr/Tt (before); -1 for a phase never
// reached, a + before the last with option logasap.
var haproxyTimers = regexp.MustCompile(`^-?[0-9]+/-?[0-9]+/-?[0-9]+/-?[0-9]+/\+?-?[0-9]+$`)

// haproxyTimer is where each timer --latency-field may name is in the
// timers field.
var haproxyTimer = map[string]int{"TR": 0, "Tq": 0, "Tw": 1, "Tc": 2, "Tr": 3, "Ta": 4, "Tt": 4}

// haproxyReader reads HAProxy's HTTP log (option httplog), with or
// without syslog's prefix: the latency is the total time (Ta, Tt) unless
// --latency-field names another timer (Tr: the server's response); the
// request ended that total after the line's [date].
func haproxyReader(o LogFormat) (LineReader, error) {
	at := 4
	if o.Field != "" {
		i, ok := haproxyTimer[o.Field]
		if !ok {
			return nil, fmt.Errorf("--latency-field %q is not one of HAProxy's timers Tt, Ta, Tr, TR, Tw, Tc", o.Field)
		}
		at = i
	}
	if o.Unit != "" {
		return nil, errors.New("HAProxy's timers are in ms: no --latency-unit")
	}
	return func(line string) (uint64, uint64, error) {
		fs := splitFields(line)
		date := -1
		for i, f := range fs {
			if f.bracketed && date < 0 {
				date = i
			} else if date >= 0 && f.key == "" && !f.quoted && haproxyTimers.MatchString(f.val) {
				return haproxyTimes(fs[date].val, f.val, at)
			}
		}
		return 0, 0, errors.New("no HAProxy [date] and Tq/Tw/Tc/Tr/Tt timers in the line")
	}, nil
}

func haproxyTimes(date, timers string, at int) (uint64, uint64, error) {
	start, err := textTimeNs(date)
	if err != nil {
		return 0, 0, err
	}
	t := strings.Split(strings.ReplaceAll(timers, "+", ""), "/")
	total, _ := strconv.ParseInt(t[4], 10, 64)
	lat, _ := strconv.ParseInt(t[at], 10, 64)
	if total < 0 || lat < 0 {
		return 0, 0, &noLatency{"a request HAProxy logged as aborted (timers " + timers + ")"}
	}
	return start + uint64(total)*1e6, uint64(lat) * 1e6, nil
}
