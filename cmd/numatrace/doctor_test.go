package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/numatrace/numatrace/internal/doctor"
)

// fixtureRoot copies doctor's healthy fixture and its binding-mismatch
// overlay into one root: pid 4242 runs on node 0 with memory bound to node 1.
func fixtureRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, src := range []string{"../../internal/doctor/testdata/base", "../../internal/doctor/testdata/binding/fires"} {
		err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(src, p)
			if fi.IsDir() {
				return os.MkdirAll(filepath.Join(root, rel), 0o755)
			}
			b, err := os.ReadFile(p)
			if err == nil {
				err = os.WriteFile(filepath.Join(root, rel), b, 0o644)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestDoctorCommand(t *testing.T) {
	root := fixtureRoot(t)
	code, out, errs := runCLI("doctor", "--root", root, "--pid", "4242", "--interval", "0")
	if code != 0 || !strings.Contains(out, "[CRIT] pid 4242 runs on node(s) 0 but may only allocate on node(s) 1") ||
		!strings.Contains(out, "fix: restart it under numactl --cpunodebind=0 --membind=0") || !strings.Contains(out, "Per-node process memory usage") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if msg := oneErrorLine(t, errs); !strings.Contains(msg, "critical") {
		t.Errorf("stderr: %q", msg)
	}
	code, out, _ = runCLI("doctor", "--root", root, "--pid", "4242", "--interval", "0", "--json")
	var rep doctor.Report
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || rep.Worst() != doctor.Crit || rep.Numastat == nil {
		t.Fatalf("json: exit %d, %v: %s", code, err, out)
	}
	code, out, _ = runCLI("doctor", "--root", root, "--pid", "4242", "--interval", "0", "--numastat")
	if code != 0 || !strings.HasPrefix(out, "Per-node process memory usage (in MiB) for PID 4242 (app)") || strings.Contains(out, "[CRIT]") {
		t.Errorf("--numastat: exit %d\n%s", code, out)
	}
}

func TestDoctorBadInput(t *testing.T) {
	root := fixtureRoot(t)
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"doctor", "--root", root, "--pid", "999"}, 2, "pid 999: no such process"},
		{[]string{"doctor", "--numastat"}, 2, "--numastat needs --pid"},
		{[]string{"doctor", "--interval", "-1s"}, 2, "must not be negative"},
		{[]string{"doctor", "--bogus"}, 2, "flag provided but not defined"},
		{[]string{"doctor", "--root", t.TempDir()}, 1, "doctor:"},
	} {
		code, out, errs := runCLI(c.args...)
		if code != c.code || out != "" || !strings.Contains(oneErrorLine(t, errs), c.msg) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and %q", c.args, code, out, errs, c.code, c.msg)
		}
	}
}
