package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/doctor"
	"github.com/numatrace/numatrace/internal/doctor/doctortest"
)

// fixtureRoot is doctor's fixture machine where pid 4242 runs on node 0
// with its memory bound to node 1, as read once and a second later.
func fixtureRoot(t *testing.T) (root, later string) {
	return doctortest.Machine(t, "seed000_membind_mismatch")
}

func TestDoctorCommand(t *testing.T) {
	root, later := fixtureRoot(t)
	code, out, errs := runCLI("doctor", "--root", root, "--pid", "4242")
	if code != 0 || !strings.Contains(out, "[CRIT] pid 4242 runs on node(s) 0 but may only allocate on node(s) 1") ||
		!strings.Contains(out, "fix: restart it under numactl --cpunodebind=0 --membind=0") || !strings.Contains(out, "Per-node process memory usage") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if msg := oneErrorLine(t, errs); !strings.Contains(msg, "critical") {
		t.Errorf("stderr: %q", msg)
	}
	code, out, _ = runCLI("doctor", "--root", root, "--pid", "4242", "--json")
	var rep doctor.Report
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || rep.Worst() != doctor.Crit || rep.Numastat == nil || rep.Interval != "not measured" {
		t.Fatalf("json: exit %d, %v: %s", code, err, out)
	}
	// A later copy measures the rates: the interval is the copies' uptimes apart.
	code, out, _ = runCLI("doctor", "--root", root, "--root-later", later, "--json")
	rep = doctor.Report{}
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || rep.Interval != "1s" {
		t.Fatalf("--root-later: exit %d, %v: %s", code, err, out)
	}
	code, out, _ = runCLI("doctor", "--root", root, "--pid", "4242", "--numastat")
	if code != 0 || !strings.HasPrefix(out, "Per-node process memory usage (in MiB) for PID 4242 (java)") || strings.Contains(out, "[CRIT]") {
		t.Errorf("--numastat: exit %d\n%s", code, out)
	}
}

func TestDoctorBadInput(t *testing.T) {
	root, _ := fixtureRoot(t)
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
		{[]string{"doctor", "--root", root, "--interval", "5s"}, 2, "a copy holds one reading"},
		{[]string{"doctor", "--root-later", root}, 2, "--root-later needs --root"},
	} {
		code, out, errs := runCLI(c.args...)
		if code != c.code || out != "" || !strings.Contains(oneErrorLine(t, errs), c.msg) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and %q", c.args, code, out, errs, c.code, c.msg)
		}
	}
}

// A copy of a machine is untrusted: a symlink out of it reads as missing
// inside it, and a FIFO in it is refused at once; either way one error
// line names the file, and nothing of what lies outside is printed.
func TestDoctorUntrustedRoot(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(outside, []byte("root:$6$SECRETHASH:19000:0:99999:7:::\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file, want string
		make       func(path string) error
	}{
		{"sys/devices/system/node/node0/cpulist", "no such file or directory", func(p string) error { return os.Symlink(outside, p) }},
		{"proc/vmstat", "not a regular file (a named pipe)", func(p string) error { return syscall.Mkfifo(p, 0o644) }},
	} {
		root, _ := fixtureRoot(t)
		path := filepath.Join(root, c.file)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := c.make(path); err != nil {
			t.Fatal(err)
		}
		type result struct {
			code      int
			out, errs string
		}
		done := make(chan result, 1)
		go func() {
			code, out, errs := runCLI("doctor", "--root", root, "--pid", "4242")
			done <- result{code, out, errs}
		}()
		select {
		case r := <-done:
			if r.code != 1 || r.out != "" || strings.Contains(r.errs, "SECRET") || !strings.Contains(oneErrorLine(t, r.errs), path+": "+c.want) {
				t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 1 and %q", c.file, r.code, r.out, r.errs, path+": "+c.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: doctor did not return", c.file)
		}
	}
}
