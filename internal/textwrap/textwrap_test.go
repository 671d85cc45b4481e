package textwrap

import (
	"strings"
	"testing"
)

// Flags, negative numbers and long numbers stay whole; lines stay within
// the width unless one word is wider.
func TestLinesBreakAtSpacesOnly(t *testing.T) {
	s := "without --slo a spike is a window whose p99 is above -1.5 times 123456789012345678901234 ns"
	got := Lines(s, 20)
	want := []string{"without --slo a", "spike is a window", "whose p99 is above", "-1.5 times", "123456789012345678901234", "ns"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("Lines = %q, want %q", got, want)
	}
}

func TestHangingAlignsContinuationLines(t *testing.T) {
	got := Hanging("  why: ", "node reclaim frees the local node's page cache first", 30)
	want := "  why: node reclaim frees the\n       local node's page cache\n       first"
	if got != want {
		t.Errorf("Hanging =\n%s\nwant\n%s", got, want)
	}
}

// A first line led by more than the rest ("[WARN] " against "  ") still
// fits the width.
func TestIndentedFirstLineFits(t *testing.T) {
	got := Indented("[WARN] ", "  ", "the node0 pool sits unevenly across the nodes", 30)
	for _, l := range strings.Split(got, "\n") {
		if len(l) > 30 {
			t.Errorf("line %q is over 30 columns in\n%s", l, got)
		}
	}
}
