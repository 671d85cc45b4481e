package source

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strings"
	"time"
)

// scaled reads a non-negative decimal ("0.002", "1764623336.123", "42")
// in units of unitNs, exactly: as awk would not, for an epoch time in ns
// is beyond a float64's 53 bits. Digits below a nanosecond are dropped.
func scaled(s string, unitNs uint64) (uint64, error) {
	whole, frac, dot := strings.Cut(s, ".")
	if whole == "" && (!dot || frac == "") || !digits(whole) || !digits(frac) {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	var w uint64
	for _, c := range []byte(whole) {
		hi, lo := bits.Mul64(w, 10)
		if hi != 0 || lo > math.MaxUint64-uint64(c-'0') {
			return 0, fmt.Errorf("%q is too large", s)
		}
		w = lo + uint64(c-'0')
	}
	hi, ns := bits.Mul64(w, unitNs)
	if hi != 0 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	// The fraction, digit by digit: unitNs/10, unitNs/100, ... until a
	// digit is worth less than a nanosecond.
	step := unitNs
	for _, c := range []byte(frac) {
		if step /= 10; step == 0 {
			break
		}
		ns += uint64(c-'0') * step
	}
	return ns, nil
}

func digits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// epochNs reads a Unix time written as a number, in whichever unit its
// size says: seconds (with a fraction, as $msec and most loggers write
// it) up to 11 digits, then ms, µs and ns.
func epochNs(s string) (uint64, error) {
	whole, _, _ := strings.Cut(s, ".")
	unit := uint64(1)
	switch n := len(whole); {
	case n <= 11:
		unit = 1e9
	case n <= 14:
		unit = 1e6
	case n <= 17:
		unit = 1e3
	}
	return scaled(s, unit)
}

// The text times logs write: RFC 3339 (JSON loggers, nginx's
// $time_iso8601), the common log format's [$time_local] / Apache's %t,
// and HAProxy's accept date, with milliseconds and no zone (local time).
const (
	clfTime     = "02/Jan/2006:15:04:05 -0700"
	haproxyTime = "02/Jan/2006:15:04:05.000"
)

// textTimeNs reads a time written as text, as Unix ns.
func textTimeNs(s string) (uint64, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t, err = time.Parse(clfTime, s)
	}
	if err != nil {
		t, err = time.ParseInLocation(haproxyTime, s, time.Local)
	}
	if err != nil || t.UnixNano() <= 0 {
		return 0, fmt.Errorf("%q is not a time (RFC 3339, [02/Jan/2006:15:04:05 -0700] or a Unix time)", s)
	}
	return uint64(t.UnixNano()), nil
}

// timeNs reads a time a log wrote: a Unix time as a number, or text.
func timeNs(s string) (uint64, error) {
	if ns, err := epochNs(s); err == nil {
		return ns, nil
	}
	return textTimeNs(s)
}

// units are the units --latency-unit takes and the field-name suffixes
// that say one.
var units = []struct {
	names []string
	ns    uint64
}{
	{[]string{"ns", "nanoseconds"}, 1},
	{[]string{"us", "µs", "microseconds"}, 1e3},
	{[]string{"ms", "milliseconds"}, 1e6},
	{[]string{"s", "seconds", "sec"}, 1e9},
}

// unitNamed is the unit named, 0 if none is.
func unitNamed(name string) uint64 {
	for _, u := range units {
		for _, n := range u.names {
			if name == n {
				return u.ns
			}
		}
	}
	return 0
}

// suffixUnitNs is the unit a field's name ends in (duration_ms), 0 if
// none.
func suffixUnitNs(field string) uint64 {
	i := strings.LastIndexAny(field, "_.-")
	if i < 0 {
		return 0
	}
	return unitNamed(strings.ToLower(field[i+1:]))
}

// noLatency is a line a format reads that carries no latency: a request
// that failed or was skipped, or never reached the upstream timed. It is
// counted apart from the lines no format reads.
type noLatency struct{ why string }

func (e *noLatency) Error() string { return e.why }

func isNoLatency(err error) bool {
	var n *noLatency
	return errors.As(err, &n)
}
