package stall

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// section is the text of path from the line that starts with heading up
// to the next heading of the same level.
func section(t *testing.T, path, heading string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n"+heading)
	if !ok {
		t.Fatalf("%s has no %q", path, heading)
	}
	level := heading[:strings.IndexByte(heading, ' ')+1]
	body, _, _ := strings.Cut(rest, "\n"+level)
	return body
}

// Every cause is documented where readers look for it: its number, name
// and whether it is timed in docs/FORMAT.md §7.1 (a recording carries the
// number), and a row in the README's table of what each cause means.
func TestEveryCauseIsDocumented(t *testing.T) {
	numbering := section(t, "../../docs/FORMAT.md", "### 7.1 ")
	meaning := section(t, "../../README.md", "## What each cause means")
	if rows := regexp.MustCompile("(?m)^\\| \\d+ \\| `").FindAllString(numbering, -1); len(rows) != int(NumCauses) {
		t.Errorf("docs/FORMAT.md §7.1 numbers %d causes, the table has %d", len(rows), NumCauses)
	}
	for _, c := range AllCauses() {
		timed := "no"
		if c.Timed() {
			timed = "yes"
		}
		row := fmt.Sprintf("(?m)^\\| %d \\| `%s` \\| %s", c, regexp.QuoteMeta(c.String()), timed)
		if !regexp.MustCompile(row).MatchString(numbering) {
			t.Errorf("docs/FORMAT.md §7.1 has no row | %d | `%s` | %s |", c, c, timed)
		}
		if !strings.Contains(meaning, "\n| `"+c.String()+"` |") {
			t.Errorf("README.md's \"What each cause means\" has no row for `%s`", c)
		}
	}
}
