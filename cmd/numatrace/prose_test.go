package main

import "strings"

// proseLines are a text report's lines with each line of prose (one
// that starts at the margin: a WARNING, a hint, the verdict) whole
// again: the report wraps one longer than 100 columns, indenting the
// rest of it by four blanks or more.
func proseLines(report string) []string {
	var out []string
	for _, l := range strings.Split(report, "\n") {
		if n := len(out); n > 0 && out[n-1] != "" && !strings.HasPrefix(out[n-1], " ") && strings.HasPrefix(l, "    ") {
			out[n-1] += " " + strings.TrimSpace(l)
			continue
		}
		out = append(out, l)
	}
	return out
}
