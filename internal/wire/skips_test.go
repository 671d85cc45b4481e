package wire

import (
	"regexp"
	"testing"

	"github.com/numatrace/numatrace/internal/latency"
)

// Every kind a source skips has a key of its own, short snake_case, and
// reads back as itself; a key no kind has is kept by its name.
func TestEverySkipKindHasAKey(t *testing.T) {
	snake := regexp.MustCompile(`^[a-z]+(_[a-z]+){0,3}$`)
	seen := map[string]latency.SkipKind{}
	for k := latency.SkipMalformed; k < latency.NumSkipKinds; k++ {
		key := SkipKey(latency.Skip{Kind: k})
		if !snake.MatchString(key) {
			t.Errorf("%v: key %q is not short snake_case", k, key)
		}
		if other, ok := seen[key]; ok {
			t.Errorf("%v and %v share the key %q", k, other, key)
		}
		seen[key] = k
		if back := NewSkip(key, 3); back != (latency.Skip{Kind: k, N: 3}) {
			t.Errorf("%q reads back as %+v", key, back)
		}
	}
	if got := NewSkip("newer_kind", 2); got != (latency.Skip{Kind: latency.SkipUnknown, N: 2, Name: "newer_kind"}) ||
		SkipKey(got) != "newer_kind" {
		t.Errorf("an unknown key reads as %+v", got)
	}
}
