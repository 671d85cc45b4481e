package doctor

import (
	"bytes"
	"strings"
	"testing"
)

// The --pid line names the process by its comm, which the process sets
// itself (prctl(PR_SET_NAME)): doctor's text shows it escaped, in the
// findings' header and in the numastat table's.
func TestTextEscapesTheComm(t *testing.T) {
	r := &Report{PID: 4242, Comm: "\x1b]0;pwned\x07\n\xff\u202e", Nodes: 1,
		Numastat: &Numastat{Nodes: []int{0}, Rows: map[string]map[string]float64{}, Total: map[string]float64{}}}
	var buf bytes.Buffer
	r.Text(&buf)
	out := buf.String()
	const shown = `pid 4242 (\x1b]0;pwned\x07\x0a\xff\u202e)`
	if first := strings.SplitN(out, "\n", 2)[0]; !strings.HasPrefix(first, "numatrace doctor: "+shown+", 1 NUMA node(s): ") {
		t.Errorf("first line %q: want it to name %s", first, shown)
	}
	if !strings.Contains(out, `for PID 4242 (\x1b]0;pwned\x07\x0a\xff\u202e)`+"\n") {
		t.Errorf("the numastat table's header does not name the escaped comm:\n%s", out)
	}
	for _, raw := range []string{"\x1b", "\x07", "\xff", "\u202e"} {
		if strings.Contains(out, raw) {
			t.Errorf("doctor's text holds %q raw: %q", raw, out)
		}
	}
}
