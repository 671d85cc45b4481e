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

// A finding's text can quote what another user named (a cgroup path in
// the PSI finding's evidence, an interface name): every line of it is
// shown escaped, one line each.
func TestTextEscapesFindings(t *testing.T) {
	const hostile = "/sys/fs/cgroup/x\x1b[2J\n\xff\u202e"
	r := &Report{Nodes: 2, Findings: []Finding{{Severity: Warn, Check: "psi", Title: "pressure in " + hostile,
		Evidence: []string{hostile + "/memory.pressure some avg10=30.00"}, Why: "why " + hostile,
		TradeOff: "t " + hostile, Fix: "f " + hostile, Persist: "p " + hostile}},
		Skipped: []string{"psi_cgroups: " + hostile}}
	var buf bytes.Buffer
	r.Text(&buf)
	out := buf.String()
	const shown = `/sys/fs/cgroup/x\x1b[2J\x0a\xff\u202e`
	for _, want := range []string{"[WARN] pressure in " + shown + " (psi)\n", "    " + shown + "/memory.pressure some avg10=30.00\n",
		"  why: why " + shown + "\n", "  trade-off: t " + shown + "\n", "  fix: f " + shown + "\n", "  persist: p " + shown + "\n",
		"  psi_cgroups: " + shown + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor's text lacks %q:\n%s", want, out)
		}
	}
	for _, raw := range []string{"\x1b", "\xff", "\u202e"} {
		if strings.Contains(out, raw) {
			t.Errorf("doctor's text holds %q raw: %q", raw, out)
		}
	}
	if lines := r.Lines(); len(lines) != 1 || strings.ContainsAny(lines[0], "\x1b\n") {
		t.Errorf("the view's lines %q", lines)
	}
}
