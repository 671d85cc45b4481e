package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/numatrace/numatrace/internal/sanitize"
	"github.com/numatrace/numatrace/internal/testutil"
)

// hostileComms are thread names any user can set (prctl(PR_SET_NAME), or
// exec through a link so named; 15 bytes at most), with the spelling the
// terminal must get.
var hostileComms = []struct{ raw, shown string }{
	{"\x1b]0;pwned\x07", `\x1b]0;pwned\x07`}, // retitles the terminal
	{"\x1b[2Jwipe", `\x1b[2Jwipe`},           // clears the screen
	{"new\nline", `new\x0aline`},             // splits a table row
	{"bad\xffutf8", `bad\xffutf8`},           // breaks the alignment
	{"evil\u202egnp", `evil\u202egnp`},       // reverses what follows
}

// checkTerminalText fails if out holds anything a terminal acts on: a
// control character other than the line end, invalid UTF-8, a bidi
// override or a line separator.
func checkTerminalText(t *testing.T, what string, out []byte) {
	t.Helper()
	if !utf8.Valid(out) {
		t.Errorf("%s is not valid UTF-8", what)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if !sanitize.Safe(line) {
			t.Errorf("%s has a line a terminal acts on: %q", what, line)
		}
	}
}

// Threads named to attack the operator's terminal stall on memcg reclaim
// in a cgroup whose own name does too: attach --no-tui's report, and
// report of its recording, show every name escaped, with no control
// byte; the JSON keeps the names.
func TestHostileNamesReachTheTerminalEscaped(t *testing.T) {
	testutil.RequireRoot(t)
	cg := testutil.MemcgCgroup(t, "numatrace-e2e-\x1b]0;cg\x07", 64<<20)
	cgShown := `/sys/fs/cgroup/memory/numatrace-e2e-\x1b]0;cg\x07`
	file := testutil.BigFile(t)
	dir := t.TempDir()
	var readers []string
	for _, c := range hostileComms {
		link := filepath.Join(dir, c.raw)
		if err := os.Symlink("/bin/cat", link); err != nil {
			t.Fatal(err)
		}
		readers = append(readers, link)
	}
	testutil.DropCaches(t)
	gate, in, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	// One after the other, each reader reads the 400 MiB file: each of
	// them reclaims in the 64 MiB cgroup.
	wl := exec.Command("sh", append([]string{"-c", `echo $$ > "$CG/cgroup.procs" && read x && for r in "$@"; do "$r" "$F" > /dev/null; done`, "sh"}, readers...)...)
	wl.Env = append(os.Environ(), "CG="+cg, "F="+file)
	wl.Stdin = gate
	if err := wl.Start(); err != nil {
		t.Fatal(err)
	}
	gate.Close()
	t.Cleanup(func() { wl.Process.Kill(); wl.Wait() })
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(filepath.Join(cg, "cgroup.procs")); strings.Contains(string(b), fmt.Sprint(wl.Process.Pid)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the workload never joined its cgroup")
		}
	}
	rec := filepath.Join(t.TempDir(), "hostile.ntr")
	nt := startAttach(t, "--cgroup", cg, "--record", rec, "--duration", "120s", "--top", "100")
	in.WriteString("go\n")
	if err := wl.Wait(); err != nil {
		t.Fatalf("workload: %v", err)
	}
	// The cgroup goes: the target exited, and the note names it.
	for deadline := time.Now().Add(5 * time.Second); os.Remove(cg) != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("cannot remove the cgroup")
		}
	}
	nt.wait(t, 30*time.Second)
	out := nt.stdout.Bytes()
	checkTerminalText(t, "attach's report", out)
	checkTerminalText(t, "attach's stderr", nt.stderr.Bytes())
	text := string(out)
	if first := strings.SplitN(text, "\n", 2)[0]; !strings.HasPrefix(first, "numatrace: cgroup "+cgShown+" for ") {
		t.Errorf("header %q: want the cgroup escaped", first)
	}
	if !strings.Contains(text, "\nnote: target cgroup "+cgShown+" exited after ") {
		t.Errorf("the note does not name the cgroup escaped:\n%s", text)
	}
	i, j := strings.Index(text, "\nTHREADS ("), strings.Index(text, "(* = thread exited)")
	if i < 0 || j < i {
		t.Fatalf("no THREADS table in\n%s", text)
	}
	for _, c := range hostileComms {
		// One row: pid, tid, the name (exited), a cause.
		if !regexp.MustCompile(`(?m)^\s*\d+\s+\d+\s+` + regexp.QuoteMeta(c.shown) + `\*\s+[a-z_]+\s`).MatchString(text[i:j]) {
			t.Errorf("no thread row of %s:\n%s", c.shown, text[i:j])
		}
	}
	t.Logf("attach's report:\n%s", text)

	// report of the recording prints the same.
	got, err := exec.Command(binary(t), "report", "--top", "100", rec).Output()
	if err != nil {
		t.Fatalf("report: %v", err)
	}
	checkTerminalText(t, "report", got)
	if string(got) != text {
		t.Errorf("report differs from the live text:\nlive:\n%s\nreport:\n%s", text, got)
	}
	js, err := exec.Command(binary(t), "report", "--json", rec).Output()
	if err != nil {
		t.Fatalf("report --json: %v", err)
	}
	var sum summaryLine
	if err := json.Unmarshal(js, &sum); err != nil {
		t.Fatal(err)
	}
	reclaims := map[string]uint64{}
	for _, th := range sum.Threads {
		reclaims[th.Comm] += th.Stalls["memcg_reclaim"].Count
	}
	for _, c := range hostileComms {
		if raw := strings.ToValidUTF8(c.raw, "\uFFFD"); reclaims[raw] == 0 { // JSON strings are UTF-8
			t.Errorf("the JSON summary has no memcg reclaim of a thread named %q: %v", raw, reclaims)
		}
	}
}
