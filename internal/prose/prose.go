// Package prose is the English more than one part of numatrace writes: a
// count of things with its plural, numbers grouped by thousands, and the
// sentences both the live warnings and the report say. Core packages
// (latency, correlate, session) take their words from here rather than
// from a format (internal/output) or from each other.
package prose

import "strconv"

// Count is n things, with n grouped by thousands: "1 window",
// "11,976 latency samples". The plural adds an s: "processs" is wrong,
// so a noun like that has a helper of its own where it is said.
func Count(n uint64, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return Thousands(n) + " " + thing + "s"
}

// Were is the verb after Count(n, ...): "1 line was", "2 lines were".
func Were(n uint64) string {
	if n == 1 {
		return "was"
	}
	return "were"
}

// Thousands writes n with commas between thousands: 11976 → "11,976".
func Thousands(n uint64) string { return GroupDigits(strconv.FormatUint(n, 10)) }

// GroupDigits puts commas between the thousands of a run of digits:
// "1856" → "1,856".
func GroupDigits(s string) string {
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// BadRecords says that n records from the kernel could not be decoded:
// the live run warns with it, and the report repeats it.
func BadRecords(n uint64) string {
	return Count(n, "ring-buffer record") + " from the kernel could not be read or decoded (an unknown cause, a short record) and " +
		Were(n) + " left out"
}
