package doctor_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/charmbracelet/x/ansi"
)

// Doctor's text, on every fixture machine, fits 100 columns (its "why:"
// lines reached 250) and cites no incident by the internal name of its
// report ("seed 000") nor quotes one untranslated.
func TestTextFitsAndSpeaksToTheUser(t *testing.T) {
	machines, err := os.ReadDir("testdata/machines")
	if err != nil {
		t.Fatal(err)
	}
	seed := regexp.MustCompile(`(?i)\bseeds?\b`)
	for _, m := range machines {
		if m.Name() == "base" {
			continue
		}
		var b strings.Builder
		run(t, m.Name()).Text(&b)
		for _, line := range strings.Split(b.String(), "\n") {
			if w := ansi.StringWidth(line); w > 100 {
				t.Errorf("%s: a line of %d columns: %q", m.Name(), w, line)
			}
			if seed.MatchString(line) || strings.ContainsFunc(line, isHan) {
				t.Errorf("%s: %q cites an internal incident name or untranslated text", m.Name(), line)
			}
		}
	}
}

func isHan(r rune) bool { return unicode.Is(unicode.Han, r) }
