// Package sanitize makes text that numatrace did not write safe to show.
// Thread names, cgroup paths, pod and container names and file paths come
// from the kernel or from other processes, and any user can set them: a
// thread named "\x1b]0;pwned\x07" retitles the operator's terminal, a
// newline splits a table row, a bidi override reverses what follows, and
// an invalid UTF-8 byte breaks column alignment or a Prometheus label.
//
// Text escapes all of these visibly, the way Go's %q would, so the
// operator sees that the name holds them; every terminal, view and label
// output passes untrusted text through it. Formats with their own
// escaping (JSON, the recording) keep the original bytes.
package sanitize

import (
	"strings"
	"unicode/utf8"
)

const hex = "0123456789abcdef"

// Text returns s with every control character, invalid UTF-8 byte and
// bidirectional-formatting character escaped: \x1b for a byte below 0x20,
// DEL or an invalid byte; \u202e for a C1 control, a bidi override,
// isolate or mark, or a line or paragraph separator. The result is valid
// UTF-8 of printable characters only. Text that needs nothing escaped is
// returned as it is, without a copy.
func Text(s string) string {
	i := firstUnsafe(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			writeByte(&b, s[i])
		case r < 0x20 || r == 0x7f:
			writeByte(&b, byte(r))
		case unsafeRune(r):
			b.WriteString(`\u`)
			for shift := 12; shift >= 0; shift -= 4 {
				b.WriteByte(hex[(r>>shift)&0xf])
			}
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Safe reports whether Text would return s unchanged.
func Safe(s string) bool { return firstUnsafe(s) < 0 }

func writeByte(b *strings.Builder, c byte) {
	b.WriteString(`\x`)
	b.WriteByte(hex[c>>4])
	b.WriteByte(hex[c&0xf])
}

// firstUnsafe is the byte offset of the first character Text escapes, or -1.
func firstUnsafe(s string) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf { // ASCII: the common case, one byte at a time
			if c < 0x20 || c == 0x7f {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || unsafeRune(r) {
			return i
		}
		i += size
	}
	return -1
}

// unsafeRune: the non-ASCII characters a terminal acts on instead of
// showing: C1 controls (0x9b is a one-byte CSI to some terminals), the
// bidi embeddings, overrides, isolates and marks, and the line and
// paragraph separators.
func unsafeRune(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f:
		return true
	case r >= 0x2028 && r <= 0x202e:
		return true
	case r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}
