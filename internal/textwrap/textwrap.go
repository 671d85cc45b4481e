// Package textwrap breaks prose for the terminal at spaces only. Flags
// (--min-event), negative numbers and paths stay whole, which
// ansi.Wordwrap does not promise: it breaks at hyphens too. A word
// longer than the width runs over rather than being cut.
package textwrap

import (
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// Lines breaks s into lines of at most width cells, at spaces.
func Lines(s string, width int) []string {
	var out []string
	line := ""
	for _, word := range strings.Fields(s) {
		switch {
		case line == "":
			line = word
		case ansi.StringWidth(line)+1+ansi.StringWidth(word) <= width:
			line += " " + word
		default:
			out = append(out, line)
			line = word
		}
	}
	return append(out, line)
}

// Hanging wraps s to width with its first line after lead and the others
// after an indent as wide as lead: "  why: ..." with its text aligned.
// The result has no final newline.
func Hanging(lead, s string, width int) string {
	return Indented(lead, strings.Repeat(" ", ansi.StringWidth(lead)), s, width)
}

// Indented wraps s to width, its first line after first and the others
// after rest.
func Indented(first, rest, s string, width int) string {
	lines := Lines(s, max(width-max(ansi.StringWidth(first), ansi.StringWidth(rest)), 20))
	var b strings.Builder
	for i, l := range lines {
		if i == 0 {
			b.WriteString(first)
		} else {
			b.WriteString("\n" + rest)
		}
		b.WriteString(l)
	}
	return b.String()
}
