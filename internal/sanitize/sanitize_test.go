package sanitize

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres", "postgres"},
		{"", ""},
		{"kworker/0:1H", "kworker/0:1H"},
		{"数据库", "数据库"},
		{"/system.slice/system-systemd\\x2dfsck.slice", "/system.slice/system-systemd\\x2dfsck.slice"},
		{"\x1b]0;pwned\x07", `\x1b]0;pwned\x07`},
		{"\x1b[2J", `\x1b[2J`},
		{"a\nb\rc\td", `a\x0ab\x0dc\x09d`},
		{"/rt_bad\xff", `/rt_bad\xff`},
		{"\xc3", `\xc3`},
		{"x\x7f", `x\x7f`},
		{"evil\u202egnp.exe", `evil\u202egnp.exe`},
		{"\u2066a\u2069", `\u2066a\u2069`},
		{"line\u2028sep", `line\u2028sep`},
		{"c1\u009bcsi", `c1\u009bcsi`},
		{"nul\x00", `nul\x00`},
	} {
		if got := Text(c.in); got != c.want {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.want)
		}
		if Safe(c.in) != (c.in == c.want) {
			t.Errorf("Safe(%q) = %v", c.in, Safe(c.in))
		}
	}
}

// Whatever the input, the output is valid UTF-8 with nothing a terminal
// acts on, and safe text is left as it is.
func FuzzText(f *testing.F) {
	for _, s := range []string{"\x1b]0;x\x07", "a\xffb", "\u202e", "ok", "\xe2\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Text(s)
		if !utf8.ValidString(out) {
			t.Fatalf("Text(%q) = %q: not valid UTF-8", s, out)
		}
		for _, r := range out {
			if r < 0x20 || r == 0x7f || unsafeRune(r) {
				t.Fatalf("Text(%q) = %q keeps %U", s, out, r)
			}
		}
		if Safe(s) && out != s {
			t.Fatalf("Text changed safe text %q to %q", s, out)
		}
		if Text(out) != out {
			t.Fatalf("Text is not stable on %q", out)
		}
		if !strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) && utf8.ValidString(s) && out != s {
			t.Fatalf("printable %q changed to %q", s, out)
		}
	})
}
